//! The store layer's errors, which the crate error (a layer above) folds in with the same
//! words.

use std::path::PathBuf;

const SETTING: &str = "CODEX_BRIDGE_STORE (--store)";

/// Why the store failed. The messages name the store's directory and what was being done;
/// the directory refusals name the setting, `CODEX_BRIDGE_STORE`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process holds the store's lock (a running server).
    #[error(
        "invalid setting {SETTING}: the store at {} is in use by another codex-mcp-bridge \
         process (a running server holds it)",
        .dir.display()
    )]
    InUse { dir: PathBuf },

    /// The directory cannot be trusted (see [`check_dir`](super::check_dir)); nothing in it was used.
    #[error(
        "invalid setting {SETTING}: the store directory {} {why}; it is not used. Use a \
         directory of your own (mode 700), or fix this one",
        .dir.display()
    )]
    Refused { dir: PathBuf, why: String },

    /// The store was written by a newer codex-mcp-bridge.
    #[error(
        "invalid setting {SETTING}: the store at {} has schema version {version}, written by a \
         newer codex-mcp-bridge (this one knows up to {known}); upgrade, or use another store",
        .dir.display()
    )]
    Newer {
        dir: PathBuf,
        version: u64,
        known: u64,
    },

    /// sled failed while `doing` something.
    #[error("session store error: store at {}: {doing} failed: {source}", .dir.display())]
    Storage {
        dir: PathBuf,
        doing: &'static str,
        #[source]
        source: sled::Error,
    },

    /// A file-system call on the store's directory failed while `doing` something.
    #[error("session store error: store at {}: {doing} failed: {source}", .dir.display())]
    Io {
        dir: PathBuf,
        doing: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// A stored record cannot be read back (the store is corrupted).
    #[error("session store error: store at {}: session {id} is unreadable: {source}", .dir.display())]
    Corrupted {
        dir: PathBuf,
        id: String,
        #[source]
        source: serde_json::Error,
    },

    /// A record cannot be encoded.
    #[error("session store error: store at {}: cannot encode a record: {source}", .dir.display())]
    Encode {
        dir: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// A migration step failed; the store is left at the previous version.
    #[error(
        "session store error: store at {}: migration to v{to} ({name}) failed: {reason}",
        .dir.display()
    )]
    Migration {
        dir: PathBuf,
        to: u64,
        name: &'static str,
        reason: String,
    },

    /// The background flush stopped before it finished.
    #[error("session store error: store at {}: the flush did not finish: {source}", .dir.display())]
    FlushLost {
        dir: PathBuf,
        #[source]
        source: tokio::task::JoinError,
    },

    /// The store's files vanished under the running server.
    #[error(
        "session store error: store at {}: the store's files were deleted while the server ran; \
         this change is not saved (restart the server to recreate the store)",
        .dir.display()
    )]
    Deleted { dir: PathBuf },

    /// A listing cursor that no page gave out (the caller's argument, `cursor`).
    #[error("the listing cursor is not one from a previous page")]
    BadCursor,
}

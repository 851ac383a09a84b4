//! The hub layer's errors: joining, owning and sharing a store. The hub sits above the crate
//! error: what fails below it (a setting, the store, starting the bridge) is carried as
//! [`HubError::Below`], and the crate error names nothing of the hub. Each message is a
//! sentence that says what was being done and which setting to change; none echoes a hello
//! (it carries the client's keys).

use std::path::PathBuf;

use crate::config::error::ConfigError;
use crate::error::Error;
use crate::store::error::StoreError;

/// What the hub layer returns.
pub type Result<T, E = HubError> = std::result::Result<T, E>;

/// The socket's file name inside the store directory.
pub const SOCKET_NAME: &str = "bridge.sock";

/// The setting that chooses the store, named in every message about joining it.
const STORE_SETTING: &str = "CODEX_BRIDGE_STORE (--store)";

/// What can go wrong while processes elect, join, serve and leave a store's owner.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The socket file, or the process listening on it, is not this user's: nothing was sent.
    #[error(
        "invalid setting {STORE_SETTING}: the store at {} is not safe to join: {why}. Nothing \
         was sent to it; use a store directory of your own",
        store.display()
    )]
    NotSafeToJoin { store: PathBuf, why: String },

    /// The owner refused this process's hello (an invalid setting, another version).
    #[error(
        "invalid setting {STORE_SETTING}: the codex-mcp-bridge process that owns the store at {} \
         refused this one: {reason}",
        store.display()
    )]
    HelloRefused { store: PathBuf, reason: String },

    /// The owner refused a `sessions` request.
    #[error(
        "the codex-mcp-bridge process that owns the store at {} refused the request: {reason}",
        store.display()
    )]
    RequestRefused { store: PathBuf, reason: String },

    /// Another process holds the store's lock and never answered on its socket.
    #[error(
        "invalid setting {STORE_SETTING}: another process holds the store at {} but does not \
         answer on its socket {SOCKET_NAME} there; if it is not a codex-mcp-bridge of this \
         version, give this server another store directory",
        store.display()
    )]
    NoOwnerAnswers { store: PathBuf },

    /// The owner daemon could not be started, or exited before it answered.
    #[error(
        "cannot start the owner of the store at {} (codex-mcp-bridge's daemon, `--owner \
         daemon`): {why}; `--owner process` makes this process own the store itself",
        store.display()
    )]
    DaemonStart { store: PathBuf, why: String },

    /// The owner went away (or went silent) while this process waited for its answer.
    #[error(
        "the codex-mcp-bridge process {owner_pid} that owns the store at {} did not answer: {why}",
        store.display()
    )]
    OwnerGone {
        owner_pid: u32,
        store: PathBuf,
        why: String,
    },

    /// The next owner went away, or went silent, while the relay replayed its client's
    /// handshake to it.
    #[error("the new owner of the store {0} during the handshake")]
    HandoverFailed(&'static str),

    /// The owner could not bind its socket: it serves its own client, but nobody else's.
    #[error(
        "cannot listen on {}: {source}; other processes on this store cannot share it",
        path.display()
    )]
    Listen {
        path: PathBuf,
        source: std::io::Error,
    },

    /// The HTTP listener's address could not be bound.
    #[error(
        "invalid setting CODEX_BRIDGE_HTTP_LISTEN (--http-listen): cannot listen on {addr}: {source}"
    )]
    HttpListen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },

    /// Talking to a client process on the socket failed.
    #[error("cannot answer the client process on the store's socket: {0}")]
    ClientGone(std::io::Error),

    /// The current directory (the default root, sent to an owner) cannot be read.
    #[error("cannot read the current directory (the default root): {0}")]
    StartDir(std::io::Error),

    /// The MCP client on this process's stdio broke off its handshake.
    #[error("the MCP client's handshake failed: {0}")]
    Handshake(String),

    /// A hello or a request could not be encoded (a bug: they are plain data).
    #[error("cannot encode the {what} for the owner of the store: {why}")]
    Encode { what: &'static str, why: String },

    /// A blocking step on the store directory panicked or was cancelled.
    #[error("{doing} the store directory stopped unexpectedly: {why}")]
    Blocking { doing: &'static str, why: String },

    /// The server did not start (a setting or the store was refused); its client was told so
    /// on every call until it left. The words say what is wrong and the fix.
    #[error("{0}")]
    NotStarted(String),

    /// A layer below the hub failed: a setting, the store, the bridge it starts (the crate
    /// error, same words).
    #[error(transparent)]
    Below(Box<Error>),
}

impl From<Error> for HubError {
    fn from(e: Error) -> Self {
        HubError::Below(Box::new(e))
    }
}

impl From<ConfigError> for HubError {
    fn from(e: ConfigError) -> Self {
        Error::from(e).into()
    }
}

impl From<StoreError> for HubError {
    fn from(e: StoreError) -> Self {
        Error::from(e).into()
    }
}

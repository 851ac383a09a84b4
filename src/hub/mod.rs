//! Many hosts, one store. MCP hosts start one stdio server per client, and sled lets one
//! process open a store, so the processes on one store elect an owner:
//!
//! - The first process to open the store owns it: the store, the registry and the session
//!   actors. It listens on a Unix socket inside the store directory (mode 0600 in a 0700
//!   directory; a peer of another uid is dropped) and runs one MCP service per connection over
//!   the shared registry ([`owner`]).
//! - Every later process relays its stdio client to that socket ([`relay`]). Its first line on
//!   the socket is a [`Hello`] with its own settings and allowlisted environment: the owner
//!   builds that connection's [`ClientContext`] from it, so each turn runs with the API keys,
//!   CODEX_HOME, roots and limits of the host that asked for it. The hello also carries the
//!   values of the host's secret-named variables: the owner redacts them from that
//!   connection's output only, as the host's own process would.
//! - When the owner exits or dies, its relays see the socket close: calls in flight fail with a
//!   clear error, one relay takes the store over (it replays its client's `initialize` to its
//!   own new service, so the client carries on), and the others connect to it.
//!
//! [`ClientContext`]: crate::actors::ClientContext

pub mod daemon;
pub mod error;
pub mod http;
pub mod owner;
pub mod relay;

pub use error::{HubError, SOCKET_NAME};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::config::Settings;
use crate::security::ids::SessionId;
use crate::store::{SessionRecord, Store};
use error::Result;

/// Version of the hello line (2: with the client's literal secrets).
pub const HELLO_VERSION: u32 = 2;
/// Longest hello line accepted.
pub const MAX_HELLO_BYTES: usize = 1024 * 1024;
/// How long a connection may take to send its hello, or the owner to answer it.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a process tries to reach an owner or become one before giving up.
pub const ELECTION_TIMEOUT: Duration = Duration::from_secs(15);
/// Pause between attempts.
pub(crate) const RETRY: Duration = Duration::from_millis(40);

/// Variables a client sends to the owner: the codex allowlist plus what its settings are
/// resolved with. Nothing else of its environment leaves the process.
pub fn hello_vars(vars: &[(String, String)]) -> Vec<(String, String)> {
    const EXTRA: [&str; 3] = ["CODEX_CLI_PATH", "XDG_DATA_HOME", "XDG_CONFIG_HOME"];
    vars.iter()
        .filter(|(k, _)| {
            crate::security::env::ALLOWED_VARS.contains(&k.as_str()) || EXTRA.contains(&k.as_str())
        })
        .cloned()
        .collect()
}

/// The values a client sends for redaction: those of its secret-named variables, as its own
/// process-wide redactor takes them, within the owner's bounds (see
/// [`ClientSecrets::bounded`]). A value left out is named (never shown) in a warning: it is
/// not redacted as a literal from what the owner answers this client.
///
/// [`ClientSecrets::bounded`]: crate::security::redact::ClientSecrets::bounded
pub fn hello_secrets(vars: &[(String, String)]) -> Vec<String> {
    use crate::security::redact::{
        MAX_CLIENT_SECRET_BYTES, MAX_CLIENT_SECRETS, MAX_CLIENT_SECRETS_TOTAL, secret_values,
        within_client_bounds,
    };
    for (name, value) in vars {
        if value.len() > MAX_CLIENT_SECRET_BYTES && !secret_values([(name, value)]).is_empty() {
            tracing::warn!(
                variable = %name,
                limit = MAX_CLIENT_SECRET_BYTES,
                "a secret-named variable is longer than a relayed client's literal secrets may \
                 be: its value is not redacted as a literal from answers when another process \
                 owns the store (patterns still apply)"
            );
        }
    }
    // within the owner's bounds, as it would take them: the hello stays far below its limit
    // whatever the environment, and what is left out is said here, to this host
    let (kept, ignored) = within_client_bounds(secret_values(vars.iter().map(|(k, v)| (k, v))));
    if ignored.over_limit > 0 {
        tracing::warn!(
            left_out = ignored.over_limit,
            max_count = MAX_CLIENT_SECRETS,
            max_total_bytes = MAX_CLIENT_SECRETS_TOTAL,
            "more secret-named variables than a relayed client's literal secrets may hold: the \
             longest values are not redacted as literals from answers when another process owns \
             the store (patterns still apply)"
        );
    }
    kept
}

/// A client process's first line on the socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hello {
    pub version: u32,
    /// The client's settings (flags, environment, config file), as it resolved them.
    pub settings: Settings,
    /// Its allowlisted environment ([`hello_vars`]).
    pub vars: Vec<(String, String)>,
    /// The values of its secret-named variables ([`hello_secrets`]): the owner redacts them
    /// from this connection's answers and progress, as the client's process would if it
    /// served its client itself.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// The directory it started in (the default root).
    pub start_dir: PathBuf,
    /// Its pid, for the owner's logs.
    pub pid: u32,
}

/// The owner's answer to a hello.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HelloAnswer {
    /// Accepted: MCP follows on the socket.
    Welcome { owner_pid: u32 },
    /// Refused (an invalid setting, say): the reason.
    Refused { reason: String },
}

/// What the command line asks the owner (`sessions ...` while a server owns the store). Sent
/// instead of a [`Hello`]: the owner answers [`HelloAnswer::Welcome`], then one [`StoreAnswer`]
/// line, and closes. The peer check is the same as for a relay (the same user only).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoreRequestLine {
    pub version: u32,
    pub store_request: StoreRequest,
}

/// One request of [`StoreRequestLine`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum StoreRequest {
    /// Every stored session, newest first.
    List,
    /// One session's record.
    Get { session_id: SessionId },
    /// Close a session as `closeSession` does (its running turn is cancelled first; its own
    /// worktree removed, refused while it holds changes not applied unless `drop_changes`).
    Close {
        session_id: SessionId,
        #[serde(default)]
        drop_changes: bool,
    },
}

/// The owner's answer to a [`StoreRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StoreAnswer {
    /// The records, as the store keeps them.
    Sessions { sessions: Vec<SessionRecord> },
    /// The record asked for (`Get`) or removed (`Close`); `None`: no such session.
    Session { session: Option<Box<SessionRecord>> },
    /// The request failed: why.
    Failed { message: String },
}

/// How long the command line waits for the owner's answer (a close cancels a running turn
/// first).
pub const STORE_ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Ask the owner of `store_dir` through its socket (the same connection and checks as a
/// relay). `Ok(None)`: no process answers there (none owns the store, or it does not listen).
pub async fn ask_owner(store_dir: &Path, request: StoreRequest) -> Result<Option<StoreAnswer>> {
    let line = serde_json::to_string(&StoreRequestLine {
        version: HELLO_VERSION,
        store_request: request,
    })
    .map_err(|e| HubError::Encode {
        what: "request",
        why: e.to_string(),
    })?;
    let store = store_dir.to_path_buf();
    let mut conn = match connect(store_dir, &line).await {
        Ok(c) => c,
        Err(Attempt::Unavailable) => return Ok(None),
        Err(Attempt::Untrusted(why)) => return Err(HubError::NotSafeToJoin { store, why }),
        Err(Attempt::Refused(reason)) => {
            return Err(HubError::RequestRefused { store, reason });
        }
    };
    let owner_pid = conn.owner_pid;
    let lost = |why: String| HubError::OwnerGone {
        owner_pid,
        store: store.clone(),
        why,
    };
    let mut answer = String::new();
    match tokio::time::timeout(STORE_ANSWER_TIMEOUT, conn.reader.read_line(&mut answer)).await {
        Ok(Ok(n)) if n > 0 => {}
        Ok(Ok(_)) => return Err(lost("it closed the connection".into())),
        Ok(Err(e)) => return Err(lost(e.to_string())),
        Err(_) => return Err(lost(format!("no answer within {STORE_ANSWER_TIMEOUT:?}"))),
    }
    serde_json::from_str(&answer)
        .map(Some)
        .map_err(|e| lost(format!("an answer this version does not understand ({e})")))
}

/// A connection to the owner, past the hello.
pub struct Connection {
    pub reader: BufReader<OwnedReadHalf>,
    pub writer: OwnedWriteHalf,
    pub owner_pid: u32,
}

/// What the election made of this process.
pub enum Role {
    /// It holds the store.
    Owner(Store),
    /// Another process holds it; this one relays to it.
    Client(Connection),
}

/// The socket path of a store directory.
pub fn socket_path(store_dir: &Path) -> PathBuf {
    store_dir.join(SOCKET_NAME)
}

/// Longest socket path `connect`/`bind` take (sun_path holds 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 100;

/// A path to the socket short enough for sun_path: the path itself, or, for a deep store
/// directory, the same file through `/proc/self/fd/N` of an open handle on the directory
/// (kept alive by the returned guard).
pub fn addressable(store_dir: &Path) -> std::io::Result<(PathBuf, Option<std::fs::File>)> {
    addressable_name(store_dir, SOCKET_NAME)
}

/// [`addressable`] for any file name in the store directory.
pub(crate) fn addressable_name(
    store_dir: &Path,
    name: &str,
) -> std::io::Result<(PathBuf, Option<std::fs::File>)> {
    let direct = store_dir.join(name);
    if direct.as_os_str().len() <= MAX_SOCKET_PATH {
        return Ok((direct, None));
    }
    let dir = std::fs::File::open(store_dir)?;
    use std::os::fd::AsRawFd;
    let short = PathBuf::from(format!("/proc/self/fd/{}/{name}", dir.as_raw_fd()));
    Ok((short, Some(dir)))
}

/// This process's effective uid.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why a connection attempt did not give a [`Connection`].
enum Attempt {
    /// Nobody answered (no socket, a stale one, an owner that died mid-hello): try again.
    Unavailable,
    /// The owner refused this client: a final error.
    Refused(String),
    /// The socket or the process listening on it is not this user's: nothing was sent; a
    /// final error.
    Untrusted(String),
}

/// Connect to the owner of `store_dir` and introduce this client. Nothing is written before
/// the socket file and the process listening on it are known to be this user's own: the hello
/// carries the client's settings and API keys.
async fn connect(store_dir: &Path, hello: &str) -> std::result::Result<Connection, Attempt> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let (path, _dir) = addressable(store_dir).map_err(|_| Attempt::Unavailable)?;
    let me = euid();
    // the socket file itself, never a symlink to elsewhere
    match std::fs::symlink_metadata(&path) {
        Err(_) => return Err(Attempt::Unavailable),
        Ok(m) if !m.file_type().is_socket() => {
            return Err(Attempt::Untrusted(format!(
                "{SOCKET_NAME} there is not a socket (a symbolic link or another file)"
            )));
        }
        Ok(m) if m.uid() != me => {
            return Err(Attempt::Untrusted(format!(
                "its socket {SOCKET_NAME} belongs to another user (uid {}, this server runs as \
                 uid {me})",
                m.uid()
            )));
        }
        Ok(_) => {}
    }
    let stream = UnixStream::connect(&path)
        .await
        .map_err(|_| Attempt::Unavailable)?;
    match stream.peer_cred() {
        Ok(c) if c.uid() == me => {}
        Ok(c) => {
            return Err(Attempt::Untrusted(format!(
                "the process listening on its socket {SOCKET_NAME} runs as another user (uid {}, \
                 this server runs as uid {me})",
                c.uid()
            )));
        }
        Err(e) => {
            return Err(Attempt::Untrusted(format!(
                "cannot tell who listens on its socket {SOCKET_NAME}: {e}"
            )));
        }
    }
    let (read, mut writer) = stream.into_split();
    let mut reader = BufReader::new(read);
    let answer = tokio::time::timeout(HELLO_TIMEOUT, async {
        writer.write_all(hello.as_bytes()).await?;
        writer.write_all(b"\n").await?;
        writer.flush().await?;
        let mut line = String::new();
        reader.read_line(&mut line).await?;
        Ok::<_, std::io::Error>(line)
    })
    .await;
    let line = match answer {
        Ok(Ok(line)) if !line.is_empty() => line,
        _ => return Err(Attempt::Unavailable),
    };
    match serde_json::from_str::<HelloAnswer>(&line) {
        Ok(HelloAnswer::Welcome { owner_pid }) => Ok(Connection {
            reader,
            writer,
            owner_pid,
        }),
        Ok(HelloAnswer::Refused { reason }) => Err(Attempt::Refused(reason)),
        Err(_) => Err(Attempt::Refused(
            "the process that owns the store answered in a way this version does not understand \
             (a different codex-mcp-bridge version?)"
                .into(),
        )),
    }
}

/// Create or check the store directory, off the runtime.
pub(crate) async fn prepare(store_dir: &Path) -> Result<()> {
    let dir = store_dir.to_path_buf();
    tokio::task::spawn_blocking(move || crate::store::prepare_dir(&dir))
        .await
        .map_err(|e| HubError::Blocking {
            doing: "preparing",
            why: e.to_string(),
        })??;
    Ok(())
}

/// Open the store unless another process holds it now, off the runtime.
pub async fn try_open(store_dir: &Path) -> Result<Option<Store>> {
    let dir = store_dir.to_path_buf();
    Ok(
        tokio::task::spawn_blocking(move || Store::try_open(&dir, Duration::ZERO))
            .await
            .map_err(|e| HubError::Blocking {
                doing: "opening",
                why: e.to_string(),
            })??,
    )
}

/// Become the store's owner, or connect to the process that is: whichever works first, until
/// `timeout`.
pub async fn elect(store_dir: &Path, hello: &Hello, timeout: Duration) -> Result<Role> {
    let line = serde_json::to_string(hello).map_err(|e| HubError::Encode {
        what: "hello",
        why: e.to_string(),
    })?;
    let until = Instant::now() + timeout;
    let store = store_dir.to_path_buf();
    prepare(store_dir).await?;
    loop {
        match connect(store_dir, &line).await {
            Ok(c) => return Ok(Role::Client(c)),
            Err(Attempt::Untrusted(why)) => {
                return Err(HubError::NotSafeToJoin { store, why });
            }
            Err(Attempt::Refused(reason)) => {
                return Err(HubError::HelloRefused { store, reason });
            }
            Err(Attempt::Unavailable) => {}
        }
        if let Some(store) = try_open(store_dir).await? {
            return Ok(Role::Owner(store));
        }
        if Instant::now() >= until {
            return Err(HubError::NoOwnerAnswers { store });
        }
        tokio::time::sleep(RETRY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host with many long secret-named variables still gets a hello the owner reads (it was
    /// cut at the owner's 1 MiB limit and the relay refused): the secrets sent are those the
    /// owner keeps, no more.
    #[test]
    fn a_hello_stays_within_the_owners_limits_whatever_the_environment() {
        use crate::security::redact::{self, ClientSecrets};
        let vars: Vec<(String, String)> = (0..300)
            .map(|i| {
                (
                    format!("CI_{i:03}_TOKEN"),
                    format!("{i:03}{}", "t".repeat(3990)),
                )
            })
            .chain([("OPENAI_API_KEY".to_owned(), "sk-short-key-1".to_owned())])
            .collect();
        let secrets = hello_secrets(&vars);
        let hello = Hello {
            version: HELLO_VERSION,
            settings: Settings::default(),
            vars: hello_vars(&vars),
            secrets: secrets.clone(),
            start_dir: "/".into(),
            pid: 1,
        };
        let line = serde_json::to_string(&hello).unwrap();
        assert!(
            line.len() < MAX_HELLO_BYTES,
            "hello of {} bytes",
            line.len()
        );
        // the same values the owner would keep from all of them, shortest first
        let (all, _) =
            ClientSecrets::bounded(redact::secret_values(vars.iter().map(|(k, v)| (k, v))));
        let (sent, ignored) = ClientSecrets::bounded(&secrets);
        assert_eq!(ignored, redact::Ignored::default());
        assert_eq!(sent.len(), all.len());
        assert!(secrets.contains(&"sk-short-key-1".to_owned()));
    }
}

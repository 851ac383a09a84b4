//! The store's owner as a daemon (`--owner daemon`, the default): a process of its own, in a
//! session of its own, that a host's signals to the server it started (SIGINT, SIGTERM,
//! SIGHUP, the end of its stdin, its process group) do not reach. The first server process on
//! a store starts it and relays its client to it like any other; so does every later one. A
//! task's or a background call's turn runs in it and outlives the host; a plain call is
//! cancelled when its connection goes, as before. The daemon exits once no client is
//! connected and no task runs ([`LINGER`] after the last one), and a server that finds no
//! owner starts a new one (after a crash, its start-up sweep marks what ran as interrupted).
//!
//! The daemon's first line on stdin is the [`Hello`] of the process that started it: its
//! settings make the daemon's own configuration (store, limits, backend); each connection
//! still brings its own hello, and each turn runs with its own host's context.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use super::error::Result;
use super::{Attempt, HELLO_VERSION, Hello, HubError, MAX_HELLO_BYTES, RETRY, Role, connect};

/// The hidden first argument that makes the executable the owner daemon.
pub const DAEMON_ARG: &str = "__owner-daemon";

/// How long the daemon stays once no client is connected and no task runs: a host that
/// restarts at once finds it still warm.
pub const LINGER: Duration = Duration::from_millis(750);

/// How long a daemon that found the store's lock held waits for it before it gives up (an
/// owner that is shutting down lets go within this).
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The daemon's log (its stderr), in the store directory.
pub const LOG_NAME: &str = "owner.log";

/// A log past this is started afresh when a daemon starts.
const LOG_KEEP_BYTES: u64 = 8 * 1024 * 1024;

/// Open the daemon's log for appending (private, never through a symlink), started afresh
/// when it grew past [`LOG_KEEP_BYTES`].
fn open_log(store_dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = store_dir.join(LOG_NAME);
    let big = std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() > LOG_KEEP_BYTES);
    std::fs::OpenOptions::new()
        .create(true)
        .append(!big)
        .write(true)
        .truncate(big)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// What of this process's environment the daemon gets: what it needs to run (PATH, HOME, its
/// logging, the allocator's settings), nothing else. The client's
/// allowlisted variables travel in the hello, as for every connection.
fn daemon_vars() -> Vec<(String, String)> {
    const KEEP: [&str; 7] = [
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "RUST_LOG",
        "MALLOC_ARENA_MAX",
        "_RJEM_MALLOC_CONF",
    ];
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| KEEP.contains(&k.as_str()) || k.starts_with("CODEX_BRIDGE_LOG"))
        .collect()
}

/// Connect to the owner of `store_dir`, starting the daemon `program` when none answers,
/// until `timeout`. Never makes this process the owner.
pub async fn elect(
    store_dir: &Path,
    hello: &Hello,
    program: &Path,
    timeout: Duration,
) -> Result<Role> {
    let line = serde_json::to_string(hello).map_err(|e| HubError::Encode {
        what: "hello",
        why: e.to_string(),
    })?;
    let store = store_dir.to_path_buf();
    super::prepare(store_dir).await?;
    let until = Instant::now() + timeout;
    let mut daemon: Option<crate::codex::process::Detached> = None;
    let mut exits = 0u32;
    loop {
        match connect(store_dir, &line).await {
            Ok(c) => return Ok(Role::Client(c)),
            Err(Attempt::Untrusted(why)) => return Err(HubError::NotSafeToJoin { store, why }),
            Err(Attempt::Refused(reason)) => {
                return Err(HubError::HelloRefused { store, reason });
            }
            Err(Attempt::Unavailable) => {}
        }
        // a daemon that found the store owned exits with success (not needed): started again
        // if still none answers; one that failed counts
        let exited = daemon.as_mut().map(|d| d.exited());
        if exited == Some(Some(false)) {
            exits += 1;
            tracing::debug!("the owner daemon failed before it answered");
        }
        let gone = !matches!(exited, Some(None));
        if exits >= 3 {
            return Err(HubError::DaemonStart {
                store,
                why: format!(
                    "it failed three times before it answered (its log: {LOG_NAME} in the \
                     store directory)"
                ),
            });
        }
        if gone {
            let mut input = line.clone().into_bytes();
            input.push(b'\n');
            let cannot = |why: String| HubError::DaemonStart {
                store: store.clone(),
                why,
            };
            let log = open_log(store_dir)
                .map_err(|e| cannot(format!("cannot open its log {LOG_NAME}: {e}")))?;
            let vars = daemon_vars();
            let child =
                crate::codex::process::start_detached(program, &[DAEMON_ARG], &vars, input, log)
                    .await
                    .map_err(|e| cannot(e.to_string()))?;
            tracing::info!(
                pid = child.id(),
                log = %store_dir.join(LOG_NAME).display(),
                "started the store's owner daemon (its log is in the store directory)"
            );
            daemon = Some(child);
        }
        if Instant::now() >= until {
            return Err(HubError::NoOwnerAnswers { store });
        }
        tokio::time::sleep(RETRY / 4).await;
    }
}

/// The variables of the daemon's own client context (what it uses when no connection's is at
/// hand: its version probe, a `sessions close` from the command line): the starter's, without
/// any secret-named one. Each connection brings its own in its hello; the daemon, which may
/// outlive the host that started it, keeps no host's secret for itself.
pub fn own_vars(hello: &Hello) -> Vec<(String, String)> {
    hello
        .vars
        .iter()
        .filter(|(k, _)| !crate::security::redact::is_secret_name(k))
        .cloned()
        .collect()
}

/// The daemon's side: the hello of the process that started it, from stdin.
pub async fn read_hello<R: tokio::io::AsyncRead + Unpin>(input: R) -> Result<Hello> {
    let mut line = Vec::new();
    let mut limited = input.take(MAX_HELLO_BYTES as u64);
    let read = tokio::time::timeout(super::HELLO_TIMEOUT, limited.read_to_end(&mut line)).await;
    let bad = |why: String| HubError::Handshake(format!("the owner daemon's hello: {why}"));
    match read {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(bad(e.to_string())),
        Err(_) => return Err(bad("none within the hello timeout".into())),
    }
    let hello: Hello = serde_json::from_slice(&line).map_err(|e| bad(e.to_string()))?;
    if hello.version != HELLO_VERSION {
        return Err(bad(format!(
            "version {} (this is {HELLO_VERSION})",
            hello.version
        )));
    }
    Ok(hello)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon's own context keeps none of the starter's secrets (they come with each
    /// connection's hello, and go with it).
    #[test]
    fn the_daemons_own_variables_hold_no_secret() {
        let hello = Hello {
            version: HELLO_VERSION,
            settings: Default::default(),
            vars: vec![
                ("OPENAI_API_KEY".into(), "sk-proj-abcdefghijklmnop".into()),
                ("CODEX_HOME".into(), "/home/u/.codex".into()),
                ("AWS_SECRET_ACCESS_KEY".into(), "wJalrXUtnFEMI".into()),
            ],
            secrets: vec!["sk-proj-abcdefghijklmnop".into()],
            start_dir: "/".into(),
            pid: 1,
        };
        assert_eq!(
            own_vars(&hello),
            vec![("CODEX_HOME".to_owned(), "/home/u/.codex".to_owned())]
        );
    }
}

//! A real `codex app-server` for tests and benches, spawned the way the process layer will:
//! the env allowlist, the exec path's `-c` pins (operator overrides first, the pins last) plus
//! `sandbox_mode="read-only"`, stdin and stdout piped, stderr drained, killed on drop. The
//! crate's [`Client`] then drives it over the pipes.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use codex_mcp_bridge::codex::app_server::client::{Client, DEFAULT_MAX_LINE_BYTES, Event};
use codex_mcp_bridge::codex::app_server::protocol::{Item, Notification, TurnStatus};
use codex_mcp_bridge::codex::argv::pins;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc::UnboundedReceiver;

use super::bridge::child_env;
use super::{MockApi, TestEnv, codex_bin};

/// How long one app-server step may take in tests before it counts as hung.
pub const STEP: Duration = Duration::from_secs(60);

/// The argv of `codex app-server` for a process serving `cwd`: every `-c` at the one level
/// there is (operator overrides, then the exec path's pins, then the read-only default).
pub fn app_server_args(mock: &MockApi, cwd: &Path) -> Vec<String> {
    let mut args = vec![];
    let configs = mock
        .provider_overrides()
        .into_iter()
        .chain(pins(cwd))
        .chain(["sandbox_mode=\"read-only\"".to_owned()]);
    for kv in configs {
        args.push("-c".to_owned());
        args.push(kv);
    }
    args.push("app-server".to_owned());
    args
}

/// The child, not yet wrapped: for tests that must write a raw line first.
pub fn spawn_raw(env: &TestEnv, mock: &MockApi) -> (Child, ChildStdin, ChildStdout) {
    let cwd = env.work().canonicalize().expect("canonical work dir");
    let mut cmd = Command::new(codex_bin());
    cmd.args(app_server_args(mock, &cwd))
        .env_clear()
        .envs(child_env(env, &[]))
        .current_dir(&cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn codex app-server");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    // drained so codex never blocks on a full pipe; shown when a test fails
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            eprintln!("app-server stderr: {l}");
        }
    });
    (child, stdin, stdout)
}

/// A spawned app-server with the crate's client on its pipes, after the handshake.
pub struct AppServer {
    pub child: Child,
    pub client: Client<ChildStdin>,
    pub events: UnboundedReceiver<Event>,
}

impl AppServer {
    /// Spawn and `initialize`.
    pub async fn start(env: &TestEnv, mock: &MockApi) -> Self {
        let (child, stdin, stdout) = spawn_raw(env, mock);
        let (client, events) = Client::new(stdout, stdin, DEFAULT_MAX_LINE_BYTES);
        tokio::time::timeout(STEP, client.handshake("0.0.0-test"))
            .await
            .expect("initialize in time")
            .expect("initialize");
        AppServer {
            child,
            client,
            events,
        }
    }

    /// Close stdin and wait for the process to exit (it must, on EOF).
    pub async fn close(mut self) {
        tokio::time::timeout(STEP, self.client.close())
            .await
            .expect("stdout ends after stdin EOF");
        let status = tokio::time::timeout(STEP, self.child.wait())
            .await
            .expect("app-server exits after stdin EOF")
            .expect("wait");
        assert!(status.success(), "app-server exit status {status}");
    }
}

/// What one turn produced, read off the event stream up to its `turn/completed`.
#[derive(Debug, Default)]
pub struct TurnLog {
    pub status: Option<TurnStatus>,
    pub messages: Vec<String>,
    /// Each completed command item.
    pub commands: Vec<Item>,
    /// Every notification, in order.
    pub notifications: Vec<Notification>,
    /// The methods of the requests the client declined.
    pub declined: Vec<String>,
}

/// Read events until `turn/completed` of `turn_id` (of any turn if `None`; panics after [`STEP`]
/// or on close).
pub async fn read_turn(events: &mut UnboundedReceiver<Event>, turn_id: Option<&str>) -> TurnLog {
    let mut log = TurnLog::default();
    let read = async {
        loop {
            match events.recv().await {
                Some(Event::Notification(n)) => {
                    match &n {
                        Notification::ItemCompleted { item, .. } => match item {
                            Item::AgentMessage { text, .. } => log.messages.push(text.clone()),
                            Item::CommandExecution { .. } => log.commands.push(item.clone()),
                            _ => {}
                        },
                        Notification::TurnCompleted {
                            turn_id: t, status, ..
                        } if turn_id.is_none_or(|id| id == t) => {
                            log.status = Some(*status);
                            log.notifications.push(n);
                            return;
                        }
                        _ => {}
                    }
                    log.notifications.push(n);
                }
                Some(Event::Declined(r)) => log.declined.push(r.method),
                Some(Event::Closed(why)) => panic!("app-server closed during the turn: {why:?}"),
                None => panic!("event stream ended during the turn"),
            }
        }
    };
    tokio::time::timeout(STEP, read)
        .await
        .expect("turn/completed in time");
    log
}

/// Write one raw JSON line (for the negative controls, which send what the templates never do).
pub async fn write_raw(stdin: &mut ChildStdin, line: &serde_json::Value) {
    stdin
        .write_all(format!("{line}\n").as_bytes())
        .await
        .expect("write to app-server");
    stdin.flush().await.expect("flush");
}

//! Running child processes in tests with a hard timeout, and reading codex `--json` output.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

/// Spawns `cmd` and waits for it to exit, collecting stdout/stderr. Panics if it cannot be
/// spawned or does not finish within `limit` (the child is then killed: use a command with
/// `kill_on_drop(true)`, as [`super::TestEnv::command`] does).
pub async fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"));
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => panic!("waiting for {cmd:?} failed: {e}"),
        Err(_) => panic!("{cmd:?} did not finish within {limit:?}"),
    }
}

/// Parses JSON Lines (one JSON value per non-empty line). Panics on a malformed line, quoting it.
pub fn jsonl(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSONL line `{l}`: {e}")))
        .collect()
}

/// The events of a codex `--json` stream whose `type` is `ty` (e.g. `"thread.started"`).
pub fn events_of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// The `item` objects of `item.completed` events whose `item.type` is `item_type`
/// (e.g. `"agent_message"`, `"command_execution"`).
pub fn completed_items<'a>(events: &'a [Value], item_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == item_type)
        .map(|e| &e["item"])
        .collect()
}

/// A readable dump of a process's exit status, stdout and stderr, for assertion messages.
pub fn describe_output(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Whether `pid` is one of the commands codex's app-server runs as it starts, not a turn's
/// process: `lsb_release -a` (a python script: seconds on a loaded machine) and what it runs,
/// and the `git` it starts itself (its own fetch of `github.com/openai/plugins.git`: a `git`
/// child and that git's own `git remote-https`, which waits on a closed network). A spare
/// starting in the background shows them for a while. A turn's `git` runs under its shell,
/// never as the app-server's child.
pub fn is_start_up_probe(pid: i32) -> bool {
    let comm = |p: i32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
    // a git whose parent is the app-server, or a git started by such a git
    let codex_git = |p: i32| {
        let mut p = p;
        for _ in 0..4 {
            if comm(p).trim() != "git" {
                return false;
            }
            let up = parent_of(p);
            if is_app_server(up) {
                return true;
            }
            p = up;
        }
        false
    };
    comm(pid).trim() == "lsb_release"
        || comm(parent_of(pid)).trim() == "lsb_release"
        || codex_git(pid)
}

/// The parent of `pid` (0 when it is gone).
pub fn parent_of(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = &s[s.rfind(')')? + 2..];
            after.split(' ').nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Whether `pid` is a `codex app-server` the bridge started: an app-server whose parent is
/// not one. As an app-server starts a child (its start-up probes, a turn's shell), the child
/// shows the app-server's command line from its fork until its exec (seen on 0.145.0 as a
/// `tokio-rt-worker` with the app-server's argv), so a count of app-servers by command line
/// alone sees two where one runs (failed once in CI).
pub fn is_bridge_app_server(pid: i32) -> bool {
    is_app_server(pid) && !is_app_server(parent_of(pid))
}

/// Whether `pid` is a `codex app-server` (a warm session's process), or a child of one
/// between its fork and its exec.
pub fn is_app_server(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"app-server".as_slice()))
}

/// The state letter of process `pid` from `/proc/<pid>/stat` (`R`, `S`, `Z`, ...), or `None`
/// when it is gone.
pub fn state_of(pid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether process `pid` exists and has not exited: not gone, not a zombie (`Z`), and not
/// being reaped (`X`: the kernel shows it while its parent's wait releases it, after `Z`, so a
/// check that saw `Z` and then `X` would see it come back to life; failed once in CI).
pub fn alive(pid: i32) -> bool {
    state_of(pid).is_some_and(|c| c != 'Z' && c != 'X')
}

/// Waits (up to 5 s) until a killed process has exited with all its threads, so that what it
/// held (the store's lock) is free.
pub async fn wait_exit(pid: u32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.count())
            .unwrap_or(0);
        let zombie = state_of(pid as i32).is_none_or(|c| c == 'Z' || c == 'X');
        if threads <= 1 && zombie {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Spawn a built codex invocation without the bridge, for the benches' side-by-side runs: the
/// same program, argv, environment and cwd, stdout piped, stderr as given; the prompt is
/// written to stdin and stdin closed before this returns.
pub async fn spawn_bare(
    spec: &codex_mcp_bridge::codex::argv::SpawnSpec,
    stderr: std::process::Stdio,
) -> Result<tokio::process::Child, String> {
    use tokio::io::AsyncWriteExt;
    let mut child = Command::new(spec.program())
        .args(spec.args())
        .env_clear()
        .envs(spec.env().iter().map(|(k, v)| (k, v)))
        .current_dir(spec.cwd().path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", spec.program().display()))?;
    let mut stdin = child.stdin.take().ok_or("stdin not piped")?;
    stdin
        .write_all(spec.stdin().unwrap_or_default())
        .await
        .map_err(|e| format!("write stdin: {e}"))?;
    drop(stdin);
    Ok(child)
}

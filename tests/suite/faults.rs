//! Faults around a running server, end to end (the built binary, rmcp's client through a
//! stdout tap that checks every line is JSON-RPC): the model connection dropping mid-turn,
//! codex killed mid-turn, a codex that prints garbage or never stops (a fake, the only way to
//! script that), the store's disk filling up or turning read-only (a tmpfs of our own), the
//! store directory deleted, and SIGTERM of the server mid-turn. SIGKILL of the server mid-turn
//! is in `mcp.rs`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

use super::hostile::{Answer, Tapped, call, start_tapped_with};
use crate::support::mcp::{server_env, structured, text};
use crate::support::process::alive;
use crate::support::{MockApi, Reply, TestEnv};

fn descendants(pid: u32) -> Vec<i32> {
    codex_mcp_bridge::codex::process::descendants(pid as i32)
}

/// Waits until none of `pids` is alive; returns the survivors.
async fn wait_dead(pids: &[i32], limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the server has no child process left (a turn's processes are reaped right
/// after its answer; a `ping` may run `codex --version` for a moment).
/// A warm session's `codex app-server` stays by design (the app-server backend); whatever it
/// started does not.
async fn assert_no_process_left(s: &Tapped) {
    // codex's own start-up probes under a starting app-server are not a turn's processes
    let probe = crate::support::process::is_start_up_probe;
    let left = || -> Vec<i32> {
        descendants(s.pid)
            .into_iter()
            .filter(|p| !crate::support::process::is_app_server(*p) && !probe(*p))
            .collect()
    };
    // codex's app-server runs `lsb_release -a` as it starts (a python script: seconds on a
    // loaded machine), so a spare starting in the background may show one for a while
    // judged by the last reading of the wait (a new spare's probes may start after it)
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = left();
    while !last.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        last = left();
    }
    let left: Vec<(i32, String)> = last
        .into_iter()
        .map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            (
                p,
                format!(
                    "{} {stat}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                ),
            )
        })
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// A tool call that must be answered with a tool result.
async fn tool(s: &Tapped, name: &str, args: Value) -> CallToolResult {
    match call(&s.peer(), name, args).await {
        Answer::Tool(r) => r,
        other => panic!("{name}: expected a tool result, got {other:?}"),
    }
}

fn error_kind(r: &CallToolResult) -> String {
    structured(r)["error"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn start(env: &TestEnv, vars: &[(String, String)]) -> Tapped {
    start_tapped_with(vars, env.root(), &env.root().join("server.log")).await
}

/// Starts a `codex` call in the background (it must not block the test).
fn spawn_call(s: &Tapped, args: Value) -> tokio::task::JoinHandle<Result<CallToolResult, String>> {
    let peer = s.peer();
    tokio::spawn(async move {
        let params = CallToolRequestParams::new("codex")
            .with_arguments(args.as_object().cloned().expect("object"));
        match tokio::time::timeout(Duration::from_secs(60), peer.call_tool(params)).await {
            Err(_) => Err("no answer within 60 s".into()),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(e.to_string()),
        }
    })
}

/// Closes the client (EOF on the server's stdin) and waits for a clean exit.
async fn stop(s: Tapped) {
    let Tapped {
        client, mut child, ..
    } = s;
    let _ = client.cancel().await;
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the server exits after EOF")
        .expect("wait");
    assert!(status.success(), "exit after EOF: {status}");
}

fn server_log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.root().join("server.log")).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// codex dies mid-turn

#[tokio::test]
async fn a_model_connection_dropped_mid_turn_fails_the_call_clearly_and_the_session_resumes() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("first answer"));
    mock.push(Reply::drop_connection());
    mock.push(Reply::message("third answer"));
    let mut s = start(&env, &server_env(&env, &mock)).await;
    let args = json!({"prompt": "remember PELICAN", "sessionId": "dropped", "workingDirectory": env.work()});
    let r1 = tool(&s, "codex", args).await;
    assert_eq!(r1.is_error, Some(false), "{}", text(&r1));
    let thread = structured(&r1)["threadId"].clone();

    let r2 = tool(
        &s,
        "codex",
        json!({"prompt": "go on", "sessionId": "dropped"}),
    )
    .await;
    assert_eq!(r2.is_error, Some(true), "{}", text(&r2));
    let msg = text(&r2);
    eprintln!("connection dropped: {msg} ({})", error_kind(&r2));
    assert!(
        msg.contains("disconnected") || msg.contains("stream") || msg.contains("connection"),
        "the message says what happened: {msg}"
    );
    assert!(!error_kind(&r2).is_empty(), "{}", structured(&r2));
    assert_no_process_left(&s).await;

    let got = tool(&s, "getSession", json!({"sessionId": "dropped"})).await;
    let rec = &structured(&got)["session"];
    assert_eq!(rec["lastStatus"], "failed", "{rec}");
    assert_eq!(rec["threadId"], thread, "{rec}");
    assert!(
        rec["lastError"].as_str().is_some_and(|e| !e.is_empty()),
        "{rec}"
    );

    let r3 = tool(
        &s,
        "codex",
        json!({"prompt": "which bird?", "sessionId": "dropped"}),
    )
    .await;
    let v3 = structured(&r3);
    assert_eq!(v3["response"], "third answer", "{}", text(&r3));
    assert_eq!(v3["resumed"], true);
    assert_eq!(v3["threadId"], thread);
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("PELICAN"),
        "the thread's history survived the failed turn"
    );
    assert_no_process_left(&s).await;
    s.assert_healthy().await;
}

#[tokio::test]
async fn codex_killed_mid_turn_fails_the_call_clearly_and_the_session_resumes() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("first answer"));
    mock.push(Reply::hang());
    mock.push(Reply::message("third answer"));
    // every codex process under the server is killed below: no spare beside the session's
    let vars = crate::support::mcp::no_spare(server_env(&env, &mock));
    let mut s = start(&env, &vars).await;
    let r1 = tool(
        &s,
        "codex",
        json!({"prompt": "remember HERON", "sessionId": "killed", "workingDirectory": env.work()}),
    )
    .await;
    assert_eq!(r1.is_error, Some(false), "{}", text(&r1));
    let thread = structured(&r1)["threadId"].clone();

    let pending = spawn_call(&s, json!({"prompt": "hang", "sessionId": "killed"}));
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30))
        .await;
    let codex = descendants(s.pid);
    assert!(!codex.is_empty(), "codex runs under the server");
    for p in &codex {
        // SAFETY: signals only.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    let r2 = pending.await.unwrap().expect("the call is answered");
    assert_eq!(r2.is_error, Some(true), "{}", text(&r2));
    let msg = text(&r2);
    eprintln!("codex killed: {msg}");
    assert!(
        msg.contains("killed by a signal") || msg.contains("signal"),
        "the message says codex was killed: {msg}"
    );
    assert_eq!(error_kind(&r2), "crashed", "{}", structured(&r2));
    assert!(wait_dead(&codex, Duration::from_secs(3)).await.is_empty());
    assert_no_process_left(&s).await;

    let got = tool(&s, "getSession", json!({"sessionId": "killed"})).await;
    let rec = &structured(&got)["session"];
    assert_eq!(rec["lastStatus"], "failed", "{rec}");
    assert_eq!(rec["threadId"], thread, "{rec}");

    let r3 = tool(
        &s,
        "codex",
        json!({"prompt": "which bird?", "sessionId": "killed"}),
    )
    .await;
    let v3 = structured(&r3);
    assert_eq!(v3["response"], "third answer", "{}", text(&r3));
    assert_eq!(v3["resumed"], true);
    assert_eq!(v3["threadId"], thread);
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("HERON")
    );
    s.assert_healthy().await;
}

// ---------------------------------------------------------------------------------------------
// codex misbehaves on stdout (a fake: the real one cannot be made to)

const FAKE_THREAD: &str = "550e8400-e29b-41d4-a716-446655440000";

/// A stand-in for codex whose behaviour the prompt picks.
fn fake_codex(dir: &Path) -> PathBuf {
    let script = format!(
        r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "codex-cli 0.145.0"; exit 0; fi
prompt=$(cat)
case "$prompt" in
*MODE-GARBAGE*)
  printf 'not json\n{{"type":\n[1,2,3]\n\377\376\000 binary\n{{"type":"thread.started","thread_id":"not-a-uuid"}}\n{{"type":"item.completed","item":{{"id":"i","type":"agent_message","text":"half an answer"}}}}\n'
  exit 0 ;;
*MODE-FLOOD*)
  while :; do echo '{{"type":"turn.started"}}'; done ;;
*MODE-NO-NEWLINE*)
  tr '\000' x < /dev/zero ;;
*MODE-LONG-LINE*)
  head -c 300000 /dev/zero | tr '\000' x; echo
  exit 0 ;;
*MODE-STDERR*)
  head -c 5000000 /dev/zero | tr '\000' e >&2
  exit 3 ;;
*MODE-OK*)
  echo '{{"type":"thread.started","thread_id":"{FAKE_THREAD}"}}'
  echo '{{"type":"turn.started"}}'
  head -c 300000 /dev/zero | tr '\000' y; echo
  echo '{{"type":"item.completed","item":{{"id":"i","type":"agent_message","text":"fine"}}}}'
  echo '{{"type":"turn.completed","usage":{{"input_tokens":3,"output_tokens":2}}}}'
  exit 0 ;;
esac
echo "unknown mode" >&2
exit 9
"#
    );
    let path = dir.join("fake-codex");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn a_codex_printing_garbage_endless_output_or_huge_lines_gets_clear_errors() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let fake = fake_codex(env.root());
    let mut vars = server_env(&env, &mock);
    vars.retain(|(k, _)| k != "CODEX_BIN");
    vars.push(("CODEX_BIN".into(), fake.display().to_string()));
    // the fake speaks `codex exec --json` only: this is the exec path's parser under attack
    // (the app-server client's framing has its own tests)
    vars.retain(|(k, _)| k != "CODEX_BRIDGE_BACKEND");
    vars.push(("CODEX_BRIDGE_BACKEND".into(), "exec".into()));
    vars.push(("CODEX_BRIDGE_MAX_LINE_BYTES".into(), "4096".into()));
    vars.push(("CODEX_BRIDGE_MAX_OUTPUT_BYTES".into(), "1048576".into()));
    let mut s = start(&env, &vars).await;

    // (mode, expected error kind, what the message must say)
    let cases = [
        ("MODE-GARBAGE", "crashed", "without completing the turn"),
        ("MODE-FLOOD", "output_cap", "output cap of 1048576 bytes"),
        (
            "MODE-NO-NEWLINE",
            "output_cap",
            "output cap of 1048576 bytes",
        ),
        ("MODE-LONG-LINE", "crashed", "without completing the turn"),
        ("MODE-STDERR", "crashed", "exited with status 3"),
    ];
    for (i, (mode, kind, says)) in cases.iter().enumerate() {
        let t = Instant::now();
        let r = tool(
            &s,
            "codex",
            json!({"prompt": format!("please {mode}"), "sessionId": format!("fake-{i}"), "workingDirectory": env.work()}),
        )
        .await;
        let msg = text(&r);
        assert_eq!(r.is_error, Some(true), "{mode}: {msg}");
        assert_eq!(error_kind(&r), *kind, "{mode}: {msg}");
        assert!(msg.contains(says), "{mode}: {msg}");
        eprintln!("{mode}: {}", msg.chars().take(160).collect::<String>());
        assert!(
            msg.len() < 8 * 1024,
            "{mode}: a bounded message ({} bytes)",
            msg.len()
        );
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "{mode} took {:?}",
            t.elapsed()
        );
        assert_no_process_left(&s).await;
        s.assert_healthy().await;
    }
    // the garbage's one agent message comes back as the partial answer
    let got = tool(&s, "getSession", json!({"sessionId": "fake-0"})).await;
    assert_eq!(structured(&got)["session"]["lastStatus"], "failed");
    assert_eq!(
        structured(&got)["session"]["threadId"],
        Value::Null,
        "not a UUID: ignored"
    );

    // the sessions still work: a well-behaved turn (with an over-long line, skipped) succeeds
    for i in [0, 1] {
        let r = tool(
            &s,
            "codex",
            json!({"prompt": "MODE-OK", "sessionId": format!("fake-{i}")}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        assert_eq!(structured(&r)["response"], "fine");
        assert_eq!(structured(&r)["threadId"], FAKE_THREAD);
    }
    assert_eq!(mock.responses_count(), 0);
    assert_no_process_left(&s).await;
    s.assert_healthy().await;
}

// ---------------------------------------------------------------------------------------------
// The store's disk

/// A tmpfs of our own, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = StdCommand::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    fn remount(&self, how: &str) {
        let ok = StdCommand::new("mount")
            .args(["-o", &format!("remount,{how}")])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount {how}");
    }

    /// Writes a file until the filesystem is full.
    fn fill(&self) -> PathBuf {
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 16 * 1024];
        while f.write_all(&chunk).is_ok() {}
        // the last pages: a byte at a time
        while f.write_all(&[0]).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = StdCommand::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Whether `r` is the clear error of a store that cannot write (a turn tool's error names its
/// kind; the session tools' errors are the sentence alone).
fn is_store_error(r: &CallToolResult) -> bool {
    r.is_error == Some(true)
        && (r.structured_content.is_none() || error_kind(r) == "store")
        && text(r).starts_with("session store error: store at ")
}

/// The disk under the store fills up mid-run: a call that needs to write fails with a clear
/// store error (before codex is started), the server keeps answering, and after the disk is
/// back and the server restarted, the session is intact and resumes. Read-only: the kernel
/// refuses to remount a filesystem read-only while a file on it is open for writing (EBUSY),
/// which the store always is, so the read-only half checks a start on a read-only store: a
/// clean exit with a clear message, nothing on stdout.
#[tokio::test]
async fn a_full_or_read_only_store_disk_fails_calls_clearly_and_corrupts_nothing() {
    let env = TestEnv::new();
    let store = env.root().join("store");
    let Some(disk) = Tmpfs::mount(&store, "16m") else {
        // SAFETY: no arguments, no memory.
        assert_ne!(
            unsafe { libc::geteuid() },
            0,
            "running as root but cannot mount a tmpfs: this test needs CAP_SYS_ADMIN"
        );
        eprintln!("not root: cannot mount a tmpfs, so this test cannot fill a disk");
        return;
    };
    let mock = MockApi::start().await;
    mock.push(Reply::message("first answer"));
    let vars = server_env(&env, &mock);
    let mut s = start(&env, &vars).await;
    let r1 = tool(
        &s,
        "codex",
        json!({"prompt": "remember IBIS", "sessionId": "disk", "workingDirectory": env.work()}),
    )
    .await;
    assert_eq!(r1.is_error, Some(false), "{}", text(&r1));
    let thread = structured(&r1)["threadId"].clone();

    // full: new sessions until one cannot be written
    let filler = disk.fill();
    let before = mock.responses_count();
    let mut failed = None;
    for i in 0..8 {
        let r = tool(
            &s,
            "codex",
            json!({"prompt": "new", "sessionId": format!("full-{i}"), "workingDirectory": env.work()}),
        )
        .await;
        if r.is_error == Some(true) {
            failed = Some(r);
            break;
        }
    }
    let failed = failed.expect("a write to a full disk failed");
    assert!(is_store_error(&failed), "{}", text(&failed));
    assert!(
        text(&failed).contains("No space left on device"),
        "{}",
        text(&failed)
    );
    eprintln!("full disk: {}", text(&failed));
    s.assert_healthy().await;
    assert_no_process_left(&s).await;
    let listed = tool(&s, "listSessions", json!({})).await;
    assert_eq!(
        listed.is_error,
        Some(false),
        "reads still work: {}",
        text(&listed)
    );
    let spent = mock.responses_count() - before;

    // the disk is back: the call is answered (today sled keeps its first IO error, so writes
    // fail until a restart; see the report)
    std::fs::remove_file(&filler).unwrap();
    let r3 = tool(&s, "codex", json!({"prompt": "again", "sessionId": "disk"})).await;
    assert!(
        r3.is_error == Some(false) || is_store_error(&r3),
        "{}",
        text(&r3)
    );
    eprintln!("disk back, same server: {}", text(&r3));
    s.assert_healthy().await;
    stop(s).await;
    assert!(
        mock.responses_count() - before <= spent + 1,
        "a failed write never started codex"
    );

    // a start on a read-only store: a clean failure with a clear message
    disk.remount("ro");
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::process::Command::new(crate::support::mcp::server_bin())
            .env_clear()
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .current_dir(env.root())
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("exits, never hangs")
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("store at") && err.contains("Read-only file system"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout");
    disk.remount("rw");

    // restarted on the repaired disk: the session is intact and resumes
    let mut s2 = start(&env, &vars).await;
    let got = tool(&s2, "getSession", json!({"sessionId": "disk"})).await;
    assert_eq!(got.is_error, Some(false), "{}", text(&got));
    let rec = &structured(&got)["session"];
    eprintln!("after restart: {rec}");
    assert_eq!(rec["threadId"], thread, "{rec}");
    assert!(rec["turnCount"].as_u64().is_some_and(|n| n >= 1), "{rec}");
    mock.push(Reply::message("after"));
    let r5 = tool(
        &s2,
        "codex",
        json!({"prompt": "which bird?", "sessionId": "disk"}),
    )
    .await;
    let v5 = structured(&r5);
    assert_eq!(v5["response"], "after", "{}", text(&r5));
    assert_eq!(v5["resumed"], true);
    assert_eq!(v5["threadId"], thread);
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("IBIS")
    );
    let listed = tool(&s2, "listSessions", json!({"limit": 200})).await;
    assert_eq!(listed.is_error, Some(false), "{}", text(&listed));
    s2.assert_healthy().await;
}

/// The store directory is deleted under a running server: every call is still answered (a
/// success or a clear store error), and a restart makes a fresh store that works.
#[tokio::test]
async fn deleting_the_store_directory_while_serving_then_restarting_works() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let vars = server_env(&env, &mock);
    let store = env.root().join("store");
    let mut s = start(&env, &vars).await;
    let r1 = tool(
        &s,
        "codex",
        json!({"prompt": "one", "sessionId": "before", "workingDirectory": env.work()}),
    )
    .await;
    assert_eq!(r1.is_error, Some(false), "{}", text(&r1));
    std::fs::remove_dir_all(&store).unwrap();

    for (id, wd) in [("before", None), ("after", Some(env.work()))] {
        let mut args = json!({"prompt": "two", "sessionId": id});
        if let Some(wd) = wd {
            args["workingDirectory"] = json!(wd);
        }
        let r = tool(&s, "codex", args).await;
        assert!(
            r.is_error == Some(false) || is_store_error(&r),
            "{id}: {}",
            text(&r)
        );
    }
    let listed = tool(&s, "listSessions", json!({})).await;
    assert!(
        listed.is_error == Some(false) || is_store_error(&listed),
        "{}",
        text(&listed)
    );
    s.assert_healthy().await;
    assert_no_process_left(&s).await;
    stop(s).await;

    let mut s2 = start(&env, &vars).await;
    assert!(store.is_dir(), "a fresh store");
    let r = tool(
        &s2,
        "codex",
        json!({"prompt": "four", "sessionId": "fresh", "workingDirectory": env.work()}),
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    stop(s2).await;
    s2 = start(&env, &vars).await;
    let got = tool(&s2, "getSession", json!({"sessionId": "fresh"})).await;
    assert_eq!(
        structured(&got)["session"]["turnCount"],
        1,
        "{}",
        text(&got)
    );
    s2.assert_healthy().await;
}

/// The stricter half of the above: a turn the server acknowledged after its store directory
/// was deleted is not lost by a restart (or the call failed). sled keeps writing to unlinked
/// files, so the store checks its files are still there before calling a write durable.
#[tokio::test]
async fn a_turn_acknowledged_after_the_store_was_deleted_survives_a_restart() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let vars = server_env(&env, &mock);
    let s = start(&env, &vars).await;
    let r1 = tool(
        &s,
        "codex",
        json!({"prompt": "one", "sessionId": "early", "workingDirectory": env.work()}),
    )
    .await;
    assert_eq!(r1.is_error, Some(false), "{}", text(&r1));
    std::fs::remove_dir_all(env.root().join("store")).unwrap();
    let r2 = tool(
        &s,
        "codex",
        json!({"prompt": "two", "sessionId": "late", "workingDirectory": env.work()}),
    )
    .await;
    stop(s).await;
    let s2 = start(&env, &vars).await;
    let got = tool(&s2, "getSession", json!({"sessionId": "late"})).await;
    assert!(
        r2.is_error == Some(true) || structured(&got)["found"] == true,
        "the turn was acknowledged ({}) but its session is gone after a restart: {}",
        text(&r2),
        text(&got)
    );
}

// ---------------------------------------------------------------------------------------------
// SIGTERM mid-turn

#[tokio::test]
async fn sigterm_mid_turn_exits_cleanly_kills_codex_and_the_session_resumes() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("first answer"));
    mock.push(Reply::hang());
    mock.push(Reply::message("third answer"));
    let vars = server_env(&env, &mock);
    let s = start(&env, &vars).await;
    let r1 = tool(
        &s,
        "codex",
        json!({"prompt": "remember EGRET", "sessionId": "term", "workingDirectory": env.work()}),
    )
    .await;
    assert_eq!(r1.is_error, Some(false), "{}", text(&r1));
    let thread = structured(&r1)["threadId"].clone();

    let pending = spawn_call(&s, json!({"prompt": "hang", "sessionId": "term"}));
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30))
        .await;
    let codex = descendants(s.pid);
    assert!(!codex.is_empty());
    // SAFETY: signals only.
    unsafe { libc::kill(s.pid as i32, libc::SIGTERM) };
    let Tapped {
        client,
        mut child,
        bad_stdout,
        ..
    } = s;
    let t = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the server exits after SIGTERM")
        .unwrap();
    eprintln!("SIGTERM: exit {status} after {:?}", t.elapsed());
    assert!(status.success(), "exit after SIGTERM: {status}");
    assert!(server_log(&env).contains("SIGTERM"), "{}", server_log(&env));
    let answer = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .expect("the pending call ends")
        .unwrap();
    eprintln!("the pending call: {answer:?}");
    if let Ok(r) = &answer {
        assert_eq!(r.is_error, Some(true), "{}", text(r));
    }
    assert!(
        wait_dead(&codex, Duration::from_secs(3)).await.is_empty(),
        "codex outlived the server"
    );
    assert!(bad_stdout.lock().unwrap().is_empty());
    drop(client);

    let s2 = start(&env, &vars).await;
    let got = tool(&s2, "getSession", json!({"sessionId": "term"})).await;
    let rec = &structured(&got)["session"];
    eprintln!("after SIGTERM and a restart: {rec}");
    assert!(
        rec["lastStatus"] == "interrupted" || rec["lastStatus"] == "cancelled",
        "{rec}"
    );
    assert_eq!(rec["threadId"], thread);
    let r3 = tool(
        &s2,
        "codex",
        json!({"prompt": "which bird?", "sessionId": "term"}),
    )
    .await;
    let v3 = structured(&r3);
    assert_eq!(v3["response"], "third answer", "{}", text(&r3));
    assert_eq!(v3["resumed"], true);
    assert_eq!(v3["threadId"], thread);
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("EGRET")
    );
}

// ---------------------------------------------------------------------------------------------
// the client closes its connection mid-turn, or the server dies: what the next start says

/// Issue 35: a host that closes its connection while a turn runs (here one declaring tasks, as
/// Claude Code does, so that the turn still runs when the server stops) is logged at the next
/// start, and recorded in the session, as that, not as a crash; a server SIGKILLed mid-turn
/// still is a crash.
#[tokio::test]
async fn a_client_closing_mid_turn_is_told_apart_from_a_server_crash_at_the_next_start() {
    use crate::support::mcp::{Protocol, connect_tasks};
    use codex_mcp_bridge::actors::{CLIENT_CLOSED, SERVER_STOPPED};
    use rmcp::model::CallToolResponse;
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::hang());
    let vars = server_env(&env, &mock);
    let s = connect_tasks(&env, &mock, Protocol::Legacy).await;
    let params = CallToolRequestParams::new("codex").with_arguments(
        json!({"prompt": "hang", "sessionId": "left", "workingDirectory": env.work()})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let started = s.call_once(params).await;
    assert!(matches!(started, CallToolResponse::Task(_)), "{started:?}");
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30))
        .await;
    let pid = s.pid;
    // EOF on the server's stdin: the client is gone
    let _ = s.client.cancel().await;
    assert!(
        wait_dead(&[pid as i32], Duration::from_secs(20))
            .await
            .is_empty(),
        "the server exits after EOF"
    );
    crate::support::process::wait_exit(pid).await;

    let s2 = start(&env, &vars).await;
    let got = tool(&s2, "getSession", json!({"sessionId": "left"})).await;
    let rec = &structured(&got)["session"];
    assert_eq!(rec["lastStatus"], "interrupted", "{rec}");
    assert_eq!(rec["lastError"], CLIENT_CLOSED, "{rec}");
    let log = server_log(&env);
    assert!(log.contains(CLIENT_CLOSED), "{log}");
    assert!(!log.contains("server crash"), "{log}");

    // the same session, its next turn cut off by a SIGKILL of the server
    mock.push(Reply::hang());
    let pending = spawn_call(&s2, json!({"prompt": "hang", "sessionId": "left"}));
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30))
        .await;
    // SAFETY: signals only.
    unsafe { libc::kill(s2.pid as i32, libc::SIGKILL) };
    crate::support::process::wait_exit(s2.pid).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), pending).await;
    drop(s2);
    let s3 = start(&env, &vars).await;
    let got = tool(&s3, "getSession", json!({"sessionId": "left"})).await;
    let rec = &structured(&got)["session"];
    assert_eq!(rec["lastStatus"], "interrupted", "{rec}");
    assert_eq!(rec["lastError"], SERVER_STOPPED, "{rec}");
    assert!(server_log(&env).contains("a turn was interrupted by a server crash"));
    stop(s3).await;
}

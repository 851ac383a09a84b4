//! The app-server backend through a real MCP client (rmcp's) and the real codex: a warm
//! session keeps one `codex app-server` across its turns, nothing sticks between turns, the cap
//! and the idle timeout close processes, and a cancel leaves nothing running.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::bridge::pids_with_cmdline;
use crate::support::mcp::{Protocol, Server, connect_with, server_env, structured, text};
use crate::support::process::{alive, is_app_server};
use crate::support::{MockApi, Reply, TestEnv};

/// The bridge with the app-server backend (whatever the suite's default) and `extra` settings.
async fn warm_server(env: &TestEnv, mock: &MockApi, extra: &[(&str, &str)]) -> Server {
    let mut vars = server_env(env, mock);
    vars.retain(|(k, _)| k != "CODEX_BRIDGE_BACKEND");
    vars.push(("CODEX_BRIDGE_BACKEND".into(), "app-server".into()));
    for (k, v) in extra {
        vars.push(((*k).into(), (*v).into()));
    }
    connect_with(&vars, env.root(), Protocol::Legacy).await
}

/// The server's `codex app-server` children.
fn app_servers(server_pid: u32) -> Vec<i32> {
    codex_mcp_bridge::codex::process::descendants(server_pid as i32)
        .into_iter()
        .filter(|p| is_app_server(*p))
        .collect()
}

async fn wait_until(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    cond()
}

fn write_file_reply(name: &str) -> Reply {
    Reply::exec_command(&format!("echo {name} > {name}; echo exit=$?"))
}

#[tokio::test]
async fn a_warm_session_keeps_one_app_server_and_nothing_sticks_between_turns() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let log = std::env::var("WARM_TEST_LOG").unwrap_or_else(|_| "warn".into());
    // one warm process at most: no spare beside the session's own
    let s = warm_server(
        &env,
        &mock,
        &[("RUST_LOG", log.as_str()), ("CODEX_BRIDGE_MAX_WARM", "1")],
    )
    .await;
    let work = env.work().canonicalize().unwrap();

    // a workspace-write turn writes
    mock.push_all([write_file_reply("one.txt"), Reply::message("wrote OSPREY")]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "write one", "sessionId": "w", "workingDirectory": work,
                   "sandbox": "workspace-write"}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert!(work.join("one.txt").exists(), "{}", text(&r));
    let servers = app_servers(s.pid);
    assert_eq!(servers.len(), 1, "one warm app-server: {servers:?}");

    // the next turn names no sandbox: read-only, on the same process, with the history
    mock.push_all([write_file_reply("two.txt"), Reply::message("tried two")]);
    let r = s
        .call("codex", json!({"prompt": "write two", "sessionId": "w"}))
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["resumed"], true, "{}", text(&r));
    assert!(
        !work.join("two.txt").exists(),
        "a turn without a sandbox wrote: {}",
        text(&r)
    );
    assert_eq!(app_servers(s.pid), servers, "the same warm process");
    let reqs = mock.responses_requests();
    assert!(
        reqs.last().unwrap().body_contains("OSPREY"),
        "the model sees the first turn's history"
    );
    let got = s.call("getSession", json!({"sessionId": "w"})).await;
    assert_eq!(
        structured(&got)["session"]["turnCount"],
        2,
        "{}",
        text(&got)
    );
}

#[tokio::test]
async fn the_warm_cap_closes_the_least_recently_used_process_and_its_session_resumes() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = warm_server(&env, &mock, &[("CODEX_BRIDGE_MAX_WARM", "1")]).await;
    let work = env.work().canonicalize().unwrap();
    mock.push(Reply::message("a says KESTREL"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "a1", "sessionId": "a", "workingDirectory": work}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let first = app_servers(s.pid);
    assert_eq!(first.len(), 1);
    mock.push(Reply::message("b one"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "b1", "sessionId": "b", "workingDirectory": work}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert!(
        wait_until(Duration::from_secs(5), || !alive(first[0])).await,
        "the least recently used warm process was closed"
    );
    assert_eq!(app_servers(s.pid).len(), 1, "at most max_warm processes");
    // session a comes back: its thread resumed in a new process, its history intact
    mock.push(Reply::message("a two"));
    let r = s
        .call("codex", json!({"prompt": "a2", "sessionId": "a"}))
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["resumed"], true);
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("KESTREL")
    );
}

#[tokio::test]
async fn an_idle_warm_process_is_closed_after_the_idle_timeout() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = warm_server(
        &env,
        &mock,
        &[
            ("CODEX_BRIDGE_IDLE_TIMEOUT_MS", "400"),
            ("CODEX_BRIDGE_MAX_WARM", "1"),
        ],
    )
    .await;
    mock.push(Reply::message("hello"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "hi", "sessionId": "idle", "workingDirectory": env.work()}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let servers = app_servers(s.pid);
    assert_eq!(servers.len(), 1);
    assert!(
        wait_until(Duration::from_secs(10), || !servers
            .iter()
            .any(|p| alive(*p)))
        .await,
        "the idle warm process was closed"
    );
    // and the session continues
    mock.push(Reply::message("again"));
    let r = s
        .call("codex", json!({"prompt": "again", "sessionId": "idle"}))
        .await;
    assert_eq!(structured(&r)["resumed"], true, "{}", text(&r));
}

/// The bridge with the app-server backend and danger-full-access allowed.
async fn danger_server(env: &TestEnv, mock: &MockApi) -> Server {
    warm_server(env, mock, &[("CODEX_BRIDGE_ALLOW_DANGER", "1")]).await
}

async fn gone_within(needle: &str, limit: Duration) -> Vec<i32> {
    wait_until(limit, || pids_with_cmdline(needle).is_empty()).await;
    pids_with_cmdline(needle)
}

fn kill_matching(needle: &str) {
    for p in pids_with_cmdline(needle) {
        // SAFETY: signals only.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
}

#[tokio::test]
async fn a_job_that_escapes_into_its_own_session_dies_with_the_warm_turn() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = danger_server(&env, &mock).await;
    let job = "setsid sleep 987104 > /dev/null 2>&1 < /dev/null & sleep 0.5; echo started";
    mock.push(Reply::exec_command(job));
    mock.push(Reply::message("done").with_delay(Duration::from_millis(300)));
    let r = s
        .call(
            "codex",
            json!({"prompt": "start a job", "sessionId": "job", "workingDirectory": env.work(),
                   "sandbox": "danger-full-access"}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let left = gone_within("sleep 987104", Duration::from_millis(500)).await;
    kill_matching("sleep 987104");
    assert!(
        left.is_empty(),
        "the escaped job outlived the turn: {left:?}"
    );
    assert!(!app_servers(s.pid).is_empty(), "the warm process stays");
}

#[tokio::test]
async fn cancelling_a_warm_turn_kills_its_command_within_a_second_and_the_session_resumes() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = danger_server(&env, &mock).await;
    mock.push(Reply::message("first"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "one", "sessionId": "c", "workingDirectory": env.work()}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    mock.push(Reply::exec_command("sleep 987105; echo done"));
    mock.push(Reply::message("never sent"));
    let params = rmcp::model::CallToolRequestParams::new("codex").with_arguments(
        json!({"prompt": "sleep", "sessionId": "c", "sandbox": "danger-full-access"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let call = s.client.call_tool(params);
    let running = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::select! {
            _ = call => panic!("the sleeping call returned"),
            _ = async {
                while pids_with_cmdline("sleep 987105").is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } => {}
        }
    })
    .await;
    assert!(running.is_ok(), "the command ran");
    // dropping the call future sent notifications/cancelled
    let t = Instant::now();
    let left = gone_within("sleep 987105", Duration::from_secs(1)).await;
    let took = t.elapsed();
    kill_matching("sleep 987105");
    assert!(left.is_empty(), "the command survived the cancel: {left:?}");
    assert!(took < Duration::from_millis(1500), "cancel took {took:?}");
    mock.push(Reply::message("after"));
    let r = s
        .call("codex", json!({"prompt": "again", "sessionId": "c"}))
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["resumed"], true);
}

/// A codex whose `app-server` subcommand does not exist (an older or a broken build): every
/// other command is the real codex.
fn codex_without_app_server(env: &TestEnv) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = env.root().join("codex-no-app-server");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = app-server ] && {{ echo \"error: unrecognized subcommand 'app-server'\" >&2; exit 2; }}; done\nexec '{}' \"$@\"\n",
            crate::support::codex_bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn without_a_usable_app_server_turns_fall_back_to_exec_with_a_warning_in_ping_and_doctor() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let fake = codex_without_app_server(&env);
    let fake_str = fake.display().to_string();
    let s = warm_server(&env, &mock, &[("CODEX_BIN", fake_str.as_str())]).await;
    mock.push(Reply::message("served by exec"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "hi", "sessionId": "fb", "workingDirectory": env.work()}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert!(text(&r).contains("served by exec"), "{}", text(&r));
    let ping = s.call("ping", json!({})).await;
    let backend = &structured(&ping)["backend"];
    assert_eq!(backend["configured"], "app-server", "{backend}");
    assert_eq!(backend["effective"], "exec", "{backend}");
    assert!(
        backend["warning"]
            .as_str()
            .is_some_and(|w| w.contains("no usable app-server")),
        "{backend}"
    );
    assert!(app_servers(s.pid).is_empty());
    // a second turn goes straight to exec
    mock.push(Reply::message("again by exec"));
    let r = s
        .call("codex", json!({"prompt": "again", "sessionId": "fb"}))
        .await;
    assert_eq!(structured(&r)["resumed"], true, "{}", text(&r));

    // doctor says so too, and says the real codex's app-server works
    let doctor = |bin: &std::path::Path| {
        let mut cmd = tokio::process::Command::new(crate::support::mcp::server_bin());
        cmd.arg("doctor")
            .env_clear()
            .envs(server_env(&env, &mock))
            .env("CODEX_BIN", bin)
            .env("CODEX_BRIDGE_BACKEND", "app-server")
            .current_dir(env.root());
        cmd
    };
    let out = doctor(&fake).output().await.unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.lines().any(|l| l.starts_with("warn")
            && l.contains("backend")
            && l.contains("no usable app-server")),
        "{said}"
    );
    let out = doctor(&crate::support::codex_bin()).output().await.unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.lines().any(|l| l.starts_with("ok")
            && l.contains("backend")
            && l.contains("starts and answers")),
        "{said}"
    );
}

#[tokio::test]
async fn a_new_session_where_one_ran_before_takes_a_spare_started_the_same_way() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let log = std::env::var("WARM_TEST_LOG").unwrap_or_else(|_| "warn".into());
    let s = warm_server(&env, &mock, &[("RUST_LOG", log.as_str())]).await;
    let work = env.work().canonicalize().unwrap();
    mock.push(Reply::message("first session"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "one", "sessionId": "s1", "workingDirectory": work}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    // the spare for this directory starts in the background
    assert!(
        wait_until(Duration::from_secs(30), || app_servers(s.pid).len() == 2).await,
        "a spare app-server beside the session's: {:?}",
        app_servers(s.pid)
    );
    let before = app_servers(s.pid);
    // a new session in the same directory takes it (no new process but the next spare), and a
    // workspace-write request still gets only what it asked for
    mock.push_all([write_file_reply("s2.txt"), Reply::message("second session")]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "two", "sessionId": "s2", "workingDirectory": work,
                   "sandbox": "workspace-write"}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert!(work.join("s2.txt").exists(), "{}", text(&r));
    let after = app_servers(s.pid);
    assert!(
        before.iter().all(|p| after.contains(p)),
        "the spare became the new session's process: {before:?} -> {after:?}"
    );
    // a spare never carries a loaded thread into another session: the new session's model
    // request holds none of the first session's history
    let last = mock.responses_requests();
    assert!(
        !last.last().unwrap().body_contains("first session"),
        "the second session saw the first one's history"
    );
}

#[tokio::test]
async fn a_warm_process_that_died_between_turns_is_replaced_and_the_turn_runs() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = warm_server(&env, &mock, &[("CODEX_BRIDGE_MAX_WARM", "1")]).await;
    mock.push(Reply::message("before ROBIN"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "one", "sessionId": "died", "workingDirectory": env.work()}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let servers = app_servers(s.pid);
    assert_eq!(servers.len(), 1);
    // SAFETY: signals only.
    unsafe { libc::kill(servers[0], libc::SIGKILL) };
    assert!(wait_until(Duration::from_secs(5), || !alive(servers[0])).await);
    mock.push(Reply::message("after"));
    let r = s
        .call("codex", json!({"prompt": "two", "sessionId": "died"}))
        .await;
    assert!(r.is_error != Some(true), "the turn ran: {}", text(&r));
    assert_eq!(structured(&r)["resumed"], true);
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("ROBIN")
    );
}

#[tokio::test]
async fn the_spare_counts_against_the_cap() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = warm_server(&env, &mock, &[("CODEX_BRIDGE_MAX_WARM", "2")]).await;
    let a = env.work().join("a");
    let b = env.work().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    mock.push(Reply::message("in a"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "a", "sessionId": "ca", "workingDirectory": a}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    // the spare for a starts beside a's own process
    wait_until(Duration::from_secs(30), || app_servers(s.pid).len() == 2).await;
    mock.push(Reply::message("in b"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "b", "sessionId": "cb", "workingDirectory": b}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert!(
        wait_until(Duration::from_secs(5), || app_servers(s.pid).len() <= 2).await,
        "more warm processes than max_warm: {:?}",
        app_servers(s.pid)
    );
    // and stays within it once the background starts settle
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(app_servers(s.pid).len() <= 2, "{:?}", app_servers(s.pid));
}

/// `max_output_bytes` holds on the warm path too: a turn whose command prints more than the
/// cap is stopped (its process killed) with the exec path's `output_cap` error, and the
/// session goes on in a new process.
#[tokio::test]
async fn a_warm_turn_printing_past_the_output_cap_is_stopped_and_the_session_goes_on() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let cap = [
        ("CODEX_BRIDGE_MAX_OUTPUT_BYTES", "1048576"),
        ("CODEX_BRIDGE_MAX_LINE_BYTES", "65536"),
    ];
    let s = warm_server(&env, &mock, &cap).await;
    mock.push_all([
        Reply::exec_command("head -c 4000000 /dev/zero | tr '\\0' x; echo"),
        Reply::message("printed"),
    ]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "flood", "sessionId": "cap", "model": "gpt-5.5",
                   "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let v = structured(&r);
    assert_eq!(v["error"]["kind"], "output_cap", "{v}");
    assert!(
        text(&r).contains("output cap of 1048576 bytes"),
        "{}",
        text(&r)
    );
    mock.push_for_user_text("again", Reply::message("still here"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "again", "sessionId": "cap", "model": "gpt-5.5"}),
        )
        .await;
    assert_eq!(structured(&r)["response"], "still here", "{}", text(&r));
}

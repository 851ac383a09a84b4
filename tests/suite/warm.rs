//! The app-server backend through a real MCP client (rmcp's) and the real codex: a warm
//! session keeps one `codex app-server` across its turns, nothing sticks between turns, the cap
//! and the idle timeout close processes, and a cancel leaves nothing running.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::bridge::{own_sleep, pids_with_cmdline, pids_with_cmdline_prefix};
use crate::support::mcp::{Protocol, Server, connect_with, server_env, structured, text};
use crate::support::process::{alive, is_bridge_app_server};
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
        .filter(|p| is_bridge_app_server(*p))
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

/// [`wait_until`] for a condition that asks an actor (the pool's keeper) on the way.
async fn wait_until_async<F: std::future::Future<Output = bool>>(
    limit: Duration,
    cond: impl Fn() -> F,
) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    cond().await
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
    let escaped = own_sleep(987104);
    let job = &format!("setsid {escaped} > /dev/null 2>&1 < /dev/null & sleep 0.5; echo started");
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
    let left = gone_within(&escaped, Duration::from_millis(500)).await;
    kill_matching(&escaped);
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
    let sleep = own_sleep(987105);
    mock.push(Reply::exec_command(&format!("{sleep}; echo done")));
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
                // the `sleep` itself, not the shell or a short-lived process of codex whose
                // command line names it: one that exits by itself would read as killed
                while pids_with_cmdline_prefix(&sleep).is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } => {}
        }
    })
    .await;
    assert!(running.is_ok(), "the command ran");
    // dropping the call future sent notifications/cancelled
    let t = Instant::now();
    wait_until(Duration::from_secs(1), || {
        pids_with_cmdline_prefix(&sleep).is_empty()
    })
    .await;
    let took = t.elapsed();
    let left = pids_with_cmdline(&sleep);
    kill_matching(&sleep);
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

/// A codex whose `app-server` runs the real one behind a line relay (perl) that SIGKILLs the
/// real codex and itself when it reads a request with an armed method: `arm(dir, "thread/resume")`
/// makes the next process that is sent `thread/resume` die right then, before it reads it
/// (one process only: the arm file is taken by renaming it). The real codex does the work;
/// every other command is the real codex itself.
fn codex_dying_on_request(env: &TestEnv) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let arms = env.root().join("arms");
    std::fs::create_dir_all(&arms).unwrap();
    let path = env.root().join("codex-dies");
    std::fs::write(
        &path,
        format!(
            r#"#!/usr/bin/perl
use strict; use warnings;
my $real = '{real}';
my $arms = '{arms}';
exec($real, @ARGV) or die "exec: $!" unless grep {{ $_ eq 'app-server' }} @ARGV;
pipe(my $r, my $w) or die "pipe: $!";
my $pid = fork() // die "fork: $!";
if ($pid == 0) {{ close $w; open(STDIN, '<&', $r) or die; exec($real, @ARGV) or die "exec: $!"; }}
close $r;
$w->autoflush(1);
while (my $line = <STDIN>) {{
    if ($line =~ /"method"\s*:\s*"([^"]+)"/) {{
        (my $f = $1) =~ s{{/}}{{_}}g;
        if (rename("$arms/$f", "$arms/$f.taken.$$")) {{ kill 'KILL', $pid; kill 'KILL', $$; }}
    }}
    print $w $line;
}}
close $w;
waitpid($pid, 0);
exit($? >> 8);
"#,
            real = crate::support::codex_bin().display(),
            arms = arms.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (path, arms)
}

/// Arm the wrapper of [`codex_dying_on_request`]: the next process sent `method` dies.
fn arm(arms: &std::path::Path, method: &str) {
    std::fs::write(arms.join(method.replace('/', "_")), b"").unwrap();
}

/// Whether an armed kill was taken (the process it names died on that request).
fn fired(arms: &std::path::Path, method: &str) -> bool {
    let prefix = format!("{}.taken.", method.replace('/', "_"));
    std::fs::read_dir(arms).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(&prefix)
    })
}

/// The wrapper processes of [`codex_dying_on_request`] (one per app-server) under the server,
/// oldest first.
fn wrapped_servers(server_pid: u32) -> Vec<i32> {
    let mut v: Vec<i32> = app_servers(server_pid)
        .into_iter()
        .filter(|p| {
            alive(*p)
                && std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("codex-dies"))
        })
        .collect();
    v.sort_by_key(|p| codex_mcp_bridge::codex::process::start_ticks(*p).unwrap_or(0));
    v
}

fn ok_call(r: &rmcp::model::CallToolResult) -> serde_json::Value {
    assert!(r.is_error != Some(true), "the call failed: {}", text(r));
    structured(r)
}

/// A warm server whose codex is [`codex_dying_on_request`]'s wrapper, with `max_warm`; its
/// arms directory and the canonical work directory.
async fn dying_server(
    env: &TestEnv,
    mock: &MockApi,
    max_warm: u32,
) -> (Server, std::path::PathBuf, std::path::PathBuf) {
    let (codex, arms) = codex_dying_on_request(env);
    let codex = codex.display().to_string();
    let max_warm = max_warm.to_string();
    let s = warm_server(
        env,
        mock,
        &[
            ("CODEX_BIN", codex.as_str()),
            ("CODEX_BRIDGE_MAX_WARM", max_warm.as_str()),
        ],
    )
    .await;
    (s, arms, env.work().canonicalize().unwrap())
}

/// A warm session's process killed from outside while idle, then the spare it would take
/// dying as it is taken (`thread/resume`): each is replaced, and the turn continues the
/// session's thread in a new process (the model sees the earlier history).
#[tokio::test]
async fn a_spare_that_dies_as_it_is_taken_for_thread_resume_is_replaced_and_the_thread_goes_on() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let (s, arms, work) = dying_server(&env, &mock, 3).await;
    mock.push(Reply::message("remember PLOVER"));
    let one = ok_call(
        &s.call(
            "codex",
            json!({"prompt": "one", "sessionId": "sp", "workingDirectory": work}),
        )
        .await,
    );
    // the session's process and the spare for its directory
    assert!(
        wait_until(Duration::from_secs(30), || wrapped_servers(s.pid).len()
            == 2)
        .await,
        "a spare beside the session's process: {:?}",
        wrapped_servers(s.pid)
    );
    // give the spare its handshake
    tokio::time::sleep(Duration::from_secs(2)).await;
    let own = wrapped_servers(s.pid)[0];
    // SAFETY: signals only.
    unsafe { libc::kill(own, libc::SIGKILL) };
    assert!(wait_until(Duration::from_secs(5), || !alive(own)).await);
    arm(&arms, "thread/resume");
    mock.push(Reply::message("after"));
    let two = ok_call(
        &s.call("codex", json!({"prompt": "two", "sessionId": "sp"}))
            .await,
    );
    assert!(
        fired(&arms, "thread/resume"),
        "the spare died on thread/resume"
    );
    assert_eq!(two["resumed"], true, "{two}");
    assert_eq!(two["threadId"], one["threadId"], "{two}");
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("PLOVER"),
        "the model sees the history"
    );
}

/// A process that dies during `initialize`, and one that dies on the first request of a turn
/// it was taken for (the spare, `thread/start`): the turn runs on a new warm process, and the
/// backend stays warm (no fall back to exec).
#[tokio::test]
async fn a_process_that_dies_during_initialize_or_as_the_spare_is_taken_is_replaced() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    // one warm process at most: no spare, so the next start is the session's own
    let (s, arms, work) = dying_server(&env, &mock, 1).await;
    mock.push(Reply::message("remember AVOCET"));
    let one = ok_call(
        &s.call(
            "codex",
            json!({"prompt": "one", "sessionId": "ini", "workingDirectory": work}),
        )
        .await,
    );
    let own = wrapped_servers(s.pid);
    assert_eq!(own.len(), 1, "{own:?}");
    // SAFETY: signals only.
    unsafe { libc::kill(own[0], libc::SIGKILL) };
    assert!(wait_until(Duration::from_secs(5), || !alive(own[0])).await);
    arm(&arms, "initialize");
    mock.push(Reply::message("after"));
    let two = ok_call(
        &s.call("codex", json!({"prompt": "two", "sessionId": "ini"}))
            .await,
    );
    assert!(fired(&arms, "initialize"), "a start died on initialize");
    assert_eq!(two["threadId"], one["threadId"], "{two}");
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("AVOCET"),
        "the model sees the history"
    );
    // still warm: the turn ran on an app-server, which the session keeps
    assert_eq!(
        wrapped_servers(s.pid).len(),
        1,
        "the session's warm process"
    );
    let ping = s.call("ping", json!({})).await;
    assert_eq!(
        structured(&ping)["backend"]["effective"],
        "app-server",
        "{}",
        text(&ping)
    );
    drop(s);

    // the spare, dying on the first request of the new session that takes it
    let mock2 = MockApi::start().await;
    let env2 = TestEnv::new();
    let (codex2, arms2) = codex_dying_on_request(&env2);
    let codex2 = codex2.display().to_string();
    let s = warm_server(
        &env2,
        &mock2,
        &[
            ("CODEX_BIN", codex2.as_str()),
            ("CODEX_BRIDGE_MAX_WARM", "3"),
        ],
    )
    .await;
    let work2 = env2.work().canonicalize().unwrap();
    mock2.push(Reply::message("first"));
    ok_call(
        &s.call(
            "codex",
            json!({"prompt": "one", "sessionId": "s1", "workingDirectory": work2}),
        )
        .await,
    );
    assert!(
        wait_until(Duration::from_secs(30), || wrapped_servers(s.pid).len()
            == 2)
        .await,
        "a spare: {:?}",
        wrapped_servers(s.pid)
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    arm(&arms2, "thread/start");
    mock2.push(Reply::message("second"));
    let r = ok_call(
        &s.call(
            "codex",
            json!({"prompt": "two", "sessionId": "s2", "workingDirectory": work2}),
        )
        .await,
    );
    assert!(
        fired(&arms2, "thread/start"),
        "the spare died on thread/start"
    );
    assert_eq!(r["response"], "second", "{r}");
}

/// The spare killed from outside while idle, and a new session in its directory at once: the
/// turn runs (on a new process when the dead spare was taken).
#[tokio::test]
async fn a_spare_killed_while_idle_does_not_fail_the_next_new_session() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = warm_server(&env, &mock, &[("CODEX_BRIDGE_MAX_WARM", "3")]).await;
    let work = env.work().canonicalize().unwrap();
    mock.push(Reply::message("first"));
    ok_call(
        &s.call(
            "codex",
            json!({"prompt": "one", "sessionId": "k1", "workingDirectory": work}),
        )
        .await,
    );
    assert!(
        wait_until(Duration::from_secs(30), || app_servers(s.pid).len() == 2).await,
        "a spare: {:?}",
        app_servers(s.pid)
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut servers = app_servers(s.pid);
    servers.sort_by_key(|p| codex_mcp_bridge::codex::process::start_ticks(*p).unwrap_or(0));
    let spare = servers[1];
    mock.push(Reply::message("second"));
    // SAFETY: signals only.
    unsafe { libc::kill(spare, libc::SIGKILL) };
    let r = ok_call(
        &s.call(
            "codex",
            json!({"prompt": "two", "sessionId": "k2", "workingDirectory": work}),
        )
        .await,
    );
    assert_eq!(r["response"], "second", "{r}");
}

/// A call whose caller gave up while it waited is dropped from the session's queue, prompt and
/// all, when the next call queues: a caller that queues and cancels over and over holds nothing
/// (the next call is queued behind the running turn alone).
#[tokio::test]
async fn cancelled_waiting_calls_leave_the_queue_with_their_prompts() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = warm_server(&env, &mock, &[("CODEX_BRIDGE_MAX_QUEUED_TURNS", "3")]).await;
    let work = env.work().canonicalize().unwrap();
    mock.push_all([
        Reply::exec_command("sleep 8; echo slept"),
        Reply::message("answer one"),
    ]);
    mock.push(Reply::message("answer two"));
    let first = spawn_codex(
        &s,
        json!({"prompt": "one", "sessionId": "cq", "workingDirectory": work}),
    );
    mock.wait_for_responses(1, Duration::from_secs(60)).await;
    for n in 0..5 {
        let params = rmcp::model::CallToolRequestParams::new("codex").with_arguments(
            json!({"prompt": format!("gave up {n} {}", "x".repeat(100_000)), "sessionId": "cq"})
                .as_object()
                .cloned()
                .unwrap(),
        );
        // dropping the call future sends notifications/cancelled
        let _ = tokio::time::timeout(Duration::from_millis(400), s.client.call_tool(params)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let last = spawn_codex(&s, json!({"prompt": "two", "sessionId": "cq"}));
    let deadline = Instant::now() + Duration::from_secs(30);
    let queued = loop {
        let said: Vec<String> = s
            .progress
            .lock()
            .unwrap()
            .iter()
            .filter_map(|p| p.message.clone())
            .filter(|m| m.starts_with("queued behind"))
            .collect();
        if said.len() >= 6 {
            break said;
        }
        assert!(Instant::now() < deadline, "not queued: {said:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        queued.last().map(String::as_str),
        Some("queued behind 1 turn(s) on this session"),
        "the cancelled calls were still held: {queued:?}"
    );
    let mut answers = Vec::new();
    for h in [first, last] {
        let r = h.await.unwrap();
        answers.push(
            ok_call(&r)["response"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    assert_eq!(answers, ["answer one", "answer two"]);
    assert_eq!(
        mock.responses_count(),
        3,
        "a cancelled call reached the model"
    );
}

/// Calls the `codex` tool in a task of its own.
fn spawn_codex(
    s: &crate::support::mcp::Server,
    args: serde_json::Value,
) -> tokio::task::JoinHandle<rmcp::model::CallToolResult> {
    let peer = s.client.peer().clone();
    tokio::spawn(async move {
        let params = rmcp::model::CallToolRequestParams::new("codex")
            .with_arguments(args.as_object().cloned().expect("object"));
        tokio::time::timeout(Duration::from_secs(180), peer.call_tool(params))
            .await
            .expect("answered in time")
            .expect("answered")
    })
}

/// The parent of process `pid`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `max_warm = 2` holds for every app-server process at every moment: the session's, the
/// spare, a fork's one-off process and processes still closing (sampled from /proc every few
/// milliseconds across a spare, a second directory, a fork and a least-recently-used close).
#[tokio::test]
async fn max_warm_counts_every_app_server_process_at_every_moment() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = warm_server(&env, &mock, &[("CODEX_BRIDGE_MAX_WARM", "2")]).await;
    let dirs: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|d| {
            let p = env.work().join(d);
            std::fs::create_dir_all(&p).unwrap();
            p.canonicalize().unwrap()
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let pid = s.pid;
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut most: Vec<String> = Vec::new();
            let mut samples = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // the server's own children: a child codex forks has its parent's command
                // line until it execs, and is not an app-server
                let now: Vec<i32> = app_servers(pid)
                    .into_iter()
                    .filter(|p| alive(*p) && parent_of(*p) == Some(pid as i32))
                    .collect();
                if now.len() > most.len() {
                    // each with its state and parent, to tell what it is when there are too many
                    most = now
                        .iter()
                        .map(|p| {
                            let stat = std::fs::read_to_string(format!("/proc/{p}/stat"))
                                .unwrap_or_default();
                            let tail = stat.rsplit(')').next().unwrap_or("").to_owned();
                            format!(
                                "{p}:{}",
                                tail.split_whitespace()
                                    .take(2)
                                    .collect::<Vec<_>>()
                                    .join(" ppid ")
                            )
                        })
                        .collect();
                }
                samples += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            (most, samples)
        })
    };
    let mut seen = 0;
    let mut turn = |mock: &MockApi, what: &str| {
        seen += 1;
        mock.push(Reply::message(format!("{what} {seen}")));
    };
    // a: its process, then the spare for a
    turn(&mock, "a");
    ok_call(
        &s.call(
            "codex",
            json!({"prompt": "a", "sessionId": "ca", "workingDirectory": dirs[0]}),
        )
        .await,
    );
    wait_until(Duration::from_secs(30), || app_servers(s.pid).len() == 2).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // b in another directory: the spare closes for it
    turn(&mock, "b");
    ok_call(
        &s.call(
            "codex",
            json!({"prompt": "b", "sessionId": "cb", "workingDirectory": dirs[1]}),
        )
        .await,
    );
    // a fork of a: its one-off process needs a place (the least recently used, a, closes)
    let f = ok_call(&s.call("forkSession", json!({"sessionId": "ca"})).await);
    assert!(f["sessionId"].is_string(), "{f}");
    // c in a third directory: the least recently used closes for it
    turn(&mock, "c");
    ok_call(
        &s.call(
            "codex",
            json!({"prompt": "c", "sessionId": "cc", "workingDirectory": dirs[2]}),
        )
        .await,
    );
    // a again: resumed in a new process, another close
    turn(&mock, "a");
    let again = ok_call(
        &s.call("codex", json!({"prompt": "a again", "sessionId": "ca"}))
            .await,
    );
    assert_eq!(again["resumed"], true, "{again}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let (most, samples) = sampler.join().unwrap();
    eprintln!(
        "most app-servers at once: {} ({most:?}) over {samples} samples",
        most.len()
    );
    assert!(samples > 100, "sampled {samples} times");
    assert!(
        most.len() <= 2,
        "more app-server processes than max_warm = 2 at once: {most:?}"
    );
}

/// A session's queue is bounded: by calls (`max_queued_turns`) and by the prompt bytes they
/// hold (`max_queued_prompt_bytes`). The call past either limit is refused as busy, naming it;
/// the running turn and every waiting call still complete.
#[tokio::test]
async fn a_full_session_queue_refuses_the_next_call_naming_the_limit_and_loses_nothing() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = warm_server(
        &env,
        &mock,
        &[
            ("CODEX_BRIDGE_MAX_QUEUED_TURNS", "2"),
            ("CODEX_BRIDGE_MAX_QUEUED_PROMPT_BYTES", "10000"),
        ],
    )
    .await;
    let work = env.work().canonicalize().unwrap();
    mock.push_all([
        Reply::exec_command("sleep 6; echo slept"),
        Reply::message("answer one"),
    ]);
    mock.push(Reply::message("answer two"));
    mock.push(Reply::message("answer three"));
    let first = spawn_codex(
        &s,
        json!({"prompt": "one", "sessionId": "q", "workingDirectory": work}),
    );
    mock.wait_for_responses(1, Duration::from_secs(60)).await;
    let second = spawn_codex(&s, json!({"prompt": "two", "sessionId": "q"}));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // a prompt that would pass the bytes held by waiting calls
    let big = s
        .call(
            "codex",
            json!({"prompt": format!("big {}", "x".repeat(9_999)), "sessionId": "q"}),
        )
        .await;
    assert_eq!(big.is_error, Some(true), "{}", text(&big));
    assert!(
        text(&big).contains("max_queued_prompt_bytes"),
        "{}",
        text(&big)
    );
    let third = spawn_codex(&s, json!({"prompt": "three", "sessionId": "q"}));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // a third waiting call: past max_queued_turns
    let over = s
        .call("codex", json!({"prompt": "four", "sessionId": "q"}))
        .await;
    assert_eq!(over.is_error, Some(true), "{}", text(&over));
    assert!(text(&over).contains("max_queued_turns"), "{}", text(&over));
    assert_eq!(
        structured(&over)["error"]["kind"],
        "busy",
        "{}",
        text(&over)
    );
    // nothing lost: the running turn and both waiting ones complete, in order
    let mut answers = Vec::new();
    for h in [first, second, third] {
        let r = h.await.unwrap();
        answers.push(
            ok_call(&r)["response"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    assert_eq!(answers, ["answer one", "answer two", "answer three"]);
    let got = s.call("getSession", json!({"sessionId": "q"})).await;
    assert_eq!(
        structured(&got)["session"]["turnCount"],
        3,
        "{}",
        text(&got)
    );
}

/// The spare app-server is on record for the takeover sweep while it waits (under a key no
/// session uses); the session that takes it has it on record under its own id (and the spare's
/// key is forgotten); once the bridge closes it, nothing of it is left on record. Without the
/// spare's record a bridge that dies while one waits leaves it to no sweep.
#[tokio::test]
async fn the_spare_is_on_record_while_it_waits_and_its_record_goes_with_it() {
    use crate::support::bridge::call;
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.set_default(Reply::message("ok"));
    let bridge = crate::support::bridge::start_warm_bridge(&env, &mock).await;
    // each process on record, with the key it is on record under
    let recorded = || -> Vec<(i32, String)> {
        let mut all: Vec<(i32, String)> = bridge
            .shared()
            .store()
            .inflight()
            .unwrap()
            .into_iter()
            .map(|(id, t)| (t.pid, id.to_string()))
            .collect();
        all.sort();
        all
    };
    // this bridge's app-servers (under `cargo test`, other tests' run in this process too)
    let own_app_servers = || -> Vec<i32> {
        crate::support::bridge::own_codex(&mock)
            .into_iter()
            .filter(|p| is_bridge_app_server(*p))
            .collect()
    };
    // both calls without a client: the bridge's own, whose spare the second session takes
    let first = bridge.turn(call(&env, Some("s1"), "one")).await.unwrap();
    assert!(first.error.is_none(), "{:?}", first.error);
    // the spare for this directory starts in the background, on record from its spawn (and
    // still once it waits in the pool)
    let spare_waits = || async { bridge.shared().warm_pool().spare_pid().await.is_some() };
    assert!(
        wait_until_async(Duration::from_secs(30), || async {
            spare_waits().await && own_app_servers().len() == 2 && recorded().len() == 2
        })
        .await,
        "the session's process and the spare, each on record: {:?} {:?}",
        own_app_servers(),
        recorded()
    );
    let rec = recorded();
    let servers = own_app_servers();
    assert!(
        servers.iter().all(|p| rec.iter().any(|(q, _)| q == p)),
        "{servers:?} {rec:?}"
    );
    let (spare, spare_key) = rec
        .iter()
        .find(|(_, k)| k != "s1")
        .cloned()
        .expect("the spare is on record under a key of its own");
    assert_eq!(bridge.shared().warm_pool().spare_pid().await, Some(spare));
    assert!(rec.iter().any(|(_, k)| k == "s1"), "{rec:?}");
    // a second session in the same directory takes the spare: on record as that session's now
    let second = bridge.turn(call(&env, Some("s2"), "two")).await.unwrap();
    assert!(second.error.is_none(), "{:?}", second.error);
    assert!(
        wait_until(Duration::from_secs(10), || {
            let rec = recorded();
            rec.contains(&(spare, "s2".to_owned())) && !rec.iter().any(|(_, k)| *k == spare_key)
        })
        .await,
        "the taken spare {spare} is the session's record, not the pool's: {:?}",
        recorded()
    );
    let live: Vec<i32> = own_app_servers();
    bridge.shutdown().await;
    assert!(
        !live.iter().any(|p| alive(*p)),
        "an app-server outlived the shutdown"
    );
    assert_eq!(recorded(), vec![], "a closed process left its record");
}

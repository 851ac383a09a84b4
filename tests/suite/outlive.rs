//! Turns that outlive the call and the host that started them (issue 37), through rmcp's real
//! client, the built server (the owner daemon: the default `--owner daemon`), the real codex
//! and the mock:
//!
//! - a task's host leaves as Claude Code leaves (SIGINT, SIGTERM 100 ms later, SIGHUP): the
//!   turn goes on in the owner daemon, and a new server process for the same host answers
//!   `tasks/get` for the old id, `working` then `completed` with the result; once nothing runs
//!   and no client is connected, the daemon exits and no codex process is left;
//! - a plain call whose client leaves is cancelled, and its codex processes are gone;
//! - a client whose calls are cut off at 5 s runs a long turn to its end with `background`
//!   and `wait`, and another host's `closeSession` meanwhile is refused and ends nothing;
//! - `stop` ends a background turn (a review's too), and its codex is gone;
//! - a SIGKILL of the daemon mid-turn reads back as interrupted (`tasks/get`, `wait`,
//!   `getSession`);
//! - a background turn's question reaches only a client waiting on it.
//!
//! The turns take [`TURN`] rather than the 20 s: what is tested does not depend on
//! the length, and the suite stays fast.

use std::time::{Duration, Instant};

use codex_mcp_bridge::codex::process::descendants;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, GetTaskParams,
    TaskPayload, TaskStatus,
};
use serde_json::{Value, json};

use crate::suite::person::script_escalation;
use crate::support::mcp::{
    Answer, Person, Protocol, Server, connect_other_home, connect_person, connect_with,
    connect_with_capabilities, structured, text,
};
use crate::support::process::{alive, parent_of};
use crate::support::{MockApi, Reply, TestEnv};

/// The suite's environment with the default owner, the daemon.
fn server_env(env: &TestEnv, mock: &MockApi) -> Vec<(String, String)> {
    let mut vars = crate::support::mcp::server_env(env, mock);
    vars.retain(|(k, _)| k != "CODEX_BRIDGE_OWNER");
    vars
}

/// A client declaring the tasks extension, on the daemon.
async fn connect_tasks(env: &TestEnv, mock: &MockApi, protocol: Protocol) -> Server {
    let caps = ClientCapabilities::builder().enable_tasks().build();
    connect_with_capabilities(&server_env(env, mock), env.root(), protocol, caps).await
}

/// How long a scripted turn takes.
const TURN: Duration = Duration::from_secs(6);

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

/// The process that owns the store (the daemon), as `ping` says.
async fn owner_pid(s: &Server) -> i32 {
    let v = structured(&s.call("ping", json!({})).await);
    let pid = v["ownerPid"].as_i64().expect("ping says ownerPid") as i32;
    assert_ne!(pid as u32, s.pid, "the stdio server relays to a daemon");
    pid
}

/// Waits until the mock has received `n` model requests.
async fn model_asked(mock: &MockApi, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.responses_requests().len() < n {
        assert!(
            Instant::now() < deadline,
            "the turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `pid` is gone; whether it went within `limit`.
async fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// The codex processes under `pid`.
fn codex_under(pid: i32) -> Vec<i32> {
    let bin = crate::support::codex_bin().canonicalize().unwrap();
    descendants(pid)
        .into_iter()
        .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == bin))
        .collect()
}

/// The host leaves as Claude Code does: SIGINT, SIGTERM 100 ms later, and the terminal's
/// SIGHUP; then the process is gone.
async fn host_leaves(s: &Server) {
    let pid = Pid::from_raw(s.pid as i32);
    let _ = kill(pid, Signal::SIGINT);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = kill(pid, Signal::SIGTERM);
    let _ = kill(pid, Signal::SIGHUP);
    // and its process group, when it leads one of its own (as a host's child may)
    if nix::unistd::getpgid(Some(pid)) == Ok(pid) {
        let _ = nix::sys::signal::killpg(pid, Signal::SIGHUP);
    }
    assert!(
        gone_within(s.pid as i32, Duration::from_secs(10)).await,
        "the stdio server did not exit"
    );
}

/// `task` read back as interrupted: failed, with the error that says so.
fn assert_interrupted(task: &rmcp::model::DetailedTask) {
    let TaskPayload::Failed { error } = &task.payload else {
        panic!("expected the task interrupted, got {task:?}")
    };
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("interrupted"), "{error:?}");
}

/// A `codex` call with `args` that must become a task; its id.
async fn start_task(s: &Server, args: Value) -> String {
    match s
        .client
        .call_tool_once(params("codex", args))
        .await
        .expect("answered")
    {
        CallToolResponse::Task(t) => t.task.task_id,
        other => panic!("expected a task, got {other:?}"),
    }
}

async fn get(s: &Server, id: &str) -> rmcp::model::DetailedTask {
    // a request the relay sent as its owner died is answered with the documented "exited
    // during this call ... retry" error: retried, as a client does
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match s.client.get_task(GetTaskParams::new(id.to_owned())).await {
            Ok(t) => return t.task,
            Err(e) if e.to_string().contains("exited during this call") => {
                assert!(Instant::now() < deadline, "no owner answered: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("tasks/get: {e}"),
        }
    }
}

/// Polls task `id` until it ends.
async fn task_end(s: &Server, id: &str) -> rmcp::model::DetailedTask {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let t = get(s, id).await;
        if !matches!(t.status(), TaskStatus::Working | TaskStatus::InputRequired) {
            return t;
        }
        assert!(Instant::now() < deadline, "task {id} never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_task_outlives_its_host_and_a_new_server_answers_it() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("outlived the host").with_delay(TURN));
    let s = connect_tasks(&env, &mock, Protocol::Legacy).await;
    let owner = owner_pid(&s).await;
    let id = start_task(
        &s,
        json!({"prompt": "long job", "sessionId": "outlive", "workingDirectory": env.work()}),
    )
    .await;
    model_asked(&mock, 1).await;
    host_leaves(&s).await;
    // past the daemon's linger: the running task keeps it
    tokio::time::sleep(codex_mcp_bridge::hub::daemon::LINGER * 2).await;
    assert!(alive(owner), "the owner daemon went with the host");
    assert!(!codex_under(owner).is_empty(), "the turn's codex is gone");

    // the host comes back (`claude --continue`): a new server process asks again
    let again = connect_tasks(&env, &mock, Protocol::Legacy).await;
    assert_eq!(owner_pid(&again).await, owner);
    assert_eq!(get(&again, &id).await.status(), TaskStatus::Working);
    let done = task_end(&again, &id).await;
    let TaskPayload::Completed { result } = done.payload else {
        panic!("expected completed, got {:?}", done.payload)
    };
    assert_eq!(result["structuredContent"]["response"], "outlived the host");
    let v = structured(
        &again
            .call("getSession", json!({"sessionId": "outlive"}))
            .await,
    );
    assert_eq!(v["session"]["lastStatus"], "completed", "{v}");

    // nothing runs and nobody is connected: the daemon exits, and nothing is left
    let relay = again.pid as i32;
    drop(again);
    assert!(gone_within(relay, Duration::from_secs(10)).await);
    assert!(
        gone_within(owner, Duration::from_secs(10)).await,
        "the owner daemon stayed"
    );
    // a server started after it exited answers from the store
    let later = connect_tasks(&env, &mock, Protocol::Legacy).await;
    assert_ne!(owner_pid(&later).await, owner);
    let kept = get(&later, &id).await;
    assert_eq!(kept.status(), TaskStatus::Completed, "{kept:?}");
    // another host (another client name) does not see it
    let other = connect_person(
        &server_env(&env, &mock),
        env.root(),
        Protocol::Legacy,
        ClientCapabilities::builder().enable_tasks().build(),
        Person::answering(Answer::Silent).on_host("another-host"),
    )
    .await;
    let err = other
        .client
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown task"), "{err}");
}

#[tokio::test]
async fn a_plain_call_whose_client_leaves_is_cancelled_and_its_codex_is_gone() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("never seen").with_delay(Duration::from_secs(60)));
    let vars = server_env(&env, &mock);
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let owner = owner_pid(&s).await;
    let call = s.client.peer().clone();
    let work = env.work().to_owned();
    let running = tokio::spawn(async move {
        call.call_tool_once(params(
            "codex",
            json!({"prompt": "plain", "sessionId": "plain", "workingDirectory": work}),
        ))
        .await
    });
    model_asked(&mock, 1).await;
    let during = codex_under(owner);
    assert!(!during.is_empty(), "no codex ran the turn");
    host_leaves(&s).await;
    running.abort();
    // its codex processes are gone, and so is the daemon (nothing else ran)
    let deadline = Instant::now() + Duration::from_secs(10);
    while during.iter().any(|p| alive(*p)) {
        assert!(
            Instant::now() < deadline,
            "codex outlived a plain call's client"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone_within(owner, Duration::from_secs(10)).await);
    let again = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let v = structured(
        &again
            .call("getSession", json!({"sessionId": "plain"}))
            .await,
    );
    assert_eq!(v["session"]["lastStatus"], "cancelled", "{v}");
}

/// A call bounded as a host bounds it.
async fn cut_at_5s(s: &Server, tool: &str, args: Value) -> CallToolResult {
    tokio::time::timeout(Duration::from_secs(5), s.call(tool, args))
        .await
        .unwrap_or_else(|_| panic!("`{tool}` was cut off at 5 s"))
}

#[tokio::test]
async fn background_and_wait_run_a_turn_longer_than_the_hosts_limit() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("finished in the background").with_delay(TURN + TURN / 2));
    let s = connect_with(&server_env(&env, &mock), env.root(), Protocol::Legacy).await;
    let started = Instant::now();
    let r = cut_at_5s(
        &s,
        "codex",
        json!({"prompt": "a long refactor", "background": true, "workingDirectory": env.work()}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let v = structured(&r);
    assert_eq!(v["status"], "running", "{v}");
    let session = v["sessionId"].as_str().expect("a sessionId").to_owned();
    assert!(text(&r).contains("wait"), "{}", text(&r));
    // another host (its own CODEX_HOME) on the store cannot end the turn by closing its
    // session: refused, naming the field, and the turn runs on to its result below
    let o = connect_other_home(&env, &mock).await;
    model_asked(&mock, 1).await;
    let c = o.call("closeSession", json!({"sessionId": session})).await;
    assert_eq!(c.is_error, Some(true), "{}", text(&c));
    assert!(text(&c).contains("`sessionId`"), "{}", text(&c));
    assert!(text(&c).contains("another host"), "{}", text(&c));
    let mut polls = 0;
    let done = loop {
        polls += 1;
        let r = cut_at_5s(&s, "wait", json!({"sessionId": session, "waitSeconds": 3})).await;
        let v = structured(&r);
        if v["status"] != "running" {
            break (r, v);
        }
        assert!(polls < 40, "never ended: {v}");
    };
    let (r, v) = done;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["response"], "finished in the background", "{v}");
    assert_eq!(v["sessionId"], session, "{v}");
    assert!(polls >= 2, "the turn was not longer than one wait");
    assert!(started.elapsed() >= TURN, "the turn ended early");
    // the session goes on as any other
    let g = structured(&s.call("getSession", json!({"sessionId": session})).await);
    assert_eq!(g["session"]["turnCount"], 1, "{g}");
    assert_eq!(g["session"]["lastStatus"], "completed", "{g}");
    assert_eq!(
        g["session"]["lastResponse"], "finished in the background",
        "{g}"
    );
    // a client of another CODEX_HOME on the store sees that it ran, not what it said
    let g = structured(&o.call("getSession", json!({"sessionId": session})).await);
    assert_eq!(g["session"]["lastStatus"], "completed", "{g}");
    assert!(g["session"].get("lastResponse").is_none(), "{g}");
    // nor can it wait on that session's background turns
    let w = o
        .call("wait", json!({"sessionId": session, "waitSeconds": 1}))
        .await;
    assert_eq!(w.is_error, Some(true), "{}", text(&w));
    // refusals name the field
    for (args, field) in [
        (
            json!({"sessionId": session, "waitSeconds": 51}),
            "waitSeconds",
        ),
        (json!({}), "sessionId"),
        (json!({"reviewId": "not-a-review"}), "reviewId"),
        (json!({"sessionId": "never-started"}), "sessionId"),
    ] {
        let r = s.call("wait", args.clone()).await;
        assert_eq!(r.is_error, Some(true), "{args}");
        assert!(
            text(&r).contains(&format!("`{field}`")),
            "{args}: {}",
            text(&r)
        );
    }
    let r = s
        .call("codex", json!({"prompt": "x", "background": "yes"}))
        .await;
    assert!(text(&r).contains("`background`"), "{}", text(&r));
}

/// `stop` ends a background turn as a task's cancel does: a review's (which nothing else
/// stops) and a `codex` turn's, whose session goes on. Its codex processes are gone; `wait`
/// then reads `cancelled`; another host's `stop` finds no such turn and stops nothing.
#[tokio::test]
async fn stop_ends_a_background_review_and_a_background_turn() {
    let env = TestEnv::new();
    env.init_git();
    let mock = MockApi::start().await;
    // each would run far past the test, unless stopped
    mock.push(Reply::message("a review never finished").with_delay(TURN * 10));
    mock.push(Reply::message("a turn never finished").with_delay(TURN * 10));
    mock.push(Reply::message("the session goes on"));
    let s = connect_with(&server_env(&env, &mock), env.root(), Protocol::Legacy).await;
    let owner = owner_pid(&s).await;
    let r = s
        .call(
            "review",
            json!({"background": true, "workingDirectory": env.work()}),
        )
        .await;
    let review = structured(&r)["reviewId"].as_str().unwrap().to_owned();
    model_asked(&mock, 1).await;
    let w = s
        .call("wait", json!({"reviewId": review, "waitSeconds": 1}))
        .await;
    assert_eq!(structured(&w)["status"], "running", "{}", text(&w));
    // another host (its own CODEX_HOME) cannot stop it
    let o = connect_other_home(&env, &mock).await;
    let r = o.call("stop", json!({"reviewId": review})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("`reviewId`"), "{}", text(&r));
    let w = s
        .call("wait", json!({"reviewId": review, "waitSeconds": 1}))
        .await;
    assert_eq!(structured(&w)["status"], "running", "{}", text(&w));
    assert!(!codex_under(owner).is_empty(), "the review runs codex");
    let r = s.call("stop", json!({"reviewId": review})).await;
    // what was asked for: not an error
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["status"], "cancelled", "{}", text(&r));
    assert_eq!(structured(&r)["reviewId"], review.as_str());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !codex_under(owner).is_empty() {
        assert!(Instant::now() < deadline, "the review's codex is left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let w = s
        .call("wait", json!({"reviewId": review, "waitSeconds": 1}))
        .await;
    assert_eq!(structured(&w)["status"], "cancelled", "{}", text(&w));

    // a background `codex` turn: stopped, its session goes on
    let args = json!({"prompt": "a long refactor", "sessionId": "stopped", "background": true,
                      "workingDirectory": env.work()});
    let r = s.call("codex", args).await;
    assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    model_asked(&mock, 2).await;
    let r = s.call("stop", json!({"sessionId": "stopped"})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["status"], "cancelled", "{}", text(&r));
    let r = s
        .call(
            "codex",
            json!({"prompt": "go on", "sessionId": "stopped", "workingDirectory": env.work()}),
        )
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["response"], "the session goes on");
    // refusals name the field
    let r = s.call("stop", json!({"sessionId": "never-started"})).await;
    assert!(text(&r).contains("`sessionId`"), "{}", text(&r));
    let r = s.call("stop", json!({})).await;
    assert!(text(&r).contains("`sessionId`"), "{}", text(&r));
}

#[tokio::test]
async fn a_sigkill_of_the_owner_mid_turn_reads_back_as_interrupted() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push_for_user_text(
        "TASKED",
        Reply::message("never").with_delay(Duration::from_secs(60)),
    );
    mock.push_for_user_text(
        "BACKGROUND",
        Reply::message("never").with_delay(Duration::from_secs(60)),
    );
    let s = connect_tasks(&env, &mock, Protocol::Legacy).await;
    let owner = owner_pid(&s).await;
    let id = start_task(
        &s,
        json!({"prompt": "TASKED", "sessionId": "tasked", "workingDirectory": env.work()}),
    )
    .await;
    let r = s
        .call(
            "codex",
            json!({"prompt": "BACKGROUND", "sessionId": "bg", "background": true,
                   "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(structured(&r)["status"], "running");
    model_asked(&mock, 2).await;
    let codex = codex_under(owner);
    kill(Pid::from_raw(owner), Signal::SIGKILL).unwrap();
    assert!(gone_within(owner, Duration::from_secs(10)).await);
    for p in codex {
        assert!(
            gone_within(p, Duration::from_secs(10)).await,
            "codex {p} outlived its owner"
        );
    }
    // the same client carries on with a new owner, which says what happened
    assert_interrupted(&get(&s, &id).await);
    let w = s
        .call("wait", json!({"sessionId": "bg", "waitSeconds": 1}))
        .await;
    assert_eq!(w.is_error, Some(true));
    assert_eq!(structured(&w)["status"], "interrupted", "{}", text(&w));
    for session in ["tasked", "bg"] {
        let g = structured(&s.call("getSession", json!({"sessionId": session})).await);
        assert_eq!(g["session"]["lastStatus"], "interrupted", "{session}: {g}");
    }
}

/// The daemon runs in a session and process group of its own: neither a terminal's hang-up
/// nor a signal to the host's process group reaches it.
fn session_and_group(pid: i32) -> (i64, i64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // after the command's `(...)`: state, ppid, pgrp, session
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    (f[3].parse().unwrap(), f[2].parse().unwrap())
}

#[tokio::test]
async fn the_owner_daemon_is_out_of_reach_of_the_hosts_session_and_group() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = connect_with(&server_env(&env, &mock), env.root(), Protocol::Legacy).await;
    let owner = owner_pid(&s).await;
    let (daemon_sid, daemon_pgrp) = session_and_group(owner);
    let (host_sid, host_pgrp) = session_and_group(s.pid as i32);
    assert_eq!(
        daemon_sid, owner as i64,
        "the daemon leads a session of its own"
    );
    assert_ne!(daemon_sid, host_sid);
    assert_ne!(daemon_pgrp, host_pgrp);
    // its stderr is its log in the store, not the host's pipe
    let err = std::fs::read_link(format!("/proc/{owner}/fd/2")).unwrap();
    assert_eq!(err, s.store.join("owner.log"));
}

/// The links of `pid`'s open descriptors (`pipe:[…]`, `socket:[…]`, paths).
fn descriptors(pid: i32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.display().to_string())
        .collect()
}

/// The daemon holds no descriptor its host left open: a host that waits for a pipe's end (a
/// shell's `$(…)`, a test harness) is not kept waiting by a daemon that outlives it. The host
/// here leaves a pipe open without close-on-exec; the stdio server inherits it (the control:
/// without the daemon's `close_range`, the daemon it starts would too).
#[tokio::test]
async fn the_owner_daemon_holds_no_descriptor_of_its_hosts() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut fds = [0; 2];
    // SAFETY: a plain pipe(2) into a local array; both ends are closed below
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), 0) }, 0);
    let pipe = std::fs::read_link(format!("/proc/self/fd/{}", fds[1]))
        .unwrap()
        .display()
        .to_string();
    assert!(pipe.starts_with("pipe:"), "{pipe}");
    let s = connect_with(&server_env(&env, &mock), env.root(), Protocol::Legacy).await;
    let owner = owner_pid(&s).await;
    assert!(
        descriptors(s.pid as i32).contains(&pipe),
        "the stdio server inherits the host's pipe"
    );
    let held = descriptors(owner);
    assert!(
        !held.contains(&pipe),
        "the daemon holds the host's {pipe}: {held:?}"
    );
    // SAFETY: the two descriptors of the pipe above, closed once
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
}

/// The negative control: with `--owner process` the first server runs the turn itself, and
/// the host's leaving ends it: a new server finds it interrupted, never completed.
#[tokio::test]
async fn with_the_process_owner_a_task_ends_with_its_host() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("never completes").with_delay(TURN));
    let vars = crate::support::mcp::server_env(&env, &mock);
    let caps = ClientCapabilities::builder().enable_tasks().build();
    let s = connect_with_capabilities(&vars, env.root(), Protocol::Legacy, caps.clone()).await;
    assert_eq!(owner_pid_of(&s).await, s.pid as i32);
    let id = start_task(
        &s,
        json!({"prompt": "long job", "sessionId": "inline", "workingDirectory": env.work()}),
    )
    .await;
    model_asked(&mock, 1).await;
    host_leaves(&s).await;
    let again = connect_with_capabilities(&vars, env.root(), Protocol::Legacy, caps).await;
    // the task ended with its host
    assert_interrupted(&get(&again, &id).await);
}

/// The owner's pid as `ping` says, whoever it is.
async fn owner_pid_of(s: &Server) -> i32 {
    structured(&s.call("ping", json!({})).await)["ownerPid"]
        .as_i64()
        .unwrap() as i32
}

/// A model with the classic tool shape (`exec_command`).
const MODEL: &str = "gpt-5.5";

/// A background turn's question goes to the client waiting on it, never to another; with
/// nobody waiting it is declined at the approval timeout, and the result says why. Questions
/// come from the app-server backend only (an exec turn never asks).
#[tokio::test]
async fn a_background_turns_question_reaches_only_a_client_waiting_on_it() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut vars = server_env(&env, &mock);
    vars.retain(|(k, _)| k != "CODEX_BRIDGE_BACKEND");
    vars.extend(
        [
            ("CODEX_BRIDGE_BACKEND", "app-server"),
            ("CODEX_BRIDGE_APPROVALS", "ask"),
            ("CODEX_BRIDGE_APPROVAL_TIMEOUT_MS", "3000"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    let eliciting = ClientCapabilities::builder().enable_elicitation().build();
    // the client that starts the turns, whose person would accept anything
    let starter = Person::answering(Answer::Accept(true));
    let a = connect_person(
        &vars,
        env.root(),
        Protocol::Legacy,
        eliciting.clone(),
        starter.clone(),
    )
    .await;
    // another host on the store, which waits on the first turn
    let waiter = Person::answering(Answer::Accept(true));
    let b = connect_person(
        &vars,
        env.root(),
        Protocol::Legacy,
        eliciting,
        waiter.clone(),
    )
    .await;
    let root = env.root().canonicalize().unwrap();

    // waited on: the waiter is asked (not the starter, who is not waiting), and its accept
    // writes the file
    let target = root.join("waited.txt");
    script_escalation(&mock, &target);
    let r = a
        .call(
            "codex",
            json!({"prompt": "please write", "sessionId": "asks", "model": MODEL,
                   "background": true, "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    let w = b
        .call("wait", json!({"sessionId": "asks", "waitSeconds": 30}))
        .await;
    let v = structured(&w);
    assert_eq!(v["status"], "completed", "{v}");
    assert!(
        target.exists(),
        "the accepted escalation wrote nothing: {v}"
    );
    assert_eq!(v["approvals"][0]["decision"], "acceptOnce", "{v}");
    assert_eq!((waiter.asked(), starter.asked()), (1, 0));

    // nobody waits: declined at the timeout, unasked, and the result says why
    let target = root.join("unwatched.txt");
    script_escalation(&mock, &target);
    let r = a
        .call(
            "codex",
            json!({"prompt": "please write again", "sessionId": "asks", "model": MODEL,
                   "background": true}),
        )
        .await;
    assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    // well past the approval timeout before anyone waits
    tokio::time::sleep(Duration::from_secs(6)).await;
    let w = a
        .call("wait", json!({"sessionId": "asks", "waitSeconds": 30}))
        .await;
    let v = structured(&w);
    assert_eq!(v["status"], "completed", "{v}");
    assert!(!target.exists(), "an unwatched question was accepted: {v}");
    let d = &v["approvals"][0];
    assert_eq!(d["decision"], "decline", "{v}");
    assert!(
        d["reason"].as_str().unwrap().contains("nobody was waiting"),
        "{v}"
    );
    assert_eq!((waiter.asked(), starter.asked()), (1, 0));

    // a client of another host (another client name) on the same store
    let stranger = Person::answering(Answer::Accept(true)).on_host("another-host");
    let c = connect_person(
        &vars,
        env.root(),
        Protocol::Legacy,
        ClientCapabilities::builder().enable_elicitation().build(),
        stranger.clone(),
    )
    .await;
    let target = root.join("stranger.txt");
    script_escalation(&mock, &target);
    let r = a
        .call(
            "codex",
            json!({"prompt": "please write once more", "sessionId": "asks", "model": MODEL,
                   "background": true}),
        )
        .await;
    assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    // another host's `wait` knows no background turn of that session (neither its result nor
    // its questions)
    let w = c
        .call("wait", json!({"sessionId": "asks", "waitSeconds": 5}))
        .await;
    assert_eq!(w.is_error, Some(true), "{}", text(&w));
    assert!(text(&w).contains("`sessionId`"), "{}", text(&w));
    // the host's own waiter is asked, and only it
    let w = b
        .call("wait", json!({"sessionId": "asks", "waitSeconds": 30}))
        .await;
    let v = structured(&w);
    assert_eq!(v["status"], "completed", "{v}");
    assert!(target.exists(), "{v}");
    assert_eq!(stranger.asked(), 0, "another host was asked");
    assert_eq!((waiter.asked(), starter.asked()), (2, 0));
}

/// A stdio server started for `vars`, spoken to line by line as a host would, through pipes
/// the test holds: closing them is what the server sees when its host dies.
struct RawHost {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: Option<tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>>,
}

impl RawHost {
    fn start(vars: &[(String, String)], cwd: &std::path::Path) -> RawHost {
        let mut child = tokio::process::Command::new(crate::support::mcp::server_bin())
            .env_clear()
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the server");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(|o| {
            use tokio::io::AsyncBufReadExt;
            tokio::io::BufReader::new(o).lines()
        });
        RawHost {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, lines: &[Value]) {
        use tokio::io::AsyncWriteExt;
        let stdin = self.stdin.as_mut().expect("stdin open");
        for l in lines {
            stdin.write_all(format!("{l}\n").as_bytes()).await.unwrap();
        }
        stdin.flush().await.unwrap();
    }

    /// Every line the server writes until it closes its stdout (within 30 s).
    async fn read_to_end(&mut self) -> Vec<Value> {
        let out = self.stdout.as_mut().expect("stdout open");
        let mut got = vec![];
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, out.next_line()).await {
                Ok(Ok(Some(l))) => got.push(serde_json::from_str(&l).expect("a JSON line")),
                Ok(_) => return got,
                Err(_) => panic!("the server did not close its stdout within 30 s: {got:?}"),
            }
        }
    }
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-host", "version": "1"}}})
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn tool_call(id: u64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": args}})
}

/// The processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .collect()
}

/// Issue 43: a host that dies (SIGKILL, the OOM killer) closes its server's pipes. Its plain
/// call ends at once: 1 s later nothing of the turn is left, neither codex nor the command it
/// ran, and the session reads `cancelled`. (Before: the owner daemon waited for rmcp's 5 s
/// drain of in-flight answers, and the command ran on for 6 s.)
#[tokio::test]
async fn a_dead_hosts_plain_call_leaves_nothing_a_second_later() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    // a command that runs long and names itself
    mock.push(Reply::exec_command("sleep 47.25; echo slept"));
    mock.push(Reply::message("never seen"));
    let vars = server_env(&env, &mock);
    let mut host = RawHost::start(&vars, env.root());
    host.send(&[
        initialize(1),
        initialized(),
        tool_call(
            2,
            "codex",
            json!({"prompt": "run it", "model": "gpt-5.5", "sessionId": "dies",
                "workingDirectory": env.work()}),
        ),
    ])
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let commands = loop {
        let found: Vec<i32> = processes_with("sleep 47.25")
            .into_iter()
            .filter(|p| alive(*p))
            .collect();
        if !found.is_empty() {
            break found;
        }
        assert!(Instant::now() < deadline, "codex never ran the command");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // the turn's processes: the command's and every ancestor up to the owner (the daemon)
    let server = crate::support::mcp::server_bin().canonicalize().unwrap();
    let is_server =
        |p: i32| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == server);
    let mut turn = commands.clone();
    let mut daemon = 0;
    for c in commands {
        let mut p = parent_of(c);
        while p > 1 && !is_server(p) {
            turn.push(p);
            p = parent_of(p);
        }
        daemon = p;
    }
    turn.sort();
    turn.dedup();
    assert_ne!(
        daemon as u32,
        host.child.id().unwrap(),
        "the daemon runs the turn"
    );
    assert!(
        turn.iter().any(|p| codex_under(daemon).contains(p)),
        "codex runs the command: {turn:?}"
    );
    // the host dies: its ends of the pipes close
    drop(host.stdin.take());
    drop(host.stdout.take());
    let died = Instant::now();
    while turn.iter().any(|p| alive(*p)) {
        assert!(
            died.elapsed() < Duration::from_secs(1),
            "the turn's processes outlived its dead host by a second: {:?}",
            turn.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let again = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let v = settled_session(&again, "dies").await;
    assert_eq!(v["session"]["lastStatus"], "cancelled", "{v}");
}

/// `getSession` of `id` once its record no longer says `running` (10 s at most): the record
/// follows a turn's end (the session actor folds the ended turn in) just after its processes
/// are gone, which is what the tests above wait for.
async fn settled_session(s: &Server, id: &str) -> Value {
    let settled = Instant::now() + Duration::from_secs(10);
    loop {
        let v = structured(&s.call("getSession", json!({"sessionId": id})).await);
        if v["session"]["lastStatus"] != "running" || Instant::now() > settled {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 43: every request a client wrote before it closed its input is answered before the
/// server exits, under the owner daemon as under the process owner: quick ones with their
/// results, a turn with its cancellation (at once: it is a plain call whose client left).
#[tokio::test]
async fn requests_written_before_the_input_closed_are_all_answered() {
    for owner in ["daemon", "process"] {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        mock.push(Reply::message("never seen").with_delay(Duration::from_secs(60)));
        let mut vars = server_env(&env, &mock);
        vars.push(("CODEX_BRIDGE_OWNER".into(), owner.into()));
        let mut host = RawHost::start(&vars, env.root());
        host.send(&[
            initialize(1),
            initialized(),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            tool_call(3, "listSessions", json!({})),
            tool_call(
                4,
                "codex",
                json!({"prompt": "long", "sessionId": "cut", "workingDirectory": env.work()}),
            ),
            tool_call(5, "ping", json!({})),
        ])
        .await;
        drop(host.stdin.take());
        let started = Instant::now();
        let got = host.read_to_end().await;
        let by_id = |id: u64| {
            got.iter()
                .find(|v| v["id"] == id)
                .unwrap_or_else(|| panic!("{owner}: no answer to request {id}: {got:?}"))
                .clone()
        };
        assert!(by_id(1)["result"]["serverInfo"].is_object(), "{owner}");
        assert!(by_id(2)["result"]["tools"].is_array(), "{owner}");
        // (the turn's session may be listed: the calls run at once)
        assert!(
            by_id(3)["result"]["structuredContent"]["sessions"].is_array(),
            "{owner}"
        );
        assert_eq!(by_id(5)["result"]["isError"], false, "{owner}");
        let turn = by_id(4);
        let said = turn.to_string();
        assert!(
            turn["result"]["isError"] == true && said.contains("cancel"),
            "{owner}: the turn is answered with its cancellation: {said}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{owner}: the answers took {:?}",
            started.elapsed()
        );
        assert_eq!(got.len(), 5, "{owner}: one answer per request: {got:?}");
    }
}

/// Issue 43: whatever `RUST_LOG` says, what a host sends never reaches the owner daemon's log
/// (`owner.log`, which sandboxed commands can read): neither a tool call's arguments (rmcp's
/// debug lines dump whole messages) nor the value of one of the host's secret-named variables
/// that the host put in a prompt (the daemon's own redactor holds no host's secret).
#[tokio::test]
async fn rust_log_trace_leaves_no_tool_argument_in_the_owner_log() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("done"));
    let secret = "hostsecret-7f3a9c2e51d04b86";
    let marker = "prompt-marker-5b1e0c77";
    let mut vars = server_env(&env, &mock);
    vars.retain(|(k, _)| k != "RUST_LOG");
    vars.push(("RUST_LOG".into(), "trace".into()));
    vars.push(("DEPLOY_TOKEN".into(), secret.into()));
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let r = s
        .call(
            "codex",
            json!({"prompt": format!("{marker} uses {secret}"), "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let owner = owner_pid(&s).await;
    let store = s.store.clone();
    drop(s);
    assert!(gone_within(owner, Duration::from_secs(15)).await);
    let log = std::fs::read_to_string(store.join("owner.log")).expect("the daemon's log");
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "the daemon logged at RUST_LOG=trace: {log}"
    );
    assert!(!log.contains(secret), "the host's secret in owner.log");
    assert!(
        !log.contains(marker),
        "a tool call's arguments in owner.log"
    );
}

/// The daemon's environment for a host whose API key is `key`.
fn with_key(env: &TestEnv, mock: &MockApi, key: &str) -> Vec<(String, String)> {
    let mut vars = server_env(env, mock);
    vars.retain(|(k, _)| k != "OPENAI_API_KEY");
    vars.push(("OPENAI_API_KEY".into(), key.into()));
    vars
}

/// The processes under `owner` whose environment (`/proc/PID/environ`) holds `OPENAI_API_KEY`
/// = `key`. One that cannot be read (not gone) fails the test: it could hold the key.
fn holding_key(owner: i32, key: &str) -> Vec<i32> {
    let wanted = format!("OPENAI_API_KEY={key}");
    descendants(owner)
        .into_iter()
        .filter(|p| match std::fs::read(format!("/proc/{p}/environ")) {
            Ok(environ) => environ
                .split(|b| *b == 0)
                .any(|var| var == wanted.as_bytes()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || !alive(*p) => false,
            // an exited process's entry reads empty or vanishes; anything else is a process
            // whose environment this test cannot see
            Err(e) => panic!("cannot read /proc/{p}/environ: {e}"),
        })
        .collect()
}

/// Waits until no process under `owner` holds `key`; the ones left after `limit` if any.
async fn key_gone_within(owner: i32, key: &str, limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left = holding_key(owner, key);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until at least `n` processes under `owner` hold `key`.
async fn key_held_by(owner: i32, key: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while holding_key(owner, key).len() < n {
        assert!(
            Instant::now() < deadline,
            "{n} processes with the key never started: {:?}",
            holding_key(owner, key)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether the suite runs the app-server backend (the default), which keeps warm processes
/// between turns; the exec backend keeps none (nothing of a turn outlives it).
fn keeps_warm_processes() -> bool {
    crate::support::mcp::backend_under_test().is_none_or(|b| b == "app-server")
}

/// Every model request from `since` on authenticated with `key` alone.
fn asked_with(mock: &MockApi, since: usize, key: &str, other: &str) {
    let requests = mock.responses_requests()[since..].to_vec();
    assert!(!requests.is_empty(), "the turn never reached the model");
    for req in &requests {
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {key}").as_str())
        );
        let all = format!("{:?} {}", req.headers, req.raw_body);
        assert!(!all.contains(other), "another host's key reached the model");
    }
}

/// Issue 43, item 8: a host's credentials end with the host. Host A runs a session turn (its
/// warm app-server is kept, a spare is started) and a `query` (an idle one-shot app-server
/// is kept), all with A's key; host B (another key) stays connected with a one-shot
/// app-server of its own. Once A's last connection is gone, no process under the daemon has
/// A's key in its environment within a few seconds, B's process is still there, and B's next
/// turn on A's session runs with B's key.
#[tokio::test]
async fn a_hosts_key_ends_with_its_last_connection() {
    const KEY_A: &str = "a-distinct-key-8f3e1c";
    const KEY_B: &str = "b-another-key-27d9a4";
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let a = connect_with(&with_key(&env, &mock, KEY_A), env.root(), Protocol::Legacy).await;
    let owner = owner_pid(&a).await;
    // a second connection of host A, gone before A's last one: A's key stays held
    let a_too = connect_with(&with_key(&env, &mock, KEY_A), env.root(), Protocol::Legacy).await;
    let r = a
        .call(
            "codex",
            json!({"prompt": "first", "sessionId": "shared", "workingDirectory": env.work()}),
        )
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let r = a.call("query", json!({"prompt": "a question"})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let b = connect_with(&with_key(&env, &mock, KEY_B), env.root(), Protocol::Legacy).await;
    assert_eq!(owner_pid(&b).await, owner);
    let r = b.call("query", json!({"prompt": "b question"})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    if keeps_warm_processes() {
        // the session's warm process, the spare and the idle one-shot: A's key in each
        key_held_by(owner, KEY_A, 3).await;
        key_held_by(owner, KEY_B, 1).await;
    }

    host_leaves(&a_too).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // settled (a call's process given back or let go of after its answer)
    let b_processes = holding_key(owner, KEY_B);
    if keeps_warm_processes() {
        assert!(
            holding_key(owner, KEY_A).len() >= 3,
            "A's processes went while A was still connected"
        );
    }
    host_leaves(&a).await;
    let left = key_gone_within(owner, KEY_A, Duration::from_secs(10)).await;
    assert!(
        left.is_empty(),
        "processes under the owner still hold A's key after A left: {left:?}"
    );
    // B's are B's: still there
    for p in &b_processes {
        assert!(alive(*p), "B's process {p} went with A");
    }

    // B goes on with the session A started: with B's key, never A's
    let before = mock.responses_count();
    let r = b
        .call("codex", json!({"prompt": "second", "sessionId": "shared"}))
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    asked_with(&mock, before, KEY_B, KEY_A);
    assert!(holding_key(owner, KEY_A).is_empty());
}

/// A background turn of a host that left keeps its process, with its host's key, until the
/// turn ends; then the process goes (and no spare is started with that key), while another
/// host stays connected (the daemon goes on).
#[tokio::test]
async fn a_background_turn_keeps_its_hosts_key_until_it_ends() {
    const KEY_A: &str = "a-background-key-61b0f2";
    const KEY_B: &str = "b-staying-key-9ce417";
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let a = connect_with(&with_key(&env, &mock, KEY_A), env.root(), Protocol::Legacy).await;
    let owner = owner_pid(&a).await;
    let b = connect_with(&with_key(&env, &mock, KEY_B), env.root(), Protocol::Legacy).await;
    assert_eq!(owner_pid(&b).await, owner);
    mock.push(Reply::message("done in the background").with_delay(TURN));
    let r = a
        .call(
            "codex",
            json!({"prompt": "a long refactor", "sessionId": "bg", "background": true,
                   "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    model_asked(&mock, 1).await;
    let asked = Instant::now();
    host_leaves(&a).await;
    // the turn runs on: its process keeps A's key
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !holding_key(owner, KEY_A).is_empty(),
        "the background turn's codex went with its host"
    );
    let left = key_gone_within(owner, KEY_A, TURN + Duration::from_secs(15)).await;
    assert!(
        left.is_empty(),
        "processes still hold A's key after its background turn ended: {left:?}"
    );
    assert!(
        asked.elapsed() >= TURN,
        "A's key went before the background turn ended"
    );
    // the turn completed (the rule cut nothing short) and no spare came back with A's key
    let g = settled_session(&b, "bg").await;
    assert_eq!(g["session"]["lastStatus"], "completed", "{g}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(holding_key(owner, KEY_A).is_empty(), "a spare with A's key");
}

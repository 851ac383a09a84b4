//! What the warm-conversation backend relies on, pinned against the real `codex app-server` of the
//! version under test and the mock Responses API: turns on a warm thread, resume of a stored
//! thread, the policy codex reports, stickiness (the negative control that makes every
//! `turn/start` carry a sandbox), and declined approvals. The process is spawned here as the
//! process layer will spawn it (env allowlist, the exec path's `-c` pins).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use codex_mcp_bridge::codex::app_server::client::{Client, DEFAULT_MAX_LINE_BYTES};
use codex_mcp_bridge::codex::app_server::protocol::{
    self, Item, ItemStatus, Notification, PolicyWatch, ReportedSandbox, ThreadId, ThreadOpened,
    TurnParams, TurnStatus,
};
use codex_mcp_bridge::plan::values::SandboxLevel;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::app_server::{AppServer, STEP, TurnLog, read_turn, spawn_raw, write_raw};
use crate::support::bridge::pids_with_cmdline_prefix;
use crate::support::{MockApi, Reply, TestEnv};

/// A model with the classic tool shape (`exec_command`).
const MODEL: &str = "gpt-5.5";

fn cwd(env: &TestEnv) -> PathBuf {
    env.work().canonicalize().expect("canonical work dir")
}

async fn open(
    app: &AppServer,
    msg: impl protocol::Request<Response = ThreadOpened>,
) -> ThreadOpened {
    tokio::time::timeout(STEP, app.client.open_thread(&msg))
        .await
        .expect("thread opened in time")
        .expect("thread opened")
}

/// One turn through the template; returns its log.
async fn turn(
    app: &mut AppServer,
    thread: &ThreadId,
    prompt: &str,
    sandbox: Option<SandboxLevel>,
    cwd: &Path,
) -> TurnLog {
    let id = tokio::time::timeout(
        STEP,
        app.client.start_turn(&TurnParams {
            thread,
            prompt: &crate::support::bridge::prompt_of(prompt),
            sandbox,
            cwd,
            model: None,
            effort: None,
        }),
    )
    .await
    .expect("turn/start answered in time")
    .expect("turn/start");
    read_turn(&mut app.events, Some(id.as_str())).await
}

fn write_file_reply(name: &str) -> Reply {
    Reply::exec_command(&format!("echo {name} > {name}; echo exit=$?"))
}

#[tokio::test]
async fn a_warm_thread_answers_turn_after_turn_with_its_history() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut app = AppServer::start(&env, &mock).await;
    let dir = cwd(&env);
    let opened = open(&app, protocol::thread_start(&dir, None, false).unwrap()).await;
    assert!(opened.path.is_some(), "a stored thread has a rollout");
    for i in 1..=3 {
        mock.push(Reply::message(format!("warm reply {i}")));
        let log = turn(
            &mut app,
            &opened.thread,
            &format!("warm prompt {i}"),
            None,
            &dir,
        )
        .await;
        assert_eq!(log.status, Some(TurnStatus::Completed), "{log:#?}");
        assert_eq!(log.messages, [format!("warm reply {i}")], "{log:#?}");
    }
    let reqs = mock.responses_requests();
    assert_eq!(reqs.len(), 3);
    let last = &reqs[2];
    assert!(last.user_text_contains("warm prompt 1") && last.user_text_contains("warm prompt 3"));
    assert!(
        last.message_texts("assistant")
            .iter()
            .any(|t| t.contains("warm reply 2")),
        "{:?}",
        last.message_texts("assistant")
    );
    app.close().await;
}

#[tokio::test]
async fn a_stored_thread_resumed_by_a_new_process_continues_its_history() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let dir = cwd(&env);
    let mut first = AppServer::start(&env, &mock).await;
    let opened = open(&first, protocol::thread_start(&dir, None, false).unwrap()).await;
    mock.push(Reply::message("the first answer"));
    let log = turn(&mut first, &opened.thread, "first prompt", None, &dir).await;
    assert_eq!(log.messages, ["the first answer"]);
    first.close().await;

    let mut second = AppServer::start(&env, &mock).await;
    let resumed = open(
        &second,
        protocol::thread_resume(&opened.thread, &dir, None).unwrap(),
    )
    .await;
    assert_eq!(resumed.thread, opened.thread);
    assert_eq!(resumed.policy.check(SandboxLevel::ReadOnly, &dir), Ok(()));
    mock.push(Reply::message("the second answer"));
    let log = turn(&mut second, &opened.thread, "second prompt", None, &dir).await;
    assert_eq!(log.messages, ["the second answer"]);
    let reqs = mock.responses_requests();
    let last = reqs.last().unwrap();
    assert!(
        last.user_text_contains("first prompt") && last.user_text_contains("second prompt"),
        "{:?}",
        last.user_texts()
    );
    assert!(
        last.message_texts("assistant")
            .iter()
            .any(|t| t.contains("the first answer"))
    );
    second.close().await;
}

/// Feed a turn's notifications to the watch, checking it at `turn/started`; returns whether a
/// `thread/settings/updated` came before it.
fn watch_turn(watch: &mut PolicyWatch, log: &TurnLog, level: SandboxLevel, dir: &Path) -> bool {
    let mut updated = false;
    for n in &log.notifications {
        watch.observe(n);
        match n {
            Notification::ThreadSettingsUpdated { .. } => updated = true,
            Notification::TurnStarted { .. } => {
                assert_eq!(watch.check(level, dir), Ok(()), "at turn/started");
            }
            _ => {}
        }
    }
    updated
}

#[tokio::test]
async fn the_policy_codex_reports_is_the_one_the_templates_sent_and_nothing_sticks() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut app = AppServer::start(&env, &mock).await;
    let dir = cwd(&env);
    let opened = open(
        &app,
        protocol::thread_start(
            &dir,
            Some(&codex_mcp_bridge::security::ids::ModelId::parse("model", MODEL).unwrap()),
            false,
        )
        .unwrap(),
    )
    .await;
    assert_eq!(
        opened.policy.sandbox,
        ReportedSandbox::ReadOnly { network: false }
    );
    assert_eq!(
        (
            opened.policy.approval_policy.as_str(),
            opened.policy.approvals_reviewer.as_str()
        ),
        ("never", "user")
    );
    let mut watch = PolicyWatch::new(&opened);

    // a workspace-write turn: codex reports the change before turn/started, and it writes
    mock.push_all([write_file_reply("one.txt"), Reply::message("wrote one")]);
    let log = turn(
        &mut app,
        &opened.thread,
        "write one",
        Some(SandboxLevel::WorkspaceWrite),
        &dir,
    )
    .await;
    assert!(watch_turn(
        &mut watch,
        &log,
        SandboxLevel::WorkspaceWrite,
        &dir
    ));
    assert!(dir.join("one.txt").exists(), "{log:#?}");
    // had the next template left the sandbox out, the watch would have failed closed
    assert!(watch.check(SandboxLevel::ReadOnly, &dir).is_err());

    // the next turn gives no sandbox: the template sends read-only, and the write is refused
    mock.push_all([write_file_reply("two.txt"), Reply::message("tried two")]);
    let log = turn(&mut app, &opened.thread, "write two", None, &dir).await;
    assert!(watch_turn(&mut watch, &log, SandboxLevel::ReadOnly, &dir));
    assert_eq!(log.status, Some(TurnStatus::Completed));
    assert!(
        !dir.join("two.txt").exists(),
        "read-only turn wrote: {log:#?}"
    );
    assert!(
        matches!(&log.commands[..], [Item::CommandExecution { exit_code: Some(c), .. }] if *c != 0)
            || mock
                .responses_requests()
                .last()
                .unwrap()
                .tool_outputs()
                .iter()
                .any(|(_, o)| o.contains("exit=1") || o.contains("Read-only")),
        "{log:#?}"
    );
    app.close().await;
}

/// A raw line reader for the negative controls, which must send what the templates never do.
struct Raw {
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Raw {
    async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let read = async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("read app-server")
                    .expect("app-server output ended");
                let v: Value = serde_json::from_str(&line).expect("a JSON line");
                if pred(&v) {
                    return v;
                }
            }
        };
        tokio::time::timeout(STEP, read).await.expect("in time")
    }
}

#[tokio::test]
async fn negative_control_a_turn_without_sandbox_policy_inherits_workspace_write() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let dir = cwd(&env);
    let (_child, mut stdin, stdout) = spawn_raw(&env, &mock);
    let mut raw = Raw {
        lines: BufReader::new(stdout).lines(),
    };
    write_raw(&mut stdin, &json!({"method": "initialize", "id": 1, "params": {"clientInfo": {"name": "t", "version": "0"}}})).await;
    raw.until(|v| v["id"] == 1).await;
    write_raw(&mut stdin, &json!({"method": "initialized"})).await;
    write_raw(&mut stdin, &json!({"method": "thread/start", "id": 2, "params": {
        "cwd": dir, "sandbox": "read-only", "approvalPolicy": "never", "approvalsReviewer": "user", "model": MODEL}})).await;
    let started = raw.until(|v| v["id"] == 2).await;
    let thread = started["result"]["thread"]["id"].clone();
    let turn = |id: i64, text: &str, sandbox: Option<Value>| {
        let mut p = json!({"threadId": thread, "input": [{"type": "text", "text": text}],
            "approvalPolicy": "never", "approvalsReviewer": "user", "cwd": dir});
        if let Some(s) = sandbox {
            p["sandboxPolicy"] = s;
        }
        json!({"method": "turn/start", "id": id, "params": p})
    };
    mock.push_all([write_file_reply("first.txt"), Reply::message("one")]);
    write_raw(
        &mut stdin,
        &turn(
            10,
            "write first",
            Some(protocol::sandbox_policy(SandboxLevel::WorkspaceWrite)),
        ),
    )
    .await;
    raw.until(|v| v["method"] == "turn/completed").await;
    assert!(dir.join("first.txt").exists());

    // the unsafe form: no sandboxPolicy. The previous turn's workspace-write sticks.
    mock.push_all([write_file_reply("second.txt"), Reply::message("two")]);
    write_raw(&mut stdin, &turn(11, "write second", None)).await;
    raw.until(|v| v["method"] == "turn/completed").await;
    assert!(
        dir.join("second.txt").exists(),
        "codex {} no longer keeps the sandbox of the previous turn: the template's sandbox on \
         every turn is still right, but update ARCHITECTURE.md (Warm conversations)",
        crate::support::under_test().number()
    );
}

#[tokio::test]
async fn a_command_approval_is_declined_at_once_and_the_command_does_not_run() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let dir = cwd(&env);
    let (mut child, mut stdin, stdout) = spawn_raw(&env, &mock);
    let mut reader = BufReader::new(stdout);
    // The templates always send approvalPolicy "never", under which codex never asks. To make
    // it ask, the thread and turn are started raw with "on-request"; then the crate's client
    // takes over the pipes and must answer the request by itself.
    let mut line = String::new();
    let mut until_id = async |reader: &mut BufReader<_>, id: i64| loop {
        line.clear();
        let n = tokio::time::timeout(STEP, reader.read_line(&mut line))
            .await
            .expect("in time")
            .expect("read");
        assert!(n > 0, "app-server output ended");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id && v.get("method").is_none() {
            return v;
        }
    };
    write_raw(&mut stdin, &json!({"method": "initialize", "id": 1, "params": {"clientInfo": {"name": "t", "version": "0"}}})).await;
    until_id(&mut reader, 1).await;
    write_raw(&mut stdin, &json!({"method": "initialized"})).await;
    write_raw(&mut stdin, &json!({"method": "thread/start", "id": 2, "params": {
        "cwd": dir, "sandbox": "read-only", "approvalPolicy": "on-request", "approvalsReviewer": "user", "model": MODEL}})).await;
    let started = until_id(&mut reader, 2).await;
    let thread = started["result"]["thread"]["id"].clone();
    mock.push_all([
        Reply::function_call(
            "exec_command",
            json!({"cmd": "echo hi > out.txt; echo exit=$?", "sandbox_permissions": "require_escalated",
                   "justification": "Write out.txt?"}),
        ),
        Reply::message("done"),
    ]);
    write_raw(
        &mut stdin,
        &json!({"method": "turn/start", "id": 9001, "params": {
        "threadId": thread, "input": [{"type": "text", "text": "please write"}],
        "approvalPolicy": "on-request", "approvalsReviewer": "user", "cwd": dir,
        "sandboxPolicy": {"type": "readOnly"}}}),
    )
    .await;
    let (client, mut events) = Client::new(reader, stdin, DEFAULT_MAX_LINE_BYTES);
    let log = read_turn(&mut events, None).await;
    assert_eq!(
        log.declined,
        ["item/commandExecution/requestApproval"],
        "{log:#?}"
    );
    assert!(
        matches!(
            &log.commands[..],
            [Item::CommandExecution {
                status: ItemStatus::Declined,
                ..
            }]
        ),
        "{log:#?}"
    );
    assert_eq!(log.status, Some(TurnStatus::Completed));
    assert!(!dir.join("out.txt").exists(), "the declined command ran");
    client.close().await;
    let status = tokio::time::timeout(STEP, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
}

/// Live `sleep` processes started with exactly this argument.
fn sleeping(arg: &str) -> Vec<i32> {
    pids_with_cmdline_prefix(&format!("sleep {arg}"))
}

async fn wait_for(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cond()
}

#[tokio::test]
async fn an_interrupt_leaves_the_command_running_until_background_terminals_are_cleaned() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut app = AppServer::start(&env, &mock).await;
    let dir = cwd(&env);
    let opened = open(
        &app,
        protocol::thread_start(
            &dir,
            Some(&codex_mcp_bridge::security::ids::ModelId::parse("model", MODEL).unwrap()),
            false,
        )
        .unwrap(),
    )
    .await;
    // zero-padded: no other test process's argument is a prefix of it
    let arg = format!("47.{:07}", std::process::id());
    // the command yields after 250 ms and goes on in the background (a background terminal);
    // the model's next answer never comes, so the turn is still running at the interrupt
    mock.push_all([
        Reply::function_call(
            "exec_command",
            json!({"cmd": format!("sleep {arg}; echo slept"), "yield_time_ms": 250}),
        ),
        Reply::hang(),
    ]);
    let turn_id = app
        .client
        .start_turn(&TurnParams {
            thread: &opened.thread,
            prompt: &crate::support::bridge::prompt_of("sleep a while"),
            sandbox: None,
            cwd: &dir,
            model: None,
            effort: None,
        })
        .await
        .expect("turn/start");
    assert!(
        wait_for(STEP, || !sleeping(&arg).is_empty()).await,
        "the command never started"
    );
    mock.wait_for_responses(2, STEP).await;
    assert!(!sleeping(&arg).is_empty(), "the command ended early");
    tokio::time::timeout(
        STEP,
        app.client
            .request(&protocol::turn_interrupt(&opened.thread, &turn_id)),
    )
    .await
    .expect("interrupt answered in time")
    .expect("interrupt");
    let log = read_turn(&mut app.events, Some(turn_id.as_str())).await;
    assert_eq!(log.status, Some(TurnStatus::Interrupted), "{log:#?}");

    // the negative control: the interrupt alone leaves the command running
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !sleeping(&arg).is_empty(),
        "codex {} now kills the command on interrupt: update ARCHITECTURE.md (Warm conversations)",
        crate::support::under_test().number()
    );
    tokio::time::timeout(
        STEP,
        app.client
            .request(&protocol::clean_background_terminals(&opened.thread)),
    )
    .await
    .expect("clean answered in time")
    .expect("clean");
    assert!(
        wait_for(Duration::from_secs(10), || sleeping(&arg).is_empty()).await,
        "the command survived thread/backgroundTerminals/clean: {:?}",
        sleeping(&arg)
    );
    app.close().await;
}

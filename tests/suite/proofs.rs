//! The security proofs of `runner.rs` and `escalation.rs`, through the bridge: a real MCP client
//! (rmcp's) drives the built server binary, which drives the real codex against the mock. The
//! server runs with the backend the suite is set to (`BRIDGE_BACKEND_UNDER_TEST`), so each proof
//! holds for `codex exec` and for a warm `codex app-server` alike. The unsafe forms (what codex
//! does without each rule) are shown in `runner.rs` and `escalation.rs`; here every proof is
//! also a failing test when its rule is taken out of the backend under test.

use std::path::Path;
use std::time::{Duration, Instant};

use codex_mcp_bridge::codex::rollout::{TurnContext, last_turn_context};
use codex_mcp_bridge::security::env::{ALLOWED_VARS, FORCED_VARS};
use codex_mcp_bridge::security::ids::ThreadId;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::support::bridge::{environ_of, marker, own_sleep, pids_with_cmdline, wait_no_process};
use crate::support::mcp::{Protocol, Server, connect_with, server_env, structured, text};
use crate::support::process::{alive, wait_exit};
use crate::support::{MockApi, RecordedRequest, Reply, TestEnv, codex_bin};

const READ_ONLY_TEXT: &str = "`sandbox_mode` is `read-only`";
const WORKSPACE_WRITE_TEXT: &str = "`sandbox_mode` is `workspace-write`";
const DANGER_TEXT: &str = "`sandbox_mode` is `danger-full-access`";
const APPROVAL_NEVER_TEXT: &str = "Approval policy is currently never";
const AUTO_REVIEW_TEXT: &str = "`approvals_reviewer` is `auto_review`";

/// The bridge under test for `env` and `mock`, with `extra` settings or host variables.
async fn serve(env: &TestEnv, mock: &MockApi, extra: &[(&str, &str)]) -> Server {
    let mut vars = server_env(env, mock);
    for (k, v) in extra {
        vars.retain(|(key, _)| key != k);
        vars.push(((*k).into(), (*v).into()));
    }
    connect_with(&vars, env.root(), Protocol::Legacy).await
}

/// The structured result of a call that must have succeeded.
fn ok(r: &CallToolResult) -> Value {
    assert!(r.is_error != Some(true), "{}", text(r));
    structured(r)
}

/// The codex thread a result names.
fn thread_of(r: &CallToolResult) -> ThreadId {
    let v = ok(r);
    ThreadId::parse(
        v["threadId"]
            .as_str()
            .unwrap_or_else(|| panic!("no threadId: {v}")),
    )
    .unwrap()
}

fn write_user_config(env: &TestEnv, text: &str) {
    std::fs::write(env.codex_home().join("config.toml"), text).unwrap();
}

fn trust(env: &TestEnv, dir: &Path) {
    write_user_config(
        env,
        &format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            dir.display()
        ),
    );
}

/// What codex recorded for the last turn of `thread`.
fn recorded(env: &TestEnv, thread: &ThreadId) -> TurnContext {
    last_turn_context(env.codex_home(), thread).expect("codex recorded a turn context")
}

fn assert_pinned(ctx: &TurnContext, sandbox: &str) {
    assert_eq!(
        (
            ctx.approval_policy.as_str(),
            ctx.approvals_reviewer.as_str(),
            ctx.sandbox.as_str()
        ),
        ("never", "user", sandbox),
        "{ctx:?}"
    );
}

fn last_request(mock: &MockApi) -> RecordedRequest {
    mock.responses_requests().pop().expect("a request")
}

#[tokio::test]
async fn prompts_that_look_like_flags_reach_the_model_as_text_on_new_and_resumed_turns() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock, &[]).await;
    let work = env.work().canonicalize().unwrap();
    let m = marker(&env, "evil");
    let token = format!(
        "-cmcp_servers={{evil={{command=\"touch\",args=[\"{}\"]}}}}",
        m.display()
    );
    let big_task = format!("{token}\n{}", "please refactor everything. ".repeat(20_000));

    let r = s
        .call(
            "codex",
            json!({"prompt": "--version", "sessionId": "flags", "workingDirectory": work}),
        )
        .await;
    ok(&r);
    assert!(last_request(&mock).user_text_contains("--version"));
    let r = s
        .call("codex", json!({"prompt": token, "sessionId": "flags"}))
        .await;
    assert_eq!(ok(&r)["resumed"], true);
    assert!(last_request(&mock).user_text_contains(&token));
    let r = s
        .call(
            "codex",
            json!({"prompt": "--version", "sessionId": "flags"}),
        )
        .await;
    assert_eq!(ok(&r)["resumed"], true);
    let r = s
        .call(
            "codex",
            json!({"prompt": big_task, "sessionId": "big", "workingDirectory": work}),
        )
        .await;
    ok(&r);
    let r = s
        .call("codex", json!({"prompt": token, "sessionId": "big"}))
        .await;
    assert_eq!(ok(&r)["resumed"], true);
    let reqs = mock.responses_requests();
    assert_eq!(reqs.len(), 5, "every prompt reached the model");
    assert!(reqs[2].user_text_contains("--version"));
    assert!(reqs[3].user_text_contains("please refactor everything."));
    assert!(reqs[4].user_text_contains(&token));
    assert!(!m.exists(), "the smuggled MCP server ran");
}

/// Two turns of one session with `model`: both reach the mock with exactly that model id, and
/// both run read-only.
async fn literal_model(env: &TestEnv, mock: &MockApi, s: &Server, model: &str, session: &str) {
    let before = mock.responses_count();
    let r = s
        .call(
            "codex",
            json!({"prompt": "hello", "sessionId": session, "model": model,
                   "workingDirectory": env.work()}),
        )
        .await;
    ok(&r);
    let r = s
        .call(
            "codex",
            json!({"prompt": "again", "sessionId": session, "model": model}),
        )
        .await;
    assert_eq!(ok(&r)["resumed"], true);
    let reqs = mock.responses_requests();
    assert_eq!(reqs.len(), before + 2);
    for r in &reqs[before..] {
        assert_eq!(r.model(), Some(model));
        assert!(
            r.body_contains(READ_ONLY_TEXT),
            "not read-only: {:?}",
            r.seq
        );
        assert!(!r.body_contains(DANGER_TEXT));
    }
}

#[tokio::test]
async fn a_model_with_a_quote_and_newline_stays_a_literal_model_name() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock, &[]).await;
    literal_model(
        &env,
        &mock,
        &s,
        "o3\"sandbox_mode=\"danger-full-access\"",
        "quote",
    )
    .await;
    // with a newline: refused on both backends, naming the model, before anything reaches
    // the model (one rule for every path)
    let evil = "o3\"\nsandbox_mode=\"danger-full-access\"";
    let before = mock.responses_count();
    let r = s
        .call(
            "codex",
            json!({"prompt": "hello", "sessionId": "newline", "model": evil,
                   "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("invalid argument `model`"),
        "{}",
        text(&r)
    );
    assert_eq!(
        mock.responses_count(),
        before,
        "a refused turn reached the model"
    );
}

#[tokio::test]
async fn the_approvals_pin_holds_on_every_turn_whatever_the_users_config_says() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    write_user_config(
        &env,
        "approvals_reviewer = \"auto_review\"\napproval_policy = \"on-request\"\n",
    );
    let s = serve(&env, &mock, &[]).await;
    let turns = [
        json!({"prompt": "first", "sessionId": "pin", "workingDirectory": env.work(),
               "model": "gpt-5.5", "reasoningEffort": "low"}),
        json!({"prompt": "second", "sessionId": "pin", "model": "gpt-5.5",
               "reasoningEffort": "low"}),
        json!({"prompt": "third", "sessionId": "pin", "sandbox": "workspace-write"}),
        json!({"prompt": "fourth", "sessionId": "pin", "sandbox": "read-only",
               "reasoningEffort": "medium"}),
    ];
    let levels = ["read-only", "read-only", "workspace-write", "read-only"];
    let mut thread = None;
    for (args, level) in turns.into_iter().zip(levels) {
        let r = s.call("codex", args).await;
        let t = thread_of(&r);
        assert_eq!(*thread.get_or_insert(t), t, "one thread");
        assert_pinned(&recorded(&env, &t), level);
        let req = last_request(&mock);
        assert!(
            req.body_contains(APPROVAL_NEVER_TEXT),
            "lost the pin: {:?}",
            req.seq
        );
        assert!(!req.body_contains(AUTO_REVIEW_TEXT));
    }
}

#[tokio::test]
async fn a_resumed_turn_without_a_level_runs_read_only_after_a_write_turn_in_a_trusted_directory() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap();
    trust(&env, &work);
    let write = |name: &str| Reply::exec_command(&format!("echo {name} > {name}; echo exit=$?"));
    let s = serve(&env, &mock, &[]).await;

    mock.push_all([write("one.txt"), Reply::message("wrote")]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "write one", "sessionId": "rw", "workingDirectory": work,
                   "sandbox": "workspace-write", "model": "gpt-5.5"}),
        )
        .await;
    let thread = thread_of(&r);
    assert!(work.join("one.txt").exists(), "{}", text(&r));
    assert!(mock.responses_requests()[0].body_contains(WORKSPACE_WRITE_TEXT));

    // the next turn names no level: read-only, on the same thread
    mock.push_all([write("two.txt"), Reply::message("tried")]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "write two", "sessionId": "rw", "model": "gpt-5.5"}),
        )
        .await;
    assert_eq!(thread_of(&r), thread);
    assert!(!work.join("two.txt").exists(), "escalated: {}", text(&r));
    assert!(last_request(&mock).body_contains(READ_ONLY_TEXT));
    assert_pinned(&recorded(&env, &thread), "read-only");

    // and so does a cold resume by the next server, after another write turn
    mock.push_all([write("three.txt"), Reply::message("wrote")]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "write three", "sessionId": "rw", "sandbox": "workspace-write",
                   "model": "gpt-5.5"}),
        )
        .await;
    ok(&r);
    assert!(work.join("three.txt").exists(), "{}", text(&r));
    kill_and_forget(s).await;
    let s = serve(&env, &mock, &[]).await;
    mock.push_all([write("four.txt"), Reply::message("tried")]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "write four", "sessionId": "rw", "model": "gpt-5.5"}),
        )
        .await;
    assert_eq!(thread_of(&r), thread);
    assert!(!work.join("four.txt").exists(), "escalated: {}", text(&r));
    assert!(last_request(&mock).body_contains(READ_ONLY_TEXT));
    assert_pinned(&recorded(&env, &thread), "read-only");
}

/// The pids of codex processes under the server.
fn codex_under(server_pid: u32) -> Vec<i32> {
    let bin = codex_bin().canonicalize().unwrap();
    codex_mcp_bridge::codex::process::descendants(server_pid as i32)
        .into_iter()
        .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == bin))
        .collect()
}

#[tokio::test]
async fn codex_and_its_commands_see_only_the_allowlist_and_results_are_redacted() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let key = "sk-proj-PLANTEDsecretVALUE1234567890abcdefXYZ";
    let aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let s = serve(
        &env,
        &mock,
        &[
            ("OPENAI_API_KEY", key),
            ("PLANTED_VAR", "planted-value-xyz"),
            ("AWS_SECRET_ACCESS_KEY", aws),
        ],
    )
    .await;
    mock.push(Reply::exec_command("env; echo ENV_DONE"));
    mock.push(Reply::message(format!("the key is {key}")).with_delay(Duration::from_millis(1500)));
    let call = s.call(
        "codex",
        json!({"prompt": "print the environment", "sessionId": "env",
               "workingDirectory": env.work(), "sandbox": "workspace-write",
               "model": "gpt-5.5"}),
    );
    let watch = async {
        mock.wait_for_responses(2, Duration::from_secs(60)).await;
        let pids = codex_under(s.pid);
        assert!(!pids.is_empty(), "codex runs under the server");
        for p in pids {
            let seen: Vec<(String, String)> = environ_of(p);
            for (k, v) in &seen {
                assert!(
                    ALLOWED_VARS.contains(&k.as_str()) || FORCED_VARS.iter().any(|(f, _)| f == k),
                    "codex {p} sees {k}"
                );
                assert!(v != aws && !v.contains("planted"), "codex {p} sees {k}={v}");
            }
        }
    };
    let (r, ()) = tokio::join!(call, watch);
    let out: String = mock.responses_requests()[1]
        .function_call_outputs()
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    assert!(out.contains("ENV_DONE"), "the command ran: {out}");
    assert!(out.contains("PATH="), "{out}");
    assert!(
        !out.contains(key) && !out.contains("PLANTED") && !out.contains(aws),
        "a secret reached the model: {out}"
    );
    ok(&r);
    let answer = format!("{}{}", text(&r), structured(&r));
    assert!(
        !answer.contains(key) && answer.contains("[REDACTED]"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_repositorys_own_codex_config_never_loads_and_no_trust_entry_is_written() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let m = crate::support::bridge::repo_with_marker_server(&env, env.work());
    let s = serve(&env, &mock, &[]).await;
    for args in [
        json!({"prompt": "edit", "sessionId": "repo", "workingDirectory": env.work(),
               "sandbox": "workspace-write"}),
        json!({"prompt": "look", "sessionId": "repo", "sandbox": "read-only"}),
        json!({"prompt": "edit again", "sessionId": "repo", "sandbox": "workspace-write"}),
    ] {
        ok(&s.call("codex", args).await);
    }
    assert!(!m.exists(), "the repository's MCP server started");
    let cfg = std::fs::read_to_string(env.codex_home().join("config.toml")).unwrap_or_default();
    assert!(
        !cfg.contains("trust_level"),
        "a trust entry was written: {cfg}"
    );
}

#[tokio::test]
async fn a_subdirectory_of_a_repository_the_user_trusts_still_loads_no_project_config() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap();
    let sub = work.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let m = crate::support::bridge::repo_with_marker_server(&env, &work);
    trust(&env, &work);
    let before = std::fs::read_to_string(env.codex_home().join("config.toml")).unwrap();
    let s = serve(&env, &mock, &[]).await;
    for args in [
        json!({"prompt": "look", "sessionId": "sub", "workingDirectory": sub,
               "sandbox": "read-only"}),
        json!({"prompt": "edit", "sessionId": "sub", "sandbox": "workspace-write"}),
        json!({"prompt": "edit", "sessionId": "sub2", "workingDirectory": sub,
               "sandbox": "workspace-write"}),
    ] {
        ok(&s.call("codex", args).await);
    }
    assert!(!m.exists(), "the trusted repository's MCP server started");
    let after = std::fs::read_to_string(env.codex_home().join("config.toml")).unwrap();
    assert_eq!(before, after, "the user's config was changed");
}

// ---------------------------------------------------------------------------------------------
// Escalation (see escalation.rs): an approving automatic reviewer stands by; a lost pin would
// let codex ask it and write the file.

const REVIEWER_MODEL: &str = "codex-auto-review";
const ALLOW_VERDICT: &str = r#"{"risk_level":"low","user_authorization":"high","outcome":"allow","rationale":"writes one file in the workspace"}"#;
const REFUSED_TEXT: &str = "approval policy is Never; reject command";

fn is_review(r: &RecordedRequest) -> bool {
    r.model() == Some(REVIEWER_MODEL)
        || r.body["text"]["format"]["schema"]["properties"]["outcome"].is_object()
}

fn reviews(mock: &MockApi) -> usize {
    mock.responses_requests()
        .iter()
        .filter(|r| is_review(r))
        .count()
}

/// One turn of session `esc` scripted to escalate a write of `pwned-<tag>.txt`; asserts that
/// nothing was written, no review was asked for, the agent was told, and codex recorded the pin.
async fn turn_refuses(env: &TestEnv, mock: &MockApi, s: &Server, args: Value, tag: &str) {
    let target = env.work().join(format!("pwned-{tag}.txt"));
    let call_id = format!("esc_{tag}");
    mock.push_matching(is_review, Reply::message(ALLOW_VERDICT));
    mock.push(Reply::function_call_with_id(
        &call_id,
        "exec_command",
        json!({
            "cmd": format!("echo pwned > '{}'", target.display()),
            "sandbox_permissions": "require_escalated",
            "justification": "I need to write this file outside the sandbox",
        }),
    ));
    mock.push(Reply::message("done").with_delay(Duration::from_millis(300)));
    let before = reviews(mock);
    let r = s.call("codex", args).await;
    let thread = thread_of(&r);
    assert!(
        !target.exists(),
        "the escalation wrote {} under a read-only turn",
        target.display()
    );
    assert_eq!(reviews(mock), before, "codex asked the reviewer model");
    let out = mock
        .responses_requests()
        .iter()
        .find_map(|r| r.tool_output(&call_id))
        .unwrap_or_else(|| panic!("codex sent no output for {call_id}"));
    assert!(out.contains(REFUSED_TEXT), "not refused: {out}");
    assert_pinned(&recorded(env, &thread), "read-only");
}

async fn prove_escalation(env: &TestEnv, mock: &MockApi) {
    let s = serve(env, mock, &[]).await;
    turn_refuses(
        env,
        mock,
        &s,
        json!({"prompt": "go", "sessionId": "esc", "workingDirectory": env.work(),
               "model": "gpt-5.5"}),
        "new",
    )
    .await;
    turn_refuses(
        env,
        mock,
        &s,
        json!({"prompt": "go on", "sessionId": "esc", "model": "gpt-5.5",
               "sandbox": "read-only", "reasoningEffort": "low"}),
        "resumed",
    )
    .await;
    // after a workspace-write turn, a turn without a level
    mock.push(Reply::message("wrote nothing"));
    ok(&s
        .call(
            "codex",
            json!({"prompt": "edit", "sessionId": "esc", "sandbox": "workspace-write",
                   "model": "gpt-5.5"}),
        )
        .await);
    turn_refuses(
        env,
        mock,
        &s,
        json!({"prompt": "go again", "sessionId": "esc", "model": "gpt-5.5"}),
        "after-write",
    )
    .await;
}

#[tokio::test]
async fn an_escalation_request_writes_nothing_under_a_user_configs_auto_reviewer() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    write_user_config(&env, "approvals_reviewer = \"auto_review\"\n");
    prove_escalation(&env, &mock).await;
}

#[tokio::test]
async fn an_escalation_request_writes_nothing_under_a_trusted_projects_auto_reviewer() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap();
    trust(&env, &work);
    std::fs::create_dir_all(work.join(".codex")).unwrap();
    std::fs::write(
        work.join(".codex/config.toml"),
        "approvals_reviewer = \"auto_review\"\n",
    )
    .unwrap();
    prove_escalation(&env, &mock).await;
}

// ---------------------------------------------------------------------------------------------
// Timeout and SIGKILL: the turn's tool commands (danger-full-access, which codex runs in their
// own process group) do not outlive it.

async fn wait_for_process(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while pids_with_cmdline(needle).is_empty() {
        assert!(Instant::now() < deadline, "no process `{needle}` appeared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn kill_matching(needle: &str) {
    for p in pids_with_cmdline(needle) {
        // SAFETY: signals only.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
}

/// SIGKILL the server and wait until it is gone with all its threads.
async fn kill_and_forget(s: Server) {
    let pid = s.pid;
    s.kill();
    wait_exit(pid).await;
    drop(s);
}

#[tokio::test]
async fn a_timeout_kills_the_turns_tool_command_and_the_session_resumes() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock, &[("CODEX_BRIDGE_ALLOW_DANGER", "1")]).await;
    mock.push(Reply::message("first"));
    ok(&s
        .call(
            "codex",
            json!({"prompt": "one", "sessionId": "to", "workingDirectory": env.work(),
                   "model": "gpt-5.5"}),
        )
        .await);
    let sleep = own_sleep(987201);
    mock.push(Reply::exec_command(&format!("{sleep}; echo done")));
    mock.push(Reply::message("never sent"));
    let started = Instant::now();
    let r = s
        .call(
            "codex",
            json!({"prompt": "sleep", "sessionId": "to", "sandbox": "danger-full-access", "model": "gpt-5.5",
                   "timeout": 3000}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("timed out"), "{}", text(&r));
    assert!(started.elapsed() < Duration::from_secs(20));
    let left = wait_no_process(&sleep, Duration::from_secs(1)).await;
    kill_matching(&sleep);
    assert!(left.is_empty(), "the tool command survived: {left:?}");
    mock.push(Reply::message("after"));
    let r = s
        .call("codex", json!({"prompt": "again", "sessionId": "to"}))
        .await;
    assert_eq!(ok(&r)["resumed"], true);
}

#[tokio::test]
async fn a_sigkill_mid_turn_leaves_no_tool_command_once_the_next_server_starts() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let danger = [("CODEX_BRIDGE_ALLOW_DANGER", "1")];
    let s = serve(&env, &mock, &danger).await;
    mock.push(Reply::message("before"));
    ok(&s
        .call(
            "codex",
            json!({"prompt": "one", "sessionId": "crash", "workingDirectory": env.work(),
                   "model": "gpt-5.5"}),
        )
        .await);
    let sleep = own_sleep(987202);
    mock.push(Reply::exec_command(&format!("{sleep}; echo done")));
    mock.push(Reply::message("never sent"));
    let params = rmcp::model::CallToolRequestParams::new("codex").with_arguments(
        json!({"prompt": "sleep", "sessionId": "crash", "sandbox": "danger-full-access", "model": "gpt-5.5"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    tokio::select! {
        _ = s.client.call_tool(params) => panic!("the sleeping call returned"),
        _ = wait_for_process(&sleep) => {}
    }
    let codex = codex_under(s.pid);
    assert!(!codex.is_empty());
    kill_and_forget(s).await;
    let deadline = Instant::now() + Duration::from_secs(3);
    while codex.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !codex.iter().any(|p| alive(*p)),
        "codex outlived the server"
    );

    let s = serve(&env, &mock, &danger).await;
    let left = wait_no_process(&sleep, Duration::from_secs(5)).await;
    kill_matching(&sleep);
    assert!(
        left.is_empty(),
        "the tool command outlived the crash: {left:?}"
    );
    let got = s.call("getSession", json!({"sessionId": "crash"})).await;
    assert_eq!(
        structured(&got)["session"]["lastStatus"],
        "interrupted",
        "{}",
        text(&got)
    );
    mock.push(Reply::message("again"));
    let r = s
        .call("codex", json!({"prompt": "again", "sessionId": "crash"}))
        .await;
    assert_eq!(ok(&r)["resumed"], true);
}

/// A turn's progress (and a task's status message) is model text: what reaches the host holds
/// no character a person cannot read as it is (an escape sequence here), written as `\u{…}`.
#[tokio::test]
async fn progress_shows_model_text_only_as_a_person_can_read_it() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock, &[]).await;
    mock.push(Reply::exec_command("true # \u{1b}[8mhidden\u{202e}txt"));
    mock.push(Reply::message("done"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "run", "workingDirectory": env.work(), "model": "gpt-5.5"}),
        )
        .await;
    ok(&r);
    let said: Vec<String> = s
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    let running: Vec<&String> = said.iter().filter(|m| m.contains("hidden")).collect();
    assert!(!running.is_empty(), "the command's progress line: {said:?}");
    for m in &running {
        assert!(
            m.contains("\\u{1b}[8mhidden\\u{202e}txt"),
            "not written visibly: {m:?}"
        );
    }
    for m in &said {
        assert!(
            !m.chars().any(|c| c == '\u{1b}' || c == '\u{202e}'),
            "a progress line holds an unreadable character: {m:?}"
        );
    }
}

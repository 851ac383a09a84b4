//! Smoke tests of the test support itself: the real codex binary runs a turn against the mock.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::{
    Codex, MockApi, Reply, TestEnv, codex_bin, completed_items, describe_output, events_of_type,
    jsonl, run_with_timeout, under_test,
};

const TURN_LIMIT: Duration = Duration::from_secs(60);

/// Runs `codex exec --json --sandbox read-only --skip-git-repo-check -c <provider..> <extra..>
/// -- <prompt>` in `env`, against `mock`.
async fn codex_exec(
    codex: &Path,
    env: &TestEnv,
    mock: &MockApi,
    extra: &[&str],
    prompt: &str,
) -> Output {
    let mut cmd = env.command(codex);
    cmd.args([
        "exec",
        "--json",
        "--sandbox",
        "read-only",
        "--skip-git-repo-check",
    ]);
    for o in mock.provider_overrides() {
        cmd.arg("-c").arg(o);
    }
    cmd.args(extra).arg("--").arg(prompt);
    let started = Instant::now();
    let out = run_with_timeout(&mut cmd, TURN_LIMIT).await;
    eprintln!("codex exec took {:?}", started.elapsed());
    out
}

#[tokio::test]
async fn codex_runs_a_plain_turn_against_the_mock() {
    let codex = codex_bin();
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("hello from the mock"));

    let out = codex_exec(&codex, &env, &mock, &[], "say hi").await;
    let dump = describe_output(&out);
    assert!(out.status.success(), "codex failed:\n{dump}");

    let events = jsonl(&out.stdout);
    assert_eq!(events_of_type(&events, "thread.started").len(), 1, "{dump}");
    let messages = completed_items(&events, "agent_message");
    assert!(
        messages.iter().any(|m| m["text"] == "hello from the mock"),
        "no agent_message with the scripted text:\n{dump}"
    );
    assert_eq!(events_of_type(&events, "turn.completed").len(), 1, "{dump}");

    let reqs = mock.responses_requests();
    assert_eq!(
        reqs.len(),
        1,
        "expected one /v1/responses request: {reqs:#?}"
    );
    assert!(
        reqs[0].user_text_contains("say hi"),
        "prompt not in the request input: {:#?}",
        reqs[0].user_texts()
    );
    assert_eq!(reqs[0].header("authorization"), Some("Bearer test-key"));
    assert_eq!(mock.pending_replies(), 0);
    let others: Vec<String> = mock
        .other_requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    eprintln!("other routes codex called: {others:?}");
}

#[tokio::test]
async fn codex_runs_a_scripted_shell_command_and_reports_its_output() {
    let codex = codex_bin();
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::function_call_with_id(
        "call_smoke",
        "exec_command",
        serde_json::json!({"cmd": "echo hi"}),
    ));
    mock.push(Reply::message("done").with_delay(Duration::from_millis(300)));

    let out = codex_exec(&codex, &env, &mock, &["-m", "gpt-5.5"], "run echo").await;
    let dump = describe_output(&out);
    assert!(out.status.success(), "codex failed:\n{dump}");

    let reqs = mock.responses_requests();
    assert_eq!(
        reqs.len(),
        2,
        "expected two /v1/responses requests: {reqs:#?}"
    );
    assert_eq!(reqs[0].model(), Some("gpt-5.5"));
    assert!(
        reqs[0].tool_names().iter().any(|n| n == "exec_command"),
        "exec_command not offered: {:?}",
        reqs[0].tool_names()
    );
    let output = reqs[1].tool_output("call_smoke").unwrap_or_else(|| {
        panic!(
            "no function_call_output for call_smoke: {:#?}",
            reqs[1].input()
        )
    });
    assert!(output.contains("hi"), "tool output lacks `hi`: {output}");

    let events = jsonl(&out.stdout);
    let commands = completed_items(&events, "command_execution");
    assert!(
        commands
            .iter()
            .any(|c| c["exit_code"] == 0
                && c["aggregated_output"].as_str().unwrap_or("").contains("hi")),
        "no completed command_execution with output `hi`:\n{dump}"
    );
    assert!(
        completed_items(&events, "agent_message")
            .iter()
            .any(|m| m["text"] == "done"),
        "{dump}"
    );
}

#[tokio::test]
async fn mock_errors_reach_codex_as_failed_turns() {
    let codex = codex_bin();
    let env = TestEnv::new();
    let mock = MockApi::start().await;

    mock.push(Reply::api_error(400, "scripted bad request"));
    let out = codex_exec(&codex, &env, &mock, &[], "first").await;
    let dump = describe_output(&out);
    assert_eq!(out.status.code(), Some(1), "{dump}");
    let failed = events_of_type(&jsonl(&out.stdout), "turn.failed")
        .first()
        .map(|e| e["error"]["message"].to_string())
        .unwrap_or_default();
    assert!(failed.contains("scripted bad request"), "{dump}");

    mock.push(Reply::message("partial").then_drop_connection());
    let out = codex_exec(&codex, &env, &mock, &[], "second").await;
    let dump = describe_output(&out);
    assert_eq!(out.status.code(), Some(1), "{dump}");
    assert_eq!(
        events_of_type(&jsonl(&out.stdout), "turn.failed").len(),
        1,
        "{dump}"
    );
    // No retries: exactly one request per turn.
    assert_eq!(mock.responses_count(), 2);
}

#[tokio::test]
async fn mock_routes_concurrent_turns_and_config_toml_works() {
    let codex = codex_bin();
    let (env_a, env_b) = (TestEnv::new(), TestEnv::new());
    let mock = MockApi::start().await;
    // B is configured through config.toml instead of -c overrides.
    mock.write_config_toml(env_b.codex_home());
    let hold = Duration::from_millis(800);
    mock.push_for_user_text("MARK_B", Reply::message("for B").with_delay(hold));
    mock.push_for_user_text("MARK_A", Reply::message("for A").with_delay(hold));

    let a = codex_exec(&codex, &env_a, &mock, &[], "MARK_A");
    let b = async {
        let mut cmd = env_b.command(&codex);
        cmd.args([
            "exec",
            "--json",
            "--sandbox",
            "read-only",
            "--skip-git-repo-check",
        ])
        .args(["--", "MARK_B"]);
        run_with_timeout(&mut cmd, TURN_LIMIT).await
    };
    let (a, b) = tokio::join!(a, b);
    for (out, want) in [(&a, "for A"), (&b, "for B")] {
        let dump = describe_output(out);
        assert!(out.status.success(), "{dump}");
        assert!(
            completed_items(&jsonl(&out.stdout), "agent_message")
                .iter()
                .any(|m| m["text"] == want),
            "expected `{want}`:\n{dump}"
        );
    }
    assert_eq!(mock.peak_concurrency(), 2);
    assert_eq!(mock.in_flight(), 0);
    assert_eq!(mock.pending_replies(), 0);
}

/// Every `--json` line of a turn with a command, a plan update and an answer parses into the
/// bridge's typed events (no unknown event or item, no malformed line) on every supported
/// version. They differ in the plan tool: 0.145.0 runs `update_plan` and reports a `todo_list`
/// item; 0.171.0 no longer offers it, answers the call as unsupported and reports no item (the
/// bridge's progress then simply shows no plan).
#[tokio::test]
async fn every_json_line_of_a_turn_parses_into_typed_events_and_the_plan_tool_differs_by_version() {
    use codex_mcp_bridge::codex::events::{Parsed, Transcript, parse_line};

    let codex = codex_bin();
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::function_call_with_id(
        "call_cmd",
        "exec_command",
        serde_json::json!({"cmd": "echo out"}),
    ));
    mock.push(Reply::function_call_with_id(
        "call_plan",
        "update_plan",
        serde_json::json!({"plan": [{"step": "a", "status": "in_progress"}]}),
    ));
    mock.push(Reply::message("done"));

    let out = codex_exec(&codex, &env, &mock, &["-m", "gpt-5.5"], "go").await;
    let dump = describe_output(&out);
    assert!(out.status.success(), "codex failed:\n{dump}");
    let mut t = Transcript::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let parsed = parse_line(line);
        assert!(matches!(parsed, Parsed::Event(_)), "{parsed:?}: {line}");
        t.apply(&parsed);
    }
    assert_eq!((t.unknown_events, t.malformed_lines), (0, 0), "{dump}");
    assert!(t.turn_completed && t.thread_id.is_some(), "{dump}");
    assert_eq!(t.last_message.as_deref(), Some("done"), "{dump}");

    let tools = mock.responses_requests()[0].tool_names();
    let plan_offered = tools.iter().any(|n| n == "update_plan");
    let events = jsonl(&out.stdout);
    let todo = completed_items(&events, "todo_list");
    let plan_output = mock
        .responses_requests()
        .iter()
        .find_map(|r| r.tool_output("call_plan"))
        .unwrap_or_default();
    match under_test() {
        Codex::V0_145_0 => {
            assert!(plan_offered, "0.145.0 offers update_plan: {tools:?}");
            assert_eq!(todo.len(), 1, "{dump}");
        }
        Codex::V0_171_0 => {
            assert!(!plan_offered, "0.171.0 offers update_plan: {tools:?}");
            assert!(todo.is_empty(), "{dump}");
            assert!(plan_output.contains("unsupported call"), "{plan_output}");
        }
    }
}

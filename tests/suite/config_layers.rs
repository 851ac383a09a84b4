//! How codex layers `-c` tokens and user config, and what the bridge builds on it: at one level
//! the later token for a key wins (so the bridge's pins, emitted last, win), and `query`/`search`
//! switch the user's nested MCP servers off while `codex` keeps them. Each proof also runs the
//! opposite form, so it is shown to be able to fail.

use std::path::Path;
use std::time::Duration;

use codex_mcp_bridge::codex::argv::{build_turn, config_tokens, pins};
use codex_mcp_bridge::codex::rollout::last_turn_context;
use codex_mcp_bridge::plan::values::{ReasoningEffort, SandboxLevel};
use codex_mcp_bridge::security::ids::{ModelId, ThreadId};
use codex_mcp_bridge::security::overrides::parse_operator_override;
use serde_json::{Value, json};

use crate::support::bridge::{common, marker, turn};
use crate::support::mcp::{Protocol, connect, structured, text};
use crate::support::{
    Codex, MockApi, TestEnv, codex_bin, describe_output, events_of_type, jsonl, run_with_timeout,
    under_test,
};

const LIMIT: Duration = Duration::from_secs(60);
const AUTO_REVIEW_TEXT: &str = "`approvals_reviewer` is `auto_review`";

/// Run bare `codex exec --json --sandbox read-only --skip-git-repo-check <mock provider>
/// <extra> -- hi` in `env`; returns the thread id codex reported. Panics unless it succeeded.
async fn exec(env: &TestEnv, mock: &MockApi, extra: &[&str]) -> ThreadId {
    let mut cmd = env.command(codex_bin());
    cmd.args([
        "exec",
        "--json",
        "--sandbox",
        "read-only",
        "--skip-git-repo-check",
    ])
    .args(mock.provider_args())
    .args(extra)
    .args(["--", "hi"]);
    let out = run_with_timeout(&mut cmd, LIMIT).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let events = jsonl(&out.stdout);
    let started = events_of_type(&events, "thread.started");
    let id = started
        .first()
        .and_then(|e| e["thread_id"].as_str())
        .unwrap_or_else(|| panic!("no thread.started: {}", describe_output(&out)));
    ThreadId::parse(id).expect("codex reports a UUID thread id")
}

/// The `model` of the mock's last Responses request.
fn last_model(mock: &MockApi) -> String {
    let reqs = mock.responses_requests();
    let last = reqs.last().expect("codex reached the mock");
    last.model().expect("the request names a model").to_owned()
}

/// The reviewer codex recorded for the last turn of `thread`.
fn recorded_reviewer(env: &TestEnv, thread: &ThreadId) -> String {
    last_turn_context(env.codex_home(), thread)
        .expect("codex recorded a turn context")
        .approvals_reviewer
}

#[tokio::test]
async fn two_config_tokens_for_one_key_the_later_wins_and_the_pins_come_last() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;

    // codex itself: of two `-c` tokens for one key at one level, the later one wins
    exec(
        &env,
        &mock,
        &["-c", "model=\"first\"", "-c", "model=\"second\""],
    )
    .await;
    assert_eq!(last_model(&mock), "second");
    exec(
        &env,
        &mock,
        &["-c", "model=\"second\"", "-c", "model=\"first\""],
    )
    .await;
    assert_eq!(
        last_model(&mock),
        "first",
        "the order decides, not the value"
    );

    // the bridge builds on that: every pin comes after every operator and per-request token,
    // on new and on resumed turns, and the pins are the last config tokens of all
    let mut c = common(&env, &mock);
    let operator = ["model_verbosity=\"low\"", "mcp_servers.other.enabled=false"];
    c.overrides
        .extend(operator.iter().map(|o| parse_operator_override(o).unwrap()));
    c.disable_mcp_servers = vec!["marker".into()];
    // an operator can never name a pinned key, so order is what protects the pins
    for pinned in [
        "approvals_reviewer=\"auto_review\"",
        "approval_policy=\"on-request\"",
    ] {
        assert!(parse_operator_override(pinned).is_err(), "{pinned}");
    }
    let mut req = turn(&env, "hi");
    req.model = Some(ModelId::parse("model", "gpt-5.5").unwrap());
    req.reasoning_effort = Some(ReasoningEffort::Low);
    req.sandbox = Some(SandboxLevel::WorkspaceWrite);
    let thread = ThreadId::parse("0199a0b1-0000-7000-8000-000000000001").unwrap();
    for resume in [None, Some(thread)] {
        req.resume = resume;
        let spec = build_turn(&c, req.clone()).unwrap();
        let tokens = config_tokens(spec.args());
        let pinned = pins(req.cwd.path());
        let (others, last) = tokens.split_at(tokens.len() - pinned.len());
        let last_values: Vec<&str> = last.iter().map(|(_, v)| *v).collect();
        assert_eq!(last_values, pinned, "{:?}", spec.args());
        let first_pin = last[0].0;
        assert!(
            others.iter().all(|(i, _)| *i < first_pin),
            "{:?}",
            spec.args()
        );
        let other_values: Vec<&str> = others.iter().map(|(_, v)| *v).collect();
        let mut expected: Vec<String> = mock.provider_overrides();
        expected.extend(operator.iter().map(|s| s.to_string()));
        expected.push("mcp_servers.marker.enabled=false".into());
        expected.push("model_reasoning_effort=\"low\"".into());
        assert_eq!(other_values, expected, "{:?}", spec.args());
        // after the last pin only the thread id (on resume), `--` and `-`
        let tail: Vec<&str> = spec.args()[last.last().unwrap().0 + 2..]
            .iter()
            .map(String::as_str)
            .collect();
        let thread_arg = thread.to_arg();
        let expected_tail: Vec<&str> = match resume {
            None => vec!["--", "-"],
            Some(_) => vec![thread_arg.as_str(), "--", "-"],
        };
        assert_eq!(tail, expected_tail, "{:?}", spec.args());
    }

    // and codex honours it for the pinned key: a later `approvals_reviewer="user"` beats an
    // earlier `auto_review` at the same level, as codex records the turn
    let later_user = exec(
        &env,
        &mock,
        &[
            "-c",
            "approvals_reviewer=\"auto_review\"",
            "-c",
            "approvals_reviewer=\"user\"",
        ],
    )
    .await;
    assert_eq!(recorded_reviewer(&env, &later_user), "user");
    assert!(
        !mock
            .responses_requests()
            .last()
            .unwrap()
            .body_contains(AUTO_REVIEW_TEXT)
    );
    // the check can fail: the reverse order records auto_review
    let later_auto = exec(
        &env,
        &mock,
        &[
            "-c",
            "approvals_reviewer=\"user\"",
            "-c",
            "approvals_reviewer=\"auto_review\"",
        ],
    )
    .await;
    assert_ne!(later_auto, later_user);
    assert_eq!(recorded_reviewer(&env, &later_auto), "auto_review");
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains(AUTO_REVIEW_TEXT)
    );
}

/// Resume `thread` bare: `parent` tokens before `resume`, `deeper` after it (then the mock
/// provider, whose `-c` tokens are at the resume level too).
async fn resume(
    env: &TestEnv,
    mock: &MockApi,
    thread: &ThreadId,
    parent: &[&str],
    deeper: &[&str],
) {
    let mut cmd = env.command(codex_bin());
    cmd.args(["exec", "--json", "--sandbox", "read-only"])
        .args(parent)
        .args(["resume", "--skip-git-repo-check"])
        .args(deeper)
        .args(mock.provider_args())
        .arg(thread.to_arg())
        .args(["--", "again"]);
    let out = run_with_timeout(&mut cmd, LIMIT).await;
    assert!(out.status.success(), "{}", describe_output(&out));
}

/// Why the bridge emits every `-c` token at the deepest level: codex 0.145.0 silently drops
/// every parent-level token once the subcommand level carries one, while 0.171.0 applies both
/// levels (the deeper one winning for a key given at both). Tokens at one level are applied alike
/// by both, so the bridge's argv holds on both.
#[tokio::test]
async fn parent_level_config_tokens_are_dropped_by_0_145_and_applied_by_0_171() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let thread = exec(&env, &mock, &["-c", "model=\"created\""]).await;
    assert_eq!(last_model(&mock), "created");

    // a parent-level key next to a resume-level token for another key
    resume(
        &env,
        &mock,
        &thread,
        &["-c", "model=\"from-parent\""],
        &["-c", "model_reasoning_effort=\"low\""],
    )
    .await;
    let model = last_model(&mock);
    match under_test() {
        Codex::V0_145_0 => assert_ne!(model, "from-parent", "0.145.0 dropped nothing"),
        Codex::V0_171_0 => assert_eq!(model, "from-parent", "0.171.0 dropped the parent level"),
    }

    // one key at both levels: the deeper level wins (0.145.0 by dropping the parent level)
    resume(
        &env,
        &mock,
        &thread,
        &["-c", "model=\"from-parent\""],
        &["-c", "model=\"from-resume\""],
    )
    .await;
    assert_eq!(last_model(&mock), "from-resume");
}

fn write_marker_server(env: &TestEnv, m: &Path) {
    std::fs::write(
        env.codex_home().join("config.toml"),
        format!(
            "[mcp_servers.marker]\ncommand = \"touch\"\nargs = [\"{}\"]\n",
            m.display()
        ),
    )
    .unwrap();
}

fn response_ok(tool: &str, r: &rmcp::model::CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(false), "{tool}: {}", text(r));
    structured(r)
}

#[tokio::test]
async fn query_and_search_switch_off_nested_mcp_servers_and_codex_keeps_them() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let m = marker(&env, "nested-mcp");
    write_marker_server(&env, &m);
    let s = connect(&env, &mock, Protocol::Legacy).await;

    let ping = response_ok("ping", &s.call("ping", json!({})).await);
    assert_eq!(
        ping["nestedMcpServers"],
        json!([{"name": "marker", "enabled": true, "required": false}]),
        "{ping}"
    );

    response_ok("query", &s.call("query", json!({"prompt": "hi"})).await);
    response_ok("search", &s.call("search", json!({"query": "x"})).await);
    assert_eq!(mock.responses_count(), 2, "both calls reached the model");
    assert!(
        !m.exists(),
        "query or search started the user's nested MCP server"
    );

    // the check can fail: with the default policy `keep`, a `codex` turn starts it
    let v = response_ok(
        "codex",
        &s.call(
            "codex",
            json!({"prompt": "hi", "workingDirectory": env.work()}),
        )
        .await,
    );
    assert_eq!(v["sandbox"], "read-only", "{v}");
    assert_eq!(mock.responses_count(), 3);
    assert!(m.exists(), "codex should have started the nested server");
}

#[tokio::test]
async fn the_disable_policy_switches_nested_mcp_servers_off_on_codex_turns_too() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let m = marker(&env, "nested-mcp-disabled");
    write_marker_server(&env, &m);
    let mut vars = crate::support::mcp::server_env(&env, &mock);
    vars.push(("CODEX_BRIDGE_NESTED_MCP".into(), "disable".into()));
    let s = crate::support::mcp::connect_with(&vars, env.root(), Protocol::Legacy).await;
    response_ok(
        "codex",
        &s.call(
            "codex",
            json!({"prompt": "hi", "sessionId": "no-nested", "workingDirectory": env.work()}),
        )
        .await,
    );
    response_ok(
        "codex",
        &s.call(
            "codex",
            json!({"prompt": "again", "sessionId": "no-nested"}),
        )
        .await,
    );
    assert_eq!(mock.responses_count(), 2, "both turns reached the model");
    assert!(!m.exists(), "a codex turn started the nested MCP server");
}

//! Proof 5: an `approvals_reviewer = "auto_review"` setting, from the user's config or from a
//! trusted repository's own `.codex/config.toml`, cannot carry a scripted sandbox escalation
//! (`sandbox_permissions: "require_escalated"`) out of a read-only turn built by the crate, on a
//! new turn or on a resumed turn with a reasoning effort.
//!
//! The mock plays both models: the agent (`gpt-5.5`), which asks to run `echo pwned > FILE`
//! escalated, and codex's automatic reviewer, which codex asks on the same provider (model
//! `codex-auto-review`, a JSON-schema'd answer) and which the mock always answers with an allow
//! verdict. So if the bridge's pin were lost, the write would go through; the unsafe forms (a bare
//! argv, new and resumed) show that it does on every supported codex. The reference bridge's
//! resume shape escalates on 0.145.0 and is refused on 0.171.0, which applies parent-level `-c`.

use std::path::Path;
use std::time::Duration;

use codex_mcp_bridge::codex::argv::build_turn;
use codex_mcp_bridge::codex::process::{Ending, TurnOutcome};
use codex_mcp_bridge::codex::rollout::{TurnContext, last_turn_context};
use codex_mcp_bridge::plan::values::{ReasoningEffort, SandboxLevel};
use codex_mcp_bridge::security::ids::{ModelId, ThreadId};
use serde_json::json;

use crate::support::bridge::{common, run_spec, turn};
use crate::support::{
    Codex, MockApi, RecordedRequest, Reply, TestEnv, codex_bin, describe_output, events_of_type,
    jsonl, run_with_timeout, under_test,
};

const LIMIT: Duration = Duration::from_secs(90);
/// The model codex asks for its automatic approval review (0.145.0 and 0.171.0).
const REVIEWER_MODEL: &str = "codex-auto-review";
/// The reviewer's verdict format: a JSON object whose required field is `outcome`
/// (`allow`|`deny`), optionally with `risk_level`, `user_authorization` and `rationale`.
const ALLOW_VERDICT: &str = r#"{"risk_level":"low","user_authorization":"high","outcome":"allow","rationale":"writes one file in the workspace"}"#;
/// What codex sends back to the model when the pinned approval policy refuses an escalation.
const REFUSED_TEXT: &str = "approval policy is Never; reject command";

/// Whether `r` is codex asking its reviewer model about an escalation: model
/// `codex-auto-review`, or a request whose structured-output schema asks for an `outcome`.
fn is_review(r: &RecordedRequest) -> bool {
    r.model() == Some(REVIEWER_MODEL)
        || r.body["text"]["format"]["schema"]["properties"]["outcome"].is_object()
}

/// Arms the mock to approve the next escalation review codex asks for.
fn approve_next_review(mock: &MockApi) {
    mock.push_matching(is_review, Reply::message(ALLOW_VERDICT));
}

fn reviews(mock: &MockApi) -> usize {
    mock.responses_requests()
        .iter()
        .filter(|r| is_review(r))
        .count()
}

/// Scripts the agent's next turn: an escalated `exec_command` writing `target`, then `done`.
fn script_escalation(mock: &MockApi, call_id: &str, target: &Path) {
    mock.push(Reply::function_call_with_id(
        call_id,
        "exec_command",
        json!({
            "cmd": format!("echo pwned > '{}'", target.display()),
            "sandbox_permissions": "require_escalated",
            "justification": "I need to write this file outside the sandbox",
        }),
    ));
    mock.push(Reply::message("done").with_delay(Duration::from_millis(300)));
}

/// The output codex sent back to the agent for `call_id`.
fn tool_output(mock: &MockApi, call_id: &str) -> String {
    mock.responses_requests()
        .iter()
        .find_map(|r| r.tool_output(call_id))
        .unwrap_or_else(|| panic!("codex sent no output for {call_id}"))
}

fn recorded(env: &TestEnv, thread: &ThreadId) -> TurnContext {
    last_turn_context(env.codex_home(), thread).expect("codex recorded a turn context")
}

fn completed(outcome: &TurnOutcome) {
    assert_eq!(outcome.ending, Ending::Completed, "{outcome:#?}");
}

/// One bridge turn, read-only and scripted to escalate while an approving reviewer stands by:
/// a new turn with no level given, or a resumed one with `Some(ReadOnly)` and a reasoning effort
/// (the shape that lost the pin in the reference bridge). Asserts that the escalation was
/// refused: nothing written, no review asked for, the agent told so, and codex recorded the
/// pinned approval mode. Returns the thread.
async fn bridge_turn_refuses(
    env: &TestEnv,
    mock: &MockApi,
    resume: Option<ThreadId>,
    tag: &str,
) -> ThreadId {
    let target = env.work().join(format!("pwned-{tag}.txt"));
    let call_id = format!("esc_{tag}");
    script_escalation(mock, &call_id, &target);
    let mut req = turn(env, &format!("go ({tag})"));
    req.model = Some(ModelId::parse("model", "gpt-5.5").unwrap());
    if resume.is_some() {
        req.resume = resume;
        req.sandbox = Some(SandboxLevel::ReadOnly);
        req.reasoning_effort = Some(ReasoningEffort::Low);
    }
    let spec = build_turn(&common(env, mock), req.clone()).unwrap();
    assert_eq!(spec.sandbox(), SandboxLevel::ReadOnly);
    let before = reviews(mock);
    let outcome = run_spec(spec).await;
    completed(&outcome);
    let thread = outcome.thread_id.expect("a thread id");
    if let Some(resumed) = resume {
        assert_eq!(thread, resumed);
    }

    assert!(
        !target.exists(),
        "the escalation wrote {} under a read-only turn",
        target.display()
    );
    assert_eq!(reviews(mock), before, "codex asked the reviewer model");
    let out = tool_output(mock, &call_id);
    assert!(out.contains(REFUSED_TEXT), "not refused: {out}");
    let ctx = recorded(env, &thread);
    assert_eq!(
        (
            ctx.approval_policy.as_str(),
            ctx.approvals_reviewer.as_str(),
            ctx.sandbox.as_str()
        ),
        ("never", "user", "read-only"),
        "{ctx:?}"
    );
    thread
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Runs codex with a hand-built argv (stdin null) and returns its thread.
async fn raw(env: &TestEnv, args: &[String]) -> ThreadId {
    let mut cmd = env.command(codex_bin());
    cmd.args(args);
    let out = run_with_timeout(&mut cmd, LIMIT).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let events = jsonl(&out.stdout);
    let started = events_of_type(&events, "thread.started");
    let id = started
        .first()
        .and_then(|e| e["thread_id"].as_str())
        .unwrap_or_else(|| panic!("no thread.started: {}", describe_output(&out)));
    ThreadId::parse(id).unwrap()
}

/// The unsafe run escalated: the reviewer was asked and approved, the file was written, and
/// codex recorded the auto-review approval mode.
fn assert_escalated(
    env: &TestEnv,
    mock: &MockApi,
    thread: &ThreadId,
    reviews_before: usize,
    target: &Path,
) {
    assert_eq!(
        reviews(mock),
        reviews_before + 1,
        "codex should have asked the reviewer once"
    );
    let written = std::fs::read_to_string(target).unwrap_or_else(|e| {
        panic!(
            "the unsafe form should have written {}: {e}",
            target.display()
        )
    });
    assert_eq!(written.trim(), "pwned");
    let ctx = recorded(env, thread);
    assert_eq!(
        (
            ctx.approval_policy.as_str(),
            ctx.approvals_reviewer.as_str(),
            ctx.sandbox.as_str()
        ),
        ("on-request", "auto_review", "read-only"),
        "{ctx:?}"
    );
}

/// The unsafe run was refused without asking the reviewer: nothing written, and codex recorded
/// the pinned approval mode.
fn assert_refused(
    env: &TestEnv,
    mock: &MockApi,
    thread: &ThreadId,
    reviews_before: usize,
    target: &Path,
) {
    assert_eq!(reviews(mock), reviews_before, "codex asked the reviewer");
    assert!(!target.exists(), "{} was written", target.display());
    let ctx = recorded(env, thread);
    assert_eq!(
        (
            ctx.approval_policy.as_str(),
            ctx.approvals_reviewer.as_str(),
            ctx.sandbox.as_str()
        ),
        ("never", "user", "read-only"),
        "{ctx:?}"
    );
}

/// A bare read-only `codex exec -m gpt-5.5 -- go` without the bridge's pins. Returns the new
/// thread.
async fn bare_new(env: &TestEnv, mock: &MockApi) -> ThreadId {
    let mut args = s(&[
        "exec",
        "--json",
        "--sandbox",
        "read-only",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
    ]);
    args.extend(mock.provider_args());
    args.extend(s(&["--", "go"]));
    raw(env, &args).await
}

/// A resume of `thread`: `parent` are `-c` values before `resume`, and at the resume level
/// `-m gpt-5.5`, then `-c` `deeper`, then the mock provider.
async fn unsafe_resume(
    env: &TestEnv,
    mock: &MockApi,
    thread: &ThreadId,
    parent: &[&str],
    deeper: &[&str],
) {
    let mut args = s(&["exec", "--json", "--sandbox", "read-only"]);
    for c in parent {
        args.extend(s(&["-c", c]));
    }
    args.extend(s(&["resume", "--skip-git-repo-check", "-m", "gpt-5.5"]));
    for c in deeper {
        args.extend(s(&["-c", c]));
    }
    args.extend(mock.provider_args());
    args.extend([thread.to_arg(), "--".into(), "go on".into()]);
    assert_eq!(&raw(env, &args).await, thread);
}

/// The whole proof for one route of `approvals_reviewer = "auto_review"` into codex.
///
/// A thread's reviewer is persisted with it: a resumed turn that does not set one keeps the
/// thread's (measured on 0.145.0 and 0.171.0; approval falls back to on-request, which
/// `codex exec` refuses when the reviewer is `user`). So the resume proofs run on a thread that
/// codex started under `auto_review`, where a lost pin does escalate.
async fn prove(env: &TestEnv, mock: &MockApi) {
    // the bridge's own thread: a new turn, then a resumed one
    approve_next_review(mock);
    let own = bridge_turn_refuses(env, mock, None, "new").await;
    bridge_turn_refuses(env, mock, Some(own), "resumed").await;
    assert_eq!(
        mock.pending_replies(),
        1,
        "only the unused approval should be left"
    );

    // the unsafe form: a bare read-only argv without the bridge's pins (the approval armed above
    // serves it)
    let target = env.work().join("pwned-bare.txt");
    script_escalation(mock, "esc_bare", &target);
    let before = reviews(mock);
    let auto = bare_new(env, mock).await;
    assert_escalated(env, mock, &auto, before, &target);
    let out = tool_output(mock, "esc_bare");
    assert!(out.contains("exited with code 0"), "{out}");

    // the unsafe resume: no pin at all (the thread keeps its auto reviewer), on every version
    approve_next_review(mock);
    let target = env.work().join("pwned-bare-resume.txt");
    script_escalation(mock, "esc_bare_resume", &target);
    let before = reviews(mock);
    unsafe_resume(env, mock, &auto, &[], &["model_reasoning_effort=\"low\""]).await;
    assert_escalated(env, mock, &auto, before, &target);
    assert_eq!(mock.pending_replies(), 0);

    // the same auto-review thread resumed by the crate holds
    approve_next_review(mock);
    bridge_turn_refuses(env, mock, Some(auto), "resumed-auto-thread").await;
    assert_eq!(mock.pending_replies(), 1);

    // the reference bridge's resume shape (pin before `resume`, effort after it), on a fresh
    // auto-review thread. codex 0.145.0 drops every parent-level `-c` when the resume level
    // carries one: the pin is lost and the write goes through. codex 0.171.0 applies
    // parent-level tokens too: the shape keeps the pin and the escalation is refused (codex
    // closed this hole itself; the bridge's own resume above is proven on both versions).
    mock.push(Reply::message("hello"));
    let fresh = bare_new(env, mock).await;
    assert_eq!(recorded(env, &fresh).approvals_reviewer, "auto_review");
    let target = env.work().join("pwned-reference-resume.txt");
    script_escalation(mock, "esc_reference", &target);
    let before = reviews(mock);
    unsafe_resume(
        env,
        mock,
        &fresh,
        &["approvals_reviewer=\"user\""],
        &["model_reasoning_effort=\"low\""],
    )
    .await;
    match under_test() {
        Codex::V0_145_0 => {
            assert_escalated(env, mock, &fresh, before, &target);
            assert_eq!(mock.pending_replies(), 0);
        }
        Codex::V0_171_0 => {
            assert_refused(env, mock, &fresh, before, &target);
            let out = tool_output(mock, "esc_reference");
            assert!(out.contains(REFUSED_TEXT), "not refused: {out}");
            assert_eq!(mock.pending_replies(), 1, "the approval stays unused");
        }
    }
}

#[tokio::test]
async fn an_escalation_request_writes_nothing_under_a_user_configs_auto_reviewer() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    std::fs::write(
        env.codex_home().join("config.toml"),
        "approvals_reviewer = \"auto_review\"\n",
    )
    .unwrap();
    prove(&env, &mock).await;
}

#[tokio::test]
async fn an_escalation_request_writes_nothing_under_a_trusted_projects_auto_reviewer() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap();
    std::fs::write(
        env.codex_home().join("config.toml"),
        format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            work.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(work.join(".codex")).unwrap();
    std::fs::write(
        work.join(".codex/config.toml"),
        "approvals_reviewer = \"auto_review\"\n",
    )
    .unwrap();
    prove(&env, &mock).await;
}

//! The security model's claims, proven through the crate's argv builders and runner against the
//! real codex binary and the mock Responses API. Each proof also runs the unsafe form once, so
//! it is shown to be able to fail.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use codex_mcp_bridge::codex::argv::{
    OneShotRequest, ReviewRequest, SpawnSpec, build_query, build_review, build_search, build_turn,
};
use codex_mcp_bridge::codex::process::{Ending, RunOptions};
use codex_mcp_bridge::codex::rollout::{TurnContext, last_turn_context};
use codex_mcp_bridge::config::{Limits, NEWEST_TESTED_CODEX_VERSION};
use codex_mcp_bridge::error::{Error, turn_result};
use codex_mcp_bridge::plan::review::ReviewTarget;
use codex_mcp_bridge::plan::values::{ReasoningEffort, SandboxLevel};
use codex_mcp_bridge::security::env::{ALLOWED_VARS, FORCED_VARS};
use codex_mcp_bridge::security::ids::{ModelId, ThreadId};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::support::Codex;
use crate::support::bridge::{
    child_env, common, confine_dir, environ_of, marker, own_sleep, pids_with_cmdline,
    pids_with_cmdline_prefix, run_spec, run_spec_with, turn, wait_no_process,
};
use crate::support::{
    MockApi, Reply, TestEnv, codex_bin, describe_output, git, run_with_timeout, under_test,
};

const LIMIT: Duration = Duration::from_secs(60);
const READ_ONLY_TEXT: &str = "`sandbox_mode` is `read-only`";
const WORKSPACE_WRITE_TEXT: &str = "`sandbox_mode` is `workspace-write`";
const DANGER_TEXT: &str = "`sandbox_mode` is `danger-full-access`";
const APPROVAL_NEVER_TEXT: &str = "Approval policy is currently never";
const AUTO_REVIEW_TEXT: &str = "`approvals_reviewer` is `auto_review`";

/// Run codex with a hand-built argv (the unsafe forms the proofs compare against).
async fn raw(env: &TestEnv, args: &[String], stdin: Option<&str>) -> std::process::Output {
    let mut cmd = env.command(codex_bin());
    cmd.args(args);
    match stdin {
        None => run_with_timeout(&mut cmd, LIMIT).await,
        Some(text) => {
            cmd.stdin(Stdio::piped());
            let mut child = cmd.spawn().expect("spawn codex");
            let mut si = child.stdin.take().unwrap();
            si.write_all(text.as_bytes()).await.unwrap();
            drop(si);
            tokio::time::timeout(LIMIT, child.wait_with_output())
                .await
                .expect("codex in time")
                .unwrap()
        }
    }
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn completed(outcome: &codex_mcp_bridge::codex::process::TurnOutcome) {
    assert_eq!(outcome.ending, Ending::Completed, "{outcome:#?}");
}

#[tokio::test]
async fn a_prompt_of_dash_dash_version_reaches_the_model_as_text() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let outcome =
        run_spec(build_turn(&common(&env, &mock), turn(&env, "--version")).unwrap()).await;
    completed(&outcome);
    let reqs = mock.responses_requests();
    assert_eq!(reqs.len(), 1);
    assert!(
        reqs[0].user_text_contains("--version"),
        "{:?}",
        reqs[0].user_texts()
    );

    // the unsafe form: the same prompt as a bare positional is parsed as codex's own flag
    let mut args = s(&[
        "exec",
        "--json",
        "--sandbox",
        "read-only",
        "--skip-git-repo-check",
    ]);
    args.extend(mock.provider_args());
    args.push("--version".into());
    let out = raw(&env, &args, None).await;
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("codex-cli-exec {}", under_test().number())),
        "{}",
        describe_output(&out)
    );
    assert_eq!(
        mock.responses_count(),
        1,
        "the unsafe form must not have reached the model"
    );
}

#[tokio::test]
async fn a_config_flag_smuggled_in_the_prompt_spawns_nothing_on_new_and_resumed_turns() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let m = marker(&env, "evil");
    let token = format!(
        "-cmcp_servers={{evil={{command=\"touch\",args=[\"{}\"]}}}}",
        m.display()
    );
    let big_task = format!("{token}\n{}", "please refactor everything. ".repeat(20_000));
    let c = common(&env, &mock);

    let first = run_spec(build_turn(&c, turn(&env, &big_task)).unwrap()).await;
    completed(&first);
    let mut req = turn(&env, &token);
    req.resume = first.thread_id;
    assert!(req.resume.is_some());
    let second = run_spec(build_turn(&c, req.clone()).unwrap()).await;
    completed(&second);
    assert_eq!(second.thread_id, first.thread_id);
    assert!(!m.exists(), "the smuggled MCP server ran");
    let reqs = mock.responses_requests();
    assert!(
        reqs[1].user_text_contains(&token),
        "the token must reach the model as text"
    );

    // the unsafe form: the token as a bare positional with the task on stdin runs `touch`
    let mut args = s(&[
        "exec",
        "--json",
        "--sandbox",
        "read-only",
        "--skip-git-repo-check",
    ]);
    args.extend(mock.provider_args());
    args.push(token.clone());
    let out = raw(&env, &args, Some("do the task")).await;
    assert!(
        m.exists(),
        "the unsafe form should have spawned the marker: {}",
        describe_output(&out)
    );
}

#[tokio::test]
async fn a_model_with_a_quote_stays_a_literal_model_name_and_a_newline_is_refused() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    // a newline never gets this far: the one model rule refuses it, naming the field
    let c = common(&env, &mock);
    let mut req = turn(&env, "hello");
    let err = ModelId::parse("model", "o3\"\nsandbox_mode=\"danger-full-access\"").unwrap_err();
    assert!(err.to_string().contains("model"), "{err}");
    // a quote passes the rule, and codex takes the whole value as the model's name
    let evil = "o3\"sandbox_mode=\"danger-full-access\"";
    req.model = Some(ModelId::parse("model", evil).unwrap());
    let first = run_spec(build_turn(&c, req.clone()).unwrap()).await;
    completed(&first);
    req.resume = first.thread_id;
    let second = run_spec(build_turn(&c, req.clone()).unwrap()).await;
    completed(&second);
    for r in mock.responses_requests() {
        assert_eq!(r.model(), Some(evil));
        assert!(
            r.body_contains(READ_ONLY_TEXT),
            "permissions text must say read-only"
        );
        assert!(!r.body_contains(DANGER_TEXT));
    }

    // the check can fail: a separate config token does change the level codex reports
    let mut args = s(&[
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-c",
        "sandbox_mode=\"danger-full-access\"",
    ]);
    args.extend(mock.provider_args());
    args.extend(s(&["--", "hi"]));
    let out = raw(&env, &args, None).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains(DANGER_TEXT)
    );
}

fn write_user_config(env: &TestEnv, text: &str) {
    std::fs::write(env.codex_home().join("config.toml"), text).unwrap();
}

/// What codex recorded for the last turn of `thread` (approval policy, reviewer, sandbox).
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

#[tokio::test]
async fn the_approvals_pin_holds_on_every_path_that_carries_other_config_tokens() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    write_user_config(&env, "approvals_reviewer = \"auto_review\"\n");
    let c = common(&env, &mock);

    let mut req = turn(&env, "first");
    req.model = Some(ModelId::parse("model", "gpt-5.5").unwrap());
    req.reasoning_effort = Some(ReasoningEffort::Low);
    let first = run_spec(build_turn(&c, req.clone()).unwrap()).await;
    completed(&first);
    let thread = first.thread_id.unwrap();
    assert_pinned(&recorded(&env, &thread), "read-only");
    req.resume = Some(thread);
    req.prompt = crate::support::bridge::prompt_of("second");
    completed(&run_spec(build_turn(&c, req.clone()).unwrap()).await);
    assert_pinned(&recorded(&env, &thread), "read-only");

    // query and search are ephemeral (no rollout): judge them on the request's permissions text
    let tmp = tempfile::tempdir_in(env.root()).unwrap();
    let one = OneShotRequest {
        prompt: crate::support::bridge::prompt_of("q"),
        model: Some(ModelId::parse("model", "gpt-5.5").unwrap()),
        reasoning_effort: Some(ReasoningEffort::Low),
        cwd: confine_dir(tmp.path()),
    };
    completed(&run_spec(build_query(&c, one.clone()).unwrap()).await);
    completed(&run_spec(build_search(&c, one.clone()).unwrap()).await);
    let reqs = mock.responses_requests();
    assert_eq!(reqs.len(), 4);
    for r in [&reqs[0], &reqs[2], &reqs[3]] {
        assert!(
            r.body_contains(APPROVAL_NEVER_TEXT),
            "lost the pin: {:?}",
            r.seq
        );
        assert!(!r.body_contains(AUTO_REVIEW_TEXT));
    }

    // the check can fail. The reference bridge's shape (pin before `resume`, effort after it):
    // codex 0.145.0 drops every parent-level `-c` when the deeper level carries one, so the pin
    // is lost and codex records approval on-request; codex 0.171.0 applies parent-level tokens
    // too, so that shape keeps the pin (codex closed this hole itself; the bridge still emits
    // every token at the deepest level, which holds on both)
    let mut args = s(&[
        "exec",
        "--json",
        "--sandbox",
        "read-only",
        "-c",
        "approvals_reviewer=\"user\"",
        "resume",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
        "-c",
        "model_reasoning_effort=\"low\"",
    ]);
    args.extend(mock.provider_args());
    args.extend([thread.to_arg(), "--".into(), "third".into()]);
    let out = raw(&env, &args, None).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let policy = recorded(&env, &thread).approval_policy;
    match under_test() {
        Codex::V0_145_0 => assert_eq!(policy, "on-request", "0.145.0 loses the parent-level pin"),
        Codex::V0_171_0 => assert_eq!(policy, "never", "0.171.0 keeps the parent-level pin"),
    }
    // on every version a resume without the pin loses it: the approval policy is not kept with
    // the thread
    let mut args = s(&[
        "exec",
        "--json",
        "--sandbox",
        "read-only",
        "resume",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
    ]);
    args.extend(mock.provider_args());
    args.extend([thread.to_arg(), "--".into(), "third again".into()]);
    let out = raw(&env, &args, None).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert_eq!(
        recorded(&env, &thread).approval_policy,
        "on-request",
        "a resume without the pin should lose it"
    );
    // and so does a new thread without the pin, visibly in the request
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
    args.extend(s(&["--", "fourth"]));
    let out = raw(&env, &args, None).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains(AUTO_REVIEW_TEXT)
    );
}

#[tokio::test]
async fn a_resumed_turn_without_a_level_runs_read_only_even_in_a_trusted_directory() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap();
    write_user_config(
        &env,
        &format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            work.display()
        ),
    );
    let c = common(&env, &mock);
    let mut req = turn(&env, "write things");
    req.model = Some(ModelId::parse("model", "gpt-5.5").unwrap());
    req.sandbox = Some(SandboxLevel::WorkspaceWrite);
    let first = run_spec(build_turn(&c, req.clone()).unwrap()).await;
    completed(&first);
    req.sandbox = None;
    req.resume = first.thread_id;
    let second = run_spec(build_turn(&c, req.clone()).unwrap()).await;
    completed(&second);
    let reqs = mock.responses_requests();
    assert!(reqs[0].body_contains(WORKSPACE_WRITE_TEXT));
    assert!(
        reqs[1].body_contains(READ_ONLY_TEXT),
        "resumed turn escalated"
    );

    // without a level, codex inherits workspace-write from the trust entry
    let mut args = s(&[
        "exec",
        "--json",
        "resume",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
    ]);
    args.extend(mock.provider_args());
    args.extend([first.thread_id.unwrap().to_arg(), "--".into(), "x".into()]);
    let out = raw(&env, &args, None).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains(WORKSPACE_WRITE_TEXT)
    );
}

#[tokio::test]
async fn review_values_that_look_like_flags_are_refused_or_bound_as_values() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let c = common(&env, &mock);
    let cwd = confine_dir(env.work());
    for (target, field) in [
        (ReviewTarget::Base("-x".into()), "`base`"),
        (
            ReviewTarget::Commit {
                sha: "-cfoo=bar".into(),
                title: None,
            },
            "`commit`",
        ),
    ] {
        let err = build_review(
            &c,
            &ReviewRequest {
                target,
                model: None,
                cwd: cwd.clone(),
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains(field), "{err}");
    }
    let sha = git(env.work(), &["rev-parse", "HEAD"]).trim().to_string();
    let spec = build_review(
        &c,
        &ReviewRequest {
            target: ReviewTarget::Commit {
                sha: sha.clone(),
                title: Some("--uncommitted".into()),
            },
            model: None,
            cwd,
        },
    )
    .unwrap();
    assert!(spec.args().contains(&"--title=--uncommitted".to_string()));
    let outcome = run_spec(spec).await;
    completed(&outcome);
    let r = &mock.responses_requests()[0];
    assert!(
        r.body_contains(&format!("commit {sha}")),
        "codex reviewed something else: {:?}",
        r.user_texts()
    );
    assert!(
        !r.body_contains("staged, unstaged, and untracked"),
        "the title acted as --uncommitted"
    );

    // the unsafe form: `--title --uncommitted` is not a value
    let mut args = s(&[
        "exec",
        "--sandbox",
        "workspace-write",
        "review",
        "--json",
        "--ephemeral",
        "--commit",
        &sha,
        "--title",
        "--uncommitted",
    ]);
    args.extend(mock.provider_args());
    let out = raw(&env, &args, None).await;
    assert!(
        !out.status.success()
            || mock
                .responses_requests()
                .last()
                .unwrap()
                .body_contains("staged, unstaged"),
        "{}",
        describe_output(&out)
    );
}

fn codex_pids_in(work: &Path) -> Vec<i32> {
    let bin = codex_bin().canonicalize().unwrap();
    pids_with_cmdline(work.to_str().unwrap())
        .into_iter()
        .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == bin))
        .collect()
}

#[tokio::test]
async fn codex_and_its_commands_see_only_the_allowlist_and_results_are_redacted() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let key = "sk-proj-PLANTEDsecretVALUE1234567890abcdefXYZ";
    let planted = [
        ("OPENAI_API_KEY", key),
        ("PLANTED_VAR", "planted-value-xyz"),
        (
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
    ];
    let mut c = common(&env, &mock);
    c.env = child_env(&env, &planted);
    assert!(!c.env.iter().any(|(k, _)| k == "PLANTED_VAR"));
    mock.push(Reply::exec_command("env; echo ENV_DONE"));
    mock.push(Reply::message(format!("the key is {key}")).with_delay(Duration::from_millis(1500)));
    let mut req = turn(&env, "print the environment");
    req.model = Some(ModelId::parse("model", "gpt-5.5").unwrap());
    req.sandbox = Some(SandboxLevel::WorkspaceWrite);
    let spec = build_turn(&c, req.clone()).unwrap();
    let work = env.work().canonicalize().unwrap();
    let handle = tokio::spawn(run_spec(spec));
    mock.wait_for_responses(2, LIMIT).await;
    let pids = codex_pids_in(&work);
    assert_eq!(pids.len(), 1, "one codex process expected: {pids:?}");
    let mut seen: Vec<String> = environ_of(pids[0]).into_iter().map(|(k, _)| k).collect();
    seen.sort();
    let mut allowed: Vec<String> = c.env.iter().map(|(k, _)| k.clone()).collect();
    allowed.sort();
    assert_eq!(
        seen, allowed,
        "codex's environment is exactly the filtered one"
    );
    assert!(
        seen.iter()
            .all(|k| ALLOWED_VARS.contains(&k.as_str()) || FORCED_VARS.iter().any(|(f, _)| f == k))
    );

    let outcome = handle.await.unwrap();
    completed(&outcome);
    let out = mock.responses_requests()[1].function_call_outputs();
    let text: String = out.iter().map(|(_, o)| o.as_str()).collect();
    assert!(text.contains("ENV_DONE"), "the command ran: {text}");
    assert!(text.contains("PATH="), "{text}");
    assert!(
        !text.contains(key) && !text.contains("PLANTED"),
        "a secret reached the model: {text}"
    );
    let msg = outcome.message.unwrap();
    assert!(!msg.contains(key) && msg.contains("[REDACTED]"), "{msg}");

    // the unsafe form: without the bridge's allowlist and pins both reach the command
    mock.push(Reply::exec_command("env; echo ENV_DONE"));
    mock.push(Reply::message("done").with_delay(Duration::from_millis(300)));
    let mut cmd = env.command(codex_bin());
    cmd.envs(planted.iter().map(|(k, v)| (*k, *v)));
    cmd.args(s(&[
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
    ]));
    cmd.args(mock.provider_args()).args(["--", "print env"]);
    let o = run_with_timeout(&mut cmd, LIMIT).await;
    assert!(o.status.success(), "{}", describe_output(&o));
    let reqs = mock.responses_requests();
    let leaked: String = reqs[reqs.len() - 1]
        .function_call_outputs()
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    assert!(
        leaked.contains(key) && leaked.contains("planted-value-xyz"),
        "{leaked}"
    );
}

/// A danger-full-access turn (operator-enabled) whose scripted tool command is `cmd`; the
/// model's next answer is `then`.
fn danger_turn(env: &TestEnv, mock: &MockApi, cmd: &str, then: Reply) -> SpawnSpec {
    let mut c = common(env, mock);
    c.allow_danger = true;
    mock.push(Reply::exec_command(cmd));
    mock.push(then);
    let mut req = turn(env, "start a job");
    req.model = Some(ModelId::parse("model", "gpt-5.5").unwrap());
    req.sandbox = Some(SandboxLevel::DangerFullAccess);
    build_turn(&c, req.clone()).unwrap()
}

/// Wait until a process whose command line starts with `prefix` runs.
async fn wait_for_process(prefix: &str) {
    let deadline = Instant::now() + LIMIT;
    while pids_with_cmdline_prefix(prefix).is_empty() {
        assert!(Instant::now() < deadline, "no process `{prefix}` appeared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kill every process matching `needle` (cleanup after a deliberately unsafe run).
fn kill_matching(needle: &str) {
    for p in pids_with_cmdline(needle) {
        // SAFETY: signals only.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
}

#[tokio::test]
async fn a_timeout_kills_codex_and_its_tool_commands_and_keeps_the_partial_state() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let sleep = own_sleep(987001);
    let spec = danger_turn(
        &env,
        &mock,
        &format!("{sleep}; echo done"),
        Reply::message("never sent"),
    );
    let mut opts = RunOptions::new(Duration::from_secs(3), Limits::default());
    opts.timeout_grace = Duration::from_millis(500);
    let started = Instant::now();
    let handle = tokio::spawn(run_spec_with(spec, opts));
    wait_for_process(&sleep).await;
    let outcome = handle.await.unwrap();
    assert_eq!(
        outcome.ending,
        Ending::TimedOut {
            after: Duration::from_secs(3)
        }
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(outcome.thread_id.is_some(), "partial state kept");
    assert!(matches!(
        turn_result(outcome.clone()),
        Err(Error::TimedOut { .. })
    ));
    let left = wait_no_process(&sleep, Duration::from_secs(1)).await;
    assert!(left.is_empty(), "the tool command survived: {left:?}");
    assert!(codex_pids_in(&env.work().canonicalize().unwrap()).is_empty());

    // the check can fail: killing only codex's process group leaves the tool command running
    let mock = MockApi::start().await;
    let bare_sleep = own_sleep(987003);
    mock.push(Reply::exec_command(&format!("{bare_sleep}; echo done")));
    let mut cmd = env.command(codex_bin());
    cmd.process_group(0);
    cmd.args(s(&[
        "exec",
        "--json",
        "--sandbox",
        "danger-full-access",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
    ]));
    cmd.args(mock.provider_args()).args(["--", "go"]);
    let child = cmd.spawn().unwrap();
    wait_for_process(&bare_sleep).await;
    // SAFETY: signals only.
    unsafe { libc::kill(-(child.id().unwrap() as i32), libc::SIGKILL) };
    let survivors = wait_no_process(&bare_sleep, Duration::from_millis(500)).await;
    kill_matching(&bare_sleep);
    assert!(
        !survivors.is_empty(),
        "expected the command to outlive a group kill"
    );
}

#[tokio::test]
async fn cancellation_kills_everything_within_a_second() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let sleep = own_sleep(987002);
    let spec = danger_turn(
        &env,
        &mock,
        &format!("{sleep}; echo done"),
        Reply::message("never sent"),
    );
    let opts = RunOptions::new(Duration::from_secs(60), Limits::default());
    let cancel = opts.cancel.clone();
    let handle = tokio::spawn(run_spec_with(spec, opts));
    wait_for_process(&sleep).await;
    let t = Instant::now();
    cancel.cancel();
    let outcome = handle.await.unwrap();
    assert_eq!(outcome.ending, Ending::Cancelled);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "cancel took {:?}",
        t.elapsed()
    );
    let left = wait_no_process(&sleep, Duration::from_millis(200)).await;
    assert!(left.is_empty(), "the tool command survived: {left:?}");
    assert!(codex_pids_in(&env.work().canonicalize().unwrap()).is_empty());
}

#[tokio::test]
async fn a_job_that_escapes_into_its_own_session_dies_with_the_turn() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let (escaped, bare_escaped) = (own_sleep(987004), own_sleep(987005));
    // the pause lets setsid detach before bash exits (codex kills the command's group then)
    let job = &format!("setsid {escaped} > /dev/null 2>&1 < /dev/null & sleep 0.5; echo started");
    let spec = danger_turn(
        &env,
        &mock,
        job,
        Reply::message("done").with_delay(Duration::from_millis(300)),
    );
    let outcome = run_spec(spec).await;
    completed(&outcome);
    let left = wait_no_process(&escaped, Duration::from_millis(500)).await;
    assert!(
        left.is_empty(),
        "the escaped job survived the turn: {left:?}"
    );

    // the check can fail: run bare, the escaped job outlives codex
    mock.push(Reply::exec_command(&job.replace(&escaped, &bare_escaped)));
    mock.push(Reply::message("done").with_delay(Duration::from_millis(300)));
    let mut cmd = env.command(codex_bin());
    cmd.args(s(&[
        "exec",
        "--json",
        "--sandbox",
        "danger-full-access",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
    ]));
    cmd.args(mock.provider_args()).args(["--", "go"]);
    let o = run_with_timeout(&mut cmd, LIMIT).await;
    assert!(o.status.success(), "{}", describe_output(&o));
    let survivors = pids_with_cmdline(&bare_escaped);
    kill_matching(&bare_escaped);
    assert!(
        !survivors.is_empty(),
        "expected the escaped job to outlive bare codex"
    );
}

#[tokio::test]
async fn a_missing_codex_binary_gives_the_install_hint() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut c = common(&env, &mock);
    c.program = env.root().join("no-such-codex");
    let spec = build_turn(&c, turn(&env, "hi")).unwrap();
    let err = codex_mcp_bridge::codex::process::run(
        spec,
        RunOptions::new(LIMIT, Limits::default()),
        |_| {},
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&format!(
            "npm install -g @openai/codex@{NEWEST_TESTED_CODEX_VERSION}"
        )) && err.contains("CODEX_BIN"),
        "{err}"
    );
}

#[tokio::test]
async fn a_repositorys_own_codex_config_never_loads_and_no_trust_entry_is_written() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let m = crate::support::bridge::repo_with_marker_server(&env, env.work());
    let c = common(&env, &mock);
    let mut req = turn(&env, "edit");
    req.sandbox = Some(SandboxLevel::WorkspaceWrite);
    let first = run_spec(build_turn(&c, req.clone()).unwrap()).await;
    completed(&first);
    req.sandbox = Some(SandboxLevel::ReadOnly);
    req.resume = first.thread_id;
    completed(&run_spec(build_turn(&c, req.clone()).unwrap()).await);
    let review = build_review(
        &c,
        &ReviewRequest {
            target: ReviewTarget::Uncommitted,
            model: None,
            cwd: confine_dir(env.work()),
        },
    )
    .unwrap();
    completed(&run_spec(review).await);
    assert!(!m.exists(), "the repository's MCP server started");
    let cfg = std::fs::read_to_string(env.codex_home().join("config.toml")).unwrap_or_default();
    assert!(
        !cfg.contains("trust_level"),
        "a trust entry was written: {cfg}"
    );

    // the unsafe forms. codex 0.145.0: a plain workspace-write run trusts the repository by
    // itself (writes a trust entry) and starts its server. codex 0.171.0 no longer trusts a
    // project by itself (it warns that project-local config is disabled and names `--trust`),
    // so the plain run starts nothing; a run with `--trust` does both. The bridge never passes
    // `--trust`, and its projects pin holds either way. (On 0.171.0 the turns above would hold
    // without the pin too; the next test, where the user trusts the repository, fails on both
    // versions without it.)
    let mut args = s(&[
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "--skip-git-repo-check",
    ]);
    args.extend(mock.provider_args());
    args.extend(s(&["--", "x"]));
    let out = raw(&env, &args, None).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let trusted = || {
        std::fs::read_to_string(env.codex_home().join("config.toml"))
            .unwrap_or_default()
            .contains("trust_level = \"trusted\"")
    };
    match under_test() {
        Codex::V0_145_0 => {
            assert!(trusted(), "0.145.0 should have trusted the repository");
        }
        Codex::V0_171_0 => {
            assert!(
                !m.exists(),
                "0.171.0 started the server of an untrusted repository"
            );
            assert!(!trusted(), "0.171.0 trusted the repository by itself");
            assert!(
                String::from_utf8_lossy(&out.stderr)
                    .contains("Untrusted project-local configuration is disabled"),
                "{}",
                describe_output(&out)
            );
            let mut args = s(&[
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "--trust",
                "--skip-git-repo-check",
            ]);
            args.extend(mock.provider_args());
            args.extend(s(&["--", "x"]));
            let out = raw(&env, &args, None).await;
            assert!(out.status.success(), "{}", describe_output(&out));
            assert!(trusted(), "`--trust` should have trusted the repository");
        }
    }
    assert!(
        m.exists(),
        "the unsafe form should have started the repository's server"
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
    write_user_config(
        &env,
        &format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            work.display()
        ),
    );
    let c = common(&env, &mock);
    let mut req = turn(&env, "look");
    req.cwd = confine_dir(&sub);
    for level in [SandboxLevel::ReadOnly, SandboxLevel::WorkspaceWrite] {
        req.sandbox = Some(level);
        completed(&run_spec(build_turn(&c, req.clone()).unwrap()).await);
    }
    assert!(!m.exists(), "the trusted repository's MCP server started");
}

#[test]
fn a_turn_outlives_idle_blocking_threads_because_codex_is_spawned_from_a_long_lived_thread() {
    // Blocking-pool threads here are reaped after 20 ms idle; codex's parent-death signal would
    // fire if it had been forked from one of them.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_keep_alive(Duration::from_millis(20))
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        mock.push(Reply::message("late").with_delay(Duration::from_millis(1500)));
        tokio::task::spawn_blocking(|| ()).await.unwrap();
        let outcome = run_spec(build_turn(&common(&env, &mock), turn(&env, "slow")).unwrap()).await;
        completed(&outcome);
        assert_eq!(outcome.message.as_deref(), Some("late"));
    });
}

#[tokio::test]
async fn usage_is_reported_per_turn_and_per_thread() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("one").with_usage(100, 10));
    mock.push(Reply::message("two").with_usage(150, 20));
    let c = common(&env, &mock);
    let first = run_spec(build_turn(&c, turn(&env, "a")).unwrap()).await;
    completed(&first);
    let t1 = first.thread_usage.unwrap();
    let mut req = turn(&env, "b");
    req.resume = first.thread_id;
    let mut opts = RunOptions::new(LIMIT, Limits::default());
    opts.prior_thread_usage = t1;
    let second = run_spec_with(build_turn(&c, req.clone()).unwrap(), opts).await;
    completed(&second);
    let t2 = second.thread_usage.unwrap();
    assert!(t2.input_tokens >= t1.input_tokens + 150, "{t1:?} {t2:?}");
    assert_eq!(second.turn_usage.unwrap(), t2.delta(&t1));
    assert_eq!(second.turn_usage.unwrap().output_tokens, 20);
}

#[tokio::test]
async fn a_failed_turn_is_classified_and_redacted() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::api_error(
        401,
        "Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123",
    ));
    let outcome = run_spec(build_turn(&common(&env, &mock), turn(&env, "a")).unwrap()).await;
    match &outcome.ending {
        Ending::Failed { kind, message } => {
            assert_eq!(
                *kind,
                codex_mcp_bridge::codex::events::FailureKind::Auth,
                "{message}"
            );
            assert!(
                !message.contains("abcdefghijklmnopqrstuvwxyz0123"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let _ = json!({});
}

//! The MCP surface end to end: rmcp's client over the built binary, the real codex, the mock.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp::{Protocol, Server, connect, connect_with, server_env, structured, text};
use crate::support::process::{alive, wait_exit};
use crate::support::{MockApi, Reply, TestEnv, git};

async fn both_protocols<F, Fut>(f: F)
where
    F: Fn(Protocol) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    f(Protocol::Legacy).await;
    f(Protocol::Modern).await;
}

#[tokio::test]
async fn tools_list_declares_every_tool_with_schemas_and_annotations() {
    both_protocols(|protocol| async move {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        let s = connect(&env, &mock, protocol).await;
        let tools = s.client.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, crate::support::mcp::TOOL_NAMES);
        for t in &tools {
            assert!(t.output_schema.is_some(), "{} has no outputSchema", t.name);
            let a = t
                .annotations
                .as_ref()
                .unwrap_or_else(|| panic!("{} has no annotations", t.name));
            assert!(
                a.title.is_some() && a.read_only_hint.is_some() && a.destructive_hint.is_some()
            );
            assert_eq!(
                t.input_schema.get("additionalProperties"),
                Some(&json!(false)),
                "{}",
                t.name
            );
        }
        let codex = tools.iter().find(|t| t.name == "codex").unwrap();
        let sandbox = &codex.input_schema["properties"]["sandbox"]["enum"];
        assert_eq!(
            sandbox,
            &json!(["read-only", "workspace-write", "full-auto"]),
            "danger is hidden unless enabled"
        );
        assert_eq!(codex.input_schema["required"], json!(["prompt"]));
        let info = s.client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, "codex-mcp-bridge");
        assert_eq!(
            info.server_info.as_ref().unwrap().version,
            env!("CARGO_PKG_VERSION")
        );
    })
    .await;
}

#[tokio::test]
async fn codex_runs_a_turn_and_resumes_it_by_session_id() {
    both_protocols(|protocol| async move {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        mock.push(Reply::message("first answer").with_usage(100, 7));
        mock.push(Reply::message("second answer").with_usage(150, 9));
        let s = connect(&env, &mock, protocol).await;
        let r = s
            .call(
                "codex",
                json!({"prompt": "remember KESTREL", "workingDirectory": env.work()}),
            )
            .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let v = structured(&r);
        assert_eq!(v["response"], "first answer");
        assert_eq!(v["resumed"], false);
        assert_eq!(v["sandbox"], "read-only");
        assert_eq!(v["approval"], "never");
        assert_eq!(v["approvalsReviewer"], "user");
        assert_eq!(v["policyVerified"], true);
        assert_eq!(v["usage"]["turn"]["output_tokens"], 7);
        let sid = v["sessionId"].as_str().unwrap().to_owned();
        let thread = v["threadId"].as_str().unwrap().to_owned();
        let r2 = s
            .call("codex", json!({"prompt": "what word?", "sessionId": sid}))
            .await;
        let v2 = structured(&r2);
        assert_eq!(v2["response"], "second answer", "{}", text(&r2));
        assert_eq!(v2["resumed"], true);
        assert_eq!(v2["threadId"], thread);
        assert_eq!(v2["usage"]["turn"]["output_tokens"], 9);
        assert!(mock.responses_requests()[1].body_contains("KESTREL"));
        let got = s.call("getSession", json!({"sessionId": sid})).await;
        assert_eq!(structured(&got)["session"]["turnCount"], 2);
        let list = s.call("listSessions", json!({})).await;
        assert_eq!(structured(&list)["sessions"].as_array().unwrap().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn bad_arguments_get_field_named_errors_and_the_server_stays_up() {
    both_protocols(bad_arguments_get_field_named_errors_and_the_server_stays_up_under).await;
}

async fn bad_arguments_get_field_named_errors_and_the_server_stays_up_under(protocol: Protocol) {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = connect(&env, &mock, protocol).await;
    let cases = [
        ("codex", json!({"prompt": 5}), "prompt"),
        ("codex", json!({}), "prompt"),
        ("codex", json!({"prompt": "x", "bogus": 1}), "bogus"),
        (
            "codex",
            json!({"prompt": "x", "sandbox": "root"}),
            "sandbox",
        ),
        (
            "codex",
            json!({"prompt": "x", "sandbox": "danger-full-access"}),
            "sandbox",
        ),
        (
            "codex",
            json!({"prompt": "x", "sessionId": "-bad"}),
            "sessionId",
        ),
        (
            "codex",
            json!({"prompt": "x", "workingDirectory": "/etc"}),
            "workingDirectory",
        ),
        (
            "codex",
            json!({"prompt": "x", "files": ["../../etc/passwd"]}),
            "files[0]",
        ),
        (
            "codex",
            json!({"prompt": "x", "reasoningEffort": "max"}),
            "reasoningEffort",
        ),
        ("codex", json!({"prompt": "x", "timeout": 0}), "timeout"),
        (
            "review",
            json!({"workingDirectory": env.work(), "mode": "base", "base": "-x"}),
            "base",
        ),
        (
            "review",
            json!({"workingDirectory": env.work(), "mode": "uncommitted", "title": "t"}),
            "title",
        ),
        (
            "structured",
            json!({"prompt": "x", "schema": "not json {"}),
            "schema",
        ),
        ("listSessions", json!({"limit": 0}), "limit"),
        ("getSession", json!({"sessionId": "a b"}), "sessionId"),
    ];
    for (tool, args, field) in cases {
        let r = s.call(tool, args.clone()).await;
        assert_eq!(r.is_error, Some(true), "{tool} {args}");
        let t = text(&r);
        assert!(t.contains(&format!("`{field}`")), "{tool} {args}: {t}");
    }
    assert_eq!(mock.responses_count(), 0, "nothing reached codex");
    let ping = s.call("ping", json!({})).await;
    assert_eq!(structured(&ping)["codexVersionMatches"], true);
    assert_eq!(structured(&ping)["codexVersionSupport"], "supported");
}

#[tokio::test]
async fn ping_says_whether_codex_is_supported_newer_than_tested_or_older_than_supported() {
    for (version, support, says) in [
        ("0.171.0", "supported", "(supported)"),
        (
            "0.172.0",
            "newer_than_tested",
            "WARNING: newer than the newest tested, 0.171.0",
        ),
        (
            "0.144.0",
            "older_than_supported",
            "ERROR: older than the oldest supported, 0.145.0",
        ),
    ] {
        // a store of its own each: the last server, still on its way out, would own a shared
        // one and answer with its codex
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        let fake = super::cli::fake_codex_answering(env.root(), version);
        let mut vars = server_env(&env, &mock);
        vars.retain(|(k, _)| k != "CODEX_BIN");
        vars.push(("CODEX_BIN".into(), fake.display().to_string()));
        let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
        let ping = s.call("ping", json!({})).await;
        let v = structured(&ping);
        assert_eq!(v["codexVersion"], format!("codex-cli {version}"), "{v}");
        assert_eq!(v["codexVersionSupport"], support, "{v}");
        assert_eq!(v["codexVersionMatches"], support == "supported", "{v}");
        assert_eq!(v["testedCodexVersion"], "0.171.0", "{v}");
        assert_eq!(v["oldestSupportedCodexVersion"], "0.145.0", "{v}");
        assert!(text(&ping).contains(says), "{}", text(&ping));
    }
}

#[tokio::test]
async fn progress_notifications_say_what_codex_does_during_a_slow_turn() {
    both_protocols(progress_notifications_say_what_codex_does_during_a_slow_turn_under).await;
}

async fn progress_notifications_say_what_codex_does_during_a_slow_turn_under(protocol: Protocol) {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::exec_command("echo working"));
    mock.push(Reply::message("done").with_delay(Duration::from_millis(2500)));
    let mut vars = server_env(&env, &mock);
    vars.push(("CODEX_BRIDGE_HEARTBEAT_MS".into(), "500".into()));
    let s = connect_with(&vars, env.root(), protocol).await;
    let r = s
        .call(
            "codex",
            json!({"prompt": "run it", "model": "gpt-5.5", "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let p = s.progress.lock().unwrap().clone();
    let messages: Vec<String> = p.iter().filter_map(|n| n.message.clone()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("running: ") && m.contains("echo working")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("elapsed")),
        "a heartbeat while the mock delays: {messages:?}"
    );
    let values: Vec<f64> = p.iter().map(|n| n.progress).collect();
    assert!(
        values.windows(2).all(|w| w[1] > w[0]),
        "strictly increasing: {values:?}"
    );
}

/// `structured`'s re-ask is one call: its progress keeps increasing across both attempts (MCP
/// requires it), and the "asking once more" notice reaches the client.
#[tokio::test]
async fn structured_progress_increases_across_the_reask_and_announces_it() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(
        Reply::message("{\"answer\": \"not a number\"}").with_delay(Duration::from_millis(1200)),
    );
    mock.push(Reply::message("{\"answer\": 42}").with_delay(Duration::from_millis(1200)));
    let mut vars = server_env(&env, &mock);
    vars.push(("CODEX_BRIDGE_HEARTBEAT_MS".into(), "300".into()));
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let schema = json!({"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"],"additionalProperties":false});
    let st = s
        .call(
            "structured",
            json!({"prompt": "the answer?", "schema": schema}),
        )
        .await;
    assert_eq!(st.is_error, Some(false), "{}", text(&st));
    assert_eq!(structured(&st)["data"], json!({"answer": 42}));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let p = s.progress.lock().unwrap().clone();
    let messages: Vec<String> = p.iter().filter_map(|n| n.message.clone()).collect();
    assert!(
        messages.iter().any(|m| m.contains("asking once more")),
        "the re-ask is announced: {messages:?}"
    );
    let values: Vec<f64> = p.iter().map(|n| n.progress).collect();
    assert!(
        values.windows(2).all(|w| w[1] > w[0]),
        "strictly increasing across both attempts: {values:?}"
    );
}

fn codex_children(server_pid: u32) -> Vec<i32> {
    codex_mcp_bridge::codex::process::descendants(server_pid as i32)
}

#[tokio::test]
async fn a_cancelled_call_kills_codex_frees_its_slot_and_the_session_resumes() {
    both_protocols(a_cancelled_call_kills_codex_frees_its_slot_and_the_session_resumes_under).await;
}

async fn a_cancelled_call_kills_codex_frees_its_slot_and_the_session_resumes_under(
    protocol: Protocol,
) {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("first"));
    mock.push(Reply::hang());
    let s = connect_with(
        &crate::support::mcp::no_spare(server_env(&env, &mock)),
        env.root(),
        protocol,
    )
    .await;
    let r = s
        .call(
            "codex",
            json!({"prompt": "one", "workingDirectory": env.work()}),
        )
        .await;
    let sid = structured(&r)["sessionId"].as_str().unwrap().to_owned();
    let params = rmcp::model::CallToolRequestParams::new("codex").with_arguments(
        json!({"prompt": "hang", "sessionId": sid})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let call = s.client.call_tool(params);
    let cancelled = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::select! {
            _ = call => panic!("the hanging call returned"),
            _ = mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30)) => {}
        }
    })
    .await;
    assert!(cancelled.is_ok());
    // dropping the call future sent notifications/cancelled
    let t = Instant::now();
    mock.wait_for_in_flight(|n| n == 0, Duration::from_secs(2))
        .await;
    let deadline = Instant::now() + Duration::from_secs(1);
    while !codex_children(s.pid).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        codex_children(s.pid).is_empty(),
        "codex still running {:?} after cancel",
        t.elapsed()
    );
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "cancel took {:?}",
        t.elapsed()
    );
    let ping = s.call("ping", json!({})).await;
    assert_eq!(structured(&ping)["activeTurns"], 0, "slot freed");
    let r3 = s
        .call("codex", json!({"prompt": "three", "sessionId": sid}))
        .await;
    assert_eq!(structured(&r3)["resumed"], true, "{}", text(&r3));
}

#[tokio::test]
async fn query_search_review_and_structured_work_end_to_end() {
    both_protocols(query_search_review_and_structured_work_end_to_end_under).await;
}

async fn query_search_review_and_structured_work_end_to_end_under(protocol: Protocol) {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let s = connect(&env, &mock, protocol).await;

    mock.push(Reply::message("4"));
    let q = s
        .call("query", json!({"prompt": "2+2?", "context": "arithmetic"}))
        .await;
    assert_eq!(structured(&q)["response"], "4", "{}", text(&q));
    let req = mock.responses_requests().pop().unwrap();
    assert!(req.user_text_contains("arithmetic") && req.user_text_contains("2+2?"));

    mock.push(Reply::message("the web says hi"));
    let sr = s
        .call(
            "search",
            json!({"query": "rust 2024 edition", "model": "gpt-5.5"}),
        )
        .await;
    assert_eq!(
        structured(&sr)["response"],
        "the web says hi",
        "{}",
        text(&sr)
    );
    let req = mock.responses_requests().pop().unwrap();
    let tools = req.tools();
    assert!(
        tools
            .iter()
            .any(|t| t["type"] == "web_search" && t["external_web_access"] == true),
        "live web search offered: {tools:?}"
    );

    std::fs::write(env.work().join("README.md"), "changed\n").unwrap();
    mock.push(Reply::message(
        "Looks risky.\n\nReview comment:\n\n- [P1] Broke the readme — README.md:1-1\n  It changed.",
    ));
    let rv = s
        .call("review", json!({"workingDirectory": env.work()}))
        .await;
    let v = structured(&rv);
    assert_eq!(v["findings"][0]["priority"], "P1", "{}", text(&rv));
    assert_eq!(v["sandbox"], "workspace-write");
    let _ = git(env.work(), &["status"]);

    let schema = json!({"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"],"additionalProperties":false});
    mock.push(Reply::message("{\"answer\": \"not a number\"}"));
    mock.push(Reply::message("{\"answer\": 42}"));
    let st = s
        .call(
            "structured",
            json!({"prompt": "the answer?", "schema": schema}),
        )
        .await;
    assert_eq!(st.is_error, Some(false), "{}", text(&st));
    assert_eq!(structured(&st)["data"], json!({"answer": 42}));
    let reqs = mock.responses_requests();
    let first = &reqs[reqs.len() - 2];
    assert!(
        first.body_contains("\"answer\""),
        "the schema went to the model as structured output"
    );
    let reask = reqs.last().unwrap();
    assert!(
        reask.user_text_contains("did not validate"),
        "re-asked in the same thread"
    );
}

#[tokio::test]
async fn a_non_json_input_line_does_not_kill_the_server() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut cmd = tokio::process::Command::new(crate::support::mcp::server_bin());
    cmd.env_clear()
        .envs(server_env(&env, &mock))
        .current_dir(env.root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "this is not json at all",
        "{\"half\": ",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ping","arguments":{}}}"#,
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut got_ping = false;
    while let Ok(Ok(Some(l))) = tokio::time::timeout(Duration::from_secs(20), out.next_line()).await
    {
        let v: Value = serde_json::from_str(&l).expect("stdout carries only JSON-RPC");
        if v["id"] == 2 {
            got_ping = v["result"]["structuredContent"]["codexFound"] == true;
            break;
        }
    }
    assert!(got_ping, "the server answered after garbage input");
}

/// SIGKILL the server and wait until every thread of it has exited (a zombie leader can still
/// have threads finishing a system call, and they hold the process's files until they are done).
pub(super) async fn kill_and_forget(s: Server) {
    let pid = s.pid;
    s.kill();
    wait_exit(pid).await;
    drop(s);
}

#[tokio::test]
async fn a_session_survives_a_sigkill_of_the_server_between_turns() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = connect(&env, &mock, Protocol::Legacy).await;
    let r = s.call("codex", json!({"prompt": "remember OSPREY", "sessionId": "durable", "workingDirectory": env.work()})).await;
    let thread = structured(&r)["threadId"].clone();
    kill_and_forget(s).await;
    let s2 = connect(&env, &mock, Protocol::Legacy).await;
    let r2 = s2
        .call(
            "codex",
            json!({"prompt": "which bird?", "sessionId": "durable"}),
        )
        .await;
    let v = structured(&r2);
    assert_eq!(v["resumed"], true, "{}", text(&r2));
    assert_eq!(v["threadId"], thread);
    assert!(
        mock.responses_requests()[1].body_contains("OSPREY"),
        "the mock sees the first turn's history"
    );
}

#[tokio::test]
async fn a_sigkill_mid_turn_leaves_no_codex_and_the_turn_is_marked_interrupted() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("before"));
    mock.push(Reply::hang());
    let s = connect(&env, &mock, Protocol::Legacy).await;
    s.call(
        "codex",
        json!({"prompt": "one", "sessionId": "crash", "workingDirectory": env.work()}),
    )
    .await;
    let params = rmcp::model::CallToolRequestParams::new("codex").with_arguments(
        json!({"prompt": "hang", "sessionId": "crash"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let client = &s.client;
    tokio::select! {
        _ = client.call_tool(params) => panic!("returned"),
        _ = mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30)) => {}
    }
    let codex = codex_children(s.pid);
    assert!(!codex.is_empty());
    kill_and_forget(s).await;
    // the parent-death signal kills codex with the server
    let deadline = Instant::now() + Duration::from_secs(3);
    while codex.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !codex.iter().any(|p| alive(*p)),
        "codex outlived the server"
    );
    let s2 = connect(&env, &mock, Protocol::Legacy).await;
    let got = s2.call("getSession", json!({"sessionId": "crash"})).await;
    assert_eq!(
        structured(&got)["session"]["lastStatus"],
        "interrupted",
        "{}",
        text(&got)
    );
    let r = s2
        .call("codex", json!({"prompt": "again", "sessionId": "crash"}))
        .await;
    assert_eq!(structured(&r)["resumed"], true, "{}", text(&r));
}

#[tokio::test]
async fn the_model_an_operator_override_chose_is_the_sessions_model() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut vars = server_env(&env, &mock);
    for (k, v) in vars.iter_mut() {
        if k == "CODEX_BRIDGE_CODEX_CONFIG" {
            v.push_str("\nmodel=\"operator-model-x\"");
        }
    }
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let r = s
        .call(
            "codex",
            json!({"prompt": "hi", "sessionId": "m1", "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(
        mock.responses_requests()[0].model(),
        Some("operator-model-x")
    );
    assert_eq!(structured(&r)["model"], "operator-model-x");
    let got = s.call("getSession", json!({"sessionId": "m1"})).await;
    assert_eq!(structured(&got)["session"]["model"], "operator-model-x");
    let list = s.call("listSessions", json!({})).await;
    assert_eq!(
        structured(&list)["sessions"][0]["model"],
        "operator-model-x"
    );
    // a model asked for on a call is the one codex runs, and then the session's
    let r = s
        .call(
            "codex",
            json!({"prompt": "again", "sessionId": "m1", "model": "asked-model-y"}),
        )
        .await;
    assert_eq!(structured(&r)["model"], "asked-model-y", "{}", text(&r));
    let got = s.call("getSession", json!({"sessionId": "m1"})).await;
    assert_eq!(structured(&got)["session"]["model"], "asked-model-y");
}

#[tokio::test]
async fn the_clients_roots_choose_the_default_working_directory_inside_the_allowed_roots() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap();
    let (a, b) = (work.join("a"), work.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    // a directory outside the operator's roots (the test root)
    let outside_dir = tempfile::Builder::new()
        .prefix("outside-")
        .tempdir_in(crate::support::test_work_dir())
        .unwrap();
    let outside = outside_dir.path().canonicalize().unwrap();
    let uri = |p: &std::path::Path| url::Url::from_file_path(p).unwrap().to_string();
    let roots = crate::support::mcp::ClientRoots::default();
    *roots.uris.lock().unwrap() = vec![
        uri(&outside),
        "https://example.com/x".into(),
        uri(&a),
        uri(&b),
    ];
    let s = crate::support::mcp::connect_with_roots(&env, &mock, roots.clone()).await;

    let dir_of = |id: &'static str| {
        let s = &s;
        async move {
            let r = s
                .call(
                    "codex",
                    json!({"prompt": format!("where {id}"), "sessionId": id}),
                )
                .await;
            assert_eq!(r.is_error, Some(false), "{}", text(&r));
            let got = s.call("getSession", json!({"sessionId": id})).await;
            structured(&got)["session"]["workingDirectory"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    // the first client root inside the allowed roots; the one outside is ignored
    assert_eq!(dir_of("r1").await, a.display().to_string());
    assert!(roots.asked() >= 1);
    let last = mock.responses_requests().pop().unwrap();
    assert!(
        last.user_text_contains(&a.display().to_string()),
        "the inner codex ran in the client's root: {:?}",
        last.user_texts()
    );

    // the client's roots change: the server asks again
    let changed = |uris: Vec<String>| {
        let (s, roots) = (&s, roots.clone());
        async move {
            let before = roots.asked();
            *roots.uris.lock().unwrap() = uris;
            s.client.notify_roots_list_changed().await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while roots.asked() == before {
                assert!(
                    Instant::now() < deadline,
                    "the server asks for the roots again"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    changed(vec![uri(&b)]).await;
    assert_eq!(dir_of("r2").await, b.display().to_string());

    // no client root inside the allowed roots: the first allowed root, as without roots
    changed(vec![uri(&outside)]).await;
    assert_eq!(
        dir_of("r3").await,
        env.root().canonicalize().unwrap().display().to_string()
    );
    // an explicit workingDirectory still wins, and the operator's roots still bind it
    let r = s
        .call("codex", json!({"prompt": "x", "workingDirectory": outside}))
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
}

/// The `structured` answer is redacted as every other answer is: codex writes it to a file,
/// which was read back and returned as it was (text and `data`), so a secret the model put in
/// its answer came back in clear, with the host's own secret-named variables and patterns
/// alike.
#[tokio::test]
async fn a_structured_answer_is_redacted() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    // not shaped like any known secret: only the literal value can find it
    const SERVICE: &str = "zebra-lantern-mosaic-4417";
    // shaped like a GitHub token: the patterns find it
    let pattern = format!("ghp_{}", "a1B2c3D4e5".repeat(4));
    let mut vars = server_env(&env, &mock);
    vars.push(("MY_SERVICE_TOKEN".into(), SERVICE.into()));
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let schema = json!({"type":"object","properties":{"answer":{"type":"string"},"other":{"type":"string"}},"required":["answer","other"],"additionalProperties":false});
    mock.push(Reply::message(format!(
        "{{\"answer\": \"{SERVICE}\", \"other\": \"{pattern}\"}}"
    )));
    let st = s
        .call(
            "structured",
            json!({"prompt": "the service?", "schema": schema}),
        )
        .await;
    assert_eq!(st.is_error, Some(false), "{}", text(&st));
    let all = format!("{st:?}");
    assert!(!all.contains(SERVICE), "{all}");
    assert!(!all.contains(&pattern), "{all}");
    assert_eq!(
        structured(&st)["data"],
        json!({"answer": "[REDACTED]", "other": "[REDACTED]"})
    );
}

/// The paths of the files a turn changed are redacted as the rest of its answer is (a file
/// the model names after a secret came back in clear in `filesChanged`).
#[tokio::test]
async fn changed_file_names_are_redacted() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    const SERVICE: &str = "zebra-lantern-mosaic-4417";
    let mut vars = server_env(&env, &mock);
    vars.push(("MY_SERVICE_TOKEN".into(), SERVICE.into()));
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    mock.push_for_user_text(
        "P-FILES",
        Reply::exec_command(&format!(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {SERVICE}.txt\n+hello\n*** End Patch\nEOF"
        )),
    );
    mock.push_for_user_text("P-FILES", Reply::message("done"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "P-FILES", "model": "gpt-5.5", "workingDirectory": env.work(), "sandbox": "workspace-write"}),
        )
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let files = structured(&r)["filesChanged"].clone();
    assert_eq!(files.as_array().map(Vec::len), Some(1), "{}", text(&r));
    let all = format!("{r:?}");
    assert!(!all.contains(SERVICE), "{all}");
}

//! `query`, `search` and `structured` on the app-server backend, through a real MCP client
//! (rmcp's) and the real codex: each runs as an ephemeral thread on a warm `codex app-server`
//! of its client context (never `codex exec`), nothing of a call is kept for the next, `query`
//! runs in a fresh empty directory, a cancel kills within a second, a process whose turn did
//! not complete is never used again, and another client context gets a process of its own.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp::{Protocol, Server, connect_with, server_env, structured, text};
use crate::support::process::{alive, is_app_server, is_bridge_app_server};
use crate::support::{MockApi, Reply, TestEnv};

/// The bridge with the backend `backend` and `extra` settings.
async fn server_with(
    env: &TestEnv,
    mock: &MockApi,
    backend: &str,
    extra: &[(&str, &str)],
) -> Server {
    let mut vars = server_env(env, mock);
    vars.retain(|(k, _)| k != "CODEX_BRIDGE_BACKEND");
    vars.push(("CODEX_BRIDGE_BACKEND".into(), backend.into()));
    for (k, v) in extra {
        vars.push(((*k).into(), (*v).into()));
    }
    connect_with(&vars, env.root(), Protocol::Legacy).await
}

/// The codex processes under `pid`, each with its command line.
fn codex_children(pid: u32) -> Vec<(i32, Vec<String>)> {
    codex_mcp_bridge::codex::process::descendants(pid as i32)
        .into_iter()
        .filter_map(|p| {
            let raw = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let is_codex = args
                .first()
                .is_some_and(|a| a.ends_with("/codex") || a == "codex");
            is_codex.then_some((p, args))
        })
        .collect()
}

/// The server's `codex app-server` children, sorted.
fn app_servers(pid: u32) -> Vec<i32> {
    let mut v: Vec<i32> = codex_mcp_bridge::codex::process::descendants(pid as i32)
        .into_iter()
        .filter(|p| is_bridge_app_server(*p))
        .collect();
    v.sort_unstable();
    v
}

/// What kinds of codex child ran while `call` ran: (`exec` seen, app-server pids seen).
async fn watch_children<F: std::future::Future>(
    pid: u32,
    call: F,
) -> (F::Output, bool, BTreeSet<i32>) {
    let mut exec = false;
    let mut servers = BTreeSet::new();
    tokio::pin!(call);
    loop {
        tokio::select! {
            out = &mut call => return (out, exec, servers),
            _ = tokio::time::sleep(Duration::from_millis(15)) => {
                for (p, args) in codex_children(pid) {
                    if args.iter().any(|a| a == "exec") {
                        exec = true;
                    }
                    if is_bridge_app_server(p) {
                        servers.insert(p);
                    }
                }
            }
        }
    }
}

fn schema() -> Value {
    json!({"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"],"additionalProperties":false})
}

/// The three tools' calls, each answered by the mock after a delay long enough to see its
/// process.
async fn call_each(s: &Server, mock: &MockApi) -> Vec<(&'static str, bool, BTreeSet<i32>)> {
    let slow = |r: Reply| r.with_delay(Duration::from_millis(600));
    let mut seen = Vec::new();
    for (tool, args, reply) in [
        ("query", json!({"prompt": "2+2?"}), Reply::message("4")),
        ("search", json!({"query": "rust"}), Reply::message("found")),
        (
            "structured",
            json!({"prompt": "the answer?", "schema": schema()}),
            Reply::message("{\"answer\": 42}"),
        ),
    ] {
        // a blank prompt is refused naming the tool's own argument, before anything runs
        let key = if tool == "search" { "query" } else { "prompt" };
        let mut blank = args.clone();
        blank[key] = json!(" \n");
        let r = s.call(tool, blank).await;
        assert!(
            r.is_error == Some(true)
                && text(&r).starts_with(&format!("invalid argument `{key}`: must not be empty")),
            "{tool}: {}",
            text(&r)
        );
        // and so is one past the limit
        let mut huge = args.clone();
        huge[key] = json!("x".repeat(codex_mcp_bridge::codex::argv::MAX_PROMPT_BYTES + 1));
        let r = s.call(tool, huge).await;
        assert!(
            r.is_error == Some(true)
                && text(&r).starts_with(&format!("invalid argument `{key}`: is larger than")),
            "{tool}: {}",
            &text(&r)[..text(&r).len().min(200)]
        );
        mock.push(slow(reply));
        let (r, exec, servers) = watch_children(s.pid, s.call(tool, args)).await;
        assert!(r.is_error != Some(true), "{tool}: {}", text(&r));
        // the ones this call started (the earlier calls' stay, idle)
        let earlier: BTreeSet<i32> = seen
            .iter()
            .flat_map(|(_, _, s): &(_, _, BTreeSet<i32>)| s.iter().copied())
            .collect();
        seen.push((tool, exec, servers.difference(&earlier).copied().collect()));
    }
    seen
}

/// (a) On the app-server backend, the three tools run on a warm app-server, never `codex
/// exec`; the next call of the same kind runs on the same process. The exec backend, on the
/// same calls, runs `codex exec` (the control: the watch sees an exec child when there is one).
#[tokio::test]
async fn query_search_and_structured_run_on_a_warm_app_server_not_codex_exec() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = server_with(&env, &mock, "app-server", &[]).await;
    let seen = call_each(&s, &mock).await;
    for (tool, exec, servers) in &seen {
        assert!(!exec, "{tool} ran codex exec");
        assert!(!servers.is_empty(), "{tool} ran on no app-server");
    }
    // each kind on a process of its own (web search is on only in search's)
    let all = app_servers(s.pid);
    assert_eq!(all.len(), 3, "{seen:?} {all:?}");
    // warm: the next calls start no process
    for (tool, args) in [
        ("query", json!({"prompt": "2+3?"})),
        ("search", json!({"query": "go"})),
        (
            "structured",
            json!({"prompt": "again?", "schema": schema()}),
        ),
    ] {
        mock.push(Reply::message("{\"answer\": 5}").with_delay(Duration::from_millis(600)));
        let (r, exec, servers) = watch_children(s.pid, s.call(tool, args)).await;
        assert!(r.is_error != Some(true), "{}", text(&r));
        assert!(!exec);
        assert_eq!(
            servers.into_iter().collect::<Vec<_>>(),
            all,
            "the next {tool} ran on a warm process"
        );
    }
    let ping = s.call("ping", json!({})).await;
    assert_eq!(structured(&ping)["backend"]["effective"], "app-server");

    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = server_with(&env, &mock, "exec", &[]).await;
    for (tool, exec, servers) in call_each(&s, &mock).await {
        assert!(exec, "{tool} on the exec backend ran no codex exec");
        assert!(
            servers.is_empty(),
            "{tool} on the exec backend ran an app-server"
        );
    }
}

/// Every file under `dir` whose name ends in `.jsonl` (codex's rollouts).
fn rollouts(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    out
}

/// (b) Nothing of a call is kept: no thread is written to codex's sessions directory, and the
/// next call on the same warm process starts from nothing (the model sees neither the first
/// call's prompt nor its answer).
#[tokio::test]
async fn nothing_of_a_one_shot_call_is_kept_for_the_next() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = server_with(&env, &mock, "app-server", &[]).await;
    for (tool, args) in [
        ("query", json!({"prompt": "remember HERON-4417"})),
        (
            "structured",
            json!({"prompt": "remember HERON-4417", "schema": schema()}),
        ),
        ("search", json!({"query": "remember HERON-4417"})),
    ] {
        mock.push(Reply::message("{\"answer\": 7} PLOVER-2290"));
        let r = s.call(tool, args.clone()).await;
        assert!(r.is_error != Some(true), "{tool}: {}", text(&r));
        let first = app_servers(s.pid);
        let mut second = args.clone();
        let key = if tool == "search" { "query" } else { "prompt" };
        second[key] = json!("what did I ask before?");
        mock.push(Reply::message("{\"answer\": 8}"));
        let r = s.call(tool, second).await;
        assert!(r.is_error != Some(true), "{tool}: {}", text(&r));
        assert_eq!(app_servers(s.pid), first, "{tool}: the same warm processes");
        let req = mock.responses_requests().pop().unwrap();
        assert!(req.user_text_contains("what did I ask before?"));
        assert!(
            !req.body_contains("HERON-4417") && !req.body_contains("PLOVER-2290"),
            "{tool}: the second call saw the first one's conversation"
        );
    }
    let kept = rollouts(&env.codex_home().join("sessions"));
    assert!(kept.is_empty(), "threads were persisted: {kept:?}");
}

/// The `<cwd>` codex told the model in a request.
fn cwd_of(req: &crate::support::RecordedRequest) -> String {
    let texts = req.user_texts().join("\n");
    let start = texts.find("<cwd>").expect("codex names the cwd") + "<cwd>".len();
    let end = texts[start..].find("</cwd>").unwrap() + start;
    texts[start..end].to_owned()
}

/// (c) A `query` runs in a fresh empty directory (a new one each call, with nothing in it,
/// neither the server's directory nor the warm process's own), on the warm process.
#[tokio::test]
async fn each_query_runs_in_a_fresh_empty_directory() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = server_with(&env, &mock, "app-server", &[]).await;
    let mut cwds = Vec::new();
    let mut servers = BTreeSet::new();
    for _ in 0..2 {
        mock.push_all([
            Reply::exec_command("ls -A; echo LISTED"),
            Reply::message("looked"),
        ]);
        let r = s
            .call(
                "query",
                json!({"prompt": "what is here?", "model": "gpt-5.5"}),
            )
            .await;
        assert!(r.is_error != Some(true), "{}", text(&r));
        servers.extend(app_servers(s.pid));
        let reqs = mock.responses_requests();
        let (ask, back) = (&reqs[reqs.len() - 2], &reqs[reqs.len() - 1]);
        let cwd = cwd_of(ask);
        let listing = back
            .function_call_outputs()
            .pop()
            .expect("the command's output went back")
            .1;
        let shown = listing
            .rsplit_once("Output:")
            .map_or(listing.as_str(), |(_, o)| o);
        assert_eq!(
            shown.trim(),
            "LISTED",
            "the directory was not empty: {listing}"
        );
        cwds.push(cwd);
    }
    assert_eq!(
        servers.len(),
        1,
        "both ran on one warm process: {servers:?}"
    );
    assert_ne!(cwds[0], cwds[1], "each query has a directory of its own");
    for c in &cwds {
        let p = std::path::Path::new(c);
        assert!(!p.starts_with(env.root()), "{c}");
        assert!(!p.exists(), "the query's directory outlived it: {c}");
        let home = std::fs::read_link(format!("/proc/{}/cwd", servers.first().unwrap())).unwrap();
        assert_ne!(p, home, "the query ran in the process's own directory");
    }
}

/// (d) Cancelling a `query` kills its app-server (and everything it started) within a second;
/// the next one runs on a new process.
#[tokio::test]
async fn cancelling_a_one_shot_kills_its_app_server_within_a_second() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = server_with(&env, &mock, "app-server", &[]).await;
    mock.push(Reply::message("warm"));
    let r = s.call("query", json!({"prompt": "warm up"})).await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let before = app_servers(s.pid);
    assert_eq!(before.len(), 1);
    mock.push(Reply::hang());
    let params = rmcp::model::CallToolRequestParams::new("query")
        .with_arguments(json!({"prompt": "hang"}).as_object().cloned().unwrap());
    let call = s.client.call_tool(params);
    let reached = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::select! {
            _ = call => panic!("the hanging call returned"),
            _ = mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(60)) => {}
        }
    })
    .await;
    assert!(reached.is_ok(), "the query reached the model");
    // dropping the call future sent notifications/cancelled
    let t = Instant::now();
    while before.iter().any(|p| alive(*p)) && t.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = t.elapsed();
    assert!(
        !before.iter().any(|p| alive(*p)),
        "the app-server survived the cancel"
    );
    assert!(took < Duration::from_millis(1500), "cancel took {took:?}");
    mock.push(Reply::message("after"));
    let r = s.call("query", json!({"prompt": "again"})).await;
    assert_eq!(structured(&r)["response"], "after", "{}", text(&r));
    let after = app_servers(s.pid);
    assert_eq!(after.len(), 1);
    assert!(before.iter().all(|p| !after.contains(p)));
}

/// A process whose turn failed is never used again: the next call gets a new one.
#[tokio::test]
async fn a_one_shot_process_whose_turn_failed_is_replaced() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = server_with(&env, &mock, "app-server", &[]).await;
    mock.push(Reply::message("fine"));
    let r = s.call("query", json!({"prompt": "one"})).await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let first = app_servers(s.pid);
    assert_eq!(first.len(), 1);
    // codex gives up on a request the API refuses for good
    mock.push(Reply::http_error(
        400,
        "{\"error\":{\"message\":\"refused for the test\"}}",
    ));
    let r = s.call("query", json!({"prompt": "two"})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    mock.push(Reply::message("fresh"));
    let r = s.call("query", json!({"prompt": "three"})).await;
    assert_eq!(structured(&r)["response"], "fresh", "{}", text(&r));
    let now = app_servers(s.pid);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(
        now, first,
        "the process of the failed turn ran the next call"
    );
}

/// (e) Another client context gets an app-server of its own: a client's idle process never
/// serves another's call, while it serves its own client's next call. Each process is on
/// record for the crash sweep while it lives, and shutdown closes both.
#[tokio::test]
async fn each_client_context_gets_its_own_one_shot_app_server() {
    use codex_mcp_bridge::actors::{OneShot, OneShotCall};
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.set_default(Reply::message("ok"));
    let bridge = crate::support::bridge::start_warm_bridge(&env, &mock).await;
    let (a, b) = (
        bridge.own_context().clone(),
        std::sync::Arc::new(bridge.shared().own_context()),
    );
    assert_ne!(a.id, b.id);
    let ask = |client: std::sync::Arc<codex_mcp_bridge::actors::ClientContext>| {
        let bridge = bridge.clone();
        async move {
            let answer = bridge
                .one_shot(OneShotCall {
                    request: OneShot::Query {
                        prompt: crate::support::bridge::prompt_of("hi"),
                        context: None,
                        model: None,
                        reasoning_effort: None,
                    },
                    timeout: Duration::from_secs(120),
                    cancel: tokio_util::sync::CancellationToken::new(),
                    progress: None,
                    client,
                })
                .await
                .unwrap();
            assert!(answer.error.is_none(), "{:?}", answer.error);
            // the process goes back to the pool once the call has answered
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    let recorded = || -> BTreeSet<i32> {
        bridge
            .shared()
            .store()
            .inflight()
            .unwrap()
            .into_iter()
            .map(|(_, t)| t.pid)
            .collect()
    };
    ask(a.clone()).await;
    let first = recorded();
    assert_eq!(first.len(), 1, "{first:?}");
    ask(b.clone()).await;
    let both = recorded();
    assert_eq!(
        both.len(),
        2,
        "the other client got a process of its own: {both:?}"
    );
    ask(a.clone()).await;
    ask(b.clone()).await;
    assert_eq!(
        recorded(),
        both,
        "each client's next call ran on its own process"
    );
    for p in &both {
        assert!(is_app_server(*p) && alive(*p));
    }
    bridge.shutdown().await;
    assert!(
        !both.iter().any(|p| alive(*p)),
        "a one-shot app-server outlived the shutdown"
    );
    assert!(bridge.shared().store().inflight().unwrap().is_empty());
}

/// The idle timeout closes an idle one-shot app-server, and `max_warm` counts it: with one
/// place, a session's turn gets its warm process at once (the idle one-shot process is closed
/// for it) instead of waiting and falling back to `codex exec`.
#[tokio::test]
async fn one_shot_app_servers_count_against_max_warm_and_close_when_idle() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = server_with(&env, &mock, "app-server", &[("CODEX_BRIDGE_MAX_WARM", "1")]).await;
    mock.push(Reply::message("q"));
    let r = s.call("query", json!({"prompt": "one"})).await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let one_shot = app_servers(s.pid);
    assert_eq!(one_shot.len(), 1);
    mock.push(Reply::message("session"));
    let t = Instant::now();
    let (r, exec, servers) = watch_children(
        s.pid,
        s.call(
            "codex",
            json!({"prompt": "hello", "sessionId": "m", "workingDirectory": env.work()}),
        ),
    )
    .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert!(!exec, "the session turn fell back to codex exec");
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "it waited {:?}",
        t.elapsed()
    );
    assert!(
        !one_shot.iter().any(|p| alive(*p)),
        "the idle one-shot process was not closed"
    );
    assert!(servers.iter().any(|p| !one_shot.contains(p)));

    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = server_with(
        &env,
        &mock,
        "app-server",
        &[("CODEX_BRIDGE_IDLE_TIMEOUT_MS", "1500")],
    )
    .await;
    mock.push(Reply::message("q"));
    let r = s.call("query", json!({"prompt": "one"})).await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let idle = app_servers(s.pid);
    assert_eq!(idle.len(), 1);
    let t = Instant::now();
    while idle.iter().any(|p| alive(*p)) && t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !idle.iter().any(|p| alive(*p)),
        "the idle process outlived the idle timeout"
    );
}

//! The optional Streamable HTTP listener: loopback only, a bearer token on every request, and
//! no foreign `Host` or `Origin` (DNS rebinding). A real rmcp client over HTTP shares the
//! store's sessions with the stdio client of the same process.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, TaskPayload,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::mcp::{Protocol, connect_with, server_bin, server_env, structured, text};
use crate::support::{MockApi, Reply, TestEnv};

const TOKEN: &str = "test-http-token-0123456789abcdefghijklmnop";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_vars(env: &TestEnv, mock: &MockApi, port: u16) -> Vec<(String, String)> {
    let mut vars = server_env(env, mock);
    vars.push((
        "CODEX_BRIDGE_HTTP_LISTEN".into(),
        format!("127.0.0.1:{port}"),
    ));
    vars.push(("CODEX_BRIDGE_HTTP_TOKEN".into(), TOKEN.into()));
    vars
}

/// One raw HTTP/1.1 POST of an `initialize` request; the status code.
async fn raw_post(port: u16, host: &str, extra_headers: &[(&str, &str)]) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra_headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut head))
        .await
        .unwrap()
        .unwrap();
    let line = String::from_utf8_lossy(&head[..n]).to_string();
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {line:?}"))
}

async fn wait_listening(port: u16) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(std::time::Instant::now() < deadline, "never listened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn http_clients_need_the_token_and_share_the_sessions() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let port = free_port();
    let stdio = connect_with(&http_vars(&env, &mock, port), env.root(), Protocol::Legacy).await;
    wait_listening(port).await;
    assert!(listens_on_tcp(stdio.pid), "the check below sees a listener");
    let host = format!("127.0.0.1:{port}");
    let auth = format!("Bearer {TOKEN}");

    // the gate: token, Host, Origin
    assert_eq!(raw_post(port, &host, &[]).await, 401, "no token");
    assert_eq!(
        raw_post(port, &host, &[("Authorization", "Bearer not-the-token")]).await,
        401
    );
    assert_eq!(
        raw_post(port, "evil.example", &[("Authorization", &auth)]).await,
        403,
        "a rebound Host"
    );
    assert_eq!(
        raw_post(
            port,
            &host,
            &[("Authorization", &auth), ("Origin", "http://evil.example")]
        )
        .await,
        403,
        "a foreign Origin"
    );
    assert_eq!(
        raw_post(port, &host, &[("Authorization", &auth)]).await,
        200,
        "the right token"
    );
    // the scheme is case-insensitive (RFC 7235)
    assert_eq!(
        raw_post(
            port,
            &host,
            &[("Authorization", &format!("bearer {TOKEN}"))]
        )
        .await,
        200,
        "a lower-case scheme"
    );

    // a real client over HTTP, declaring tasks
    let url = format!("http://127.0.0.1:{port}/mcp");
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(TOKEN),
    );
    let client = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("http-test", "0"),
    )
    .serve(transport)
    .await
    .expect("connects with the token");
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "codex"));
    let created = client
        .call_tool_once(
            CallToolRequestParams::new("codex").with_arguments(
                json!({"prompt": "over http", "sessionId": "via-http", "workingDirectory": env.work()})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(t) = created else {
        panic!("expected a task: {created:?}")
    };
    let result = loop {
        let got = client
            .get_task(GetTaskParams::new(t.task.task_id.clone()))
            .await
            .unwrap();
        match got.task.payload {
            TaskPayload::Working => tokio::time::sleep(Duration::from_millis(50)).await,
            TaskPayload::Completed { result } => break Value::Object(result),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        result["structuredContent"]["sessionId"], "via-http",
        "{result}"
    );
    // the task is this HTTP session's: another session cannot read or cancel it
    let snooper = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("http-snooper", "0"),
    )
    .serve(StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(TOKEN),
    ))
    .await
    .expect("connects with the token");
    for err in [
        snooper
            .get_task(GetTaskParams::new(t.task.task_id.clone()))
            .await
            .map(|_| ())
            .unwrap_err(),
        snooper
            .cancel_task(CancelTaskParams::new(t.task.task_id.clone()))
            .await
            .unwrap_err(),
    ] {
        assert!(err.to_string().contains("unknown task"), "{err}");
    }
    // so is a background turn: another HTTP session can neither wait on it nor stop it
    mock.push_for_user_text(
        "in the background over http",
        Reply::message("background over http").with_delay(Duration::from_secs(2)),
    );
    let call = |c: &rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
                tool: &str,
                args: Value| {
        let params = CallToolRequestParams::new(tool.to_owned())
            .with_arguments(args.as_object().cloned().unwrap());
        let peer = c.peer().clone();
        async move {
            match peer.call_tool_once(params).await.unwrap() {
                CallToolResponse::Complete(r) => r,
                other => panic!("expected a result: {other:?}"),
            }
        }
    };
    let started = call(
        &client,
        "codex",
        json!({"prompt": "in the background over http", "sessionId": "bg-http",
               "background": true, "workingDirectory": env.work()}),
    )
    .await;
    assert_eq!(
        structured(&started)["status"],
        "running",
        "{}",
        text(&started)
    );
    for tool in ["wait", "stop"] {
        let r = call(&snooper, tool, json!({"sessionId": "bg-http"})).await;
        assert_eq!(r.is_error, Some(true), "{tool}: {}", text(&r));
        assert!(text(&r).contains("`sessionId`"), "{tool}: {}", text(&r));
    }
    let done = loop {
        let r = call(
            &client,
            "wait",
            json!({"sessionId": "bg-http", "waitSeconds": 5}),
        )
        .await;
        if structured(&r)["status"] != "running" {
            break r;
        }
    };
    assert_eq!(structured(&done)["status"], "completed", "{}", text(&done));
    assert_eq!(structured(&done)["response"], "background over http");
    let _ = snooper.cancel().await;
    // the stdio client of the same process sees the session
    let got = stdio
        .call("getSession", json!({"sessionId": "via-http"}))
        .await;
    assert_eq!(structured(&got)["found"], true, "{}", text(&got));
    let _ = client.cancel().await;

    // a wrong token cannot even connect
    let bad = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("bad", "0"),
    )
    .serve(StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header("wrong-token"),
    ))
    .await;
    assert!(bad.is_err(), "connected without the token");
}

#[tokio::test]
async fn the_http_listener_is_off_by_default_and_refuses_bad_settings() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let run = |vars: Vec<(String, String)>| {
        let root = env.root().to_path_buf();
        async move {
            let out = tokio::time::timeout(
                Duration::from_secs(20),
                tokio::process::Command::new(server_bin())
                    .env_clear()
                    .envs(vars)
                    .current_dir(root)
                    .stdin(std::process::Stdio::null())
                    .output(),
            )
            .await
            .expect("exits")
            .unwrap();
            assert!(!out.status.success());
            assert!(out.stdout.is_empty());
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    };
    let mut v = server_env(&env, &mock);
    v.push(("CODEX_BRIDGE_HTTP_LISTEN".into(), "0.0.0.0:8765".into()));
    v.push(("CODEX_BRIDGE_HTTP_TOKEN".into(), TOKEN.into()));
    let err = run(v).await;
    assert!(
        err.contains("CODEX_BRIDGE_HTTP_LISTEN") && err.contains("loopback"),
        "{err}"
    );
    let mut v = server_env(&env, &mock);
    v.push(("CODEX_BRIDGE_HTTP_LISTEN".into(), "127.0.0.1:8765".into()));
    v.push(("CODEX_BRIDGE_HTTP_TOKEN".into(), "short".into()));
    let err = run(v).await;
    assert!(err.contains("CODEX_BRIDGE_HTTP_TOKEN"), "{err}");
    assert!(!err.contains("short"), "the token is never printed: {err}");
    // the message reads whole: redaction takes no word of it
    assert!(
        err.contains("(the HTTP listener's bearer token): must be at least 32")
            && !err.contains("[REDACTED]"),
        "{err}"
    );

    // off by default: a server without the setting listens on no TCP port
    let s = connect_with(&server_env(&env, &mock), env.root(), Protocol::Legacy).await;
    assert!(
        !listens_on_tcp(s.pid),
        "the server listens on TCP without the setting"
    );
}

/// Whether process `pid` has a listening TCP socket.
fn listens_on_tcp(pid: u32) -> bool {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.starts_with("socket:["))
        .map(|p| {
            p.trim_start_matches("socket:[")
                .trim_end_matches(']')
                .to_owned()
        })
        .collect();
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap()
        + &std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
    // state 0A = LISTEN; column 9 is the inode
    tcp.lines().skip(1).any(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        cols.get(3) == Some(&"0A") && cols.get(9).is_some_and(|i| inodes.iter().any(|x| x == i))
    })
}

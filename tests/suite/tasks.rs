//! Long-running calls as MCP tasks (the tasks extension, SEP-2663), through rmcp's real client
//! declaring the extension, against the built server, the real codex and the mock.

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, DetailedTask,
    GetTaskParams, TaskPayload, TaskStatus,
};
use serde_json::{Value, json};

use crate::support::mcp::{Protocol, Server, connect, connect_tasks, server_env, structured, text};
use crate::support::{MockApi, Reply, TestEnv};

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

/// Start a call that must become a task; its id.
async fn start_task(s: &Server, tool: &str, args: Value) -> String {
    match s
        .client
        .call_tool_once(params(tool, args))
        .await
        .expect("answered")
    {
        CallToolResponse::Task(t) => {
            assert_eq!(t.task.status, TaskStatus::Working);
            assert!(
                t.task.ttl_ms.is_some_and(|ttl| ttl > 3_600_000),
                "{:?}",
                t.task.ttl_ms
            );
            t.task.task_id
        }
        other => panic!("{tool}: expected a task, got {other:?}"),
    }
}

/// Poll until the task ends; every status message seen on the way.
async fn wait_task(s: &Server, id: &str) -> (DetailedTask, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut messages = vec![];
    loop {
        let got = s
            .client
            .get_task(GetTaskParams::new(id.to_owned()))
            .await
            .expect("tasks/get answered");
        if let Some(m) = &got.task.task.status_message
            && messages.last() != Some(m)
        {
            messages.push(m.clone());
        }
        if got.task.status() != TaskStatus::Working {
            return (got.task, messages);
        }
        assert!(Instant::now() < deadline, "task {id} never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn result_of(task: &DetailedTask) -> CallToolResult {
    match &task.payload {
        TaskPayload::Completed { result } => {
            serde_json::from_value(Value::Object(result.clone())).expect("a CallToolResult")
        }
        other => panic!("expected a completed task, got {other:?}"),
    }
}

#[tokio::test]
async fn codex_runs_as_a_task_whose_status_and_result_can_be_polled() {
    for protocol in [Protocol::Legacy, Protocol::Modern] {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        mock.push(
            Reply::message("done as a task")
                .with_event_delay(Duration::from_millis(300))
                .with_usage(10, 5),
        );
        let s = connect_tasks(&env, &mock, protocol).await;
        let id = start_task(
            &s,
            "codex",
            json!({"prompt": "long job", "sessionId": "tasked", "workingDirectory": env.work()}),
        )
        .await;
        let (done, messages) = wait_task(&s, &id).await;
        let r = result_of(&done);
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        assert_eq!(structured(&r)["response"], "done as a task");
        assert_eq!(structured(&r)["sessionId"], "tasked");
        assert!(
            !messages.is_empty(),
            "{protocol:?}: no status message while it ran"
        );
        // the session is the same as for a plain call
        let again = s
            .client
            .call_tool_once(params("getSession", json!({"sessionId": "tasked"})))
            .await
            .unwrap();
        let CallToolResponse::Complete(again) = again else {
            panic!("getSession is never a task")
        };
        assert_eq!(structured(&again)["session"]["turnCount"], 1);
        // a quick tool stays a plain call
        let q = s
            .client
            .call_tool_once(params("query", json!({"prompt": "quick"})))
            .await;
        assert!(matches!(q, Ok(CallToolResponse::Complete(_))), "{q:?}");
    }
}

#[tokio::test]
async fn cancelling_a_task_kills_codex_and_the_session_resumes() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("first"));
    mock.push(Reply::hang());
    let s = crate::support::mcp::connect_with_capabilities(
        &crate::support::mcp::no_spare(server_env(&env, &mock)),
        env.root(),
        Protocol::Legacy,
        rmcp::model::ClientCapabilities::builder()
            .enable_tasks()
            .build(),
    )
    .await;
    let id = start_task(
        &s,
        "codex",
        json!({"prompt": "one", "sessionId": "c", "workingDirectory": env.work()}),
    )
    .await;
    let (done, _) = wait_task(&s, &id).await;
    let thread = structured(&result_of(&done))["threadId"].clone();

    let id = start_task(&s, "codex", json!({"prompt": "hang", "sessionId": "c"})).await;
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30))
        .await;
    let codex = codex_mcp_bridge::codex::process::descendants(s.pid as i32);
    assert!(!codex.is_empty());
    s.client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel acknowledged");
    let (done, _) = wait_task(&s, &id).await;
    assert_eq!(done.status(), TaskStatus::Cancelled, "{:?}", done.payload);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !codex_mcp_bridge::codex::process::descendants(s.pid as i32).is_empty()
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        codex_mcp_bridge::codex::process::descendants(s.pid as i32).is_empty(),
        "codex outlived its cancelled task"
    );
    mock.push(Reply::message("resumed"));
    let id = start_task(&s, "codex", json!({"prompt": "again", "sessionId": "c"})).await;
    let (done, _) = wait_task(&s, &id).await;
    let r = result_of(&done);
    assert_eq!(structured(&r)["resumed"], true, "{}", text(&r));
    assert_eq!(structured(&r)["threadId"], thread);
}

#[tokio::test]
async fn an_unknown_task_gets_a_clear_error_and_plain_clients_get_plain_results() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = connect_tasks(&env, &mock, Protocol::Legacy).await;
    let err = s
        .client
        .get_task(GetTaskParams::new("4b0c1f9e-0000-4000-8000-000000000000"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown task") && err.contains("Call the tool again"),
        "{err}"
    );
    let err = s
        .client
        .cancel_task(CancelTaskParams::new("nope"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown task"), "{err}");
    drop(s);

    // a client without the extension: the same tool is a plain call, with progress
    let plain = connect(&env, &mock, Protocol::Legacy).await;
    let r = plain
        .client
        .call_tool_once(params(
            "codex",
            json!({"prompt": "plain", "workingDirectory": env.work()}),
        ))
        .await
        .unwrap();
    assert!(matches!(r, CallToolResponse::Complete(_)), "{r:?}");
}

/// A task belongs to the connection that started it: another connection (here a second
/// process relaying to the owner, which runs the task) cannot read, update or cancel it.
#[tokio::test]
async fn another_connection_cannot_see_or_cancel_a_task() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push_for_user_text(
        "MINE",
        Reply::message("mine only").with_delay(Duration::from_millis(1500)),
    );
    let owner = connect_tasks(&env, &mock, Protocol::Legacy).await;
    let sock = env.root().join("store").join("bridge.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = connect_tasks(&env, &mock, Protocol::Modern).await;
    for (starter, snooper) in [(&owner, &other), (&other, &owner)] {
        let id = start_task(
            starter,
            "codex",
            json!({"prompt": "MINE", "workingDirectory": env.work()}),
        )
        .await;
        let err = snooper
            .client
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown task"), "tasks/get: {err}");
        let err = snooper
            .client
            .cancel_task(CancelTaskParams::new(id.clone()))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown task"), "tasks/cancel: {err}");
        // the starter still has it, uncancelled, to its result
        let (done, _) = wait_task(starter, &id).await;
        assert_eq!(structured(&result_of(&done))["response"], "mine only");
        let err = snooper
            .client
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown task"), "a finished task: {err}");
        mock.push_for_user_text(
            "MINE",
            Reply::message("mine only").with_delay(Duration::from_millis(1500)),
        );
    }
}

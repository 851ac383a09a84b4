//! The bridge through the official MCP TypeScript SDK client (`@modelcontextprotocol/sdk`, what
//! the MCP Inspector, Claude Code and VS Code are built on), pinned in tests/ts-sdk/ and
//! installed by scripts/fetch-ts-sdk.sh: tools/list with no schema warning, and every tool called,
//! successes and failures, with the SDK's own result validation on, and the prompts and the
//! session resources (listed, read, subscribed: `notifications/resources/updated` as a turn
//! ends) (tests/ts-sdk/e2e.mjs).

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{server_bin, server_env};
use crate::support::{MockApi, Reply, TestEnv, repo_root, test_work_dir};

/// tests/ts-sdk with the pinned SDK installed (once per test process, under a file lock, since
/// nextest runs tests in parallel processes).
fn ts_sdk_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let lock_path = test_work_dir().join("ts-sdk.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .expect("open the ts-sdk lock file");
        lock.lock().expect("lock the ts-sdk lock file");
        let script = repo_root().join("scripts").join("fetch-ts-sdk.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/fetch-ts-sdk.sh");
        drop(lock);
        assert!(
            out.status.success(),
            "scripts/fetch-ts-sdk.sh failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(
            stdout
                .lines()
                .last()
                .expect("the script printed the directory"),
        )
    })
    .clone()
}

#[tokio::test]
async fn the_typescript_sdk_lists_every_tool_without_warnings_and_gets_every_answer() {
    let dir = ts_sdk_dir();
    let env = TestEnv::with_git();
    std::fs::write(env.work().join("README.md"), "changed\n").unwrap();
    let mock = MockApi::start().await;
    // in the order e2e.mjs calls the tools that run a turn
    mock.push_all([
        Reply::message("first answer"),
        Reply::message("4"),
        Reply::message("the web says hi"),
        Reply::message("{\"answer\": 42}"),
        Reply::message(
            "Looks risky.\n\nReview comment:\n\n- [P1] Broke the readme — README.md:1-1\n  It changed.",
        ),
        Reply::api_error(400, "the mock refuses this prompt"),
        // a turn long enough to be steered (the fork before it asks the model nothing)
        Reply::exec_command("sleep 3; echo slept"),
        Reply::message("steered answer"),
    ]);
    mock.push_for_user_text("in the background", Reply::message("background answer"));
    mock.push_for_user_text("in a worktree", Reply::message("worktree answer"));
    // `steer` needs a warm turn: the app-server backend, whatever the suite runs
    let mut vars = server_env(&env, &mock);
    vars.retain(|(k, _)| k != "CODEX_BRIDGE_BACKEND");
    vars.push(("CODEX_BRIDGE_BACKEND".into(), "app-server".into()));
    let bridge_env: serde_json::Map<String, Value> = vars
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let mut node = tokio::process::Command::new("node");
    node.arg(dir.join("e2e.mjs"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .env("BRIDGE_BIN", server_bin())
        .env("BRIDGE_ENV", Value::Object(bridge_env).to_string())
        .env("BRIDGE_CWD", env.root())
        .env("WORK_DIR", env.work())
        .current_dir(&dir)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(600), node.output())
        .await
        .expect("the SDK run ended in time")
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no summary from e2e.mjs ({}): {stderr}", out.status));
    assert!(
        out.status.success(),
        "the TypeScript SDK run failed ({}):\n{stderr}",
        out.status
    );
    assert_eq!(summary["failures"], json!([]), "{stderr}");
    assert_eq!(summary["warnings"], json!([]), "the SDK warned: {stderr}");
    assert_eq!(summary["tools"], json!(crate::support::mcp::TOOL_NAMES));
    assert_eq!(
        summary["prompts"],
        json!(["review", "delegate", "status", "continue"])
    );
    let calls = summary["calls"].as_array().unwrap();
    // every tool answered at least once with a success and once with an error result, and the
    // SDK never threw (no "Structured content does not match the tool's output schema")
    for tool in summary["tools"].as_array().unwrap() {
        let of_tool: Vec<&Value> = calls.iter().filter(|c| &c["tool"] == tool).collect();
        assert!(
            of_tool.iter().any(|c| c["isError"] == false),
            "{tool}: no success"
        );
        assert!(
            of_tool.iter().any(|c| c["isError"] == true),
            "{tool}: no error result"
        );
        for c in of_tool {
            assert!(c.get("thrown").is_none(), "the SDK threw: {c}");
        }
    }
    let limit = calls
        .iter()
        .find(|c| c["tool"] == "listSessions" && c["arguments"]["limit"] == "2")
        .unwrap();
    assert_eq!(
        limit["text"],
        "invalid argument `limit`: invalid type: string \"2\", expected u32"
    );
    assert_eq!(limit["structured"], Value::Null);
    let refused = calls
        .iter()
        .find(|c| c["tool"] == "codex" && c["isError"] == true && c["structured"].is_object())
        .unwrap();
    assert!(
        refused["structured"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the mock refuses this prompt"),
        "{refused}"
    );
    // one request per turn, two for the steered one (its command, then its answer) and one for
    // the compaction, one for the background turn, one for the worktree session's; none for the
    // calls with a bad model id
    assert_eq!(mock.responses_count(), 11);
}

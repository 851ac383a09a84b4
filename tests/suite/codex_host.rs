//! Codex itself as the MCP host: the real `codex exec` (against the mock) with the bridge in its
//! `[mcp_servers]`, configured with README's own Codex snippet. The outer model calls `ping`
//! and then `codex`, whose nested turn (the inner codex, against the same mock) answers; the
//! outer model must see both results.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::server_bin;
use crate::support::{
    MockApi, RecordedRequest, Reply, TestEnv, codex_bin, describe_output, repo_root,
    run_with_timeout,
};

/// The namespace tool codex offers a server's tools under: `mcp__` and the server's name with
/// `-` as `_`.
fn namespace(server: &str) -> String {
    format!("mcp__{}", server.replace('-', "_"))
}

const OUTER: &str = "OUTER-HOST-TASK";
const INNER: &str = "INNER-NESTED-TASK";
const ANSWER: &str = "nested answer: HERON-7731";

/// README's Codex snippet: the `[mcp_servers.<name>]` table, and its name.
fn readme_codex_snippet() -> (String, toml::Table) {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme.find("\n## Wire it into a host\n").expect("section");
    let section = &readme[start..];
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a toml block in the section");
    let t: toml::Table = toml::from_str(block).unwrap();
    let servers = t["mcp_servers"].as_table().unwrap();
    assert_eq!(servers.len(), 1, "{block}");
    let (name, table) = servers.iter().next().unwrap();
    (name.clone(), table.as_table().unwrap().clone())
}

/// The outer codex's home, `$HOME/.codex` (no CODEX_HOME anywhere, as for most users, so the
/// nested codex reads this same config): the mock as provider, and the bridge from README's
/// snippet with the test's binary, roots, store and codex; `edit` changes the server's table
/// first.
fn outer_home(env: &TestEnv, mock: &MockApi, edit: impl FnOnce(&mut toml::Table)) -> PathBuf {
    let home = env.home().join(".codex");
    std::fs::create_dir_all(&home).unwrap();
    let (name, mut server) = readme_codex_snippet();
    // the snippet starts the bridge as `npx -y codex-mcp-bridge`: here the test's binary
    // itself (tests/packages.rs runs the npm package through npx)
    server.insert("command".into(), server_bin().display().to_string().into());
    server.remove("args");
    let mut vars = server
        .get("env")
        .and_then(|e| e.as_table())
        .cloned()
        .unwrap_or_default();
    for (k, v) in [
        ("CODEX_BRIDGE_ROOTS", env.root().display().to_string()),
        ("CODEX_BIN", codex_bin().display().to_string()),
        (
            "CODEX_BRIDGE_STORE",
            env.root().join("store").display().to_string(),
        ),
        ("RUST_LOG", "warn,codex_mcp_bridge=info".into()),
    ] {
        vars.insert(k.into(), v.into());
    }
    server.insert("env".into(), vars.into());
    edit(&mut server);
    let mut servers = toml::Table::new();
    servers.insert(name, server.into());
    let mut config = toml::Table::new();
    // a model codex has no catalog entry for gets the MCP tools offered directly (known models
    // get them through `tool_search` or code mode); the nested codex reads it too
    config.insert("model".into(), "mock-model".into());
    config.insert("mcp_servers".into(), servers.into());
    std::fs::write(home.join("config.toml"), toml::to_string(&config).unwrap()).unwrap();
    mock.write_config_toml(&home);
    home
}

/// `codex exec` as the host, in `env.work()`, with `$HOME/.codex` as its home.
async fn outer_exec(env: &TestEnv, home: &Path) -> std::process::Output {
    assert_eq!(home, env.home().join(".codex"));
    let mut cmd = env.command(codex_bin());
    cmd.env_remove("CODEX_HOME")
        .args(["exec", "--json", "--skip-git-repo-check", "--", OUTER]);
    run_with_timeout(&mut cmd, Duration::from_secs(180)).await
}

fn outer_requests(mock: &MockApi) -> Vec<RecordedRequest> {
    mock.responses_requests()
        .into_iter()
        .filter(|r| r.user_text_contains(OUTER))
        .collect()
}

/// The output the outer model got for `call_id`, from the first outer request carrying it.
fn output_for(mock: &MockApi, call_id: &str) -> String {
    outer_requests(mock)
        .iter()
        .find_map(|r| r.tool_output(call_id))
        .unwrap_or_else(|| panic!("no output for {call_id} reached the outer model"))
}

fn inner_requests(mock: &MockApi) -> Vec<RecordedRequest> {
    mock.responses_requests()
        .into_iter()
        .filter(|r| r.user_text_contains(INNER))
        .collect()
}

/// Script the outer model: the calls `(call_id, tool, arguments)` one request after another,
/// then a final message; the inner codex answers [`ANSWER`].
fn script(mock: &MockApi, calls: &[(&str, &str, Value)]) {
    let ns = namespace(&readme_codex_snippet().0);
    for (id, tool, args) in calls {
        mock.push_for_user_text(OUTER, Reply::namespaced_call(id, &ns, tool, args.clone()));
    }
    mock.push_for_user_text(OUTER, Reply::message("outer done"));
    mock.push_for_user_text(INNER, Reply::message(ANSWER));
}

/// The outer model's call of the bridge's `codex` tool with the nested prompt, in `work`.
fn nested_codex_call(work: &str) -> (&'static str, &'static str, Value) {
    (
        "call_codex",
        "codex",
        json!({"prompt": INNER, "workingDirectory": work}),
    )
}

#[tokio::test]
async fn codex_as_the_host_pings_the_bridge_and_gets_a_nested_turns_answer() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap().display().to_string();
    script(
        &mock,
        &[("call_ping", "ping", json!({})), nested_codex_call(&work)],
    );
    let home = outer_home(&env, &mock, |_| {});
    let out = outer_exec(&env, &home).await;
    let dump = describe_output(&out);
    assert!(out.status.success(), "{dump}");

    let ping = output_for(&mock, "call_ping");
    assert!(
        ping.contains("codex-mcp-bridge") && ping.contains(&crate::support::codex_version()),
        "the ping result reaches the outer model: {ping}\n{dump}"
    );
    let inner = inner_requests(&mock);
    assert_eq!(inner.len(), 1, "one nested turn: {dump}");
    assert_eq!(
        inner[0].header("authorization"),
        Some("Bearer test-key"),
        "the nested codex got the key through env_vars"
    );
    let ns = namespace(&readme_codex_snippet().0);
    assert!(
        !inner[0].tool_names().contains(&ns),
        "the nested codex does not start the bridge again: {:?}",
        inner[0].tool_names()
    );
    let answer = output_for(&mock, "call_codex");
    assert!(
        answer.contains(ANSWER),
        "the nested turn's answer reaches the outer model: {answer}\n{dump}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("outer done"),
        "{dump}"
    );
}

#[tokio::test]
async fn without_the_approval_line_every_tool_not_read_only_is_cancelled() {
    let env = TestEnv::new();
    let work = env.work().canonicalize().unwrap().display().to_string();
    let call = [nested_codex_call(&work)];

    let mock = MockApi::start().await;
    script(
        &mock,
        &[
            call[0].clone(),
            ("call_review", "review", json!({"workingDirectory": work})),
            ("call_close", "closeSession", json!({"sessionId": "x"})),
            ("call_list", "listSessions", json!({})),
        ],
    );
    let home = outer_home(&env, &mock, |server| {
        assert!(
            server.remove("default_tools_approval_mode").is_some(),
            "README's snippet approves the bridge's tools"
        );
    });
    let out = outer_exec(&env, &home).await;
    let dump = describe_output(&out);
    // every tool not marked read-only is refused without running; a read-only one runs. Each
    // version words the refusal its own way.
    let refusal = match crate::support::under_test() {
        crate::support::Codex::V0_145_0 => "user cancelled MCP tool call",
        crate::support::Codex::V0_171_0 => {
            "MCP tool call requires approval, but approval policy is never"
        }
    };
    for id in ["call_codex", "call_review", "call_close"] {
        let output = output_for(&mock, id);
        assert!(output.contains(refusal), "{id}: {output}\n{dump}");
    }
    let listed = output_for(&mock, "call_list");
    assert!(listed.contains("\"sessions\""), "{listed}\n{dump}");
    assert!(
        inner_requests(&mock).is_empty(),
        "no nested turn ran: {dump}"
    );

    // the other way README names: approving the one tool
    let mock = MockApi::start().await;
    script(&mock, &call);
    let home = outer_home(&env, &mock, |server| {
        server.remove("default_tools_approval_mode");
        let mut codex = toml::Table::new();
        codex.insert("approval_mode".into(), "approve".into());
        let mut tools = toml::Table::new();
        tools.insert("codex".into(), codex.into());
        server.insert("tools".into(), tools.into());
    });
    let out = outer_exec(&env, &home).await;
    let dump = describe_output(&out);
    let output = output_for(&mock, "call_codex");
    assert!(output.contains(ANSWER), "{output}\n{dump}");
}

#[tokio::test]
async fn without_env_vars_the_nested_codex_has_no_api_key() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap().display().to_string();
    script(&mock, &[nested_codex_call(&work)]);
    let home = outer_home(&env, &mock, |server| {
        assert!(
            server.remove("env_vars").is_some(),
            "README's snippet passes OPENAI_API_KEY on"
        );
    });
    let out = outer_exec(&env, &home).await;
    let dump = describe_output(&out);
    let output = output_for(&mock, "call_codex");
    assert!(
        output.contains("OPENAI_API_KEY") && !output.contains(ANSWER),
        "{output}\n{dump}"
    );
    assert!(
        inner_requests(&mock).is_empty(),
        "no nested turn reached the API: {dump}"
    );
}

#[tokio::test]
async fn without_nested_mcp_disable_the_nested_codex_would_start_the_bridge_again() {
    let env = TestEnv::new();
    let work = env.work().canonicalize().unwrap().display().to_string();
    let call = [nested_codex_call(&work)];
    let mock = MockApi::start().await;
    script(&mock, &call);
    let home = outer_home(&env, &mock, |server| {
        let vars = server["env"].as_table_mut().unwrap();
        assert!(
            vars.remove("CODEX_BRIDGE_NESTED_MCP").is_some(),
            "README's snippet keeps the nested codex from starting the bridge"
        );
    });
    let out = outer_exec(&env, &home).await;
    let dump = describe_output(&out);
    assert!(output_for(&mock, "call_codex").contains(ANSWER), "{dump}");
    let inner = inner_requests(&mock);
    assert_eq!(inner.len(), 1, "{dump}");
    let ns = namespace(&readme_codex_snippet().0);
    assert!(
        inner[0].tool_names().contains(&ns),
        "the nested codex reads the same config and offers the bridge again: {:?}",
        inner[0].tool_names()
    );
    // the bridge its own codex started again relays to the owner daemon; that connection
    // does not keep the daemon alive once the host's own is gone, so nothing is left
    assert_no_bridge_left(&env).await;
}

/// Waits until no process of the bridge's binary runs in the test's directories (the owner
/// daemon exits once its last client outside its own process tree left).
async fn assert_no_bridge_left(env: &TestEnv) {
    let bin = server_bin().canonicalize().unwrap();
    let root = env.root().canonicalize().unwrap();
    let left = || -> Vec<i32> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == bin))
            .filter(|p| {
                std::fs::read_link(format!("/proc/{p}/cwd")).is_ok_and(|c| c.starts_with(&root))
            })
            .filter(|p| crate::support::process::alive(*p))
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !left().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left(), Vec::<i32>::new(), "bridge processes left behind");
}

/// Codex as the host declares form elicitation (0.145.0 and 0.171.0 both send
/// `"elicitation": {"form": {}, "url": {}}`), so under `approvals = ask` the bridge asks it.
/// What `codex exec` does with the question is pinned here: it declines it at once (measured on
/// both versions), so an escalation of the nested turn is not approved without a person.
#[tokio::test]
async fn codex_exec_as_the_host_is_asked_under_ask_and_approves_nothing_without_a_person() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap().display().to_string();
    let target = env
        .root()
        .canonicalize()
        .unwrap()
        .join("host-escalated.txt");
    let ns = namespace(&readme_codex_snippet().0);
    mock.push_for_user_text(
        OUTER,
        Reply::namespaced_call(
            "call_codex",
            &ns,
            "codex",
            json!({"prompt": INNER, "workingDirectory": work, "model": "gpt-5.5"}),
        ),
    );
    mock.push_for_user_text(OUTER, Reply::message("outer done"));
    mock.push_for_user_text(
        INNER,
        Reply::function_call(
            "exec_command",
            json!({"cmd": format!("echo pwned > '{}'", target.display()),
                   "sandbox_permissions": "require_escalated",
                   "justification": "I need to write this file outside the sandbox"}),
        ),
    );
    mock.push_for_user_text(INNER, Reply::message(ANSWER));
    let home = outer_home(&env, &mock, |server| {
        let env = server
            .get_mut("env")
            .and_then(|e| e.as_table_mut())
            .expect("the snippet's env");
        env.insert("CODEX_BRIDGE_APPROVALS".into(), "ask".into());
        env.insert("CODEX_BRIDGE_APPROVAL_TIMEOUT_MS".into(), "5000".into());
        env.insert("CODEX_BRIDGE_BACKEND".into(), "app-server".into());
    });
    let out = outer_exec(&env, &home).await;
    let dump = describe_output(&out);
    assert!(out.status.success(), "{dump}");
    let answer = output_for(&mock, "call_codex");
    assert!(answer.contains(ANSWER), "{answer}\n{dump}");
    assert!(
        !target.exists(),
        "codex exec as the host approved the escalation: {answer}\n{dump}"
    );
    // the question reached the host, and `codex exec` (no person behind it) declined it at
    // once: the bridge sees a client's decline, which it cannot tell from a person's
    assert!(
        answer.contains("\"approvals\"") && answer.contains("\"decision\":\"decline\""),
        "{answer}\n{dump}"
    );
}

//! A server that cannot start still answers its host (issue 38): with a store directory others
//! can reach, or a refused setting, it serves `initialize` or `server/discover`, and `tools/list`
//! fails with the problem in the words it printed on stderr (the setting and the fix), so the
//! host's server list shows it as not working (issue 45); every tool call answers the problem
//! too, on both protocols. It starts nothing (no codex, no spare) and writes nothing until a
//! restart after the fix.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use rmcp::model::{ClientRequest, PingRequest, ServerResult};
use serde_json::json;

use crate::support::mcp::{
    Protocol, Server, connect_with, server_bin, server_env, structured, text,
};
use crate::support::process::{alive, parent_of};
use crate::support::{MockApi, TestEnv};

/// Every live process under `pid`.
fn descendants(pid: u32) -> Vec<i32> {
    let all: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let mut found = vec![pid as i32];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            all.iter()
                .filter(|p| parent_of(**p) == parent && alive(**p)),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Connect with `vars` on `protocol`, and check what the unstarted server answers: `tools/list`
/// an error holding each of `words`; `codex`, `query` and `ping` as `isError` results whose text
/// holds each of them (a turn tool's structured error too); the MCP `ping` request (2025-11-25)
/// empty; and no process under the server.
async fn answers_the_problem(
    vars: &[(String, String)],
    cwd: &Path,
    protocol: Protocol,
    words: &[&str],
) -> Server {
    let s = connect_with(vars, cwd, protocol).await;
    // the tool list fails with the problem: a host shows the server as not working, with why
    // (Claude Code's `/mcp`: `⚠ connected · couldn't load tools`, the message as its issue)
    let e = match s.client.list_all_tools().await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("{protocol:?}: tools/list: {other:?}"),
    };
    assert!(
        e.message.contains("this server did not start"),
        "{protocol:?}: {e:?}"
    );
    for w in words {
        assert!(
            e.message.contains(w),
            "{protocol:?}: `{w}` missing from {e:?}"
        );
    }
    let info = s.client.peer_info().expect("the server described itself");
    assert!(
        info.instructions
            .as_deref()
            .is_some_and(|i| i.contains("did not start")),
        "{protocol:?}: {:?}",
        info.instructions
    );
    for (tool, args) in [
        ("codex", json!({"prompt": "hello", "workingDirectory": cwd})),
        ("query", json!({"prompt": "hello"})),
        ("ping", json!({})),
        ("listSessions", json!({})),
    ] {
        let r = s.call(tool, args).await;
        assert_eq!(r.is_error, Some(true), "{protocol:?} {tool}: {r:?}");
        let t = text(&r);
        assert!(t.contains("this server did not start"), "{tool}: {t}");
        for w in words {
            assert!(t.contains(w), "{protocol:?} {tool}: `{w}` missing from {t}");
        }
        if ["codex", "query"].contains(&tool) {
            let v = structured(&r);
            assert_eq!(v["error"]["message"], t.as_str(), "{tool}: {v}");
        } else {
            assert!(r.structured_content.is_none(), "{tool}: {r:?}");
        }
    }
    if protocol == Protocol::Legacy {
        let pong = s
            .client
            .send_request(ClientRequest::PingRequest(PingRequest {
                method: Default::default(),
                extensions: Default::default(),
            }))
            .await
            .expect("ping answered");
        assert!(matches!(pong, ServerResult::EmptyResult(_)), "{pong:?}");
    }
    // a warm spare would have started with the server, a turn's codex with the call
    tokio::time::sleep(Duration::from_millis(500)).await;
    let under = descendants(s.pid);
    assert!(
        under.is_empty(),
        "{protocol:?}: processes under the server: {under:?}"
    );
    s
}

#[tokio::test]
async fn a_store_directory_of_mode_755_is_told_to_the_host_and_nothing_starts() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let store = env.root().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vars = server_env(&env, &mock);
    let store_text = store.display().to_string();
    for protocol in [Protocol::Legacy, Protocol::Modern] {
        let s = answers_the_problem(
            &vars,
            env.root(),
            protocol,
            &[
                "CODEX_BRIDGE_STORE",
                &store_text,
                "has mode 755",
                "`chmod 700`",
                "restart",
            ],
        )
        .await;
        drop(s);
    }
    assert!(
        std::fs::read_dir(&store).unwrap().next().is_none(),
        "nothing was written into the store directory"
    );
    let mode = std::fs::metadata(&store).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755, "the directory was left as it was");
    assert!(mock.requests().is_empty(), "codex was never reached");

    // the same words on stderr and in `doctor`'s line, and the exit is a failure
    let mut cmd = tokio::process::Command::new(server_bin());
    cmd.env_clear()
        .envs(vars.iter().cloned())
        .current_dir(env.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let out = crate::support::process::run_with_timeout(&mut cmd, Duration::from_secs(60)).await;
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing on stdout without a client");
    let err = String::from_utf8_lossy(&out.stderr);
    let said = err
        .lines()
        .find(|l| l.starts_with("codex-mcp-bridge: this server did not start: "))
        .unwrap_or_else(|| panic!("{err}"));
    let problem = said
        .trim_start_matches("codex-mcp-bridge: this server did not start: ")
        .split("; then restart")
        .next()
        .unwrap();
    cmd.arg("doctor");
    let out = crate::support::process::run_with_timeout(&mut cmd, Duration::from_secs(60)).await;
    let doctor = String::from_utf8_lossy(&out.stdout);
    let line = doctor
        .lines()
        .find(|l| l.starts_with("FAIL") && l.contains("store"))
        .unwrap_or_else(|| panic!("{doctor}"));
    assert!(line.ends_with(problem), "doctor: {line}\nserver: {problem}");

    // fixed and restarted, it works
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let r = s.call("ping", json!({})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
}

/// A setting the settings refuse (a zero `CODEX_BRIDGE_MAX_WARM`) and a value the command line
/// refuses (`CODEX_BRIDGE_APPROVALS=always`) reach the host the same way, naming the setting.
#[tokio::test]
async fn a_refused_setting_is_told_to_the_host_and_nothing_starts() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    for (var, value, words) in [
        (
            "CODEX_BRIDGE_MAX_WARM",
            "0",
            &["CODEX_BRIDGE_MAX_WARM (--max-warm)", "must be at least 1"][..],
        ),
        (
            "CODEX_BRIDGE_APPROVALS",
            "always",
            &["CODEX_BRIDGE_APPROVALS (--approvals)", "decline"][..],
        ),
    ] {
        let mut vars = server_env(&env, &mock);
        vars.push((var.into(), value.into()));
        for protocol in [Protocol::Legacy, Protocol::Modern] {
            drop(answers_the_problem(&vars, env.root(), protocol, words).await);
        }
        assert!(
            !env.root().join("store").exists(),
            "{var}: the store was not created"
        );
    }
    assert!(mock.requests().is_empty(), "codex was never reached");
}

/// An HTTP address the owner cannot have (another process listens there) is refused before
/// the owner starts anything: the host is told, naming the setting, and no codex runs.
#[tokio::test]
async fn an_http_address_in_use_is_told_to_the_host_and_nothing_starts() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut vars = server_env(&env, &mock);
    vars.push((
        "CODEX_BRIDGE_HTTP_LISTEN".into(),
        taken.local_addr().unwrap().to_string(),
    ));
    vars.push(("CODEX_BRIDGE_HTTP_TOKEN".into(), "t".repeat(40)));
    let s = answers_the_problem(
        &vars,
        env.root(),
        Protocol::Legacy,
        &["CODEX_BRIDGE_HTTP_LISTEN", "cannot listen on"],
    )
    .await;
    assert!(
        !env.root().join("store").join("bridge.sock").exists(),
        "no socket for other processes"
    );
    drop(s);
    assert!(mock.requests().is_empty(), "codex was never reached");
}

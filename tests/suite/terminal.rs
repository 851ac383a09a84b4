//! What a person who starts the server by hand sees: a hint on a terminal, a clean exit on
//! Ctrl-D before any client, a JSON-RPC parse error for a line that is not JSON, a warning with
//! the fix when codex is missing, and INFO lines a person can read.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::support::mcp::{server_bin, server_env};
use crate::support::{MockApi, TestEnv};

const HINT: &str = "codex-mcp-bridge: this is an MCP server; it waits for an MCP client";
const EOF_SENTENCE: &str = "stdin ended before an MCP client sent `initialize`: nothing to serve";

/// A new pseudo-terminal: (the master side, the slave side for the child's stdin).
fn pty() -> (std::fs::File, OwnedFd) {
    // SAFETY: plain libc calls on descriptors this function owns; each result is checked.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::grantpt(master), 0, "grantpt");
        assert_eq!(libc::unlockpt(master), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master, name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
        let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            slave >= 0,
            "open the pty slave: {}",
            std::io::Error::last_os_error()
        );
        (
            std::fs::File::from_raw_fd(master),
            OwnedFd::from_raw_fd(slave),
        )
    }
}

/// The server's stderr once it exited, and its exit code; bounded.
async fn finish(mut child: tokio::process::Child) -> (Option<i32>, String, String) {
    let mut err = String::new();
    let mut out = String::new();
    let mut stderr = child.stderr.take().unwrap();
    let stdout = child.stdout.take();
    let status = tokio::time::timeout(Duration::from_secs(60), async {
        let read_out = async {
            if let Some(mut o) = stdout {
                let _ = o.read_to_string(&mut out).await;
            }
        };
        let (_, _, status) = tokio::join!(stderr.read_to_string(&mut err), read_out, child.wait());
        status
    })
    .await
    .expect("the server exited in time")
    .expect("wait for the server");
    (status.code(), err, out)
}

fn command(vars: &[(String, String)], cwd: &std::path::Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(server_bin());
    cmd.env_clear()
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn on_a_terminal_the_server_says_what_it_waits_for_and_ctrl_d_leaves_cleanly() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let (mut master, slave) = pty();
    let mut child = command(&server_env(&env, &mock), env.root())
        .stdin(Stdio::from(slave))
        .spawn()
        .expect("start the server");
    // the hint comes before anything is typed
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = vec![];
    let hint = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(l)) = stderr.next_line().await {
            seen.push(l.clone());
            if l.starts_with(HINT) {
                return l;
            }
        }
        String::new()
    })
    .await
    .unwrap_or_default();
    assert!(
        hint.contains("codex-mcp-bridge doctor") && hint.contains("Ctrl-D"),
        "no hint on the terminal: {seen:?}"
    );
    // Ctrl-D at the start of a line: end of input
    std::io::Write::write_all(&mut master, b"\x04").unwrap();
    let mut rest = String::new();
    let status = tokio::time::timeout(Duration::from_secs(60), async {
        let mut inner = stderr.into_inner();
        let _ = inner.read_to_string(&mut rest).await;
        child.wait().await
    })
    .await
    .expect("the server left in time")
    .unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(rest.contains(EOF_SENTENCE), "{rest}");
    assert!(!rest.contains("connection closed"), "{rest}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    assert_eq!(out, "", "nothing on stdout");
}

#[tokio::test]
async fn a_host_pipe_gets_no_hint_readable_logs_and_a_parse_error_for_a_line_that_is_not_json() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    // the default log filter, as a person or a host gets it
    let vars: Vec<(String, String)> = server_env(&env, &mock)
        .into_iter()
        .filter(|(k, _)| k != "RUST_LOG")
        .collect();
    let mut child = command(&vars, env.root())
        .stdin(Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hand-typed","version":"9.1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "",
        "hello server",
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut answers = vec![];
    while let Ok(Ok(Some(l))) = tokio::time::timeout(Duration::from_secs(30), out.next_line()).await
    {
        let v: Value = serde_json::from_str(&l).expect("stdout carries only JSON-RPC");
        answers.push(v);
        // the parse error and rmcp's answers reach stdout in either order
        if answers.iter().any(|a| a["id"] == 2) && answers.iter().any(|a| a["id"].is_null()) {
            break;
        }
    }
    drop(stdin);
    let parse_errors: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32700)
        .collect();
    assert_eq!(parse_errors.len(), 1, "one parse error: {answers:?}");
    assert_eq!(parse_errors[0]["id"], Value::Null);
    assert!(
        parse_errors[0]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Parse error"),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 2 && a.get("result").is_some()),
        "the server still answers: {answers:?}"
    );
    let (code, err, _) = finish(child).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains(HINT), "a pipe is no terminal: {err}");
    assert!(
        err.contains("a line on stdin is not JSON") && err.contains("-32700"),
        "the parse error is logged: {err}"
    );
    assert!(
        !err.contains("hello server"),
        "the line itself is not logged"
    );
    assert!(
        err.contains("MCP client connected")
            && err.contains("client=hand-typed")
            && err.contains("client_version=9.1")
            && err.contains("protocol=2025-11-25"),
        "the client is named: {err}"
    );
    for dump in ["InitializeRequestParams", "meta: None", "Some(Closed)"] {
        assert!(
            !err.contains(dump),
            "a debug dump `{dump}` in the log: {err}"
        );
    }
}

#[tokio::test]
async fn a_missing_codex_is_warned_about_at_start_with_the_fix() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let missing = env.root().join("no-such-codex");
    for (codex_bin, expect) in [
        (
            Some(missing.display().to_string()),
            format!(
                "{} (from CODEX_BIN/--codex-bin) does not exist",
                missing.display()
            ),
        ),
        (
            None,
            "`codex` (from the default, `codex` on PATH) is not on PATH".to_owned(),
        ),
    ] {
        let mut vars: Vec<(String, String)> = server_env(&env, &mock)
            .into_iter()
            .filter(|(k, _)| k != "CODEX_BIN" && k != "PATH")
            .collect();
        // a PATH without codex
        vars.push(("PATH".into(), env.home().display().to_string()));
        if let Some(b) = codex_bin {
            vars.push(("CODEX_BIN".into(), b));
        }
        let child = command(&vars, env.root())
            .stdin(Stdio::null())
            .spawn()
            .expect("start the server");
        let (code, err, out) = finish(child).await;
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out, "");
        assert!(err.contains("WARN"), "{err}");
        assert!(err.contains(&expect), "{expect}: {err}");
        assert!(
            err.contains(&format!(
                "npm install -g @openai/codex@{}",
                codex_mcp_bridge::config::NEWEST_TESTED_CODEX_VERSION
            )) && err.contains("codex-mcp-bridge doctor"),
            "the fix is named: {err}"
        );
        assert!(err.contains(EOF_SENTENCE), "{err}");
    }
}

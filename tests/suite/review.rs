//! The reviewer's probes of the merged redesign (issue 14): behaviour the merge could have
//! changed silently. Each test states the rule it holds.

use std::path::Path;
use std::time::Duration;

use codex_mcp_bridge::codex::process::{CodexCommand, run_command};
use codex_mcp_bridge::config::parse_config_file;
use codex_mcp_bridge::error::Error;
use codex_mcp_bridge::plan::values::SandboxLevel;

use crate::support::bridge::{BridgeOpts, call, start_bridge};
use crate::support::{MockApi, Reply, TestEnv};

/// A call the bridge refuses on its arguments (a sandbox level the operator did not enable,
/// an empty prompt) is refused as such, at once, whether or not its session is busy: before the
/// redesign the MCP layer checked them before the session was asked; a call that will never
/// run must not wait behind another turn (up to its timeout) nor be told "busy, retry".
#[tokio::test]
async fn a_call_refused_on_its_arguments_is_refused_at_once_on_a_busy_session() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("slow").with_delay(Duration::from_secs(8)));
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let b = bridge.clone();
    let c = call(&env, Some("refused-busy"), "long");
    let first = tokio::spawn(async move { b.turn(c).await });
    mock.wait_for_responses(1, Duration::from_secs(30)).await;

    // asked not to wait: the refusal, not "busy"
    let mut danger = call(&env, Some("refused-busy"), "everything");
    danger.sandbox = Some(SandboxLevel::DangerFullAccess);
    danger.wait_if_busy = false;
    let err = bridge.turn(danger).await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { field, .. } if field == "sandbox"),
        "a refused sandbox on a busy session: {err}"
    );
    // an empty prompt is refused where the tool call is parsed, before any session is asked:
    // no call can carry one (the MCP layer's refusal is in `hostile`)
    let err = Error::from(
        codex_mcp_bridge::security::prompt::Prompt::parse("prompt", "  ".into()).unwrap_err(),
    );
    assert!(
        matches!(&err, Error::InvalidArgument { field, .. } if field == "prompt"),
        "an empty prompt on a busy session: {err}"
    );

    // willing to wait: refused without waiting for the running turn
    let mut danger = call(&env, Some("refused-busy"), "everything");
    danger.sandbox = Some(SandboxLevel::DangerFullAccess);
    let answered = tokio::time::timeout(Duration::from_secs(5), bridge.turn(danger)).await;
    let err = answered
        .expect("the refusal waited for the session's running turn")
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { field, .. } if field == "sandbox"),
        "{err}"
    );
    assert!(!first.is_finished(), "the running turn was disturbed");
    first.await.unwrap().unwrap();
    bridge.shutdown().await;
}

/// The config file's errors never echo a value from the file (SECURITY: a secret pasted into
/// the wrong key, or a broken line holding one, must not reach logs or a terminal). The known
/// cases are in config/file.rs's unit tests; these are the ones a TOML parser's own message could
/// quote.
#[test]
fn config_file_errors_never_echo_a_value_whatever_the_syntax_error() {
    const SECRET: &str = "sk-proj-SECRETVALUE0123456789";
    let cases = [
        format!("codex_bin = \"{SECRET}\n"),
        format!("codex_bin = '{SECRET}\n"),
        format!("codex_bin = \"\"\"{SECRET}\n"),
        format!("codex_bin = \"\\q{SECRET}\"\n"),
        format!("max_concurrent = 4{SECRET}\n"),
        format!("max_concurrent = 0x{SECRET}\n"),
        format!("allow_danger = t{SECRET}\n"),
        format!("roots = [\"/a\", {SECRET}]\n"),
        format!("roots = [\"/a\" \"{SECRET}\"]\n"),
        format!("codex_bin = \"a\" \"{SECRET}\"\n"),
        format!("{SECRET}\n"),
        format!("codex_bin = {{ a = \"{SECRET}\" }}\n"),
        format!("max_concurrent = 1979-05-27T{SECRET}\n"),
        format!("codex_bin = \"a\"\ncodex_bin = \"{SECRET}\"\n"),
    ];
    let path = Path::new("/etc/bridge.toml");
    let mut echoed = vec![];
    for text in &cases {
        match parse_config_file(path, text) {
            Ok(_) => echoed.push(format!("accepted: {text:?}")),
            Err(e) => {
                let msg = e.to_string();
                if msg.contains("SECRETVALUE") {
                    echoed.push(format!("{text:?} -> {msg}"));
                }
            }
        }
    }
    assert!(echoed.is_empty(), "{echoed:#?}");
}

/// The short commands (`codex --version`, `codex delete`) get exactly the environment they
/// are given: the test process's own variables (cargo's, the CI's) never reach them.
#[tokio::test]
async fn a_short_command_gets_exactly_the_given_environment() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("codex");
    std::fs::write(&fake, "#!/bin/sh\n/usr/bin/env\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(
        std::env::vars().any(|(k, _)| k.starts_with("CARGO")),
        "the test runs under cargo, with variables the child must not see"
    );
    let env = [
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("NO_COLOR".to_owned(), "1".to_owned()),
    ];
    let out = run_command(&fake, &env, &CodexCommand::Version, None)
        .await
        .unwrap();
    let mut seen: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_owned()))
        // what sh sets itself
        .filter(|k| !["PWD", "SHLVL", "_", "OLDPWD"].contains(&k.as_str()))
        .collect();
    seen.sort();
    assert_eq!(seen, vec!["NO_COLOR", "PATH"], "{seen:?}");
}

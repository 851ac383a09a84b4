//! Fast tests of the runner's stream handling with a scripted stand-in for codex (`/bin/sh`).
//! These prove IO behaviour only (line and output caps, stdin, exit classification); every
//! security property is proven against the real binary in `runner.rs`.

use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use codex_mcp_bridge::codex::argv::{Common, SpawnSpec, build_turn};
use codex_mcp_bridge::codex::events::FailureKind;
use codex_mcp_bridge::codex::process::{Ending, RunOptions};
use codex_mcp_bridge::config::Limits;
use codex_mcp_bridge::error::turn_result;

use crate::support::TestEnv;
use crate::support::bridge::{run_spec_with, turn};

const THREAD: &str = "550e8400-e29b-41d4-a716-446655440000";

/// A turn whose "codex" is `script` run by `/bin/sh` (the argv the builder made is ignored),
/// with `stdin` as the prompt. Built by the crate's own builder: a [`SpawnSpec`] cannot be made
/// any other way.
fn sh(env: &TestEnv, script: &str, stdin: Option<&str>) -> SpawnSpec {
    static N: AtomicUsize = AtomicUsize::new(0);
    let program = env
        .root()
        .join(format!("fake-codex-{}", N.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&program, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let common = Common {
        program,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        overrides: vec![],
        allow_danger: false,
        disable_mcp_servers: vec![],
    };
    // a script that does not read its stdin ignores the one-byte prompt
    build_turn(&common, turn(env, stdin.unwrap_or("p"))).unwrap()
}

fn plain_turn_lines() -> String {
    format!(
        r#"echo '{{"type":"thread.started","thread_id":"{THREAD}"}}'
echo '{{"type":"turn.started"}}'
echo '{{"type":"item.completed","item":{{"id":"i","type":"agent_message","text":"answer"}}}}'
echo '{{"type":"turn.completed","usage":{{"input_tokens":3,"output_tokens":2}}}}'"#
    )
}

fn opts(limits: Limits) -> RunOptions {
    RunOptions::new(Duration::from_secs(20), limits)
}

#[tokio::test]
async fn an_over_long_line_is_skipped_and_reading_goes_on() {
    let env = TestEnv::new();
    let limits = Limits {
        max_line_bytes: 4096,
        ..Limits::default()
    };
    let script = format!(
        "head -c 100000 /dev/zero | tr '\\0' x; echo; echo 'not json'; echo '{{\"type\":\"future.thing\"}}'; {}",
        plain_turn_lines()
    );
    let outcome = run_spec_with(sh(&env, &script, None), opts(limits)).await;
    assert_eq!(outcome.ending, Ending::Completed, "{outcome:?}");
    assert_eq!(outcome.message.as_deref(), Some("answer"));
    assert_eq!(
        outcome.malformed_lines, 2,
        "the long line and the non-JSON line"
    );
    assert_eq!(outcome.unknown_events, 1);
    assert_eq!(outcome.thread_id.unwrap().to_arg(), THREAD);
}

#[tokio::test]
async fn endless_output_stops_the_turn_at_the_cap() {
    let env = TestEnv::new();
    let limits = Limits {
        max_line_bytes: 4096,
        max_output_bytes: 1 << 20,
        ..Limits::default()
    };
    let script = "while :; do echo '{\"type\":\"turn.started\"}'; done";
    let outcome = run_spec_with(sh(&env, script, None), opts(limits)).await;
    assert_eq!(outcome.ending, Ending::OutputCapExceeded { limit: 1 << 20 });
    let err = turn_result(outcome).unwrap_err().to_string();
    assert!(err.contains("cap"), "{err}");
}

#[tokio::test]
async fn stdin_is_written_in_full_and_closed() {
    let env = TestEnv::new();
    let big = "y".repeat(3 * 1024 * 1024);
    let script = r#"n=$(wc -c); echo "{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"$n\"}}"; echo '{"type":"turn.completed"}'"#;
    let outcome = run_spec_with(sh(&env, script, Some(&big)), opts(Limits::default())).await;
    assert_eq!(outcome.ending, Ending::Completed, "{outcome:?}");
    assert_eq!(outcome.message.as_deref().map(str::trim), Some("3145728"));
}

#[tokio::test]
async fn a_silent_non_zero_exit_is_a_crash_with_a_clear_message() {
    let env = TestEnv::new();
    let outcome = run_spec_with(sh(&env, "exit 3", None), opts(Limits::default())).await;
    assert_eq!(
        outcome.ending,
        Ending::Failed {
            kind: FailureKind::Crashed,
            message: "codex exited with status 3 and printed nothing".into()
        }
    );
}

#[tokio::test]
async fn stderr_is_kept_as_a_redacted_tail_and_classified() {
    let env = TestEnv::new();
    let script =
        "echo 'Error: 401 Unauthorized, key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345' >&2; exit 1";
    let outcome = run_spec_with(sh(&env, script, None), opts(Limits::default())).await;
    match &outcome.ending {
        Ending::Failed { kind, message } => {
            assert_eq!(*kind, FailureKind::Auth);
            assert!(
                message.contains("401") && !message.contains("ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_turn_that_failed_after_its_message_is_a_failure() {
    let env = TestEnv::new();
    let script = format!(
        r#"echo '{{"type":"thread.started","thread_id":"{THREAD}"}}'
echo '{{"type":"item.completed","item":{{"id":"i","type":"agent_message","text":"half"}}}}'
echo '{{"type":"turn.failed","error":{{"message":"stream disconnected before completion"}}}}'
exit 1"#
    );
    let outcome = run_spec_with(sh(&env, &script, None), opts(Limits::default())).await;
    assert!(
        matches!(
            outcome.ending,
            Ending::Failed {
                kind: FailureKind::TurnFailed,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(outcome.message.as_deref(), Some("half"));
}

#[tokio::test]
async fn a_secret_cut_by_the_start_of_the_stderr_tail_keeps_none_of_its_remains() {
    let env = TestEnv::new();
    let limits = Limits {
        stderr_tail_bytes: 1000,
        ..Limits::default()
    };
    // the kept tail starts 10 bytes before the token's end: only redacting before the cut
    // sees the token whole (its last 10 characters alone look like nothing)
    let token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
    let script = format!(
        "{{ printf 'Error: push failed with {token}\\n'; head -c 989 /dev/zero | tr '\\0' y; }} >&2; exit 1"
    );
    let outcome = run_spec_with(sh(&env, &script, None), opts(limits)).await;
    let tail = &outcome.exec.as_ref().expect("an exec turn").stderr_tail;
    assert!(tail.starts_with("[REDACTED]\nyyy"), "{tail:.40}");
    assert!(!tail.contains(&token[30..]), "{tail:.40}");
    assert!(tail.len() <= 1000 + "[REDACTED]".len(), "{}", tail.len());
}

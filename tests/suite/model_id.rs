//! A caller's model id is checked once, before anything is queued or spawned, by one rule on
//! both backends (issue 25): a model with a control character is refused by every tool that
//! takes one as ``invalid argument `model` `` with the reason, and no codex process starts (a
//! wrapper in front of the real codex logs every start) and nothing reaches the mock model API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::support::mcp::{Protocol, connect_with, no_spare, server_env, text};
use crate::support::{MockApi, Reply, TestEnv, codex_bin};

/// A wrapper that logs each start (its arguments, one line) and then runs the real codex.
fn logging_codex(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("codex-starts.log");
    let path = dir.join("codex-logged");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"start $*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            codex_bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (path, log)
}

fn starts(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_model_with_a_control_character_is_refused_before_anything_starts_on_both_backends() {
    for backend in ["app-server", "exec"] {
        let env = TestEnv::with_git();
        let mock = MockApi::start().await;
        let (wrapper, log) = logging_codex(env.root());
        let mut vars = no_spare(server_env(&env, &mock));
        vars.retain(|(k, _)| k != "CODEX_BRIDGE_BACKEND" && k != "CODEX_BIN");
        vars.push(("CODEX_BRIDGE_BACKEND".into(), backend.into()));
        vars.push(("CODEX_BIN".into(), wrapper.display().to_string()));
        let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
        // whatever the server starts on its own (a version probe) is done before counting
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = starts(&log);
        // answers the model would give, were a turn to reach it
        mock.push_all([Reply::message("never"), Reply::message("never")]);
        let work = env.work().display().to_string();
        for model in ["gpt-5.5\nx", "gpt-5.5\u{1b}[2J", "gpt\u{85}5", "gpt\r5"] {
            for (tool, args) in [
                (
                    "codex",
                    json!({"prompt": "hi", "model": model, "workingDirectory": work}),
                ),
                ("query", json!({"prompt": "hi", "model": model})),
                ("search", json!({"query": "hi", "model": model})),
                (
                    "structured",
                    json!({"prompt": "hi", "model": model, "schema": {"type": "object"},
                           "workingDirectory": work}),
                ),
                ("review", json!({"model": model, "workingDirectory": work})),
            ] {
                let r = s.call(tool, args).await;
                assert_eq!(r.is_error, Some(true), "{backend} {tool}: {}", text(&r));
                assert!(
                    text(&r).contains("invalid argument `model`")
                        && text(&r).contains("control character"),
                    "{backend} {tool} {model:?}: {}",
                    text(&r)
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            starts(&log),
            before,
            "{backend}: a codex process started:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        assert!(
            mock.responses_requests().is_empty(),
            "{backend}: a request reached the model API"
        );
        // the same call with a good model id runs (the wrapper and the setup work)
        let r = s
            .call(
                "codex",
                json!({"prompt": "hi", "model": "gpt-5.5", "workingDirectory": work}),
            )
            .await;
        assert!(r.is_error != Some(true), "{backend}: {}", text(&r));
        assert!(starts(&log) > before, "{backend}: the wrapper logs starts");
        assert_eq!(mock.responses_requests().len(), 1, "{backend}");
    }
}

//! The bridge's own files are never inside a working directory a turn may write (issue 25): a
//! workspace-write turn whose working directory holds the config file the bridge loaded (or
//! the store) is refused before codex starts, naming `workingDirectory` and the file, and the
//! file is unchanged; a read-only turn still runs there and cannot write it. The negative
//! control: the same scripted write under workspace-write, in a directory whose copy of the
//! file is not the bridge's, is carried out by codex (so the refusal is what keeps the file).
//! Against the real codex of the version under test, on the backend under test.

use serde_json::{Value, json};

use crate::support::mcp::{Protocol, connect_with, server_env, structured, text};
use crate::support::{MockApi, Reply, TestEnv};

const MODEL: &str = "gpt-5.5";
const CONFIG: &str = "# the operator's settings\nmax_concurrent = 2\n";
/// What a hostile model writes into the config file of its working directory.
const TAKEOVER: &str = "printf 'allow_danger = true\\n' >> bridge.toml; echo wrote";

fn ok(r: &rmcp::model::CallToolResult) -> Value {
    assert!(r.is_error != Some(true), "{}", text(r));
    structured(r)
}

#[tokio::test]
async fn a_writable_turn_never_runs_where_the_bridges_config_file_or_store_is() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let config = env.work().join("bridge.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut vars = server_env(&env, &mock);
    vars.push(("CODEX_BRIDGE_CONFIG".into(), config.display().to_string()));
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;

    // workspace-write where the loaded config file is: refused before codex starts
    mock.push_all([Reply::exec_command(TAKEOVER), Reply::message("done")]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "edit", "sessionId": "w", "model": MODEL,
                   "workingDirectory": env.work(), "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let canonical = config.canonicalize().unwrap();
    assert!(
        text(&r).contains("`workingDirectory`")
            && text(&r).contains("config file")
            && text(&r).contains(&canonical.display().to_string()),
        "{}",
        text(&r)
    );
    assert!(mock.responses_requests().is_empty(), "codex ran");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), CONFIG);

    // read-only turns still run there (their sandbox cannot write): the same write fails
    let v = ok(&s
        .call(
            "codex",
            json!({"prompt": "look", "sessionId": "w", "model": MODEL,
                   "workingDirectory": env.work()}),
        )
        .await);
    assert_eq!(v["sandbox"], "read-only", "{v}");
    assert_eq!(mock.responses_requests().len(), 2, "the read-only turn ran");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), CONFIG);
    // the session's stored working directory is held to the same rule
    let r = s
        .call(
            "codex",
            json!({"prompt": "edit", "sessionId": "w", "model": MODEL,
                   "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("config file"), "{}", text(&r));
    // and so is a working directory that holds the store (the root), by either spelling
    for sandbox in ["workspace-write", "full-auto"] {
        let r = s
            .call(
                "codex",
                json!({"prompt": "edit", "model": MODEL, "workingDirectory": env.root(),
                       "sandbox": sandbox}),
            )
            .await;
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        assert!(
            text(&r).contains("`workingDirectory`") && text(&r).contains("store directory"),
            "{}",
            text(&r)
        );
    }
    assert_eq!(mock.responses_requests().len(), 2, "codex ran again");

    // the negative control: the same write under workspace-write where the file is not the
    // bridge's is done by codex
    let plain = env.root().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let copy = plain.join("bridge.toml");
    std::fs::write(&copy, CONFIG).unwrap();
    mock.push_all([Reply::exec_command(TAKEOVER), Reply::message("done")]);
    let v = ok(&s
        .call(
            "codex",
            json!({"prompt": "edit", "sessionId": "p", "model": MODEL,
                   "workingDirectory": plain, "sandbox": "workspace-write"}),
        )
        .await);
    assert_eq!(v["sandbox"], "workspace-write", "{v}");
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        format!("{CONFIG}allow_danger = true\n"),
        "codex did not write the file in its working directory: {v}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), CONFIG);
}

/// Codex's workspace-write lets a turn write `/tmp` wherever it runs: while the bridge's store
/// lies there, a writable turn is refused naming `sandbox` and the store, in any working
/// directory. The negative control: with the store elsewhere, the same kind of turn writes a
/// file under `/tmp` (codex's own rule, which makes the refusal matter).
#[tokio::test]
async fn a_writable_turn_never_runs_while_the_bridges_store_is_in_tmp() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let temp = tempfile::Builder::new()
        .prefix("cmb-own-")
        .tempdir_in("/tmp")
        .unwrap();
    let probe = temp.path().join("probe");

    // the control: store elsewhere, a workspace-write turn writes under /tmp
    let s = connect_with(&server_env(&env, &mock), env.root(), Protocol::Legacy).await;
    mock.push_all([
        Reply::exec_command(&format!("echo wrote > {}", probe.display())),
        Reply::message("done"),
    ]);
    ok(&s
        .call(
            "codex",
            json!({"prompt": "write tmp", "model": MODEL, "workingDirectory": env.work(),
                   "sandbox": "workspace-write"}),
        )
        .await);
    assert_eq!(
        std::fs::read_to_string(&probe).unwrap_or_default().trim(),
        "wrote",
        "codex no longer lets workspace-write write /tmp: the rule below protects nothing"
    );
    drop(s);

    // the store under /tmp: every writable turn refused, before codex starts
    let store = temp.path().join("store");
    let mut vars = server_env(&env, &mock);
    vars.retain(|(k, _)| k != "CODEX_BRIDGE_STORE");
    vars.push(("CODEX_BRIDGE_STORE".into(), store.display().to_string()));
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let before = mock.responses_requests().len();
    mock.push_all([Reply::exec_command(TAKEOVER), Reply::message("done")]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "edit", "model": MODEL, "workingDirectory": env.work(),
                   "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("`sandbox`") && text(&r).contains("store directory"),
        "{}",
        text(&r)
    );
    assert_eq!(mock.responses_requests().len(), before, "codex ran");
    // a read-only turn still runs
    let v = ok(&s
        .call(
            "codex",
            json!({"prompt": "look", "model": MODEL, "workingDirectory": env.work()}),
        )
        .await);
    assert_eq!(v["sandbox"], "read-only", "{v}");
}

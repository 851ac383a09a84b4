//! The suite runs wherever its checkout lies (issue 47). From a checkout under `/tmp` the
//! suite's set-up (`support::work_dir`) puts each test's store, config and `HOME` outside it,
//! and the real server accepts a writable turn there. The negative control: the same tree in
//! the checkout's `.test-work/`, as the suite laid it out before, has the store in `/tmp`,
//! which codex's workspace-write may write, so the server refuses every writable turn (its own
//! rule, `tests/suite/own_files.rs`, which must not bend for the suite).
//! Against the real codex of the version under test, on the backend under test.

use std::path::Path;

use serde_json::json;

use crate::support::mcp::{Protocol, connect_with, server_env, text};
use crate::support::work_dir::{self, Facts};
use crate::support::{MockApi, Reply, TestEnv, codex_bin};

const MODEL: &str = "gpt-5.5";

/// A writable turn in `env` (its store, config and `HOME` where the suite put them): the
/// server's answer, and whether codex wrote the probe file into the working directory.
async fn writable_turn(env: &TestEnv) -> (rmcp::model::CallToolResult, bool) {
    let mock = MockApi::start().await;
    let s = connect_with(&server_env(env, &mock), env.root(), Protocol::Legacy).await;
    mock.push_all([
        Reply::exec_command("echo wrote > probe"),
        Reply::message("done"),
    ]);
    let r = s
        .call(
            "codex",
            json!({"prompt": "write", "model": MODEL, "workingDirectory": env.work(),
                   "sandbox": "workspace-write"}),
        )
        .await;
    let wrote =
        std::fs::read_to_string(env.work().join("probe")).is_ok_and(|p| p.trim() == "wrote");
    (r, wrote)
}

#[tokio::test]
async fn from_a_checkout_in_tmp_the_suites_set_up_lets_a_writable_turn_run() {
    let codex = codex_bin();
    let fake = tempfile::Builder::new()
        .prefix("new comer ")
        .tempdir_in("/tmp")
        .unwrap();
    let checkout = fake.path().join("codex-mcp-bridge");
    std::fs::create_dir(&checkout).unwrap();
    // this process's facts, with the checkout moved under /tmp
    let facts = Facts {
        checkout: work_dir::resolved(&checkout),
        named: None,
        ..work_dir::facts().clone()
    };
    let placed =
        work_dir::decide(&facts, &work_dir::others_reach).unwrap_or_else(|e| panic!("{e}"));
    let tmp = Path::new("/tmp").canonicalize().unwrap();
    for dir in [Some(&placed.work), placed.codex_cli.as_ref()]
        .into_iter()
        .flatten()
    {
        assert!(
            work_dir::in_temp(dir, &facts.temp_dirs).is_none() && !dir.starts_with(&tmp),
            "the suite would work in {}",
            dir.display()
        );
    }
    assert!(
        placed.codex_cli.is_some(),
        "codex would be fetched into the checkout, under /tmp"
    );
    assert!(
        !work_dir::resolved(&codex).starts_with(&tmp),
        "the codex under test lies in /tmp: {}",
        codex.display()
    );

    work_dir::create_dir(&placed.work);
    let env = TestEnv::new_in(&placed.work);
    let (r, wrote) = writable_turn(&env).await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert!(wrote, "codex did not write in the working directory");

    // the control: the same tree in the checkout under /tmp, where the suite used to put it
    let old = checkout.join(".test-work");
    std::fs::create_dir(&old).unwrap();
    let env = TestEnv::new_in(&old);
    let (r, wrote) = writable_turn(&env).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("`sandbox`") && text(&r).contains("store directory"),
        "{}",
        text(&r)
    );
    assert!(
        !wrote,
        "codex ran a writable turn while the store lay in /tmp"
    );
}

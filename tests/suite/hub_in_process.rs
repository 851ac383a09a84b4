//! The hub through its library entry point: servers started with
//! [`codex_mcp_bridge::server::run`] in this test process, each on an in-memory pipe with a
//! real rmcp client on the other end and its own shutdown token, on one temporary store. A
//! script stands in for codex (it only answers `--version`): these tests are about election,
//! relaying, takeover and shutdown, not about codex (`hub.rs` proves those with the built
//! binary and the real codex).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use codex_mcp_bridge::config::Settings;
use codex_mcp_bridge::store::Store;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support::TestEnv;

/// One in-process server and the client connected to it.
struct InProcess {
    client: RunningService<RoleClient, ()>,
    shutdown: CancellationToken,
    served: JoinHandle<Result<(), codex_mcp_bridge::hub::HubError>>,
}

/// A stand-in for codex that answers `--version` as the newest tested codex does.
fn fake_codex(env: &TestEnv) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = env.root().join("fake-codex");
    let version = crate::support::codex_bin::under_test().version_line();
    std::fs::write(
        &path,
        format!("#!/bin/sh\n[ \"$1\" = --version ] && echo '{version}' && exit 0\nexit 1\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn store_dir(env: &TestEnv) -> PathBuf {
    env.root().join("store")
}

/// Start `run` on a pipe and connect a client to it.
async fn start(env: &TestEnv) -> InProcess {
    let settings = Settings {
        codex_bin: Some(fake_codex(env)),
        roots: Some(env.root().display().to_string()),
        store: Some(store_dir(env)),
        // two servers in this process: the first owns the store itself
        owner: Some(codex_mcp_bridge::config::OwnerMode::Process),
        ..Default::default()
    };
    let vars = env
        .codex_env()
        .into_iter()
        .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
        .collect();
    let (client_end, server_end) = tokio::io::duplex(1 << 20);
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(codex_mcp_bridge::server::run(
        settings,
        vars,
        tokio::io::split(server_end),
        shutdown.clone(),
    ));
    let client = tokio::time::timeout(Duration::from_secs(60), ().serve(client_end))
        .await
        .expect("the server answers `initialize` in time")
        .expect("the MCP handshake");
    InProcess {
        client,
        shutdown,
        served,
    }
}

/// `ping`'s structured answer; bounded (a takeover may come first).
async fn ping(server: &InProcess) -> Value {
    let answer = tokio::time::timeout(
        Duration::from_secs(60),
        server.client.call_tool(CallToolRequestParams::new("ping")),
    )
    .await
    .expect("ping answered in time")
    .expect("ping answered");
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    answer
        .structured_content
        .expect("ping's structured content")
}

/// `ping` through a relay whose owner just went: a call the relay passed on before it saw the
/// owner go is lost with an error saying to retry (as `hub.rs` asserts); the retry is answered
/// by the new owner.
async fn ping_after_takeover(server: &InProcess) -> Value {
    for _ in 0..2 {
        let answer = tokio::time::timeout(
            Duration::from_secs(60),
            server.client.call_tool(CallToolRequestParams::new("ping")),
        )
        .await
        .expect("ping answered in time");
        match answer {
            Ok(r) => return r.structured_content.expect("ping's structured content"),
            Err(e) if e.to_string().contains("exited during this call") => continue,
            Err(e) => panic!("ping failed: {e}"),
        }
    }
    panic!("ping lost twice after one takeover")
}

/// Cancel a server's token and wait for `run` to return.
async fn stop(server: InProcess) {
    server.shutdown.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(60), server.served)
        .await
        .expect("run returns after its shutdown token is cancelled")
        .unwrap();
    assert!(ended.is_ok(), "{ended:?}");
    drop(server.client);
}

fn socket(env: &TestEnv) -> PathBuf {
    store_dir(env).join(codex_mcp_bridge::hub::SOCKET_NAME)
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether some server holds the store's lock (opening it here would fail).
fn store_is_held(dir: &Path) -> bool {
    Store::try_open(dir, Duration::ZERO).unwrap().is_none()
}

#[tokio::test]
async fn in_process_the_first_run_owns_the_store_the_second_relays_and_takes_it_over() {
    let env = TestEnv::new();
    let owner = start(&env).await;
    wait_for("the owner listens on the store's socket", || {
        socket(&env).exists()
    })
    .await;
    let relay = start(&env).await;
    // one owner: the store is held (by the first), and the second still answers through it
    let (a, b) = (ping(&owner).await, ping(&relay).await);
    let store = store_dir(&env).display().to_string();
    assert_eq!(a["storePath"], store.as_str(), "{a}");
    assert_eq!(b["storePath"], store.as_str(), "{b}");
    assert!(store_is_held(&store_dir(&env)));

    // the owner shuts down while its process goes on: the relay takes the store over
    stop(owner).await;
    let after = ping_after_takeover(&relay).await;
    assert_eq!(after["storePath"], store.as_str(), "{after}");
    assert!(socket(&env).exists(), "the new owner listens");
    assert!(store_is_held(&store_dir(&env)));

    // a third server relays to the new owner
    let third = start(&env).await;
    assert_eq!(ping(&third).await["storePath"], store.as_str());
    stop(third).await;
    assert!(
        socket(&env).exists(),
        "a relay's shutdown leaves the owner's socket"
    );

    stop(relay).await;
    assert!(!socket(&env).exists(), "a shutdown leaves no socket file");
    // the last services let go of the bridge as their tasks wind down
    wait_for("a shutdown lets go of the store", || {
        !store_is_held(&store_dir(&env))
    })
    .await;
}

#[tokio::test]
async fn in_process_an_owner_whose_client_disconnects_returns_and_leaves_no_socket() {
    let env = TestEnv::new();
    let owner = start(&env).await;
    ping(&owner).await;
    assert!(socket(&env).exists());
    owner.client.cancel().await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(60), owner.served)
        .await
        .expect("run returns when its client disconnects")
        .unwrap();
    assert!(ended.is_ok(), "{ended:?}");
    assert!(!socket(&env).exists(), "a shutdown leaves no socket file");
    wait_for("a shutdown lets go of the store", || {
        !store_is_held(&store_dir(&env))
    })
    .await;
}

//! Per-turn wall time of a warm `codex app-server` thread against `codex exec resume`, and of a
//! cold app-server conversation against a bare `codex exec` turn, side by side in one run against
//! the same mock Responses API and the real codex under test (groundwork of the warm
//! conversations; the figures are in benches/README.md).
//!
//! Each round runs the four measurements in turn, so drift hits them alike:
//! - warm: `turn/start` sent → `turn/completed` read, on one thread of one app-server process
//!   (the crate's client, the templates the bridge will send);
//! - exec resume: `codex exec … resume <id> -- -` on one exec thread, spawn to exit (the argv of
//!   `build_turn`, as the server runs it today);
//! - cold: spawn + `initialize` + `thread/start` + first turn's `turn/completed`;
//! - exec: a bare new `codex exec` turn, spawn to exit.
//!
//! Run: `cargo bench --bench app_server` (`APP_SERVER_ROUNDS=N`, default 10). Without `--bench`
//! (`cargo test --benches`) it runs one round as a smoke test.

// benches report on stdout
#![allow(clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use codex_mcp_bridge::codex::app_server::protocol::{self, TurnParams};
use codex_mcp_bridge::codex::argv::{SpawnSpec, build_turn};
use codex_mcp_bridge::security::ids::ThreadId;

use support::app_server::{AppServer, read_turn};
use support::bridge::{common, turn};
use support::{MockApi, TestEnv};

const LIMIT: Duration = Duration::from_secs(60);

fn main() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let rounds = if bench_mode {
        std::env::var("APP_SERVER_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10usize)
            .max(1)
    } else {
        1
    };
    let bin = support::codex_bin::codex_bin_or_exit("app_server");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let s = rt.block_on(measure(rounds));
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut warm, mut resume, mut cold, mut exec) = s;
    let (w, r, c, e) = (
        med(&mut warm),
        med(&mut resume),
        med(&mut cold),
        med(&mut exec),
    );
    println!(
        "app_server bench: codex {} ({}), {rounds} rounds, medians in ms",
        support::under_test().number(),
        bin.display()
    );
    println!("  warm app-server turn        {:8.1}", w * 1e3);
    println!("  codex exec resume turn      {:8.1}", r * 1e3);
    println!("  cold app-server first turn  {:8.1}", c * 1e3);
    println!("  bare codex exec turn        {:8.1}", e * 1e3);
    println!("  warm / exec resume          {:8.2}", w / r);
    println!("  cold / bare exec            {:8.2}", c / e);
}

async fn exec_turn(spec: &SpawnSpec) -> (f64, String) {
    let started = Instant::now();
    let child = support::process::spawn_bare(spec, Stdio::null())
        .await
        .expect("spawn codex exec");
    let out = tokio::time::timeout(LIMIT, child.wait_with_output())
        .await
        .expect("exec in time")
        .expect("exec output");
    let secs = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "codex exec failed: {}", out.status);
    (secs, String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn warm_turn(app: &mut AppServer, thread: &ThreadId, cwd: &std::path::Path, n: usize) -> f64 {
    let prompt = support::bridge::prompt_of(&format!("warm {n}"));
    let started = Instant::now();
    let id = app
        .client
        .start_turn(&TurnParams {
            thread,
            prompt: &prompt,
            sandbox: None,
            cwd,
            model: None,
            effort: None,
        })
        .await
        .expect("turn/start");
    let log = read_turn(&mut app.events, Some(id.as_str())).await;
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(log.messages.len(), 1, "{log:#?}");
    secs
}

async fn measure(rounds: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let c = common(&env, &mock);
    let cwd = env.work().canonicalize().expect("canonical work dir");

    // the exec thread, and one warm-up resume
    let (_, out) = exec_turn(&build_turn(&c, turn(&env, "exec first")).unwrap()).await;
    let id = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "thread.started")
        .and_then(|v| v["thread_id"].as_str().map(str::to_owned))
        .expect("thread.started");
    let resume_spec = |n: usize| {
        let mut req = turn(&env, &format!("exec resume {n}"));
        req.resume = Some(ThreadId::parse(&id).unwrap());
        build_turn(&c, req.clone()).unwrap()
    };
    exec_turn(&resume_spec(0)).await;

    // the warm thread, and one warm-up turn
    let mut app = AppServer::start(&env, &mock).await;
    let opened = app
        .client
        .open_thread(&protocol::thread_start(&cwd, None, false).unwrap())
        .await
        .expect("thread/start");
    warm_turn(&mut app, &opened.thread, &cwd, 0).await;

    let (mut warm, mut resume, mut cold, mut exec) = (vec![], vec![], vec![], vec![]);
    for n in 1..=rounds {
        warm.push(warm_turn(&mut app, &opened.thread, &cwd, n).await);
        resume.push(exec_turn(&resume_spec(n)).await.0);

        let started = Instant::now();
        let mut fresh = AppServer::start(&env, &mock).await;
        let t = fresh
            .client
            .open_thread(&protocol::thread_start(&cwd, None, false).unwrap())
            .await
            .expect("thread/start");
        warm_turn(&mut fresh, &t.thread, &cwd, n).await;
        cold.push(started.elapsed().as_secs_f64());
        fresh.close().await;

        exec.push(
            exec_turn(&build_turn(&c, turn(&env, &format!("exec {n}"))).unwrap())
                .await
                .0,
        );
    }
    app.close().await;
    (warm, resume, cold, exec)
}

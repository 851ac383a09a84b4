//! Relay overhead: the same calls through the store's owner and through a second process that
//! relays to it over the store's socket (the built server binary, rmcp's real client on each,
//! the real codex against the mock Responses API on loopback).
//!
//! Two measures, each as alternating pairs (owner, relay) so that machine noise hits both
//! sides alike: `listSessions` (no codex: the relay's own hop, in microseconds), and a `codex`
//! turn in a new session. Reported: medians of each side and the median of the pairwise
//! differences, on stdout and as JSON in `<target dir>/relay-report.json`.
//!
//! Run: `cargo bench --bench relay` (`RELAY_PAIRS=50` sets the turn pairs; default 30).
//! Without `--bench` (`cargo test --benches`) it runs 3 pairs of each as a smoke test and
//! writes nothing.

// benches report on stdout
#![allow(clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;

use support::mcp::{Protocol, Server, connect_with, server_bin, server_env, text};
use support::{MockApi, TestEnv};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn timed(s: &Server, tool: &str, args: serde_json::Value) -> Result<f64, String> {
    let start = Instant::now();
    let r = s.call(tool, args).await;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if r.is_error == Some(true) {
        return Err(format!("{tool} failed: {}", text(&r)));
    }
    Ok(ms)
}

struct Pairs {
    owner: Vec<f64>,
    relay: Vec<f64>,
    diff: Vec<f64>,
}

impl Pairs {
    fn summary(&mut self) -> (f64, f64, f64) {
        (
            median(&mut self.owner),
            median(&mut self.relay),
            median(&mut self.diff),
        )
    }
}

async fn pairs(
    owner: &Server,
    relay: &Server,
    n: usize,
    args: impl Fn(usize, &str) -> (String, serde_json::Value),
) -> Result<Pairs, String> {
    let mut p = Pairs {
        owner: vec![],
        relay: vec![],
        diff: vec![],
    };
    for i in 0..n {
        let (tool, a) = args(i, "o");
        let o = timed(owner, &tool, a).await?;
        let (tool, a) = args(i, "r");
        let r = timed(relay, &tool, a).await?;
        p.owner.push(o);
        p.relay.push(r);
        p.diff.push(r - o);
    }
    Ok(p)
}

fn main() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let turn_pairs = if bench_mode {
        std::env::var("RELAY_PAIRS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30)
    } else {
        3
    };
    let hop_pairs = if bench_mode { 500 } else { 3 };
    if !server_bin().is_file() {
        eprintln!(
            "relay: error: build the server first (`cargo build --release --bin codex-mcp-bridge`)"
        );
        std::process::exit(2);
    }
    support::codex_bin::codex_bin_or_exit("relay");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let report = rt.block_on(async {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        let mut vars: Vec<(String, String)> = server_env(&env, &mock)
            .into_iter()
            .filter(|(k, _)| k != "RUST_LOG")
            .collect();
        vars.push(("RUST_LOG".into(), "warn".into()));
        let owner = connect_with(&vars, env.root(), Protocol::Legacy).await;
        let sock = env.root().join("store").join("bridge.sock");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sock.exists() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let relay = connect_with(&vars, env.root(), Protocol::Legacy).await;
        let work = env.work().display().to_string();
        // warm both paths
        pairs(&owner, &relay, 2, |_, _| ("listSessions".into(), json!({}))).await?;
        let mut hop = pairs(&owner, &relay, hop_pairs, |_, _| {
            ("listSessions".into(), json!({"limit": 1}))
        })
        .await?;
        let mut turn = pairs(&owner, &relay, turn_pairs, |i, side| {
            (
                "codex".into(),
                json!({"prompt": "hi", "sessionId": format!("relay-{side}-{i}"), "workingDirectory": work}),
            )
        })
        .await?;
        Ok::<_, String>((hop.summary(), turn.summary(), hop_pairs, turn_pairs))
    });
    let ((h_o, h_r, h_d), (t_o, t_r, t_d), hn, tn) = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("relay: error: {e}");
            std::process::exit(1);
        }
    };
    println!("relay overhead ({hn} listSessions pairs, {tn} codex turn pairs)");
    println!("  listSessions  owner {h_o:8.3} ms  relay {h_r:8.3} ms  median diff {h_d:+8.3} ms");
    println!("  codex turn    owner {t_o:8.2} ms  relay {t_r:8.2} ms  median diff {t_d:+8.2} ms");
    if bench_mode {
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
        let json = json!({
            "listSessions": {"pairs": hn, "ownerMedianMs": h_o, "relayMedianMs": h_r, "medianDiffMs": h_d},
            "codexTurn": {"pairs": tn, "ownerMedianMs": t_o, "relayMedianMs": t_r, "medianDiffMs": t_d},
        });
        let _ = std::fs::write(dir.join("relay-report.json"), json.to_string());
    } else {
        println!("relay: smoke run ok; run with `cargo bench --bench relay` to measure");
    }
}

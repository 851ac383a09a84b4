//! The bridge's overhead per turn over bare codex, against the real codex binary (the codex under
//! test: `CODEX_BIN`, else the test support's fetcher's `CODEX_VERSION_UNDER_TEST`, by default
//! the newest tested) and the mock Responses API.
//!
//! Each pair runs one turn two ways, in alternating order (bridge first on even pairs, bare
//! first on odd ones) so that drift cancels out:
//! - bridge: `build_turn` + `codex_mcp_bridge::codex::process::run`, as the server does;
//! - bare: the same program, argv, environment and cwd, spawned with `tokio::process::Command`,
//!   the prompt written to stdin and stdin closed, stdout read to the end, the child waited for.
//!
//! Every run shares one `CODEX_HOME` (warm, as on a long-lived server); warm-up turns come first.
//! The summary goes to stdout and, as JSON, to `<target dir>/e2e-overhead.json`.
//! The target (median overhead <= 5 ms per turn) is reported, never enforced.
//!
//! Run: `cargo bench --bench e2e_overhead` (`E2E_PAIRS=N` for more than 30 pairs; at least 30).
//! Without `--bench` (`cargo test --benches`) it runs one pair as a smoke test and writes nothing.

// benches report on stdout
#![allow(clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use codex_mcp_bridge::codex::argv::{Common, SpawnSpec, TurnRequest, build_turn};
use codex_mcp_bridge::codex::process::{self, Ending, RunOptions};
use codex_mcp_bridge::config::Limits;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use support::bridge::{common, turn};
use support::{MockApi, TestEnv};

const DEFAULT_PAIRS: usize = 30;
const MIN_PAIRS: usize = 30;
const WARMUP_TURNS: usize = 3;
const TARGET_MS: f64 = 5.0;
const TURN_LIMIT: Duration = Duration::from_secs(60);
const PROMPT: &str = "Reply with the single word ok.";

fn main() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let pairs = if bench_mode { pairs_from_env() } else { 1 };

    let bin = support::codex_bin::codex_bin_or_exit("e2e_overhead");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = rt.block_on(measure(pairs, bench_mode));
    match result {
        Ok(summary) => {
            if bench_mode {
                print_summary(&summary, &bin);
                write_json(&summary, &bin);
            } else {
                println!(
                    "e2e_overhead: smoke run ok (bridge {:.1} ms, bare {:.1} ms); run with \
                     `cargo bench --bench e2e_overhead` to measure",
                    summary.median_bridge, summary.median_bare
                );
            }
        }
        Err(e) => {
            eprintln!("e2e_overhead: error: {e}");
            std::process::exit(1);
        }
    }
}

fn pairs_from_env() -> usize {
    match std::env::var("E2E_PAIRS") {
        Err(_) => DEFAULT_PAIRS,
        Ok(raw) => match raw.trim().parse::<usize>() {
            Ok(n) if n >= MIN_PAIRS => n,
            Ok(n) => {
                eprintln!("e2e_overhead: E2E_PAIRS={n} is below {MIN_PAIRS}; using {MIN_PAIRS}");
                MIN_PAIRS
            }
            Err(_) => {
                eprintln!("e2e_overhead: E2E_PAIRS=`{raw}` is not a number; using {DEFAULT_PAIRS}");
                DEFAULT_PAIRS
            }
        },
    }
}

struct Summary {
    pairs: usize,
    bridge: Vec<Timing>,
    bare: Vec<Timing>,
    /// Per pair, bridge minus bare, in ms: whole turn, head, tail.
    diff_ms: Vec<f64>,
    head_diff_ms: Vec<f64>,
    tail_diff_ms: Vec<f64>,
    median_bridge: f64,
    median_bare: f64,
    median_diff: f64,
    p90_diff: f64,
    containment: process::Containment,
}

impl Summary {
    fn median_of(timings: &[Timing], part: fn(&Timing) -> Duration) -> f64 {
        percentile(
            &timings.iter().map(|t| ms(part(t))).collect::<Vec<_>>(),
            50.0,
        )
    }
}

async fn measure(pairs: usize, bench_mode: bool) -> Result<Summary, String> {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let common = common(&env, &mock);
    let req = turn(&env, PROMPT);
    // the exact spawn the bare runs repeat (every new turn builds the same argv)
    let spec = build_turn(&common, req.clone()).map_err(|e| format!("build_turn: {e}"))?;

    let warmups = if bench_mode { WARMUP_TURNS } else { 1 };
    for _ in 0..warmups {
        bridge_turn(&common, &req).await?;
        bare_turn(&spec).await?;
    }

    let mut bridge = Vec::with_capacity(pairs);
    let mut bare = Vec::with_capacity(pairs);
    for i in 0..pairs {
        let (b, r) = if i % 2 == 0 {
            let b = bridge_turn(&common, &req).await?;
            (b, bare_turn(&spec).await?)
        } else {
            let r = bare_turn(&spec).await?;
            (bridge_turn(&common, &req).await?, r)
        };
        if bench_mode {
            eprintln!(
                "pair {:>3}/{pairs}: bridge {:7.2} ms  bare {:7.2} ms  diff {:+7.2} ms \
                 (head {:+6.2}, tail {:+6.2})",
                i + 1,
                ms(b.total),
                ms(r.total),
                ms(b.total) - ms(r.total),
                ms(b.head) - ms(r.head),
                ms(b.tail) - ms(r.tail),
            );
        }
        bridge.push(b);
        bare.push(r);
    }
    let expected = warmups * 2 + pairs * 2;
    let seen = mock.responses_count();
    if seen != expected {
        return Err(format!(
            "the mock saw {seen} /v1/responses requests, expected {expected} (one per turn)"
        ));
    }

    let diffs = |part: fn(&Timing) -> Duration| -> Vec<f64> {
        bridge
            .iter()
            .zip(&bare)
            .map(|(b, r)| ms(part(b)) - ms(part(r)))
            .collect()
    };
    let diff_ms = diffs(|t| t.total);
    Ok(Summary {
        pairs,
        median_bridge: Summary::median_of(&bridge, |t| t.total),
        median_bare: Summary::median_of(&bare, |t| t.total),
        median_diff: percentile(&diff_ms, 50.0),
        p90_diff: percentile(&diff_ms, 90.0),
        head_diff_ms: diffs(|t| t.head),
        tail_diff_ms: diffs(|t| t.tail),
        diff_ms,
        bridge,
        bare,
        containment: process::containment(),
    })
}

/// One timed turn, split at the first and the last JSONL line codex printed.
#[derive(Clone, Copy)]
struct Timing {
    /// Start to return.
    total: Duration,
    /// Start to the first stdout line (spawn, codex start-up, reading the prompt).
    head: Duration,
    /// Last stdout line to return (codex exit, waiting, cleanup).
    tail: Duration,
}

impl Timing {
    fn new(started: Instant, first: Option<Instant>, last: Option<Instant>) -> Self {
        let end = Instant::now();
        Timing {
            total: end - started,
            head: first.map_or(Duration::ZERO, |f| f - started),
            tail: last.map_or(Duration::ZERO, |l| end - l),
        }
    }
}

/// One turn through the crate: build the argv, then run it; the outcome must be `Completed`.
async fn bridge_turn(common: &Common, req: &TurnRequest) -> Result<Timing, String> {
    let started = Instant::now();
    let spec = build_turn(common, req.clone()).map_err(|e| format!("build_turn: {e}"))?;
    let opts = RunOptions::new(TURN_LIMIT, Limits::default());
    let (mut first, mut last) = (None, None);
    let on_event = |_: &_| {
        let now = Instant::now();
        first.get_or_insert(now);
        last = Some(now);
    };
    let outcome = tokio::time::timeout(TURN_LIMIT * 2, process::run(spec, opts, on_event))
        .await
        .map_err(|_| "the bridge turn did not return in time".to_owned())?
        .map_err(|e| format!("the bridge could not start codex: {e}"))?;
    let timing = Timing::new(started, first, last);
    if outcome.ending != Ending::Completed {
        return Err(format!("bridge turn did not complete: {outcome:#?}"));
    }
    Ok(timing)
}

/// The same spawn without the bridge: argv, environment, cwd, stdin written then closed,
/// stdout and stderr read to the end, the exit waited for.
async fn bare_turn(spec: &SpawnSpec) -> Result<Timing, String> {
    let started = Instant::now();
    let mut child = support::process::spawn_bare(spec, Stdio::piped()).await?;
    let stdout = child.stdout.take().ok_or("stdout not piped")?;
    let mut stderr = child.stderr.take().ok_or("stderr not piped")?;
    let stderr_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf).await;
        buf
    });
    let read_all = async {
        let mut lines = BufReader::new(stdout).lines();
        let (mut text, mut first, mut last) = (String::new(), None, None);
        while let Some(line) = lines
            .next_line()
            .await
            .map_err(|e| format!("stdout: {e}"))?
        {
            let now = Instant::now();
            first.get_or_insert(now);
            last = Some(now);
            text.push_str(&line);
            text.push('\n');
        }
        let status = child.wait().await.map_err(|e| format!("wait: {e}"))?;
        Ok::<_, String>((text, status, first, last))
    };
    let (stdout, status, first, last) = tokio::time::timeout(TURN_LIMIT, read_all)
        .await
        .map_err(|_| "the bare turn did not finish in time".to_owned())??;
    let stderr = stderr_task.await.unwrap_or_default();
    let timing = Timing::new(started, first, last);
    if !status.success() || !stdout.contains("\"turn.completed\"") {
        return Err(format!(
            "bare turn did not complete ({status}):\n{stdout}\n{}",
            String::from_utf8_lossy(&stderr)
        ));
    }
    Ok(timing)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Linear-interpolated percentile (`p` in 0..=100) of unsorted values.
fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = p / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

fn ratio(s: &Summary) -> f64 {
    s.median_bridge / s.median_bare
}

fn print_summary(s: &Summary, bin: &std::path::Path) {
    let verdict = if s.median_diff <= TARGET_MS {
        "within"
    } else {
        "ABOVE"
    };
    println!();
    println!("e2e_overhead: {} pairs, codex {}", s.pairs, bin.display());
    println!("  containment          {:?}", s.containment);
    println!("  median bridge turn   {:8.2} ms", s.median_bridge);
    println!("  median bare turn     {:8.2} ms", s.median_bare);
    println!("  median diff (b - r)  {:+8.2} ms", s.median_diff);
    println!("  p90 diff             {:+8.2} ms", s.p90_diff);
    println!(
        "  min / max diff       {:+8.2} / {:+.2} ms",
        percentile(&s.diff_ms, 0.0),
        percentile(&s.diff_ms, 100.0)
    );
    println!("  ratio bridge/bare    {:8.3}", ratio(s));
    println!(
        "  where it goes (medians; head = start to codex's first JSONL line, tail = last line to return):"
    );
    println!(
        "    head  bridge {:7.2} ms  bare {:7.2} ms  median pairwise diff {:+6.2} ms",
        Summary::median_of(&s.bridge, |t| t.head),
        Summary::median_of(&s.bare, |t| t.head),
        percentile(&s.head_diff_ms, 50.0)
    );
    println!(
        "    tail  bridge {:7.2} ms  bare {:7.2} ms  median pairwise diff {:+6.2} ms",
        Summary::median_of(&s.bridge, |t| t.tail),
        Summary::median_of(&s.bare, |t| t.tail),
        percentile(&s.tail_diff_ms, 50.0)
    );
    println!(
        "  target: median overhead <= {TARGET_MS} ms per turn: {verdict} target ({:+.2} ms)",
        s.median_diff
    );
}

fn write_json(s: &Summary, bin: &std::path::Path) {
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    let rounded = |v: &[f64]| v.iter().copied().map(round).collect::<Vec<f64>>();
    let doc = json!({
        "bench": "e2e_overhead",
        "codex": bin.display().to_string(),
        "codex_version": support::codex_version(),
        "containment": s.containment,
        "pairs": s.pairs,
        "unit": "ms",
        "median_bridge_ms": round(s.median_bridge),
        "median_bare_ms": round(s.median_bare),
        "median_diff_ms": round(s.median_diff),
        "p90_diff_ms": round(s.p90_diff),
        "ratio_median_bridge_over_bare": (ratio(s) * 10_000.0).round() / 10_000.0,
        "target_median_diff_ms": TARGET_MS,
        "within_target": s.median_diff <= TARGET_MS,
        "phases": {
            "head": "start to codex's first JSONL line (spawn, start-up, prompt on stdin)",
            "tail": "codex's last JSONL line to the turn's return (exit, wait, cleanup)",
            "median_head_bridge_ms": round(Summary::median_of(&s.bridge, |t| t.head)),
            "median_head_bare_ms": round(Summary::median_of(&s.bare, |t| t.head)),
            "median_head_diff_ms": round(percentile(&s.head_diff_ms, 50.0)),
            "median_tail_bridge_ms": round(Summary::median_of(&s.bridge, |t| t.tail)),
            "median_tail_bare_ms": round(Summary::median_of(&s.bare, |t| t.tail)),
            "median_tail_diff_ms": round(percentile(&s.tail_diff_ms, 50.0)),
        },
        "bridge_ms": rounded(&s.bridge.iter().map(|t| ms(t.total)).collect::<Vec<_>>()),
        "bare_ms": rounded(&s.bare.iter().map(|t| ms(t.total)).collect::<Vec<_>>()),
        "diff_ms": rounded(&s.diff_ms),
    });
    let path = support::target_dir().join("e2e-overhead.json");
    let text = serde_json::to_string_pretty(&doc).expect("serialize summary");
    match std::fs::write(&path, text + "\n") {
        Ok(()) => println!("  written to {}", path.display()),
        Err(e) => eprintln!("e2e_overhead: cannot write {}: {e}", path.display()),
    }
}

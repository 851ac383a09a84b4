//! Load: a warm-up of one turn per session, then `LOAD_BURSTS` bursts (default 3) of
//! `LOAD_TURNS` codex turns each (default 1000) across `LOAD_SESSIONS` sessions (default 50)
//! through a real MCP client (rmcp's, over the built server binary) with 8 client tasks and
//! `CODEX_BRIDGE_MAX_CONCURRENT=8`, against the real codex (the codex under test, from the test
//! support's fetcher) and the mock Responses API on loopback. The warm-up and every burst end
//! by waiting until each session has gone idle (`LOAD_IDLE_MS`, default 10 s) and its warm
//! process is closed; the next burst continues the same sessions (their actors and warm
//! processes start again). Latency and throughput count the bursts, not the warm-up.
//!
//! Each prompt carries a unique token and the mock answers it with `ANSWER <token>` (a reply
//! routed on the prompt), so a lost, duplicated or crossed answer is seen. Checked after the run:
//! every call got its own answer, the mock served exactly one request per turn and nothing is
//! left unserved, every session's `turnCount` (getSession) is its number of turns, and no process
//! is left under the server. Reported: latency per turn (p50, p90, p99, max), throughput, the
//! server's RSS (VmRSS) and its anonymous part (`RssAnon`: the server's own memory, without its
//! executable's pages that a burst reads in) before the first burst, and after each burst's
//! turns and once every session is idle again, and the server's CPU time per turn in each
//! burst; on stdout and as JSON in `<target dir>/load-report.json`. `_RJEM_MALLOC_CONF` in the
//! bench's environment is passed to the server (to measure other allocator settings).
//!
//! Memory is a guard too, for every burst: at most `LOAD_TARGET_RSS_MB` (40) after the turns
//! (the smoke run, a debug build, instead at most `LOAD_TARGET_IDLE_GROWTH_MB` above the
//! start), and at most `LOAD_TARGET_IDLE_GROWTH_MB` (8) above the start once idle. And memory
//! comes back, judged on the anonymous memory once idle and settled (`LOAD_SETTLE_MS`, default
//! 12 s, after the sessions went idle: the runtime lets a thread of its blocking pool exit after
//! 10 s without work): at most `LOAD_TARGET_IDLE_ANON_GROWTH_MB` (3; a decimal number) above the
//! start after the warm-up and every burst (the first turns pay one-time costs: the store's log
//! buffers, threads started once), and after every burst at most
//! `LOAD_TARGET_BURST_ANON_GROWTH_MB` (0.5; a decimal number) above the figure after the
//! warm-up: what a burst adds comes back, and nothing grows per burst. A check that fails makes
//! the bench exit non-zero. The run stops by itself: a bounded count and a global limit of 40
//! minutes.
//!
//! Run: `cargo bench --bench load` (`LOAD_TURNS=200 cargo bench --bench load` for a short run).
//! Without `--bench` (`cargo test --benches`) it runs the warm-up and two bursts of 16 turns on
//! 4 sessions as a smoke test and writes nothing.

// benches report on stdout
#![allow(clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use support::mcp::{Protocol, connect_with, server_bin, server_env, structured, text};
use support::{MockApi, Reply, TestEnv};

const DEFAULT_TURNS: usize = 1000;
const DEFAULT_SESSIONS: usize = 50;
const DEFAULT_BURSTS: usize = 3;
const CONCURRENCY: usize = 8;
const GLOBAL_LIMIT: Duration = Duration::from_secs(40 * 60);
const CALL_LIMIT: Duration = Duration::from_secs(120);

fn from_env(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("load: error: {name} must be a positive integer, got `{v}`");
                std::process::exit(2);
            }
        },
        _ => default,
    }
}

/// A positive decimal number from the environment (a target), or `default`.
fn from_env_f64(name: &str, default: f64) -> f64 {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<f64>() {
            Ok(n) if n > 0.0 && n.is_finite() => n,
            _ => {
                eprintln!("load: error: {name} must be a positive number, got `{v}`");
                std::process::exit(2);
            }
        },
        _ => default,
    }
}

fn main() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let (turns, sessions, bursts) = if bench_mode {
        (
            from_env("LOAD_TURNS", DEFAULT_TURNS),
            from_env("LOAD_SESSIONS", DEFAULT_SESSIONS),
            from_env("LOAD_BURSTS", DEFAULT_BURSTS),
        )
    } else {
        (16, 4, 2)
    };
    let sessions = sessions.min(turns);

    let server = server_bin();
    if !server.is_file() {
        eprintln!(
            "load: error: the server binary {} is missing; build it first with \
             `cargo build --release --bin codex-mcp-bridge`",
            server.display()
        );
        std::process::exit(2);
    }
    support::codex_bin::codex_bin_or_exit("load");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let outcome = rt.block_on(async {
        tokio::time::timeout(GLOBAL_LIMIT, run(turns, sessions, bursts, bench_mode)).await
    });
    let report = match outcome {
        Ok(r) => r,
        Err(_) => {
            eprintln!("load: error: the run exceeded its global limit of {GLOBAL_LIMIT:?}");
            std::process::exit(1);
        }
    };
    print_report(&report);
    if bench_mode {
        write_json(&report);
    }
    if !report.failures.is_empty() {
        eprintln!("load: FAILED checks:");
        for f in &report.failures {
            eprintln!("  - {f}");
        }
        std::process::exit(1);
    }
    if !bench_mode {
        println!("load: smoke run ok; run with `cargo bench --bench load` to measure");
    }
}

/// One finished call.
struct Done {
    latency: Duration,
    /// `Ok(answer text)` or why the call failed.
    answer: Result<String, String>,
    expected: String,
    session: String,
}

struct Report {
    turns: usize,
    sessions: usize,
    wall: Duration,
    latencies_ms: Vec<f64>,
    answered_right: usize,
    lost: usize,
    duplicated: usize,
    mock_requests: usize,
    unserved_replies: usize,
    turn_counts_right: usize,
    leftover_processes: Vec<i32>,
    bursts: usize,
    rss_before_kb: Option<u64>,
    /// The anonymous (private) part of the RSS before the first burst: what the server itself
    /// holds, without the pages of its own executable that a burst reads in
    anon_before_kb: Option<u64>,
    /// The same two figures after each burst's turns and once every session is idle again
    per_burst: Vec<BurstMemory>,
    failures: Vec<String>,
}

/// The server's memory around one burst of turns.
struct BurstMemory {
    turns: usize,
    wall: Duration,
    /// CPU time (user and system) the server used from the first call of the burst to its last
    /// answer
    cpu_ms: Option<u64>,
    rss_after_kb: Option<u64>,
    rss_idle_kb: Option<u64>,
    anon_after_kb: Option<u64>,
    anon_idle_kb: Option<u64>,
    /// the server's threads after the turns and once idle
    threads_after: Option<u64>,
    threads_idle: Option<u64>,
    /// anonymous memory and threads `LOAD_SETTLE_MS` after the idle figures
    anon_settled_kb: Option<u64>,
    threads_settled: Option<u64>,
}

fn vm_rss_kb(pid: u32) -> Option<u64> {
    status_kb(pid, "VmRSS:")
}

fn rss_anon_kb(pid: u32) -> Option<u64> {
    status_kb(pid, "RssAnon:")
}

/// CPU time (user and system) the process has used, in milliseconds.
fn cpu_ms(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the fields after the command name, which is in parentheses and may hold spaces
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the system and has no preconditions
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_s > 0).then(|| ticks * 1000 / per_s as u64)
}

fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Burst 0 is the warm-up.
fn burst_name(n: usize) -> String {
    if n == 0 {
        "warm-up".to_owned()
    } else {
        format!("burst {n}")
    }
}

fn session_id(i: usize) -> String {
    format!("load-{i:03}")
}

async fn run(turns: usize, sessions: usize, bursts: usize, bench_mode: bool) -> Report {
    let env = TestEnv::new();
    let mock = Arc::new(MockApi::start().await);
    let mut vars: Vec<(String, String)> = server_env(&env, &mock)
        .into_iter()
        .filter(|(k, _)| k != "RUST_LOG")
        .collect();
    vars.push(("RUST_LOG".into(), "warn".into()));
    vars.push((
        "CODEX_BRIDGE_MAX_CONCURRENT".into(),
        CONCURRENCY.to_string(),
    ));
    vars.push(("CODEX_BRIDGE_QUEUE_TIMEOUT_MS".into(), "600000".into()));
    // to measure other allocator settings (the server's environment is otherwise cleared)
    if let Ok(conf) = std::env::var("_RJEM_MALLOC_CONF") {
        vars.push(("_RJEM_MALLOC_CONF".into(), conf));
    }
    // sessions go idle this long after their last turn: each burst ends by waiting for that, to
    // see the memory of the burst come back
    let idle = Duration::from_millis(from_env("LOAD_IDLE_MS", 10_000) as u64);
    vars.push((
        "CODEX_BRIDGE_IDLE_TIMEOUT_MS".into(),
        idle.as_millis().to_string(),
    ));
    // and once idle, the memory is taken again this much later (the runtime lets a thread of its
    // blocking pool exit after 10 s without work)
    let settle = Duration::from_millis(from_env("LOAD_SETTLE_MS", 12_000) as u64);
    let server = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let pid = server.pid;
    let rss_before_kb = vm_rss_kb(pid);
    let anon_before_kb = rss_anon_kb(pid);

    // session i gets turns / sessions turns in each burst, the first (turns % sessions) one more
    let planned: Vec<usize> = (0..sessions)
        .map(|i| turns / sessions + usize::from(i < turns % sessions))
        .collect();
    let work = env.work().display().to_string();
    let mut done: Vec<Done> = vec![];
    let mut per_burst: Vec<BurstMemory> = vec![];
    let mut failures = vec![];
    // burst 0 is the warm-up: one turn per session, which pays what a server pays once, on its
    // first turns (the store's log buffers, threads started once); bursts 1.. are the measured
    for burst in 0..=bursts {
        let plan: Vec<usize> = if burst == 0 {
            vec![1; sessions]
        } else {
            planned.clone()
        };
        let cpu_start = cpu_ms(pid);
        let started = Instant::now();
        let mut workers = vec![];
        for w in 0..CONCURRENCY {
            let owned: Vec<usize> = (0..sessions).filter(|i| i % CONCURRENCY == w).collect();
            let planned = plan.clone();
            let peer = server.client.peer().clone();
            let mock = mock.clone();
            let work = work.clone();
            workers.push(tokio::spawn(async move {
                let mut done = vec![];
                let rounds = owned.iter().map(|i| planned[*i]).max().unwrap_or(0);
                for round in 0..rounds {
                    for &i in &owned {
                        if round >= planned[i] {
                            continue;
                        }
                        let token = format!("TOKEN-B{burst}-S{i:03}-T{round:04}");
                        let expected = format!("ANSWER {token}");
                        let marker = token.clone();
                        mock.push_matching(
                            move |r| r.last_user_text().is_some_and(|t| t.contains(&marker)),
                            Reply::message(&expected),
                        );
                        let mut args = json!({
                            "prompt": format!("Reply with the token {token}."),
                            "sessionId": session_id(i),
                        });
                        // a later burst continues the sessions the first one started (each
                        // gone idle in between: its actor and warm process start again)
                        if burst == 0 && round == 0 {
                            args["workingDirectory"] = json!(work);
                        }
                        let params = CallToolRequestParams::new("codex")
                            .with_arguments(args.as_object().cloned().expect("object"));
                        let t = Instant::now();
                        let answer =
                            match tokio::time::timeout(CALL_LIMIT, peer.call_tool(params)).await {
                                Err(_) => Err(format!("no answer within {CALL_LIMIT:?}")),
                                Ok(Err(e)) => Err(format!("JSON-RPC error: {e}")),
                                Ok(Ok(r)) if r.is_error == Some(true) => Err(text(&r)),
                                Ok(Ok(r)) => {
                                    let v = structured(&r);
                                    if v["sessionId"] != session_id(i) {
                                        Err(format!("answer for session {}", v["sessionId"]))
                                    } else {
                                        Ok(v["response"].as_str().unwrap_or_default().to_owned())
                                    }
                                }
                            };
                        done.push(Done {
                            latency: t.elapsed(),
                            answer,
                            expected,
                            session: session_id(i),
                        });
                    }
                }
                done
            }));
        }
        for w in workers {
            done.extend(w.await.expect("a client task panicked"));
        }
        let wall = started.elapsed();
        let cpu = cpu_ms(pid)
            .zip(cpu_start)
            .map(|(end, start)| end.saturating_sub(start));

        // after the turns, nothing runs under the server but the warm sessions' `codex
        // app-server` processes (the app-server backend keeps them, and a spare, until the
        // idle timeout)
        let turn_processes = || -> Vec<i32> {
            codex_mcp_bridge::codex::process::descendants(pid as i32)
                .into_iter()
                .filter(|p| !support::process::is_app_server(*p))
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut leftover = turn_processes();
        while !leftover.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            leftover = turn_processes();
        }
        if !leftover.is_empty() {
            failures.push(format!(
                "{}: processes left under the server: {leftover:?}",
                burst_name(burst)
            ));
        }
        let rss_after_kb = vm_rss_kb(pid);
        let anon_after_kb = rss_anon_kb(pid);
        let threads_after = status_kb(pid, "Threads:");

        // every session past its idle timeout, then the memory again
        let idle_deadline = Instant::now() + idle + Duration::from_secs(30);
        let mut live = u64::MAX;
        while Instant::now() < idle_deadline {
            let ping = server.call("ping", serde_json::json!({})).await;
            live = ping
                .structured_content
                .as_ref()
                .and_then(|v| v["liveSessions"].as_u64())
                .unwrap_or(u64::MAX);
            if live == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if live != 0 {
            failures.push(format!(
                "{}: {live} sessions still live {:?} past the idle timeout",
                burst_name(burst),
                Duration::from_secs(30)
            ));
        }
        // once every session is idle, their warm processes and the spare are closed too
        let mut warm_left = codex_mcp_bridge::codex::process::descendants(pid as i32);
        while !warm_left.is_empty() && Instant::now() < idle_deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            warm_left = codex_mcp_bridge::codex::process::descendants(pid as i32);
        }
        if !warm_left.is_empty() {
            failures.push(format!(
                "{}: processes left under the server once every session is idle: \
                 {warm_left:?}",
                burst_name(burst)
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        per_burst.push(BurstMemory {
            turns: plan.iter().sum(),
            wall,
            cpu_ms: cpu,
            rss_after_kb,
            rss_idle_kb: vm_rss_kb(pid),
            anon_after_kb,
            anon_idle_kb: rss_anon_kb(pid),
            threads_after,
            threads_idle: status_kb(pid, "Threads:"),
            anon_settled_kb: {
                tokio::time::sleep(settle).await;
                rss_anon_kb(pid)
            },
            threads_settled: status_kb(pid, "Threads:"),
        });
    }
    // throughput and latency: the measured bursts only
    let wall: Duration = per_burst.iter().skip(1).map(|b| b.wall).sum();
    let warmup_turns = sessions;

    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut answered_right = 0;
    let mut lost = 0;
    for d in &done {
        match &d.answer {
            Ok(a) => {
                *seen.entry(a.as_str()).or_default() += 1;
                if *a == d.expected {
                    answered_right += 1;
                } else {
                    lost += 1;
                    if failures.len() < 20 {
                        failures.push(format!(
                            "{}: expected `{}`, got `{a}`",
                            d.session, d.expected
                        ));
                    }
                }
            }
            Err(e) => {
                lost += 1;
                if failures.len() < 20 {
                    failures.push(format!(
                        "{}: `{}` failed: {}",
                        d.session,
                        d.expected,
                        e.chars().take(300).collect::<String>()
                    ));
                }
            }
        }
    }
    let all_turns = warmup_turns + turns * bursts;
    let duplicated: usize = seen.values().map(|n| n.saturating_sub(1)).sum();
    if done.len() != all_turns {
        failures.push(format!("{} calls made, {all_turns} planned", done.len()));
    }
    if lost > 0 {
        failures.push(format!(
            "{lost} of {all_turns} turns lost or answered wrongly"
        ));
    }
    if duplicated > 0 {
        failures.push(format!("{duplicated} answers came back more than once"));
    }
    let mock_requests = mock.responses_count();
    let unserved_replies = mock.pending_replies();
    if mock_requests != all_turns {
        failures.push(format!(
            "the mock served {mock_requests} requests for {all_turns} turns"
        ));
    }
    if unserved_replies != 0 {
        failures.push(format!(
            "{unserved_replies} scripted answers were never asked for"
        ));
    }

    let mut turn_counts_right = 0;
    for (i, want) in planned.iter().enumerate() {
        let want = 1 + want * bursts;
        let params = CallToolRequestParams::new("getSession").with_arguments(
            json!({"sessionId": session_id(i)})
                .as_object()
                .cloned()
                .expect("object"),
        );
        let got = match tokio::time::timeout(CALL_LIMIT, server.client.call_tool(params)).await {
            Ok(Ok(r)) => structured(&r)["session"]["turnCount"].clone(),
            other => json!(format!("{other:?}")),
        };
        if got == json!(want) {
            turn_counts_right += 1;
        } else {
            failures.push(format!(
                "{}: turnCount {got}, expected {want}",
                session_id(i)
            ));
        }
    }
    let leftover_processes = codex_mcp_bridge::codex::process::descendants(pid as i32);
    drop(server);

    memory_guards(
        bench_mode,
        rss_before_kb,
        anon_before_kb,
        &per_burst,
        &mut failures,
    );

    let mut latencies_ms: Vec<f64> = done
        .iter()
        .skip(warmup_turns)
        .map(|d| d.latency.as_secs_f64() * 1000.0)
        .collect();
    latencies_ms.sort_by(f64::total_cmp);
    Report {
        turns: turns * bursts,
        sessions,
        wall,
        latencies_ms,
        answered_right,
        lost,
        duplicated,
        mock_requests,
        unserved_replies,
        turn_counts_right,
        leftover_processes,
        bursts,
        rss_before_kb,
        anon_before_kb,
        per_burst,
        failures,
    }
}

/// The guards on memory: each burst's peak; what is left once every session is idle, against
/// the start (the first burst pays one-time costs: the store's log buffers, threads started
/// once); and what each further burst leaves, against the first burst's idle figure (memory
/// comes back: no growth per burst).
fn memory_guards(
    bench_mode: bool,
    rss_before_kb: Option<u64>,
    anon_before_kb: Option<u64>,
    per_burst: &[BurstMemory],
    failures: &mut Vec<String>,
) {
    let target_mb = from_env("LOAD_TARGET_RSS_MB", 40) as u64;
    let growth_mb = from_env("LOAD_TARGET_IDLE_GROWTH_MB", 8) as u64;
    let anon_growth_mb = from_env_f64("LOAD_TARGET_IDLE_ANON_GROWTH_MB", 3.0);
    let burst_growth_mb = from_env_f64("LOAD_TARGET_BURST_ANON_GROWTH_MB", 0.5);
    let mib = |kb: u64| kb as f64 / 1024.0;
    for (n, b) in per_burst.iter().enumerate() {
        let n = burst_name(n);
        // (a full run is an optimised build, held to the absolute target; the smoke run is a
        // debug build, several times larger, so it is held to the growth alone)
        if let (true, Some(after)) = (bench_mode, b.rss_after_kb)
            && after > target_mb * 1024
        {
            failures.push(format!(
                "{n}: server RSS after the turns {:.1} MiB > {target_mb} MiB",
                mib(after)
            ));
        }
        if let (false, Some(before), Some(after)) = (bench_mode, rss_before_kb, b.rss_after_kb)
            && after > before + growth_mb * 1024
        {
            failures.push(format!(
                "{n}: server RSS after the turns {:.1} MiB, more than {growth_mb} MiB \
                 above the {:.1} MiB before the first turn",
                mib(after),
                mib(before)
            ));
        }
        if let (Some(before), Some(idle)) = (rss_before_kb, b.rss_idle_kb)
            && idle > before + growth_mb * 1024
        {
            failures.push(format!(
                "{n}: server RSS once every session is idle {:.1} MiB, more than \
                 {growth_mb} MiB above the {:.1} MiB before the first turn",
                mib(idle),
                mib(before)
            ));
        }
        // what comes back: the server's own (anonymous) memory once idle and settled (the
        // runtime's idle threads gone); the rest of the RSS growth is its executable's pages,
        // read in by the code paths a burst runs (shared with every other instance, and
        // reclaimable by the kernel)
        if let (Some(before), Some(idle)) = (anon_before_kb, b.anon_settled_kb)
            && idle as f64 > before as f64 + anon_growth_mb * 1024.0
        {
            failures.push(format!(
                "memory did not come back: server anonymous memory once every session is idle \
                 (settled) after the {n} {:.1} MiB, {:.1} MiB above the {:.1} MiB before the first turn \
                 (target: at most {anon_growth_mb} MiB above)",
                mib(idle),
                mib(idle.saturating_sub(before)),
                mib(before)
            ));
        }
    }
    let warm_idle = per_burst.first().and_then(|b| b.anon_settled_kb);
    for (n, b) in per_burst.iter().enumerate().skip(1) {
        if let (Some(warm), Some(idle)) = (warm_idle, b.anon_settled_kb)
            && idle as f64 > warm as f64 + burst_growth_mb * 1024.0
        {
            failures.push(format!(
                "memory did not come back after a burst: server anonymous memory once every \
                 session is idle (settled) after the {} {:.1} MiB, {:.1} MiB above the {:.1} MiB \
                 after the warm-up (target: at most {burst_growth_mb} MiB above)",
                burst_name(n),
                mib(idle),
                mib(idle.saturating_sub(warm)),
                mib(warm)
            ));
        }
    }
}

/// The `p`th percentile (nearest rank) of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn throughput(r: &Report) -> f64 {
    r.turns as f64 / r.wall.as_secs_f64()
}

fn print_report(r: &Report) {
    let l = &r.latencies_ms;
    let kb = |v: Option<u64>| v.map_or("?".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    println!(
        "load: {} turns in {} bursts, {} sessions, {CONCURRENCY} client tasks, \
         CODEX_BRIDGE_MAX_CONCURRENT={CONCURRENCY}",
        r.turns, r.bursts, r.sessions
    );
    println!(
        "  wall {:.1} s, throughput {:.2} turns/s",
        r.wall.as_secs_f64(),
        throughput(r)
    );
    println!(
        "  latency per turn: p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        percentile(l, 50.0),
        percentile(l, 90.0),
        percentile(l, 99.0),
        l.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  answers: {} right, {} lost or wrong, {} duplicated; mock requests {}, unserved {}",
        r.answered_right, r.lost, r.duplicated, r.mock_requests, r.unserved_replies
    );
    println!(
        "  turnCount right on {}/{} sessions; processes left: {}",
        r.turn_counts_right,
        r.sessions,
        r.leftover_processes.len()
    );
    println!(
        "  server RSS before the first burst {}, anonymous (the server's own) {}",
        kb(r.rss_before_kb),
        kb(r.anon_before_kb)
    );
    let mut idle_before = r.anon_before_kb;
    for (n, b) in r.per_burst.iter().enumerate() {
        let cpu = b.cpu_ms.map_or("?".to_owned(), |ms| {
            format!("{:.2} ms", ms as f64 / b.turns.max(1) as f64)
        });
        println!(
            "  {} ({} turns, {:.1} s, server CPU {cpu} per turn): RSS {} after the turns, {} \
             once every session is idle; anonymous {} after, {} once idle",
            burst_name(n),
            b.turns,
            b.wall.as_secs_f64(),
            kb(b.rss_after_kb),
            kb(b.rss_idle_kb),
            kb(b.anon_after_kb),
            kb(b.anon_idle_kb)
        );
        let n = |v: Option<u64>| v.map_or("?".to_owned(), |v| v.to_string());
        println!(
            "    threads {} after, {} once idle; settled: anonymous {}, threads {}",
            n(b.threads_after),
            n(b.threads_idle),
            kb(b.anon_settled_kb),
            n(b.threads_settled)
        );
        if let (Some(before), Some(after), Some(idle)) =
            (idle_before, b.anon_after_kb, b.anon_settled_kb)
        {
            println!(
                "    came back once settled: {:.2} of the {:.2} MiB the burst added; {:+.2} MiB \
                 against the settled figure before it",
                after.saturating_sub(idle) as f64 / 1024.0,
                after.saturating_sub(before) as f64 / 1024.0,
                (idle as f64 - before as f64) / 1024.0
            );
        }
        idle_before = b.anon_settled_kb;
    }
    println!(
        "  checks: {}",
        if r.failures.is_empty() {
            "all passed".to_owned()
        } else {
            format!("{} FAILED", r.failures.len())
        }
    );
}

fn write_json(r: &Report) {
    let l = &r.latencies_ms;
    let round = |v: f64| (v * 100.0).round() / 100.0;
    let mut histogram: BTreeMap<String, usize> = BTreeMap::new();
    for ms in l {
        let bucket = (ms / 250.0).floor() as usize * 250;
        *histogram.entry(format!("{bucket:06}")).or_default() += 1;
    }
    let doc: Value = json!({
        "bench": "load",
        "codex_version": support::codex_version(),
        "turns": r.turns,
        "sessions": r.sessions,
        "client_tasks": CONCURRENCY,
        "max_concurrent": CONCURRENCY,
        "wall_s": round(r.wall.as_secs_f64()),
        "throughput_turns_per_s": round(throughput(r)),
        "latency_ms": {
            "p50": round(percentile(l, 50.0)),
            "p90": round(percentile(l, 90.0)),
            "p99": round(percentile(l, 99.0)),
            "max": round(l.last().copied().unwrap_or(f64::NAN)),
            "mean": round(l.iter().sum::<f64>() / l.len().max(1) as f64),
            "histogram_250ms": histogram,
        },
        "answers": {
            "right": r.answered_right,
            "lost_or_wrong": r.lost,
            "duplicated": r.duplicated,
        },
        "mock_requests": r.mock_requests,
        "unserved_replies": r.unserved_replies,
        "sessions_with_right_turn_count": r.turn_counts_right,
        "leftover_processes": r.leftover_processes,
        "bursts": r.bursts,
        "server_before_kb": {"rss": r.rss_before_kb, "anon": r.anon_before_kb},
        "server_per_burst_kb": r.per_burst.iter().enumerate().map(|(n, b)| json!({
            "burst": burst_name(n),
            "turns": b.turns,
            "wall_s": round(b.wall.as_secs_f64()),
            "server_cpu_ms": b.cpu_ms,
            "rss_after": b.rss_after_kb,
            "rss_idle": b.rss_idle_kb,
            "anon_after": b.anon_after_kb,
            "anon_idle": b.anon_idle_kb,
            "anon_settled": b.anon_settled_kb,
            "threads": {"after": b.threads_after, "idle": b.threads_idle, "settled": b.threads_settled},
        })).collect::<Vec<_>>(),
        "failures": r.failures,
    });
    let path = support::target_dir().join("load-report.json");
    let text = serde_json::to_string_pretty(&doc).expect("serialize report");
    match std::fs::write(&path, text + "\n") {
        Ok(()) => println!("  written to {}", path.display()),
        Err(e) => eprintln!("load: cannot write {}: {e}", path.display()),
    }
}

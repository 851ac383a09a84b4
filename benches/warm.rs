//! The acceptance bench of the warm conversations (issue 15): the bridge, through rmcp's client
//! and the built server binary, once per backend (`CODEX_BRIDGE_BACKEND=exec` and
//! `CODEX_BRIDGE_BACKEND=app-server`), side by side with bare codex, in one run against the same
//! mock Responses API on loopback and the real codex under test.
//!
//! What it measures (medians of wall time, each backend as a ratio to the bare column):
//! - continuing a session: `tools/call codex` with the `sessionId` of a session that has had its
//!   first turn, against a bare `codex exec … resume <id> -- -` turn (spawn to exit, the argv
//!   of `build_turn`); target: app-server at most 0.35 x bare; and against a turn of a raw
//!   `codex app-server` driven directly (the floor: the crate's client on one thread of one
//!   process, `turn/start` sent to `turn/completed` read); target: app-server at most 1.1 x
//!   raw. The server's own CPU per warm turn (user + system time of the bridge process,
//!   children excluded, over those turns) is reported;
//! - the first turn of a new session (a new `sessionId`) against a bare `codex exec` turn;
//!   target: app-server at most 0.6 x bare;
//! - with one nested MCP server in codex's config (`[mcp_servers.slow]` in `CODEX_HOME`) that
//!   takes 1 s to start, turns 2–10 of a session against the same bare resume turn (which starts
//!   the server every turn); target: app-server at most 0.35 x bare. The nested server is this
//!   bench's own binary run with `--warm-bench-slow-mcp-server <marker>`: it appends a line to
//!   the marker on every start, sleeps 1 s, then answers `initialize`, `tools/list` and `ping`.
//!   The starts are counted: bare exec and the exec backend start it once per turn, the
//!   app-server backend must start it once per session (guarded). The bridge runs with
//!   `CODEX_BRIDGE_NESTED_MCP=keep`, the setting that lets codex start it;
//! - the bridge process's own RSS (`VmRSS`, children excluded) after the same turns, per
//!   backend; target: app-server at most 4 MiB above exec;
//! - the memory of a warm session: the PSS (`/proc/PID/smaps_rollup`) of the `codex
//!   app-server` process trees the bridge holds, and its anonymous part (`Pss_Anon`; the rest
//!   is mostly codex's executable, shared with every other codex process), per session, with
//!   one warm session, with one per new session of the first-turn rounds, and in the nested
//!   session (reported).
//!
//! The app-server backend counts as available when, after a `codex` turn, the bridge started
//! with `CODEX_BRIDGE_BACKEND=app-server` holds a `codex app-server` among its descendants. When
//! it does not, its column reads "n/a" and the guard fails ("backend app-server not
//! available"): that is a missed target, not a skip. The exec and bare columns still run.
//!
//! The order of the columns rotates every round, so drift hits them alike. Every bridge
//! has its own store; the columns share one `CODEX_HOME` (the nested phase gives each column its
//! own, to count its starts of the nested server).
//!
//! Run: `cargo bench --bench warm` (`WARM_ROUNDS=N`, default 15, samples of the first two
//! measurements; `WARM_NESTED_TURNS=N`, default 10, turns of the nested session). Targets:
//! `WARM_TARGET_CONTINUE` (0.35), `WARM_TARGET_RAW` (1.1), `WARM_TARGET_FIRST` (0.6),
//! `WARM_TARGET_NESTED` (0.35), `WARM_TARGET_RSS_GROWTH_MB` (4). A missed target exits non-zero.
//! Without `--bench` (`cargo test --bench warm`, a debug build of the server) it runs a smoke
//! version: 3 rounds, a nested session of 4 turns, the first-turn target at 1.25 (three samples
//! of a cold app-server against bare exec read 0.85 to 1.07 on a loaded machine, with a debug
//! server), the raw app-server target at 1.5 (a debug server's own time per turn) and the
//! continuing target at 0.5 (a debug server's continuing turn read 0.33 to 0.37 x bare on CI,
//! three samples each; a warm path that stopped working reads about 1.0); the other targets hold
//! as they are. The report also goes, as JSON, to
//! `<target dir>/warm-report.json` (bench mode only).

// benches report on stdout
#![allow(clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use codex_mcp_bridge::codex::app_server::protocol::{self, TurnParams};
use codex_mcp_bridge::codex::argv::{SpawnSpec, build_turn};
use codex_mcp_bridge::security::ids::ThreadId;
use serde_json::{Value, json};

use support::app_server::{AppServer, read_turn};
use support::bridge::{common, turn};
use support::mcp::{Protocol, Server, connect_with, server_env, text};
use support::{MockApi, TestEnv};

/// The argument that makes this binary the slow nested MCP server.
const SLOW_MCP_ARG: &str = "--warm-bench-slow-mcp-server";
/// How long the nested server takes to start.
const SLOW_START: Duration = Duration::from_secs(1);
const TURN_LIMIT: Duration = Duration::from_secs(120);
const APP: &str = "app-server";
const EXEC: &str = "exec";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(SLOW_MCP_ARG) {
        slow_mcp_server(args.get(2).map(PathBuf::from));
    }
    let bench_mode = args.iter().any(|a| a == "--bench");
    let sizes = Sizes::from_env(bench_mode);
    let bin = support::codex_bin::codex_bin_or_exit("warm");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let report = match rt.block_on(measure(&sizes)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warm: error: {e}");
            std::process::exit(1);
        }
    };
    let failures = report.print(&sizes, &bin);
    if bench_mode {
        report.write_json(&sizes, &bin, &failures);
    }
    if failures.is_empty() {
        println!("warm: every target met");
    } else {
        for f in &failures {
            println!("warm: GUARD FAILED: {f}");
        }
        std::process::exit(1);
    }
}

/// The nested MCP server that takes [`SLOW_START`] to start: one line appended to `marker` per
/// start, then newline-delimited JSON-RPC on stdin/stdout until EOF.
fn slow_mcp_server(marker: Option<PathBuf>) -> ! {
    if let Some(m) = marker {
        let line = format!("start {}\n", std::process::id());
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&m)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!("slow MCP server: cannot write {}: {e}", m.display());
        }
    }
    std::thread::sleep(SLOW_START);
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        // notifications (`notifications/initialized`) get no answer
        let Some(id) = msg.get("id").cloned() else {
            continue;
        };
        let answer = match msg["method"].as_str().unwrap_or_default() {
            "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": msg["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "slow", "version": "0"},
            }}),
            "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
                "name": "noop",
                "description": "Does nothing.",
                "inputSchema": {"type": "object", "properties": {}},
            }]}}),
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            other => json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": format!("method not found: {other}"),
            }}),
        };
        let mut out = stdout.lock();
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
    std::process::exit(0)
}

fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Err(_) => default,
        Ok(raw) => raw.trim().parse().unwrap_or_else(|_| {
            eprintln!("warm: {name}=`{raw}` is not a number; using the default");
            default
        }),
    }
}

struct Sizes {
    rounds: usize,
    nested_turns: usize,
    target_continue: f64,
    target_raw: f64,
    target_first: f64,
    target_nested: f64,
    target_rss_growth_mb: f64,
}

impl Sizes {
    fn from_env(bench_mode: bool) -> Sizes {
        let (rounds, nested_turns, first, raw, continuing) = if bench_mode {
            (
                env_num("WARM_ROUNDS", 15usize),
                env_num("WARM_NESTED_TURNS", 10),
                0.6,
                1.1,
                0.35,
            )
        } else {
            (3, 4, 1.25, 1.5, 0.5)
        };
        Sizes {
            rounds: rounds.max(1),
            nested_turns: nested_turns.max(2),
            target_continue: env_num("WARM_TARGET_CONTINUE", continuing),
            target_raw: env_num("WARM_TARGET_RAW", raw),
            target_first: env_num("WARM_TARGET_FIRST", first),
            target_nested: env_num("WARM_TARGET_NESTED", 0.35),
            target_rss_growth_mb: env_num("WARM_TARGET_RSS_GROWTH_MB", 4.0),
        }
    }
}

/// Samples (seconds) of one measurement, per column; `app` is `None` when the backend is not
/// available.
#[derive(Default)]
struct Row {
    bare: Vec<f64>,
    exec: Vec<f64>,
    app: Option<Vec<f64>>,
}

struct Report {
    /// Why the app-server column could not run, if it could not.
    app_unavailable: Option<String>,
    continuing: Row,
    /// Turns of a raw `codex app-server` driven directly, in the continuing rounds.
    raw: Vec<f64>,
    /// The app-server bridge's own CPU (user + system), ms per continuing turn.
    app_cpu_ms_per_turn: Option<f64>,
    first: Row,
    nested: Row,
    /// Starts of the nested server over the nested session: bare, exec backend, app-server.
    starts: (usize, usize, Option<usize>),
    /// The bridges' own `VmRSS`, KiB, after the same turns.
    rss_exec_kib: u64,
    rss_app_kib: Option<u64>,
    /// The warm app-server trees the bridge held after the continuing turns (one session),
    /// after the first turns (one per session then), and in the nested session (with the
    /// nested server).
    pss_one: Option<Pss>,
    pss_many: Option<Pss>,
    pss_nested: Option<Pss>,
}

/// The memory of the warm app-server process trees a bridge holds: PSS and its anonymous part
/// (`Pss_Anon`; the rest is mostly codex's executable, shared by every codex process), summed
/// over each tree and over the trees.
#[derive(Clone, Copy)]
struct Pss {
    trees: usize,
    pss_kib: u64,
    anon_kib: u64,
}

impl Pss {
    fn per_tree(&self) -> (f64, f64) {
        let n = self.trees.max(1) as f64;
        (mib(self.pss_kib) / n, mib(self.anon_kib) / n)
    }

    fn json(p: Option<Pss>) -> Value {
        p.map_or(
            Value::Null,
            |p| json!({"trees": p.trees, "pss_kib": p.pss_kib, "pss_anon_kib": p.anon_kib}),
        )
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

impl Report {
    /// Prints the table; returns the missed targets.
    fn print(&self, s: &Sizes, bin: &Path) -> Vec<String> {
        let mut failures = vec![];
        if let Some(why) = &self.app_unavailable {
            failures.push(format!("backend app-server not available: {why}"));
        }
        println!();
        println!(
            "warm: codex {} ({}), {} rounds, nested session of {} turns; medians in ms, \
             (ratio to bare)",
            support::under_test().number(),
            bin.display(),
            s.rounds,
            s.nested_turns
        );
        println!(
            "  {:<44} {:>10} {:>18} {:>20}  target (app-server)",
            "", "bare codex", "bridge exec", "bridge app-server"
        );
        let nested_label = format!("nested MCP (1 s start), turns 2-{}", s.nested_turns);
        for (label, row, target, name) in [
            (
                "continuing a session (vs exec resume)",
                &self.continuing,
                s.target_continue,
                "continuing a session",
            ),
            (
                "first turn of a new session (vs exec)",
                &self.first,
                s.target_first,
                "first turn of a new session",
            ),
            (
                nested_label.as_str(),
                &self.nested,
                s.target_nested,
                "nested MCP turns",
            ),
        ] {
            let bare = median(&row.bare);
            let exec = median(&row.exec);
            let app = row.app.as_deref().map(median);
            let app_cell = match app {
                Some(a) => format!("{:8.1} ({:.2})", a * 1e3, a / bare),
                None => "n/a".to_owned(),
            };
            let verdict = match app {
                Some(a) if a / bare <= target => "met",
                Some(_) => "MISSED",
                None => "MISSED (n/a)",
            };
            println!(
                "  {label:<44} {:>10.1} {:>18} {:>20}  <= {target:.2} x: {verdict}",
                bare * 1e3,
                format!("{:8.1} ({:.2})", exec * 1e3, exec / bare),
                app_cell
            );
            if let Some(a) = app
                && a / bare > target
            {
                failures.push(format!(
                    "{name}: app-server {:.1} ms is {:.2} x bare {:.1} ms, above {target:.2} x",
                    a * 1e3,
                    a / bare,
                    bare * 1e3
                ));
            }
        }
        let raw = median(&self.raw);
        let app = self.continuing.app.as_deref().map(median);
        let (cell, verdict) = match app {
            Some(a) if a / raw <= s.target_raw => {
                (format!("{:8.1} ({:.2})", a * 1e3, a / raw), "met")
            }
            Some(a) => (format!("{:8.1} ({:.2})", a * 1e3, a / raw), "MISSED"),
            None => ("n/a".to_owned(), "MISSED (n/a)"),
        };
        println!(
            "  {:<44} {:>10.1} {:>18} {:>20}  <= {:.2} x raw: {verdict}",
            "continuing a session (vs raw app-server)",
            raw * 1e3,
            "-",
            cell,
            s.target_raw
        );
        if let Some(a) = app
            && a / raw > s.target_raw
        {
            failures.push(format!(
                "continuing a session: app-server {:.1} ms is {:.2} x a raw app-server turn \
                 {:.1} ms, above {:.2} x",
                a * 1e3,
                a / raw,
                raw * 1e3,
                s.target_raw
            ));
        }
        println!(
            "  {:<44} {:>10} {:>18} {:>20}  reported",
            "server CPU per warm turn (ms)",
            "-",
            "-",
            self.app_cpu_ms_per_turn
                .map_or("n/a".to_owned(), |c| format!("{c:.2}"))
        );
        let (b, e, a) = self.starts;
        println!(
            "  {:<44} {:>10} {:>18} {:>20}  1 per session",
            format!("nested server starts ({} turns)", s.nested_turns),
            b,
            e,
            a.map_or("n/a".to_owned(), |a| a.to_string())
        );
        if let Some(a) = a
            && a != 1
        {
            failures.push(format!(
                "the app-server backend started the nested MCP server {a} times in one session of \
                 {} turns, expected once",
                s.nested_turns
            ));
        }
        let rss_target = mib(self.rss_exec_kib) + s.target_rss_growth_mb;
        println!(
            "  {:<44} {:>10} {:>18.1} {:>20}  <= exec + {:.1}: {}",
            "bridge's own RSS (MiB)",
            "-",
            mib(self.rss_exec_kib),
            self.rss_app_kib
                .map_or("n/a".to_owned(), |k| format!("{:.1}", mib(k))),
            s.target_rss_growth_mb,
            match self.rss_app_kib {
                Some(k) if mib(k) <= rss_target => "met",
                Some(_) => "MISSED",
                None => "MISSED (n/a)",
            }
        );
        if let Some(k) = self.rss_app_kib
            && mib(k) > rss_target
        {
            failures.push(format!(
                "the bridge's own RSS with the app-server backend, {:.1} MiB, is more than \
                 {:.1} MiB above the exec backend's {:.1} MiB",
                mib(k),
                s.target_rss_growth_mb,
                mib(self.rss_exec_kib)
            ));
        }
        println!(
            "  memory of a warm session (its app-server process tree; PSS, of which anonymous):"
        );
        for (label, p) in [
            ("after the continuing turns", self.pss_one),
            ("after the first turns of new sessions", self.pss_many),
            (
                "in the nested session, with the nested server",
                self.pss_nested,
            ),
        ] {
            let cell = p.map_or("n/a".to_owned(), |p| {
                let (pss, anon) = p.per_tree();
                format!(
                    "{pss:6.1} MiB (anonymous {anon:5.1} MiB) per session, {} warm",
                    p.trees
                )
            });
            println!("    {label:<48} {cell}");
        }
        failures
    }

    fn write_json(&self, s: &Sizes, bin: &Path, failures: &[String]) {
        let ms = |v: &[f64]| {
            v.iter()
                .map(|x| (x * 1e6).round() / 1e3)
                .collect::<Vec<_>>()
        };
        let row = |r: &Row| {
            json!({
                "bare_ms": ms(&r.bare),
                "exec_ms": ms(&r.exec),
                "app_server_ms": r.app.as_deref().map(ms),
                "median_bare_ms": median(&r.bare) * 1e3,
                "median_exec_ms": median(&r.exec) * 1e3,
                "median_app_server_ms": r.app.as_deref().map(|a| median(a) * 1e3),
            })
        };
        let doc = json!({
            "bench": "warm",
            "codex": bin.display().to_string(),
            "codex_version": support::codex_version(),
            "rounds": s.rounds,
            "nested_turns": s.nested_turns,
            "app_server_unavailable": self.app_unavailable,
            "continuing": row(&self.continuing),
            "continuing_raw_app_server_ms": ms(&self.raw),
            "median_continuing_raw_app_server_ms": median(&self.raw) * 1e3,
            "server_cpu_ms_per_warm_turn": self.app_cpu_ms_per_turn,
            "first_turn": row(&self.first),
            "nested": row(&self.nested),
            "nested_starts": {"bare": self.starts.0, "exec": self.starts.1, "app_server": self.starts.2},
            "bridge_rss_kib": {"exec": self.rss_exec_kib, "app_server": self.rss_app_kib},
            "warm_sessions_memory": {
                "after_continuing": Pss::json(self.pss_one),
                "after_first_turns": Pss::json(self.pss_many),
                "nested": Pss::json(self.pss_nested),
            },
            "targets": {
                "continuing": s.target_continue,
                "continuing_vs_raw": s.target_raw,
                "first_turn": s.target_first,
                "nested": s.target_nested,
                "rss_growth_mb": s.target_rss_growth_mb,
            },
            "failures": failures,
        });
        let path = support::target_dir().join("warm-report.json");
        let text = serde_json::to_string_pretty(&doc).expect("serialize the report");
        match std::fs::write(&path, text + "\n") {
            Ok(()) => println!("  written to {}", path.display()),
            Err(e) => eprintln!("warm: cannot write {}: {e}", path.display()),
        }
    }
}

// ---- the columns --------------------------------------------------------------------------

/// The built server for `env` and `mock` with `backend`, its own store, quiet logs.
async fn start_bridge(env: &TestEnv, mock: &MockApi, backend: &str) -> Server {
    let mut vars = server_env(env, mock);
    vars.retain(|(k, _)| {
        !matches!(
            k.as_str(),
            "RUST_LOG" | "CODEX_BRIDGE_STORE" | "CODEX_BRIDGE_BACKEND" | "CODEX_BRIDGE_NESTED_MCP"
        )
    });
    vars.extend([
        ("RUST_LOG".to_owned(), "error".to_owned()),
        (
            "CODEX_BRIDGE_STORE".to_owned(),
            env.root()
                .join(format!("store-{backend}"))
                .display()
                .to_string(),
        ),
        ("CODEX_BRIDGE_BACKEND".to_owned(), backend.to_owned()),
        ("CODEX_BRIDGE_NESTED_MCP".to_owned(), "keep".to_owned()),
    ]);
    connect_with(&vars, env.root(), Protocol::Legacy).await
}

/// One `tools/call codex`, timed; an error result is an error.
async fn bridge_turn(s: &Server, args: Value) -> Result<f64, String> {
    let started = Instant::now();
    let r = s.call("codex", args).await;
    let secs = started.elapsed().as_secs_f64();
    if r.is_error == Some(true) {
        return Err(format!("the bridge's codex turn failed: {}", text(&r)));
    }
    Ok(secs)
}

/// A bare codex turn, spawn to exit; its stdout.
async fn bare_turn(spec: &SpawnSpec) -> Result<(f64, String), String> {
    let started = Instant::now();
    let child = support::process::spawn_bare(spec, Stdio::piped()).await?;
    let out = tokio::time::timeout(TURN_LIMIT, child.wait_with_output())
        .await
        .map_err(|_| "a bare codex turn did not finish in time".to_owned())?
        .map_err(|e| format!("waiting for bare codex: {e}"))?;
    let secs = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || !stdout.contains("\"turn.completed\"") {
        return Err(format!(
            "a bare codex turn did not complete ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((secs, stdout))
}

fn thread_of(stdout: &str) -> Result<ThreadId, String> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "thread.started")
        .and_then(|v| {
            v["thread_id"]
                .as_str()
                .and_then(|t| ThreadId::parse(t).ok())
        })
        .ok_or_else(|| format!("no thread.started in bare codex's output:\n{stdout}"))
}

/// The bare columns of one environment: a new turn, or a resume of the thread it started.
struct Bare<'a> {
    env: &'a TestEnv,
    mock: &'a MockApi,
    thread: Option<ThreadId>,
}

impl Bare<'_> {
    async fn new_turn(&mut self, prompt: &str) -> Result<f64, String> {
        let spec = build_turn(&common(self.env, self.mock), turn(self.env, prompt))
            .map_err(|e| format!("build_turn: {e}"))?;
        let (secs, out) = bare_turn(&spec).await?;
        self.thread.get_or_insert(thread_of(&out)?);
        Ok(secs)
    }

    async fn resume_turn(&mut self, prompt: &str) -> Result<f64, String> {
        let mut req = turn(self.env, prompt);
        req.resume = Some(self.thread.ok_or("no bare thread to resume")?);
        let spec = build_turn(&common(self.env, self.mock), req)
            .map_err(|e| format!("build_turn: {e}"))?;
        Ok(bare_turn(&spec).await?.0)
    }
}

/// A raw `codex app-server` with one thread open: the floor a session turn is measured against.
struct Raw {
    app: AppServer,
    thread: ThreadId,
    cwd: PathBuf,
}

impl Raw {
    async fn start(env: &TestEnv, mock: &MockApi) -> Result<Raw, String> {
        let cwd = env
            .work()
            .canonicalize()
            .map_err(|e| format!("canonical work dir: {e}"))?;
        let app = AppServer::start(env, mock).await;
        let start = protocol::thread_start(&cwd, None, false)
            .map_err(|e| format!("thread/start template: {e}"))?;
        let opened = app
            .client
            .open_thread(&start)
            .await
            .map_err(|e| format!("raw app-server thread/start: {e}"))?;
        Ok(Raw {
            app,
            thread: opened.thread,
            cwd,
        })
    }

    /// One turn, `turn/start` sent to `turn/completed` read.
    async fn turn(&mut self, prompt: &str) -> Result<f64, String> {
        let prompt = support::bridge::prompt_of(prompt);
        let started = Instant::now();
        let id = self
            .app
            .client
            .start_turn(&TurnParams {
                thread: &self.thread,
                prompt: &prompt,
                sandbox: None,
                cwd: &self.cwd,
                model: None,
                effort: None,
            })
            .await
            .map_err(|e| format!("raw app-server turn/start: {e}"))?;
        let log = read_turn(&mut self.app.events, Some(id.as_str())).await;
        let secs = started.elapsed().as_secs_f64();
        if log.messages.len() != 1 {
            return Err(format!(
                "a raw app-server turn did not answer once: {log:#?}"
            ));
        }
        Ok(secs)
    }
}

/// A process's own CPU time (user + system, children excluded), ms.
fn cpu_ms(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // after the command's closing parenthesis: state is field 3; utime and stime are 14 and 15
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .ok_or("no command in /proc/PID/stat")?
        .1
        .split_whitespace()
        .collect();
    let field = |n: usize| -> Result<u64, String> {
        rest.get(n - 3)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat has no field {n}"))
    };
    let ticks = field(14)? + field(15)?;
    Ok(ticks as f64 * 1000.0 / procfs::ticks_per_second() as f64)
}

fn first_args(env: &TestEnv, session: &str, prompt: &str) -> Value {
    json!({"prompt": prompt, "sessionId": session, "workingDirectory": env.work()})
}

fn next_args(session: &str, prompt: &str) -> Value {
    json!({"prompt": prompt, "sessionId": session})
}

// ---- /proc ----------------------------------------------------------------------------------

/// Every live process's parent, from `/proc/PID/stat`.
fn parents() -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // after the command's closing parenthesis: state, ppid
            let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
            let state = rest.next()?;
            let ppid = rest.next()?.parse().ok()?;
            (state != "Z").then_some((pid, ppid))
        })
        .collect()
}

/// `pid` and every live descendant of it.
fn tree(pid: i32, table: &[(i32, i32)]) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(table.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

fn is_app_server(pid: i32) -> bool {
    cmdline(pid).split(' ').any(|a| a == "app-server")
}

/// The `codex app-server` processes among `bridge`'s descendants (the outermost of each tree).
fn app_servers(bridge: u32) -> Vec<i32> {
    let table = parents();
    let parent_of = |p: i32| table.iter().find(|(c, _)| *c == p).map(|(_, pp)| *pp);
    tree(bridge as i32, &table)
        .into_iter()
        .filter(|p| *p != bridge as i32 && is_app_server(*p))
        .filter(|p| !parent_of(*p).is_some_and(is_app_server))
        .collect()
}

fn proc_kib(path: &str, key: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.trim().strip_suffix("kB")?;
        v.trim().parse().ok()
    })
}

fn rss_kib(pid: u32) -> Result<u64, String> {
    proc_kib(&format!("/proc/{pid}/status"), "VmRSS:")
        .ok_or_else(|| format!("no VmRSS for the bridge (pid {pid})"))
}

/// The memory of the warm app-server trees `bridge` holds.
fn warm_pss(bridge: u32) -> Pss {
    let table = parents();
    let mut p = Pss {
        trees: 0,
        pss_kib: 0,
        anon_kib: 0,
    };
    for a in app_servers(bridge) {
        p.trees += 1;
        for pid in tree(a, &table) {
            let rollup = format!("/proc/{pid}/smaps_rollup");
            p.pss_kib += proc_kib(&rollup, "Pss:").unwrap_or(0);
            p.anon_kib += proc_kib(&rollup, "Pss_Anon:").unwrap_or(0);
        }
    }
    p
}

/// Lines in a nested server's marker: its starts.
fn starts(marker: &Path) -> usize {
    std::fs::read_to_string(marker).map_or(0, |t| t.lines().count())
}

// ---- the run --------------------------------------------------------------------------------

/// Runs the four columns of round `r` (bare, exec backend, app-server backend, raw app-server),
/// the order rotated by `r`.
macro_rules! rotate4 {
    ($r:expr, $a:expr, $b:expr, $c:expr, $d:expr) => {
        for k in 0..4 {
            match ($r + k) % 4 {
                0 => $a,
                1 => $b,
                2 => $c,
                _ => $d,
            }
        }
    };
}

/// Runs the three columns of round `r` (bare, exec backend, app-server backend), the order
/// rotated by `r`.
macro_rules! rotate {
    ($r:expr, $a:expr, $b:expr, $c:expr) => {
        for k in 0..3 {
            match ($r + k) % 3 {
                0 => $a,
                1 => $b,
                _ => $c,
            }
        }
    };
}

async fn measure(s: &Sizes) -> Result<Report, String> {
    let mock = MockApi::start().await;
    let env = TestEnv::new();
    let mut bare = Bare {
        env: &env,
        mock: &mock,
        thread: None,
    };
    // warm-up and the bare thread
    bare.new_turn("bare first").await?;
    bare.resume_turn("bare warm-up").await?;

    let exec = start_bridge(&env, &mock, EXEC).await;
    let app = start_bridge(&env, &mock, APP).await;
    bridge_turn(&exec, first_args(&env, "cont", "exec first")).await?;
    bridge_turn(&exec, next_args("cont", "exec warm-up")).await?;
    let held = app_servers(exec.pid).len();
    if held != 0 {
        eprintln!(
            "warm: note: the exec backend's bridge holds {held} codex app-server process(es)"
        );
    }
    bridge_turn(&app, first_args(&env, "cont", "app first")).await?;
    let mut app_unavailable = None;
    if app_servers(app.pid).is_empty() {
        app_unavailable = Some(
            "after a codex turn, the bridge started with CODEX_BRIDGE_BACKEND=app-server holds \
             no `codex app-server` process (the setting is unknown to this build, or the \
             backend fell back to exec)"
                .to_owned(),
        );
        eprintln!("warm: backend app-server not available: its column cannot run");
    }
    let app = if app_unavailable.is_none() {
        bridge_turn(&app, next_args("cont", "app warm-up")).await?;
        Some(app)
    } else {
        None
    };

    // the raw app-server's thread, and one warm-up turn
    let mut raw = Raw::start(&env, &mock).await?;
    raw.turn("raw warm-up").await?;

    // 1. continuing a session
    let mut continuing = Row {
        app: app.as_ref().map(|_| vec![]),
        ..Row::default()
    };
    let mut raw_turns = vec![];
    let mut app_cpu_ms = 0.0;
    for r in 0..s.rounds {
        rotate4!(
            r,
            continuing
                .bare
                .push(bare.resume_turn(&format!("bare {r}")).await?),
            continuing
                .exec
                .push(bridge_turn(&exec, next_args("cont", &format!("exec {r}"))).await?),
            if let (Some(app), Some(v)) = (&app, continuing.app.as_mut()) {
                let before = cpu_ms(app.pid)?;
                v.push(bridge_turn(app, next_args("cont", &format!("app {r}"))).await?);
                app_cpu_ms += cpu_ms(app.pid)? - before;
            },
            raw_turns.push(raw.turn(&format!("raw {r}")).await?)
        );
    }
    raw.app.close().await;
    let app_cpu_ms_per_turn = app.as_ref().map(|_| app_cpu_ms / s.rounds as f64);
    let pss_one = app.as_ref().map(|a| warm_pss(a.pid));

    // 2. the first turn of a new session
    let mut first = Row {
        app: app.as_ref().map(|_| vec![]),
        ..Row::default()
    };
    for r in 0..s.rounds {
        rotate!(
            r,
            first
                .bare
                .push(bare.new_turn(&format!("bare new {r}")).await?),
            first.exec.push(
                bridge_turn(
                    &exec,
                    first_args(&env, &format!("new-{r}"), &format!("exec new {r}"))
                )
                .await?
            ),
            if let (Some(app), Some(v)) = (&app, first.app.as_mut()) {
                v.push(
                    bridge_turn(
                        app,
                        first_args(&env, &format!("new-{r}"), &format!("app new {r}")),
                    )
                    .await?,
                );
            }
        );
    }
    let pss_many = app.as_ref().map(|a| warm_pss(a.pid));
    let rss_exec_kib = rss_kib(exec.pid)?;
    let rss_app_kib = app.as_ref().map(|a| rss_kib(a.pid)).transpose()?;
    drop(exec);
    drop(app);

    // 3. a nested MCP server that takes 1 s to start; one CODEX_HOME per column
    let me = std::env::current_exe().map_err(|e| format!("this bench's path: {e}"))?;
    let nested_env = |name: &str| {
        let e = TestEnv::new();
        let marker = e.root().join(format!("starts-{name}"));
        let config = format!(
            "[mcp_servers.slow]\ncommand = {}\nargs = [{}, {}]\nstartup_timeout_sec = 30\n",
            toml_str(&me),
            toml_str(Path::new(SLOW_MCP_ARG)),
            toml_str(&marker)
        );
        std::fs::write(e.codex_home().join("config.toml"), config)
            .map_err(|err| format!("write the nested config: {err}"))?;
        Ok::<_, String>((e, marker))
    };
    let (bare_env, bare_marker) = nested_env("bare")?;
    let (exec_env, exec_marker) = nested_env(EXEC)?;
    let (app_env, app_marker) = nested_env(APP)?;
    let mut nbare = Bare {
        env: &bare_env,
        mock: &mock,
        thread: None,
    };
    nbare.new_turn("nested bare 1").await?;
    let nexec = start_bridge(&exec_env, &mock, EXEC).await;
    bridge_turn(&nexec, first_args(&exec_env, "nested", "nested exec 1")).await?;
    let napp = match app_unavailable {
        None => {
            let a = start_bridge(&app_env, &mock, APP).await;
            bridge_turn(&a, first_args(&app_env, "nested", "nested app 1")).await?;
            Some(a)
        }
        Some(_) => None,
    };
    for (who, m) in [
        ("bare codex", &bare_marker),
        ("the exec backend", &exec_marker),
    ]
    .into_iter()
    .chain(
        napp.as_ref()
            .map(|_| ("the app-server backend", &app_marker)),
    ) {
        if starts(m) != 1 {
            return Err(format!(
                "{who} started the nested MCP server {} times on a session's first turn, \
                 expected once (is it configured and allowed to run?)",
                starts(m)
            ));
        }
    }
    let mut nested = Row {
        app: napp.as_ref().map(|_| vec![]),
        ..Row::default()
    };
    for t in 2..=s.nested_turns {
        rotate!(
            t,
            nested
                .bare
                .push(nbare.resume_turn(&format!("nested bare {t}")).await?),
            nested
                .exec
                .push(bridge_turn(&nexec, next_args("nested", &format!("nested exec {t}"))).await?),
            if let (Some(app), Some(v)) = (&napp, nested.app.as_mut()) {
                v.push(bridge_turn(app, next_args("nested", &format!("nested app {t}"))).await?);
            }
        );
    }
    let pss_nested = napp.as_ref().map(|a| warm_pss(a.pid));
    let report = Report {
        app_unavailable,
        continuing,
        raw: raw_turns,
        app_cpu_ms_per_turn,
        first,
        nested,
        starts: (
            starts(&bare_marker),
            starts(&exec_marker),
            napp.as_ref().map(|_| starts(&app_marker)),
        ),
        rss_exec_kib,
        rss_app_kib,
        pss_one,
        pss_many,
        pss_nested,
    };
    // every timed turn reached the model once: bare and exec run every turn, app-server every
    // turn or only its first when it is not available
    let columns = 2 + 2 * s.rounds + s.nested_turns;
    let app_turns = if report.app_unavailable.is_some() {
        1
    } else {
        columns
    };
    // and the raw app-server: a warm-up and one turn per round
    let expected = 2 * columns + app_turns + 1 + s.rounds;
    let seen = mock.responses_count();
    if seen < expected {
        return Err(format!(
            "the mock saw {seen} /v1/responses requests, expected {expected}: a turn did not \
             reach the model"
        ));
    }
    if seen > expected {
        eprintln!("warm: note: the mock saw {seen} /v1/responses requests, expected {expected}");
    }
    Ok(report)
}

/// A TOML basic string of a path.
fn toml_str(p: &Path) -> String {
    toml::Value::String(p.display().to_string()).to_string()
}

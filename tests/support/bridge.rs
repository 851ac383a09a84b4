//! Glue between the tests and the crate's runner: a [`Common`] pointed at the real codex and
//! the mock, confined working directories, and `/proc` scans for leftover processes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use codex_mcp_bridge::codex::argv::{Common, SpawnSpec, TurnRequest};
use codex_mcp_bridge::codex::process::{RunOptions, TurnOutcome, run};
use codex_mcp_bridge::config::Limits;
use codex_mcp_bridge::security::env::filter_env;
use codex_mcp_bridge::security::overrides::parse_operator_override;
use codex_mcp_bridge::security::paths::{Confined, Kind};

use super::{MockApi, TestEnv, codex_bin};

/// The child environment the bridge would build from `env`'s variables plus `extra` (which
/// may plant secrets that must not pass the allowlist).
pub fn child_env(env: &TestEnv, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = env
        .codex_env()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
        .collect();
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    filter_env(vars)
}

/// Invocation settings for the real codex against `mock` (the provider as operator overrides).
pub fn common(env: &TestEnv, mock: &MockApi) -> Common {
    Common {
        program: codex_bin(),
        env: child_env(env, &[]),
        overrides: mock
            .provider_overrides()
            .iter()
            .map(|o| parse_operator_override(o).expect("mock provider override is allowed"))
            .collect(),
        allow_danger: false,
        disable_mcp_servers: vec![],
    }
}

/// `dir` confined as a working directory inside itself.
pub fn confine_dir(dir: &Path) -> Confined {
    let canon = dir.canonicalize().expect("canonical work dir");
    codex_mcp_bridge::confine::resolve(
        "workingDirectory",
        canon.to_str().unwrap(),
        Path::new("/"),
        std::slice::from_ref(&canon),
        Kind::Dir,
    )
    .expect("confine work dir")
}

/// A caller's prompt, checked as the MCP layer checks one (a test's prompts are never empty).
pub fn prompt_of(text: &str) -> codex_mcp_bridge::security::prompt::Prompt {
    codex_mcp_bridge::security::prompt::Prompt::parse("prompt", text.into()).expect("a prompt")
}

/// A new-turn request in `env.work()` with `prompt` and everything else default.
pub fn turn(env: &TestEnv, prompt: &str) -> TurnRequest {
    TurnRequest {
        prompt: prompt_of(prompt),
        sandbox: None,
        model: None,
        reasoning_effort: None,
        cwd: confine_dir(env.work()),
        images: vec![],
        resume: None,
        output_schema: None,
        output_last_message: None,
    }
}

/// Run a spec through the crate's runner with a generous timeout.
pub async fn run_spec(spec: SpawnSpec) -> TurnOutcome {
    run_spec_with(
        spec,
        RunOptions::new(Duration::from_secs(60), Limits::default()),
    )
    .await
}

/// Run a spec through the crate's runner with explicit options; the whole call is bounded.
pub async fn run_spec_with(spec: SpawnSpec, opts: RunOptions) -> TurnOutcome {
    let limit = opts.timeout + Duration::from_secs(30);
    tokio::time::timeout(limit, run(spec, opts, |_| {}))
        .await
        .expect("runner returned in time")
        .expect("runner started codex")
}

/// The processes the test process started whose command line contains `mark`, with everything
/// they started: its children that show `mark`, and their descendants. Under `cargo test` the
/// tests share one process and run side by side, so the test process's descendants include
/// other tests' codex: a test judges only the processes that carry a mark of its own.
pub fn started_here(mark: &str) -> Vec<i32> {
    use codex_mcp_bridge::codex::process::descendants;
    let shows_mark = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(mark))
    };
    let me = std::process::id() as i32;
    let mut out = vec![];
    for child in descendants(me)
        .into_iter()
        .filter(|p| crate::support::process::parent_of(*p) == me && shows_mark(*p))
    {
        out.push(child);
        out.extend(descendants(child));
    }
    out
}

/// The codex processes a bridge pointed at `mock` started in this test process (see
/// [`start_bridge`]), with everything they started: every codex such a bridge runs gets the
/// mock's provider override on its command line, which carries the mock's own port.
pub fn own_codex(mock: &MockApi) -> Vec<i32> {
    started_here(&mock.base_url())
}

/// `sleep <n>.<this process's id>`: a tool command that runs for days, whose command line no
/// other test process on the machine shows (the id is zero-padded, so no other's is a prefix
/// of it). A test that scans every process for it (a job escaped into its own session is no
/// descendant of anything the test started) finds only its own, and its clean-up kills nothing
/// of another run's; each test gives its own `n`, which tells apart the tests of one process.
pub fn own_sleep(n: u32) -> String {
    format!("sleep {n}.{:07}", std::process::id())
}

/// Pids of live processes whose command line contains `needle` (zombies excluded).
pub fn pids_with_cmdline(needle: &str) -> Vec<i32> {
    let mut out = vec![];
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if crate::support::process::alive(pid) && cmd.contains(needle) {
            out.push(pid);
        }
    }
    out
}

/// Pids of live processes whose command line starts with `prefix` (e.g. `sleep 123`, which
/// does not match the `bash -lc 'sleep 123; …'` that started it).
pub fn pids_with_cmdline_prefix(prefix: &str) -> Vec<i32> {
    pids_with_cmdline(prefix)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .starts_with(prefix)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Wait until no process matches `needle`, up to `limit`; returns the survivors.
pub async fn wait_no_process(needle: &str, limit: Duration) -> Vec<i32> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = pids_with_cmdline(needle);
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The environment of a live process, from `/proc/PID/environ`.
pub fn environ_of(pid: i32) -> Vec<(String, String)> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .filter_map(|kv| {
            let s = String::from_utf8_lossy(kv);
            s.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// A path under the test's root that no test creates by accident.
/// A `.codex/config.toml` at `at` whose MCP server touches a marker when codex starts it (a
/// repository's own config, which must never load); the marker's path.
pub fn repo_with_marker_server(env: &TestEnv, at: &std::path::Path) -> PathBuf {
    let m = marker(env, "repo-mcp");
    std::fs::create_dir_all(at.join(".codex")).unwrap();
    std::fs::write(
        at.join(".codex/config.toml"),
        format!(
            "[mcp_servers.x]\ncommand = \"touch\"\nargs = [\"{}\"]\n",
            m.display()
        ),
    )
    .unwrap();
    m
}

pub fn marker(env: &TestEnv, name: &str) -> PathBuf {
    env.root().join(format!("marker-{name}"))
}

/// Options for [`start_bridge`].
pub struct BridgeOpts {
    pub max_concurrent: usize,
    pub idle: Duration,
    pub fault_injection: bool,
    pub allow_danger: bool,
    /// The backend (`exec`, `app-server`); `None`: the suite's (`BRIDGE_BACKEND_UNDER_TEST`).
    pub backend: Option<&'static str>,
}

impl Default for BridgeOpts {
    fn default() -> Self {
        BridgeOpts {
            max_concurrent: 4,
            idle: Duration::from_secs(600),
            fault_injection: false,
            allow_danger: false,
            backend: None,
        }
    }
}

/// A running [`codex_mcp_bridge::actors::Bridge`] over a store in the test's root, driving the
/// real codex against `mock`, with `env.root()` as the allowed root.
pub async fn start_bridge(
    env: &TestEnv,
    mock: &MockApi,
    o: BridgeOpts,
) -> codex_mcp_bridge::actors::Bridge {
    use codex_mcp_bridge::actors::{Bridge, Limiter, Shared};
    use codex_mcp_bridge::config::{Config, Settings};
    let settings = Settings {
        roots: Some(env.root().to_string_lossy().into_owned()),
        store: Some(env.root().join("store")),
        max_concurrent: Some(o.max_concurrent),
        backend: o
            .backend
            .map(str::to_owned)
            .or_else(super::mcp::backend_under_test)
            .map(|b| {
                <codex_mcp_bridge::config::Backend as clap::ValueEnum>::from_str(&b, false)
                    .expect("BRIDGE_BACKEND_UNDER_TEST is exec or app-server")
            }),
        ..Default::default()
    };
    let vars: Vec<(String, String)> = env
        .codex_env()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let config = Config::from_settings(&settings, env.root(), &vars).expect("config");
    let store = codex_mcp_bridge::store::Store::open(&config.store_dir).expect("store");
    let mut c = common(env, mock);
    c.allow_danger = o.allow_danger;
    let shared = Shared::new(
        std::sync::Arc::new(config),
        c,
        env.codex_home().to_path_buf(),
        store,
    )
    .with_idle_timeout(o.idle)
    .with_queue_timeout(Duration::from_secs(120))
    .with_fault_injection(o.fault_injection);
    Bridge::start(shared).await.expect("bridge starts")
}

/// [`start_bridge`] on the app-server backend, with the other options at their defaults.
pub async fn start_warm_bridge(env: &TestEnv, mock: &MockApi) -> codex_mcp_bridge::actors::Bridge {
    let o = BridgeOpts {
        backend: Some("app-server"),
        ..Default::default()
    };
    start_bridge(env, mock, o).await
}

/// A turn call in `env.work()` with defaults.
pub fn call(
    env: &TestEnv,
    session: Option<&str>,
    prompt: &str,
) -> codex_mcp_bridge::actors::TurnCall {
    codex_mcp_bridge::actors::TurnCall {
        session_id: session
            .map(|s| codex_mcp_bridge::security::ids::SessionId::parse("sessionId", s).unwrap()),
        reset: false,
        prompt: Some(prompt_of(prompt)),
        files: vec![],
        sandbox: None,
        model: None,
        reasoning_effort: None,
        cwd: codex_mcp_bridge::actors::WorkDir::Given(confine_dir(env.work())),
        timeout: Duration::from_secs(60),
        wait_if_busy: true,
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: None,
        client: None,
        asker: None,
        host: None,
        worktree: None,
    }
}

//! Cost of building a codex argv ([`SpawnSpec`]) on each path: new turn, resumed turn, query,
//! search, review. The builders are pure, so this is CPU only: string formatting, TOML quoting
//! of the `projects` pin, and the clones of the environment and of the prompt (prompts travel
//! over stdin, so each spec owns a copy of the prompt bytes).
//!
//! Run: `cargo bench --bench argv` (about 30 s in total).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use codex_mcp_bridge::codex::argv::{
    Common, OneShotRequest, ReviewRequest, TurnRequest, build_query, build_review, build_search,
    build_turn,
};
use codex_mcp_bridge::confine;
use codex_mcp_bridge::plan::review::ReviewTarget;
use codex_mcp_bridge::plan::values::{ReasoningEffort, SandboxLevel};
use codex_mcp_bridge::security::env::filter_env;
use codex_mcp_bridge::security::ids::{ModelId, ThreadId};
use codex_mcp_bridge::security::overrides::parse_operator_override;
use codex_mcp_bridge::security::paths::{Confined, Kind};
use codex_mcp_bridge::security::prompt::Prompt;
use criterion::{Criterion, criterion_group, criterion_main};

/// A realistic project directory: six levels, so the `projects` pin names six directories.
const WORK: &str = "/home/dev/src/acme/payments-service";
const THREAD: &str = "0199a3c2-7f41-7d2e-9b1a-4c6e2f8d5a10";

/// A 2 KiB task prompt (what a coding agent typically sends for one turn).
fn prompt_2k() -> String {
    let para = "Refactor the retry logic in src/billing/charge.rs so that transient \
                network errors are retried with exponential backoff (base 200 ms, factor 2, \
                at most 5 attempts) while card declines fail immediately; add unit tests \
                for both cases and keep the public API unchanged. ";
    let mut p = String::with_capacity(2048 + para.len());
    while p.len() < 2048 {
        p.push_str(para);
    }
    p.truncate(2048);
    p
}

/// The settings a production server would pass: the filtered environment, one operator
/// override table and one disabled nested MCP server.
fn common() -> Common {
    let vars = [
        ("HOME", "/home/dev"),
        (
            "PATH",
            "/home/dev/.cargo/bin:/home/dev/.local/bin:/usr/local/sbin:/usr/local/bin:\
             /usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("USER", "dev"),
        ("SHELL", "/bin/bash"),
        ("LANG", "en_US.UTF-8"),
        ("TERM", "xterm-256color"),
        ("CODEX_HOME", "/home/dev/.codex"),
        ("OPENAI_API_KEY", "sk-proj-0123456789abcdef0123456789abcdef"),
        // dropped by the filter, as in production
        ("AWS_SECRET_ACCESS_KEY", "not-passed"),
        ("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock"),
    ];
    Common {
        program: PathBuf::from("/usr/local/bin/codex"),
        env: filter_env(vars),
        overrides: [
            r#"model_provider="azure""#,
            r#"model_providers.azure={name="azure",base_url="https://acme.openai.azure.com/openai",wire_api="responses",env_key="OPENAI_API_KEY"}"#,
        ]
        .into_iter()
        .map(|o| parse_operator_override(o).expect("allowed override"))
        .collect(),
        allow_danger: false,
        disable_mcp_servers: vec!["codex-bridge".into()],
    }
}

/// `path` made real under a temporary root, then confined: a `Confined` is only ever the
/// answer of `confine::resolve` (the root is left behind in the temporary directory).
fn confined(path: &str, kind: Kind, field: &str) -> Confined {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    let root = ROOT.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("codex-mcp-bridge-bench-")
            .tempdir()
            .expect("temporary directory");
        dir.keep().canonicalize().expect("canonical root")
    });
    let real = root.join(path.trim_start_matches('/'));
    if kind == Kind::Dir {
        std::fs::create_dir_all(&real).expect("bench directory");
    } else {
        std::fs::create_dir_all(real.parent().expect("a parent")).expect("bench directory");
        std::fs::write(&real, b"png").expect("bench file");
    }
    confine::resolve(
        field,
        real.to_str().expect("UTF-8"),
        Path::new("/"),
        std::slice::from_ref(root),
        kind,
    )
    .expect("confined")
}

fn new_turn(prompt: &str) -> TurnRequest {
    TurnRequest {
        prompt: Prompt::parse("prompt", prompt.to_owned()).expect("a prompt"),
        sandbox: Some(SandboxLevel::WorkspaceWrite),
        model: Some(ModelId::parse("model", "gpt-5.5").unwrap()),
        reasoning_effort: Some(ReasoningEffort::High),
        cwd: confined(WORK, Kind::Dir, "workingDirectory"),
        images: vec![confined(
            &format!("{WORK}/docs/screenshots/checkout-error.png"),
            Kind::Image,
            "files[0]",
        )],
        resume: None,
        output_schema: None,
        output_last_message: None,
    }
}

fn bench_argv(c: &mut Criterion) {
    let common = common();
    let prompt = prompt_2k();

    let new = new_turn(&prompt);
    let mut resumed = new_turn(&prompt);
    resumed.images.clear();
    resumed.resume = Some(ThreadId::parse(THREAD).expect("uuid"));
    let query = OneShotRequest {
        prompt: Prompt::parse("prompt", prompt.clone()).expect("a prompt"),
        model: Some(ModelId::parse("model", "gpt-5.5").unwrap()),
        reasoning_effort: Some(ReasoningEffort::Low),
        cwd: confined(
            "/home/dev/.local/state/codex-mcp-bridge/query-3f2a9c",
            Kind::Dir,
            "workingDirectory",
        ),
    };
    // a search is a short question, not a task
    let search = OneShotRequest {
        prompt: Prompt::parse(
            "query",
            "latest stable tokio release and its MSRV, with the changelog link".into(),
        )
        .expect("a prompt"),
        ..query.clone()
    };
    let review = ReviewRequest {
        target: ReviewTarget::Commit {
            sha: "9fceb02d0ae598e95dc970b74767f19372d61af8".into(),
            title: Some("billing: retry transient charge failures".into()),
        },
        model: Some(ModelId::parse("model", "gpt-5.5").unwrap()),
        cwd: confined(WORK, Kind::Dir, "workingDirectory"),
    };

    // every request builds, so a failing builder cannot be timed as a fast error path
    for (name, spec) in [
        ("new_turn", build_turn(&common, new.clone())),
        ("resumed_turn", build_turn(&common, resumed.clone())),
        ("query", build_query(&common, query.clone())),
        ("search", build_search(&common, search.clone())),
        ("review", build_review(&common, &review)),
    ] {
        let spec = spec.unwrap_or_else(|e| panic!("{name} does not build: {e}"));
        assert!(spec.args().len() > 10, "{name}: {:?}", spec.args());
    }

    let mut g = c.benchmark_group("argv");
    g.bench_function("new_turn", |b| {
        b.iter(|| build_turn(black_box(&common), black_box(new.clone())))
    });
    g.bench_function("resumed_turn", |b| {
        b.iter(|| build_turn(black_box(&common), black_box(resumed.clone())))
    });
    g.bench_function("query", |b| {
        b.iter(|| build_query(black_box(&common), black_box(query.clone())))
    });
    g.bench_function("search", |b| {
        b.iter(|| build_search(black_box(&common), black_box(search.clone())))
    });
    g.bench_function("review", |b| {
        b.iter(|| build_review(black_box(&common), black_box(&review)))
    });
    g.finish();
}

// 5 builders x (1 s warm-up + 4 s measurement), no plots and a lighter bootstrap: about 30 s.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .nresamples(20_000)
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_argv
}
criterion_main!(benches);

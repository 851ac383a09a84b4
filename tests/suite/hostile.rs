//! Hostile input at the MCP level, against the built server driving the real codex against the
//! mock: thousands of tool calls from a seeded generator (wrong types, huge strings, control
//! characters, unknown fields, nesting close to serde_json's depth limit, unreadable
//! attachments, unknown tools), raw garbage on stdin, and arguments nested 10 000 deep.
//!
//! Every generated call to a tool that could start codex carries at least one defect the server
//! must catch before any spawn, so the mock must see no request at all. The server's stdout is
//! tapped on its way to the client: every line it writes must be a JSON-RPC message (rmcp's
//! client silently skips lines that are not JSON, so it would not notice on its own).

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, ProtocolVersion,
};
use rmcp::service::{Peer, RunningService};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::mcp::{server_bin, server_env, structured, text};
use crate::support::{MockApi, TestEnv};

/// The generator's seed: a failure reproduces exactly.
const SEED: u64 = 0x5eed_c0de_0145_2026;
/// Generated calls (plus the fixed ones).
const CALLS: usize = 3000;
/// Calls in flight at once.
const IN_FLIGHT: usize = 16;
/// Every call must be answered within this.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);
/// Nesting of the generated values: with the JSON-RPC envelope (4 levels) it stays under
/// serde_json's recursion limit of 128, so these calls must be answered.
const MAX_GENERATED_DEPTH: usize = 100;

// ---------------------------------------------------------------------------------------------
// A server whose stdout is checked line by line on its way to rmcp's client

/// A server started by [`start_tapped_with`]: stdout is checked line by line on its way to the
/// client; stderr goes to a log file.
pub(super) struct Tapped {
    pub(super) client: RunningService<RoleClient, ClientConfig>,
    pub(super) child: tokio::process::Child,
    pub(super) pid: u32,
    /// Lines on stdout that are not JSON-RPC messages.
    pub(super) bad_stdout: Arc<Mutex<Vec<String>>>,
    /// The server's stderr.
    pub(super) log: PathBuf,
}

/// Why a line the server wrote is not a JSON-RPC message, if it is not.
pub(super) fn not_json_rpc(line: &[u8]) -> Option<String> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let shown = || String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v["jsonrpc"] == "2.0" => None,
        Ok(_) => Some(format!("JSON but not JSON-RPC: {}", shown())),
        Err(e) => Some(format!("not JSON ({e}): {}", shown())),
    }
}

async fn start_tapped(env: &TestEnv, mock: &MockApi) -> Tapped {
    let mut vars = server_env(env, mock);
    vars.retain(|(k, _)| k != "RUST_LOG");
    vars.push(("RUST_LOG".into(), "warn".into()));
    start_tapped_with(&vars, env.root(), &env.root().join("server.log")).await
}

/// Start the built server with `vars` (everything else cleared) in `cwd`, stderr appended to
/// `log`, and connect rmcp's client through the stdout tap.
pub(super) async fn start_tapped_with(vars: &[(String, String)], cwd: &Path, log: &Path) -> Tapped {
    let log_path = log.to_path_buf();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("server log");
    let mut child = tokio::process::Command::new(server_bin())
        .env_clear()
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn server");
    let pid = child.id().expect("server pid");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (client_side, mut tee) = tokio::io::duplex(1 << 16);
    let bad_stdout = Arc::new(Mutex::new(vec![]));
    let bad = bad_stdout.clone();
    tokio::spawn(async move {
        let mut r = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if let Some(why) = not_json_rpc(&line) {
                bad.lock().unwrap().push(why);
            }
            if tee.write_all(&line).await.is_err() {
                break;
            }
        }
    });
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("codex-mcp-bridge-hostile", "0"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25);
    let client = tokio::time::timeout(Duration::from_secs(30), config.serve((client_side, stdin)))
        .await
        .expect("connect in time")
        .expect("connect");
    Tapped {
        client,
        child,
        pid,
        bad_stdout,
        log: log_path,
    }
}

impl Tapped {
    pub(super) fn peer(&self) -> Peer<RoleClient> {
        self.client.peer().clone()
    }

    /// The last lines of the server's stderr, for failure messages.
    pub(super) fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "--- server stderr (tail) ---\n{}",
            lines[lines.len().saturating_sub(40)..].join("\n")
        )
    }

    /// The server still runs, answers `ping`, and wrote nothing but JSON-RPC.
    pub(super) async fn assert_healthy(&mut self) {
        let status = self.child.try_wait().expect("try_wait");
        assert!(
            status.is_none(),
            "the server exited ({status:?}):\n{}",
            self.log_tail()
        );
        let r = match call(&self.peer(), "ping", json!({})).await {
            Answer::Tool(r) => r,
            other => panic!("ping: {other:?}\n{}", self.log_tail()),
        };
        assert_eq!(r.is_error, Some(false), "ping: {}", text(&r));
        assert_eq!(
            structured(&r)["codexFound"],
            true,
            "ping: {}\n{}",
            structured(&r),
            self.log_tail()
        );
        let bad = self.bad_stdout.lock().unwrap().clone();
        assert!(bad.is_empty(), "stdout carried non-JSON-RPC lines: {bad:?}");
    }
}

#[derive(Debug)]
pub(super) enum Answer {
    Tool(CallToolResult),
    Protocol(String),
    Unanswered,
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        other => panic!("arguments must be an object: {other}"),
    }
}

pub(super) async fn call(peer: &Peer<RoleClient>, tool: &str, args: Value) -> Answer {
    call_within(peer, tool, args, ANSWER_WITHIN).await
}

pub(super) async fn call_within(
    peer: &Peer<RoleClient>,
    tool: &str,
    args: Value,
    limit: Duration,
) -> Answer {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(object(args));
    match tokio::time::timeout(limit, peer.call_tool(params)).await {
        Err(_) => Answer::Unanswered,
        Ok(Ok(r)) => Answer::Tool(r),
        Ok(Err(e)) => Answer::Protocol(e.to_string()),
    }
}

/// Runs `f` on a runtime whose threads have stacks deep enough to build, serialize and drop
/// values nested 10 000 deep (serde_json serializes and drops recursively).
fn on_big_stacks<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    const STACK: usize = 256 << 20;
    let worker = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_stack_size(STACK)
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(f());
        })
        .expect("spawn test thread");
    if let Err(panic) = worker.join() {
        std::panic::resume_unwind(panic);
    }
}

// ---------------------------------------------------------------------------------------------
// The generator

/// xorshift64*: tiny, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// What a call must get back.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// An `isError` result naming an invalid argument (a tool that could start codex).
    Rejected,
    /// A JSON-RPC error (an unknown tool).
    ProtocolError,
    /// Any answer (tools that never start a turn; their generated calls may be valid).
    Answered,
}

struct Case {
    tool: String,
    args: Value,
    expect: Expect,
    what: String,
}

/// Files in the working directory that `files` entries point at.
struct Fixture {
    work: PathBuf,
}

impl Fixture {
    fn new(work: &Path) -> Self {
        std::fs::write(work.join("ok.txt"), "hello\n").unwrap();
        std::fs::write(
            work.join("bad-utf8.txt"),
            [0xff, 0xfe, b'S', 0xc3, 0x28, 0, b'\n'],
        )
        .unwrap();
        std::fs::write(work.join("big.txt"), vec![b'a'; (1 << 20) + 1]).unwrap();
        std::fs::write(work.join("img.png"), [0x89, b'P', b'N', b'G']).unwrap();
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", work.join("link-out")).unwrap();
        let fifo = std::ffi::CString::new(work.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
        // a name that is not UTF-8 (no JSON string can name it; it must not disturb anything)
        use std::os::unix::ffi::OsStrExt;
        std::fs::write(
            work.join(std::ffi::OsStr::from_bytes(b"name-\xff\xfe.txt")),
            "x",
        )
        .unwrap();
        Fixture {
            work: work.to_path_buf(),
        }
    }

    fn work(&self) -> String {
        self.work.display().to_string()
    }
}

/// `leaf` wrapped `depth` times, alternating arrays and objects (built without `json!`, which
/// would copy the inner value at every level).
fn nested(depth: usize, leaf: Value) -> Value {
    let mut v = leaf;
    for i in 0..depth {
        v = if i % 2 == 0 {
            Value::Array(vec![v])
        } else {
            let mut m = serde_json::Map::new();
            m.insert("k".into(), v);
            Value::Object(m)
        };
    }
    v
}

/// A JSON text nested `depth` deep, built as a string (for values no serde_json parse accepts).
fn nested_text(depth: usize) -> String {
    format!("{}0{}", "[".repeat(depth), "]".repeat(depth))
}

fn hostile_string(rng: &mut Rng) -> String {
    match rng.below(14) {
        0 => String::new(),
        1 => " \t\r\n ".into(),
        2 => "\u{0}\u{1}\u{7}\u{8}\u{1b}[2J\u{1b}]0;title\u{7}\u{7f}\r\nX".into(),
        3 => "\u{202e}evil\u{200b}\u{feff}\u{fffd}\u{10ffff}".into(),
        4 => rng
            .pick(&["-c", "--help", "-cmcp_servers={}", "--", "-", "--last"])
            .to_string(),
        5 => rng
            .pick(&[
                "../../../../etc/passwd",
                "/etc",
                "/",
                "~",
                ".",
                "..",
                "/proc/self/environ",
            ])
            .to_string(),
        6 => "a".repeat(1 + rng.below(20_000)),
        7 => "$(touch pwned)`id`;rm -rf ~ && echo $OPENAI_API_KEY".into(),
        8 => "%s%n{}{{}}\\\\\"'\u{0}".into(),
        9 => "🦀".repeat(1 + rng.below(5000)),
        10 if rng.percent(2) => "x".repeat(2 << 20),
        11 => format!("sk-{}", "A".repeat(48)),
        12 => rng
            .pick(&[
                "ok.txt",
                "bad-utf8.txt",
                "fifo",
                "link-out",
                "sub",
                "img.png",
                "big.txt",
            ])
            .to_string(),
        _ => "plain".into(),
    }
}

fn junk(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(15) {
        0 => Value::Null,
        1 => Value::Bool(rng.percent(50)),
        2 => json!(i64::MIN),
        3 => json!(u64::MAX),
        4 => json!(-1),
        5 => json!(1.5e308),
        6 => json!(0),
        7..=9 => Value::String(hostile_string(rng)),
        10 if depth > 0 => {
            let n = rng.below(4);
            Value::Array((0..n).map(|_| junk(rng, depth - 1)).collect())
        }
        11 if depth > 0 => {
            let n = rng.below(4);
            let mut m = serde_json::Map::new();
            for _ in 0..n {
                m.insert(hostile_string(rng), junk(rng, depth - 1));
            }
            Value::Object(m)
        }
        12 => nested(rng.below(MAX_GENERATED_DEPTH), json!("leaf")),
        13 => json!(["a", 1, null, {"b": []}]),
        _ => json!({"type": "object"}),
    }
}

const TOOLS: &[&str] = &crate::support::mcp::TOOL_NAMES;

const SPAWNING: &[&str] = &["codex", "query", "search", "structured", "review"];

const UNKNOWN_TOOLS: &[&str] = &[
    "",
    "CODEX",
    "codex ",
    "codex\u{0}",
    "../ping",
    "tools/call",
    "__proto__",
    "exec",
    "\u{1b}[31mping",
];

fn fields(tool: &str) -> &'static [&'static str] {
    match tool {
        "codex" => &[
            "prompt",
            "sessionId",
            "resetSession",
            "sandbox",
            "model",
            "reasoningEffort",
            "workingDirectory",
            "files",
            "timeout",
            "maxResponseLength",
            "waitIfBusy",
            "worktree",
            "base",
        ],
        "query" => &["prompt", "context", "model", "reasoningEffort", "timeout"],
        "search" => &["query", "model", "timeout"],
        "structured" => &[
            "prompt",
            "schema",
            "files",
            "model",
            "workingDirectory",
            "timeout",
        ],
        "review" => &[
            "mode",
            "base",
            "commit",
            "title",
            "model",
            "workingDirectory",
            "timeout",
        ],
        "listSessions" => &["cursor", "limit"],
        "getSession" => &["sessionId"],
        "closeSession" => &["sessionId", "deleteThread", "dropChanges"],
        "diffSession" => &["sessionId", "offset", "limit"],
        "applySession" => &["sessionId"],
        "renameSession" => &["sessionId", "name"],
        "rewindSession" => &["sessionId", "turns"],
        "compactSession" => &["sessionId"],
        _ => &[],
    }
}

fn base_args(tool: &str, fx: &Fixture) -> Value {
    match tool {
        "codex" => json!({"prompt": "hello", "workingDirectory": fx.work(), "sessionId": "s1"}),
        "query" => json!({"prompt": "2+2?"}),
        "search" => json!({"query": "rust"}),
        "structured" => json!({"prompt": "x", "schema": {"type": "object"}}),
        "review" => json!({"workingDirectory": fx.work()}),
        "getSession" | "closeSession" | "diffSession" | "applySession" => {
            json!({"sessionId": "abc"})
        }
        _ => json!({}),
    }
}

/// Values that look right but are not (or are, for the tools that never spawn).
fn plausible(rng: &mut Rng, field: &str, fx: &Fixture) -> Value {
    match field {
        "sessionId" => json!(rng.pick(&[
            "ok-id",
            "-bad",
            "a b",
            "",
            "x/y",
            "é",
            "a".repeat(257).as_str()
        ])),
        "sandbox" => json!(rng.pick(&[
            "read-only",
            "root",
            "danger-full-access",
            "READ-ONLY",
            "full-auto"
        ])),
        "reasoningEffort" => json!(rng.pick(&["low", "max", "", "HIGH"])),
        "mode" => json!(rng.pick(&["uncommitted", "base", "commit", "all", ""])),
        "base" | "commit" => {
            json!(rng.pick(&["main", "-x", "--output=/tmp/x", "HEAD~1", "a..b", "@{-1}"]))
        }
        "workingDirectory" => {
            json!(rng.pick(&[fx.work().as_str(), "/etc", "work", "..", "/nonexistent"]))
        }
        "files" => json!([hostile_string(rng)]),
        "timeout" | "maxResponseLength" | "limit" | "offset" => {
            json!(rng.pick(&[0i64, 1, -5, 999_999_999_999]))
        }
        "cursor" => json!(rng.pick(&["zz", "", "0000000000000000ff", "00"])),
        "schema" => json!(rng.pick(&["{", "42", "{\"type\":\"object\"}", "[]"])),
        _ => Value::String(hostile_string(rng)),
    }
}

/// Makes a call to a spawning tool certainly invalid, with a defect the server checks before
/// any spawn. Returns what it did.
fn fatal(rng: &mut Rng, tool: &str, args: &mut JsonObject, fx: &Fixture) -> String {
    let bad_files: Vec<Value> = vec![
        json!(["bad-utf8.txt"]),
        json!(["missing.txt"]),
        json!(["../outside.txt"]),
        json!(["link-out"]),
        json!(["fifo"]),
        json!(["sub"]),
        json!(["ok.txt:0-1"]),
        json!(["ok.txt:5-9"]),
        json!(["img.png:1-2"]),
        json!(["big.txt"]),
        json!(["ok.txt", "bad-utf8.txt"]),
        json!(["/etc/passwd"]),
        json!([""]),
        json!(["ok.txt\u{0}"]),
        json!(["ok.txt\n"]),
        Value::Array(vec![json!("ok.txt"); 21]),
    ];
    let bad_dirs: Vec<Value> = vec![
        json!("/etc"),
        json!("/"),
        json!("../.."),
        json!(format!("{}/ok.txt", fx.work())),
        json!(format!("{}/nonexistent", fx.work())),
        json!("\u{0}"),
        json!("work\nx"),
        json!(""),
        json!(5),
    ];
    let mut set = |k: &str, v: Value| {
        args.insert(k.to_owned(), v);
    };
    let common = rng.below(6);
    match (tool, common) {
        (_, 0) => {
            let key = rng
                .pick(&[
                    "bogus",
                    "",
                    "PROMPT",
                    "prompt ",
                    "__proto__",
                    "\u{0}",
                    "cwd",
                ])
                .to_string();
            set(&key, junk(rng, 3));
            format!("unknown field `{key}`")
        }
        (_, 1) => {
            set(
                "timeout",
                json!(rng.pick(&[json!(0), json!(-1), json!("soon"), json!(1.5)])),
            );
            "bad timeout".into()
        }
        (_, 2) => {
            set(
                "model",
                json!(rng.pick(&["", "a\u{0}b", "m".repeat(300).as_str()])),
            );
            "bad model".into()
        }
        ("search", _) => {
            if rng.percent(50) {
                args.remove("query");
                "no query".into()
            } else {
                set(
                    "query",
                    json!(rng.pick(&[json!(" \n\t"), json!(7), json!(null), json!([])])),
                );
                "bad query".into()
            }
        }
        ("query", _) => {
            set("reasoningEffort", json!("max"));
            "bad reasoningEffort".into()
        }
        ("codex", 3) => {
            let f = rng.pick(&bad_files).clone();
            let what = format!(
                "bad files {}",
                f.to_string().chars().take(60).collect::<String>()
            );
            set("files", f);
            what
        }
        ("codex", 4) => {
            let d = rng.pick(&bad_dirs).clone();
            set("workingDirectory", d);
            "bad workingDirectory".into()
        }
        ("codex", _) => match rng.below(5) {
            0 => {
                set(
                    "sessionId",
                    json!(rng.pick(&["-x", "a b", "", "../x", "é"])),
                );
                "bad sessionId".into()
            }
            1 => {
                set(
                    "sandbox",
                    json!(rng.pick(&["root", "danger-full-access", "READ-ONLY"])),
                );
                "bad sandbox".into()
            }
            2 => {
                set(
                    "prompt",
                    json!(rng.pick(&[json!(""), json!("   "), json!(5), json!(null)])),
                );
                "bad prompt".into()
            }
            3 => {
                args.remove("prompt");
                "no prompt".into()
            }
            _ => {
                set("reasoningEffort", json!(rng.pick(&["max", "", "HIGH"])));
                "bad reasoningEffort".into()
            }
        },
        ("structured", 3) => {
            set("files", rng.pick(&bad_files).clone());
            "bad files (after the schema was planned)".into()
        }
        ("structured", 4) => {
            // a hostile but valid-looking schema, then a directory outside the roots: the schema
            // is compiled before the directory is checked
            let schemas = [
                json!({"$ref": "http://169.254.169.254/latest/meta-data"}),
                json!({"$ref": "#"}),
                json!({"type": "string", "pattern": "(?:a{100}){100}{100}"}),
                json!({"type": "string", "pattern": "(a+)+$"}),
                json!({"type": "object", "properties": {"a": nested(90, json!({"type": "string"}))}}),
                json!({"type": "object", "additionalProperties": false, "properties": {"x": {"type": "integer"}}, "required": ["x"]}),
            ];
            set("schema", rng.pick(&schemas).clone());
            set("workingDirectory", rng.pick(&bad_dirs).clone());
            "hostile schema, bad workingDirectory".into()
        }
        ("structured", _) => {
            let schemas = [
                json!("not json {"),
                json!(42),
                json!([]),
                json!({"type": 12}),
                json!(nested_text(200)),
                json!({"type": "object", "description": "d".repeat(70 * 1024)}),
            ];
            set("schema", rng.pick(&schemas).clone());
            "bad schema".into()
        }
        ("review", _) => match rng.below(5) {
            0 => {
                set("mode", json!(rng.pick(&["all", "", "BASE"])));
                "bad mode".into()
            }
            1 => {
                set("mode", json!("base"));
                set(
                    "base",
                    json!(rng.pick(&["-x", "--output=/tmp/x", "a..b", ""])),
                );
                "bad base".into()
            }
            2 => {
                set("mode", json!("commit"));
                set("commit", json!(rng.pick(&["--evil", "-p", ""])));
                "bad commit".into()
            }
            3 => {
                set("mode", json!("uncommitted"));
                set("title", json!("t"));
                "title without commit".into()
            }
            _ => {
                let d = rng.pick(&bad_dirs).clone();
                set("workingDirectory", d);
                "bad workingDirectory".into()
            }
        },
        (other, _) => unreachable!("{other} is not a spawning tool"),
    }
}

fn mutate(rng: &mut Rng, tool: &str, args: &mut JsonObject, fx: &Fixture) {
    let fields = fields(tool);
    for _ in 0..rng.below(4) {
        let field = if fields.is_empty() {
            hostile_string(rng)
        } else {
            rng.pick(fields).to_string()
        };
        match rng.below(5) {
            0 => {
                args.insert(field, junk(rng, 3));
            }
            1 => {
                args.insert(field, Value::String(hostile_string(rng)));
            }
            2 => {
                args.remove(&field);
            }
            3 => {
                args.insert(hostile_string(rng), junk(rng, 2));
            }
            _ => {
                let v = plausible(rng, &field, fx);
                args.insert(field, v);
            }
        }
    }
}

fn generate(rng: &mut Rng, fx: &Fixture) -> Case {
    if rng.percent(4) {
        let tool = if rng.percent(20) {
            hostile_string(rng)
        } else {
            rng.pick(UNKNOWN_TOOLS).to_string()
        };
        return Case {
            args: base_args("codex", fx),
            what: "unknown tool".into(),
            tool,
            expect: Expect::ProtocolError,
        };
    }
    let tool = *rng.pick(TOOLS);
    let mut args = object(base_args(tool, fx));
    mutate(rng, tool, &mut args, fx);
    if SPAWNING.contains(&tool) {
        let what = fatal(rng, tool, &mut args, fx);
        Case {
            tool: tool.into(),
            args: Value::Object(args),
            expect: Expect::Rejected,
            what,
        }
    } else {
        Case {
            tool: tool.into(),
            args: Value::Object(args),
            expect: Expect::Answered,
            what: "mutated".into(),
        }
    }
}

/// Calls every generator run makes first: the extremes, deterministically.
fn fixed_cases(fx: &Fixture) -> Vec<Case> {
    let huge = "x".repeat(2 << 20);
    let rejected = |tool: &str, args: Value, what: &str| Case {
        tool: tool.into(),
        args,
        expect: Expect::Rejected,
        what: what.into(),
    };
    vec![
        Case {
            tool: "getSession".into(),
            args: json!({"sessionId": huge}),
            expect: Expect::Answered,
            what: "a 2 MB session id".into(),
        },
        Case {
            tool: "closeSession".into(),
            args: json!({"sessionId": huge, "deleteThread": true}),
            expect: Expect::Answered,
            what: "a 2 MB session id".into(),
        },
        rejected(
            "codex",
            json!({"prompt": "p", "sessionId": huge}),
            "a 2 MB session id",
        ),
        rejected(
            "codex",
            json!({"prompt": "p".repeat(5 << 20)}),
            "a 5 MB prompt",
        ),
        rejected(
            "codex",
            json!({"prompt": "p", "workingDirectory": huge}),
            "a 2 MB working directory",
        ),
        rejected(
            "codex",
            json!({"prompt": "p", "files": [huge]}),
            "a 2 MB file name",
        ),
        rejected(
            "query",
            json!({"prompt": "p", "context": "c".repeat((1 << 20) + 1)}),
            "a context over 1 MiB",
        ),
        rejected(
            "structured",
            json!({"prompt": "p", "schema": nested_text(10_000)}),
            "a schema string nested 10 000 deep",
        ),
        rejected(
            "codex",
            json!({"prompt": "p", "deep": nested(MAX_GENERATED_DEPTH, json!(1))}),
            "an unknown field nested 100 deep",
        ),
        rejected(
            "structured",
            json!({"prompt": "p", "schema": {"type": "object", "properties": {"a": nested(MAX_GENERATED_DEPTH - 4, json!({}))}}, "workingDirectory": "/etc"}),
            "a schema nested near the limit",
        ),
        rejected(
            "codex",
            json!({"prompt": "p", "workingDirectory": fx.work(), "files": ["fifo"]}),
            "a FIFO attached",
        ),
        rejected(
            "codex",
            json!({"prompt": "p", "workingDirectory": fx.work(), "files": ["bad-utf8.txt"]}),
            "a file that is not UTF-8",
        ),
        Case {
            tool: "x".repeat(100_000),
            args: json!({}),
            expect: Expect::ProtocolError,
            what: "a 100 kB tool name".into(),
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_hostile_calls_are_all_answered_and_none_reaches_codex() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let fx = Fixture::new(env.work());
    let mut server = start_tapped(&env, &mock).await;
    let mut rng = Rng(SEED);
    let mut cases = fixed_cases(&fx);
    cases.extend((0..CALLS).map(|_| generate(&mut rng, &fx)));
    let total = cases.len();
    let started = Instant::now();

    let peer = server.peer();
    // every result's structuredContent, error results included, must match the tool's
    // outputSchema: hosts on the TypeScript SDK reject a result that does not
    let output_schemas: Arc<HashMap<String, jsonschema::Validator>> = Arc::new(
        peer.list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| {
                let schema = Value::Object((*t.output_schema.expect("an outputSchema")).clone());
                let v = jsonschema::validator_for(&schema).expect("the outputSchema compiles");
                (t.name.to_string(), v)
            })
            .collect(),
    );
    let outcomes: Vec<(&'static str, Option<String>)> =
        futures::stream::iter(cases.into_iter().enumerate())
            .map(|(i, c)| {
                let peer = peer.clone();
                let output_schemas = output_schemas.clone();
                async move {
                    let answer = call(&peer, &c.tool, c.args).await;
                    let tool: String = c.tool.chars().take(40).collect();
                    let conforms = match &answer {
                        Answer::Tool(r) => r.structured_content.as_ref().is_none_or(|v| {
                            output_schemas.get(&c.tool).is_some_and(|s| s.is_valid(v))
                        }),
                        _ => true,
                    };
                    let ok = conforms
                        && match (&answer, c.expect) {
                            (Answer::Unanswered, _) => false,
                            (Answer::Protocol(m), Expect::ProtocolError) => {
                                m.contains("unknown tool")
                            }
                            (Answer::Tool(r), Expect::Rejected) => {
                                r.is_error == Some(true)
                                    && structured(r)["error"]["kind"] == "invalid_argument"
                                    && text(r).starts_with("invalid argument `")
                            }
                            (Answer::Tool(_) | Answer::Protocol(_), Expect::Answered) => true,
                            _ => false,
                        };
                    let (kind, shown): (&'static str, String) = match &answer {
                        Answer::Tool(r) if r.is_error == Some(true) => {
                            ("isError result", text(r).chars().take(200).collect())
                        }
                        Answer::Tool(r) => ("success result", text(r).chars().take(200).collect()),
                        Answer::Protocol(m) => ("JSON-RPC error", m.chars().take(200).collect()),
                        Answer::Unanswered => ("no answer", "no answer".into()),
                    };
                    let failure = (!ok).then(|| {
                        let schema = if conforms {
                            ""
                        } else {
                            " (structuredContent breaks the outputSchema)"
                        };
                        format!(
                            "#{i} {tool} ({}), expected {:?}{schema}: {shown}",
                            c.what, c.expect
                        )
                    });
                    (kind, failure)
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
    let elapsed = started.elapsed();
    let count = |k: &str| outcomes.iter().filter(|(kind, _)| *kind == k).count();
    eprintln!(
        "{total} hostile calls in {elapsed:?}: {} isError results, {} JSON-RPC errors, {} \
         successes, {} unanswered",
        count("isError result"),
        count("JSON-RPC error"),
        count("success result"),
        count("no answer"),
    );
    let failures: Vec<&String> = outcomes.iter().filter_map(|(_, f)| f.as_ref()).collect();
    assert!(
        failures.is_empty(),
        "{} of {total} calls went wrong:\n{}",
        failures.len(),
        failures
            .iter()
            .take(30)
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );

    assert_eq!(
        mock.responses_count(),
        0,
        "a generated call reached the model"
    );
    server.assert_healthy().await;
    let ping = match call(&server.peer(), "ping", json!({})).await {
        Answer::Tool(r) => structured(&r),
        other => panic!("{other:?}"),
    };
    assert_eq!(ping["storedSessions"], 0, "no session was created: {ping}");
    assert_eq!(ping["activeTurns"], 0);
    assert_eq!(ping["queuedTurns"], 0);
    assert!(
        codex_mcp_bridge::codex::process::descendants(server.pid as i32).is_empty(),
        "a process was left behind"
    );
    assert!(!env.work().join("pwned").exists());

    // hostile text that is a valid prompt reaches codex over stdin only, and works
    let prompt = "--help -cmcp_servers={} \u{1b}[2J\u{7} $(touch pwned) \u{202e}MARK-HOSTILE";
    let r = match call(
        &server.peer(),
        "codex",
        json!({"prompt": prompt, "workingDirectory": env.work()}),
    )
    .await
    {
        Answer::Tool(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(structured(&r)["response"], "ok");
    let reqs = mock.responses_requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].user_text_contains("MARK-HOSTILE"));
    assert!(!env.work().join("pwned").exists());
    server.assert_healthy().await;
}

/// `{"sessionId": [[[…10 000 deep…]]]}` through rmcp's client: serde_json refuses to parse the
/// line (recursion limit 128); the server must survive it and keep serving.
#[test]
fn a_10000_deep_argument_leaves_the_server_serving() {
    on_big_stacks(|| async {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        let mut server = start_tapped(&env, &mock).await;
        let deep = nested(10_000, json!("leaf"));
        let answer = call_within(
            &server.peer(),
            "getSession",
            json!({"sessionId": deep}),
            Duration::from_secs(3),
        )
        .await;
        eprintln!("answer to a 10 000 deep argument: {answer:?}");
        if let Answer::Tool(r) = &answer {
            assert_eq!(r.is_error, Some(true), "{}", text(r));
        }
        server.assert_healthy().await;
        let r = match call(&server.peer(), "getSession", json!({"sessionId": "a b"})).await {
            Answer::Tool(r) => r,
            other => panic!("{other:?}"),
        };
        assert!(text(&r).contains("`sessionId`"), "{}", text(&r));
        assert_eq!(mock.responses_count(), 0);
    });
}

/// The stricter half of the above: the deep call itself gets an answer. rmcp's stdio transport
/// drops a line serde_json cannot parse (`recursion limit exceeded` is one) without answering,
/// although the request's `id` sits at the top level; the server's framing layer
/// (`mcp::framing`) answers it with an error carrying that id.
#[test]
fn a_10000_deep_argument_gets_an_error_answer() {
    on_big_stacks(|| async {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        let server = start_tapped(&env, &mock).await;
        let deep = nested(10_000, json!("leaf"));
        let answer = call_within(
            &server.peer(),
            "getSession",
            json!({"sessionId": deep}),
            Duration::from_secs(10),
        )
        .await;
        assert!(
            !matches!(answer, Answer::Unanswered),
            "a call nested 10 000 deep got no answer within 10 s"
        );
    });
}

#[tokio::test]
async fn raw_garbage_on_stdin_never_stops_the_server() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut child = tokio::process::Command::new(server_bin())
        .env_clear()
        .envs(server_env(&env, &mock))
        .current_dir(env.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // collect every stdout line as it comes (the server must never block on a full pipe)
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        let mut r = BufReader::new(stdout);
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
"#;
    stdin.write_all(init).await.unwrap();

    let tool_call = |id: u64, name: &str, args: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args}}}}}"#
        )
        .into_bytes()
    };
    let mut garbage: Vec<Vec<u8>> =
        vec![
        b"this is not json at all".to_vec(),
        b"{\"half\": ".to_vec(),
        b"\xff\xfe\xfd\x00\x01 invalid UTF-8 and NUL".to_vec(),
        b"\x1b[2J\x1b]0;title\x07".to_vec(),
        b"[]".to_vec(),
        b"null".to_vec(),
        b"{}".to_vec(),
        br#"{"jsonrpc":"2.0","id":2,"method":5}"#.to_vec(),
        br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":{"nested":true},"method":"ping"}"#.to_vec(),
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999999}}"#
            .to_vec(),
        br#"{"jsonrpc":"2.0","id":4,"result":{}}"#.to_vec(),
        // invalid UTF-8 inside a JSON string of a well-formed request
        tool_call(5, "getSession", "{\"sessionId\":\"a\u{0}b\"}")
            .into_iter()
            .map(|b| if b == 0 { 0xff } else { b })
            .collect(),
        tool_call(6, "getSession", r#"{"sessionId":"\ud800"}"#),
        // 10 000 deep: serde_json gives up at 128
        tool_call(7, "getSession", &nested_text(10_000)),
        // a 20 MB line: over rmcp's 16 MiB line limit, discarded
        tool_call(8, "getSession", &format!("{{\"sessionId\":\"{}\"}}", "x".repeat(20 << 20))),
        // a 12 MB line under the limit: parsed and refused with an answer
        tool_call(9, "getSession", &format!("{{\"sessionId\":\"{}\"}}", "y".repeat(12 << 20))),
        vec![b'\n'; 1000],
        vec![b' '; 100_000],
    ];
    // and a 20 MB line with no JSON at all, written in pieces
    garbage.push(vec![b'z'; 20 << 20]);
    for g in &garbage {
        stdin.write_all(g).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
    }
    stdin
        .write_all(&tool_call(100, "ping", "{}"))
        .await
        .unwrap();
    stdin.write_all(b"\n").await.unwrap();
    stdin
        .write_all(br#"{"jsonrpc":"2.0","id":101,"method":"ping"}"#)
        .await
        .unwrap();
    stdin.write_all(b"\n").await.unwrap();
    stdin.flush().await.unwrap();

    let mut answered: Vec<Value> = vec![];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got_ping = false;
    let mut got_jsonrpc_ping = false;
    while !(got_ping && got_jsonrpc_ping) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(Some(line)) = tokio::time::timeout(left, rx.recv()).await else {
            break;
        };
        if let Some(why) = not_json_rpc(&line) {
            panic!("stdout carried a line that is not JSON-RPC: {why}");
        }
        let v: Value = serde_json::from_slice(&line).unwrap();
        if v["id"] == 100 {
            got_ping = v["result"]["structuredContent"]["codexFound"] == true;
        }
        if v["id"] == 101 {
            got_jsonrpc_ping = v.get("result").is_some();
        }
        answered.push(v);
    }
    let ids: Vec<&Value> = answered.iter().map(|v| &v["id"]).collect();
    assert!(
        got_ping && got_jsonrpc_ping,
        "the server answered the pings after the garbage (answers: {ids:?})"
    );
    let nine = answered
        .iter()
        .find(|v| v["id"] == 9)
        .expect("the 12 MB request was answered");
    assert_eq!(
        nine["result"]["isError"],
        true,
        "{}",
        nine.to_string().chars().take(300).collect::<String>()
    );
    assert!(child.try_wait().unwrap().is_none(), "the server is running");
    assert_eq!(mock.responses_count(), 0);

    // EOF on stdin: a clean exit
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the server exits on EOF")
        .unwrap();
    assert!(status.success(), "{status}");
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Some(l) = rx.recv().await {
            rest.push(l);
        }
    })
    .await;
    for l in rest {
        assert!(not_json_rpc(&l).is_none(), "{:?}", not_json_rpc(&l));
    }
}

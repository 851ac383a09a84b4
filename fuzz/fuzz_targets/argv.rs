//! The argv builders given arbitrary tool arguments (and arbitrary operator settings that passed
//! the crate's own checks).
//!
//! Asserted on every argv a builder returns, by reading it the way codex's parser reads it:
//! - it starts with `exec`; before `--` every token is a known flag, a `--flag=value` with the
//!   value bound to a known flag, `-c` followed by one config token, the `resume`/`review`
//!   subcommand, or (resume only) the parsed thread id right before `--`. So no caller value is
//!   ever a token of its own, and none can be read as a flag;
//! - every bound value is exactly the caller's value for that flag (model, base, commit, title,
//!   images with no `,`), or a path the bridge made;
//! - the `-c` tokens are one contiguous run at the deepest subcommand; they are exactly: the
//!   operator overrides (in order), the `mcp_servers.NAME.enabled=false` disables, the
//!   per-request keys (`model_reasoning_effort`, `web_search`), then the five pins of
//!   [`pins`] last. Each non-operator token parses as a one-key TOML document whose key is the
//!   key codex reads (split at the first `=`, dotted), so no caller text adds a config key; the
//!   `projects` pin names exactly the working directory and its ancestors, each untrusted;
//! - no operator override the denylist let through touches a pinned key;
//! - exactly one `--sandbox=` before any subcommand, with the requested level (read-only when
//!   none; workspace-write for review; danger only when the operator allowed it);
//! - a turn, query or search ends in `-- -` and sends the prompt on stdin, byte for byte;
//!   a review has no `--` and no stdin;
//! - `Prompt::parse` refuses exactly the empty (or blank) and the huge prompt, `ModelId::parse`
//!   exactly the model id the one model rule refuses, and a builder
//!   refuses exactly the inputs it must (danger without the operator's consent, an
//!   image with `,` or a leading `-`).
#![no_main]

use std::path::{Path, PathBuf};

use arbitrary::Arbitrary;
use codex_mcp_bridge::codex::argv::{Common, MAX_MODEL_LEN, MAX_PROMPT_BYTES, OneShotRequest, PathKind, ReviewRequest, SpawnSpec, TurnRequest, build_query, build_review, build_search, build_turn, pins};
use codex_mcp_bridge::security::prompt::Prompt;
use codex_mcp_bridge::plan::values::{ReasoningEffort, ReviewMode, SandboxLevel};
use codex_mcp_bridge::plan::review::{ReviewTarget, review_target};
use codex_mcp_bridge::security::ids::{ModelId, ThreadId};
use codex_mcp_bridge::security::overrides::{Override, parse_operator_override};
use codex_mcp_bridge::security::paths::{Confined, Kind, normalize};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Operator settings: `-c` overrides (kept only when the denylist accepts them), the
    /// danger switch, nested MCP servers to disable.
    overrides: Vec<String>,
    allow_danger: bool,
    disable_mcp_servers: Vec<String>,
    /// The working directory, as a canonical absolute path.
    cwd: String,
    call: Call,
}

#[derive(Arbitrary, Debug)]
enum Call {
    Turn {
        prompt: String,
        sandbox: Option<u8>,
        model: Option<String>,
        effort: Option<u8>,
        images: Vec<String>,
        resume: Option<[u8; 16]>,
        structured: bool,
    },
    OneShot {
        search: bool,
        prompt: String,
        model: Option<String>,
        effort: Option<u8>,
    },
    Review {
        mode: Option<String>,
        base: Option<String>,
        commit: Option<String>,
        title: Option<String>,
        model: Option<String>,
    },
}

const SANDBOXES: &[&str] = &[
    "read-only",
    "workspace-write",
    "full-auto",
    "danger-full-access",
];
const EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];

/// Flags that take no value.
const BARE_FLAGS: &[&str] = &[
    "--json",
    "--skip-git-repo-check",
    "--ephemeral",
    "--ignore-user-config",
    "--ignore-rules",
    "--uncommitted",
];
/// Flags that take a value, always bound with `=`.
const VALUE_FLAGS: &[&str] = &[
    "--sandbox",
    "--model",
    "--image",
    "--output-schema",
    "--output-last-message",
    "--base",
    "--commit",
    "--title",
];
/// Keys the bridge pins; no operator override may touch them (or a table above them).
const PINNED_KEYS: &[&[&str]] = &[
    &["approvals_reviewer"],
    &["approval_policy"],
    &["features", "shell_snapshot"],
    &["shell_environment_policy"],
    &["projects"],
    &["sandbox_mode"],
];

const SCHEMA_FILE: &str = "/tmp/bridge-structured/schema.json";
const LAST_MESSAGE_FILE: &str = "/tmp/bridge-structured/last-message.txt";

/// What the builder was asked for, to compare the argv against.
struct Expected {
    kind: PathKind,
    sandbox: SandboxLevel,
    prompt: Option<String>,
    resume: Option<String>,
    /// (flag, value) pairs that must be bound, in order, and nothing else.
    bound: Vec<(&'static str, String)>,
    /// Per-request `-c` tokens between the operator's and the pins.
    request_configs: Vec<String>,
}

fn thread_id(b: [u8; 16]) -> ThreadId {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    let s = format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    );
    ThreadId::parse(&s).expect("a hyphenated UUID parses")
}

fn confined(path: PathBuf, within: &Path, kind: Kind, field: &str) -> Confined {
    // paths that exist nowhere: the builders are pure, and this constructor exists only in a
    // build with `--cfg fuzzing` (cargo-fuzz's)
    Confined::unchecked(
        &path.to_string_lossy(),
        &within.to_string_lossy(),
        kind,
        field,
    )
}

/// The one model rule of every tool: 1 to 256 bytes, no control character (C0, DEL, C1).
fn model_ok(m: &str) -> bool {
    !m.is_empty() && m.len() <= MAX_MODEL_LEN && !m.chars().any(char::is_control)
}

/// The model id checked the one way a tool call's is (`ModelId::parse`): refused exactly when
/// [`model_ok`] says so; `None` (nothing left to build) when refused. A builder takes only a
/// checked one.
fn checked_model(m: &Option<String>) -> Option<Option<ModelId>> {
    match m {
        None => Some(None),
        Some(m) => {
            let parsed = ModelId::parse("model", m);
            assert_eq!(parsed.is_ok(), model_ok(m), "ModelId::parse on {m:?}: {parsed:?}");
            parsed.ok().map(Some)
        }
    }
}

fn prompt_ok(p: &str) -> bool {
    !p.trim().is_empty() && p.len() <= MAX_PROMPT_BYTES
}

/// The prompt checked the one way a tool call's is: refused exactly when [`prompt_ok`] says
/// so; `None` (nothing left to build) when refused.
fn checked_prompt(p: &str) -> Option<Prompt> {
    let parsed = Prompt::parse("prompt", p.to_owned());
    assert_eq!(parsed.is_ok(), prompt_ok(p), "Prompt::parse on {p:?}: {parsed:?}");
    parsed.ok()
}

fuzz_target!(|input: Input| {
    // Operator overrides reach the builders only through the denylist.
    let overrides: Vec<Override> = input
        .overrides
        .iter()
        .filter_map(|raw| parse_operator_override(raw).ok())
        .collect();
    for o in &overrides {
        let arg = o.to_arg();
        let key = arg.split_once('=').expect("key=value").0;
        let path: Vec<String> = key
            .trim()
            .split('.')
            .map(|s| s.to_ascii_lowercase())
            .collect();
        for pinned in PINNED_KEYS {
            let n = pinned.len().min(path.len());
            assert!(
                path[..n] != pinned[..n],
                "operator override {:?} touches the pinned key {pinned:?}",
                o.to_arg()
            );
        }
        assert!(!o.to_arg().contains('\n') && !o.to_arg().contains('\r'));
    }
    let common = Common {
        program: "codex".into(),
        env: vec![],
        overrides: overrides.clone(),
        allow_danger: input.allow_danger,
        disable_mcp_servers: input.disable_mcp_servers.clone(),
    };
    // A confined working directory is canonical: absolute, no `.`/`..`, no NUL.
    if input.cwd.contains('\0') {
        return;
    }
    let Some(cwd) = normalize(Path::new("/"), &input.cwd) else {
        return;
    };
    let cwd_c = confined(cwd.clone(), Path::new("/"), Kind::Dir, "workingDirectory");

    let (result, expected) = match input.call {
        Call::Turn {
            prompt,
            sandbox,
            model,
            effort,
            images,
            resume,
            structured,
        } => {
            let sandbox = sandbox.map(|i| {
                SandboxLevel::parse("sandbox", SANDBOXES[i as usize % SANDBOXES.len()]).unwrap()
            });
            let effort = effort.map(|i| {
                ReasoningEffort::parse("reasoningEffort", EFFORTS[i as usize % EFFORTS.len()])
                    .unwrap()
            });
            let resume = resume.map(thread_id);
            // Images reach the builder resolved: canonical paths never hold a control
            // character (commas and leading dashes are left in: the builder refuses them).
            if images.iter().any(|p| p.chars().any(char::is_control)) {
                return;
            }
            let Some(checked) = checked_prompt(&prompt) else {
                return;
            };
            let Some(model_id) = checked_model(&model) else {
                return;
            };
            let req = TurnRequest {
                prompt: checked,
                sandbox,
                model: model_id,
                reasoning_effort: effort,
                cwd: cwd_c.clone(),
                images: images
                    .iter()
                    .enumerate()
                    .map(|(i, p)| confined(p.into(), &cwd, Kind::Image, &format!("files[{i}]")))
                    .collect(),
                resume,
                output_schema: structured.then(|| SCHEMA_FILE.into()),
                output_last_message: structured.then(|| LAST_MESSAGE_FILE.into()),
            };
            let level = sandbox.unwrap_or(SandboxLevel::ReadOnly);
            let must_fail = (level == SandboxLevel::DangerFullAccess && !input.allow_danger)
                || images.iter().any(|p| p.contains(',') || p.starts_with('-'));
            let result = build_turn(&common, req.clone());
            assert_eq!(
                result.is_err(),
                must_fail,
                "build_turn refused {} input: {:?}",
                if must_fail { "no" } else { "a valid" },
                result.as_ref().err()
            );
            let mut bound = vec![("--sandbox", level.as_arg().to_owned())];
            if let Some(m) = model {
                bound.push(("--model", m));
            }
            if structured {
                bound.push(("--output-schema", SCHEMA_FILE.to_owned()));
                bound.push(("--output-last-message", LAST_MESSAGE_FILE.to_owned()));
            }
            bound.extend(images.into_iter().map(|p| ("--image", p)));
            let kind = match (structured, resume.is_some()) {
                (true, _) => PathKind::Structured,
                (false, true) => PathKind::Resume,
                (false, false) => PathKind::Exec,
            };
            (
                result,
                Expected {
                    kind,
                    sandbox: level,
                    prompt: Some(prompt),
                    resume: resume.map(|t| t.to_arg()),
                    bound,
                    request_configs: effort
                        .map(|e| format!("model_reasoning_effort=\"{}\"", e.as_str()))
                        .into_iter()
                        .collect(),
                },
            )
        }
        Call::OneShot {
            search,
            prompt,
            model,
            effort,
        } => {
            let effort = effort.map(|i| {
                ReasoningEffort::parse("reasoningEffort", EFFORTS[i as usize % EFFORTS.len()])
                    .unwrap()
            });
            let Some(checked) = checked_prompt(&prompt) else {
                return;
            };
            let Some(model_id) = checked_model(&model) else {
                return;
            };
            let req = OneShotRequest {
                prompt: checked,
                model: model_id,
                reasoning_effort: effort,
                cwd: cwd_c.clone(),
            };
            let result = if search {
                build_search(&common, req.clone())
            } else {
                build_query(&common, req.clone())
            };
            assert!(result.is_ok(), "{:?}", result.as_ref().err());
            let mut bound = vec![("--sandbox", "read-only".to_owned())];
            if let Some(m) = model {
                bound.push(("--model", m));
            }
            let mut request_configs: Vec<String> = effort
                .map(|e| format!("model_reasoning_effort=\"{}\"", e.as_str()))
                .into_iter()
                .collect();
            if search {
                request_configs.push("web_search=\"live\"".to_owned());
            }
            (
                result,
                Expected {
                    kind: if search {
                        PathKind::Search
                    } else {
                        PathKind::Query
                    },
                    sandbox: SandboxLevel::ReadOnly,
                    prompt: Some(prompt),
                    resume: None,
                    bound,
                    request_configs,
                },
            )
        }
        Call::Review {
            mode,
            base,
            commit,
            title,
            model,
        } => {
            // a mode is parsed as the tool's schema parses it (one of the spellings, else refused)
            let mode = match mode
                .as_deref()
                .map(|m| ReviewMode::parse("mode", m))
                .transpose()
            {
                Ok(m) => m,
                Err(_) => return,
            };
            let Ok(target) =
                review_target(mode, base.as_deref(), commit.as_deref(), title.as_deref())
            else {
                return;
            };
            let Some(model_id) = checked_model(&model) else {
                return;
            };
            let req = ReviewRequest {
                target: target.clone(),
                model: model_id,
                cwd: cwd_c.clone(),
            };
            let result = build_review(&common, &req);
            let mut bound = vec![("--sandbox", "workspace-write".to_owned())];
            if let Some(m) = model {
                bound.push(("--model", m));
            }
            match target {
                ReviewTarget::Uncommitted => {}
                ReviewTarget::Base(b) => bound.push(("--base", b)),
                ReviewTarget::Commit { sha, title } => {
                    bound.push(("--commit", sha));
                    if let Some(t) = title {
                        bound.push(("--title", t));
                    }
                }
            }
            (
                result,
                Expected {
                    kind: PathKind::Review,
                    sandbox: SandboxLevel::WorkspaceWrite,
                    prompt: None,
                    resume: None,
                    bound,
                    request_configs: vec![],
                },
            )
        }
    };
    if let Ok(spec) = result {
        check(&spec, &expected, &overrides, &common, &cwd);
    }
});

/// One token of argv before `--`, as codex's parser reads it.
#[derive(Debug)]
enum Token<'a> {
    Sub(&'a str),
    Bare(&'a str),
    Bound(&'a str, &'a str),
    Config(&'a str),
    Thread(&'a str),
}

fn check(spec: &SpawnSpec, exp: &Expected, overrides: &[Override], common: &Common, cwd: &Path) {
    let args = spec.args();
    assert_eq!(spec.kind(), exp.kind, "{args:?}");
    assert_eq!(spec.sandbox(), exp.sandbox, "{args:?}");
    assert!(
        args.iter().all(|a| !a.contains('\0')),
        "a NUL cannot reach argv: {args:?}"
    );
    assert_eq!(args.first().map(String::as_str), Some("exec"), "{args:?}");

    // Read argv like codex: (level, token) for every token before `--`.
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut tokens: Vec<(usize, usize, Token)> = Vec::new(); // (index, level, token)
    let mut level = 0;
    let mut i = 1;
    while i < end {
        let a = args[i].as_str();
        let t = if a == "-c" {
            assert!(i + 1 < end, "-c without a value: {args:?}");
            i += 1;
            Token::Config(&args[i])
        } else if a == "resume" || a == "review" {
            assert_eq!(level, 0, "a second subcommand: {args:?}");
            level = 1;
            Token::Sub(a)
        } else if BARE_FLAGS.contains(&a) {
            Token::Bare(a)
        } else if let Some((flag, value)) = a.split_once('=')
            && VALUE_FLAGS.contains(&flag)
        {
            Token::Bound(flag, value)
        } else {
            // The only positional before `--`: the parsed thread id, last, on resume.
            assert!(
                exp.resume.as_deref() == Some(a) && i + 1 == end,
                "unexpected token {a:?} (caller text as a token of its own?) in {args:?}"
            );
            assert!(!a.starts_with('-'));
            Token::Thread(a)
        };
        tokens.push((i, level, t));
        i += 1;
    }
    let deepest = level;

    // The subcommand.
    let sub: Vec<&str> = tokens
        .iter()
        .filter_map(|(_, _, t)| match t {
            Token::Sub(s) => Some(*s),
            _ => None,
        })
        .collect();
    match exp.kind {
        PathKind::Resume => assert_eq!(sub, ["resume"], "{args:?}"),
        PathKind::Review => assert_eq!(sub, ["review"], "{args:?}"),
        PathKind::Structured if exp.resume.is_some() => assert_eq!(sub, ["resume"]),
        _ => assert!(sub.is_empty(), "{args:?}"),
    }
    if let Some(t) = &exp.resume {
        assert!(
            matches!(tokens.last(), Some((_, _, Token::Thread(x))) if x == t),
            "the thread id must sit right before `--`: {args:?}"
        );
    }

    // Bound values: exactly the expected (flag, value) pairs, in order; the sandbox first and on
    // the parent, `--json` present.
    let bound: Vec<(&str, &str)> = tokens
        .iter()
        .filter_map(|(_, _, t)| match t {
            Token::Bound(f, v) => Some((*f, *v)),
            _ => None,
        })
        .collect();
    let want: Vec<(&str, &str)> = exp.bound.iter().map(|(f, v)| (*f, v.as_str())).collect();
    assert_eq!(bound, want, "bound values differ: {args:?}");
    let sandboxes: Vec<usize> = tokens
        .iter()
        .filter(|(_, _, t)| matches!(t, Token::Bound("--sandbox", _)))
        .map(|(_, l, _)| *l)
        .collect();
    assert_eq!(sandboxes, [0], "one --sandbox, on the parent: {args:?}");
    if !common.allow_danger {
        assert!(!args.iter().any(|a| a == "--sandbox=danger-full-access"));
    }
    for (f, v) in &bound {
        if *f == "--image" {
            assert!(!v.contains(','), "codex splits images on ',': {args:?}");
        }
    }
    // Flags without a value: each at most once; `--json` always (the events are read as
    // JSONL); one-shot and review runs are ephemeral; review ignores user config and rules.
    let bare: Vec<&str> = tokens
        .iter()
        .filter_map(|(_, _, t)| match t {
            Token::Bare(f) => Some(*f),
            _ => None,
        })
        .collect();
    for (n, f) in bare.iter().enumerate() {
        assert!(!bare[..n].contains(f), "{f} twice: {args:?}");
    }
    let mut must: Vec<&str> = vec!["--json", "--skip-git-repo-check"];
    match exp.kind {
        PathKind::Query | PathKind::Search => must.push("--ephemeral"),
        PathKind::Review => must.extend(["--ephemeral", "--ignore-user-config", "--ignore-rules"]),
        _ => {}
    }
    for f in must {
        assert!(bare.contains(&f), "{f} missing: {args:?}");
    }
    if bare.contains(&"--uncommitted") {
        assert!(
            exp.kind == PathKind::Review
                && exp.bound.len()
                    == 1 + usize::from(args.iter().any(|a| a.starts_with("--model=")))
        );
    }

    // Config tokens: one contiguous run at the deepest level, exactly the expected list.
    let configs: Vec<(usize, usize, &str)> = tokens
        .iter()
        .filter_map(|(i, l, t)| match t {
            Token::Config(kv) => Some((*i, *l, *kv)),
            _ => None,
        })
        .collect();
    assert!(configs.len() >= 5, "{args:?}");
    assert!(configs.iter().all(|(_, l, _)| *l == deepest), "{args:?}");
    let first = configs[0].0;
    for (n, (i, _, _)) in configs.iter().enumerate() {
        assert_eq!(*i, first + 2 * n, "the -c tokens are not one run: {args:?}");
    }
    let mut want: Vec<String> = overrides.iter().map(Override::to_arg).collect();
    let n_operator = want.len();
    want.extend(
        common
            .disable_mcp_servers
            .iter()
            .filter(|n| {
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            })
            .map(|n| format!("mcp_servers.{n}.enabled=false")),
    );
    want.extend(exp.request_configs.iter().cloned());
    let pinned = pins(cwd);
    want.extend(pinned.iter().cloned());
    let got: Vec<&str> = configs.iter().map(|(_, _, kv)| *kv).collect();
    assert_eq!(got, want, "config tokens differ: {args:?}");
    assert_eq!(
        &got[got.len() - 5..],
        pinned.as_slice(),
        "the pins must come last"
    );
    assert_eq!(pinned[0], "approvals_reviewer=\"user\"");
    for kv in &got[n_operator..] {
        one_key_as_codex_reads_it(kv);
    }
    check_projects_pin(got[got.len() - 1], cwd);

    // The prompt: on stdin only, after `-- -`; a review has neither.
    match &exp.prompt {
        Some(p) => {
            assert_eq!(&args[end..], ["--", "-"], "{args:?}");
            assert_eq!(spec.stdin(), Some(p.as_bytes()));
        }
        None => {
            assert_eq!(end, args.len(), "{args:?}");
            assert!(spec.stdin().is_none());
        }
    }
}

/// A `-c` token is split by codex at its first `=` into a dotted key and a TOML value. Check
/// that the value parses (otherwise codex would take it as a raw string, silently voiding a
/// pin) and that TOML reads the whole token as exactly that one key.
fn one_key_as_codex_reads_it(kv: &str) {
    let (key, value) = kv.split_once('=').expect("key=value");
    let path: Vec<&str> = key.trim().split('.').collect();
    let wrapped = format!("v = {value}");
    assert!(
        toml::from_str::<toml::Table>(&wrapped).is_ok(),
        "the value of {kv:?} is not TOML"
    );
    let doc: toml::Table =
        toml::from_str(kv).unwrap_or_else(|e| panic!("{kv:?} is not one TOML key/value: {e}"));
    let mut table = &doc;
    for (n, seg) in path.iter().enumerate() {
        assert_eq!(table.len(), 1, "{kv:?} sets more than one key");
        let v = table
            .get(*seg)
            .unwrap_or_else(|| panic!("{kv:?}: TOML and codex disagree on the key"));
        if n + 1 < path.len() {
            table = v.as_table().expect("a dotted key is a table");
        }
    }
}

/// `projects={...}` names the working directory and each ancestor, all untrusted, nothing else.
fn check_projects_pin(kv: &str, cwd: &Path) {
    let doc: toml::Table = toml::from_str(kv).unwrap();
    let projects = doc["projects"].as_table().unwrap();
    let ancestors: Vec<&str> = cwd.ancestors().filter_map(|p| p.to_str()).collect();
    assert_eq!(projects.len(), ancestors.len(), "{kv}");
    for a in ancestors {
        let entry = projects
            .get(a)
            .unwrap_or_else(|| panic!("{a:?} missing from {kv}"))
            .as_table()
            .unwrap();
        assert_eq!(entry.len(), 1, "{kv}");
        assert_eq!(entry["trust_level"].as_str(), Some("untrusted"), "{kv}");
    }
}

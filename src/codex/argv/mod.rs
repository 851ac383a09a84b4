//! Argv builders: a validated request in, the exact [`SpawnSpec`] of a `codex` child out.
//! Pure: no IO, no environment reads. This is the security boundary of the product; every rule
//! below is a rule of SECURITY.md or a measured fact of the Codex CLI, pinned by a test against
//! the real binary (tests/suite/runner.rs, proofs.rs).
//!
//! Rules every builder keeps (each has a unit test in these files and a proof against the real
//! CLI in `tests/suite`):
//! - **No caller text in argv as a positional.** Every prompt goes over stdin: argv ends in
//!   `-- -` (`-` = read the prompt from stdin, on `exec` and on `exec resume`, whose parser
//!   ignores piped stdin next to a positional prompt). So the stdin threshold is 0 bytes: a
//!   prompt is never visible in `/proc/PID/cmdline`, never capped at 128 KiB, and never parsed
//!   as a flag. `--` still sits right before the `-` and after every `--image`.
//! - **Caller values are bound with `--flag=value`** (`--model=`, `--image=`, review's
//!   `--base=`, `--commit=`, `--title=`), so a value starting with `-` stays a value.
//! - **A sandbox level on every path**, read-only when unspecified, as a parent flag before any
//!   subcommand. `danger-full-access` only when the operator enabled it.
//! - **All `-c` tokens at one level, the deepest subcommand present**: codex 0.145.0 silently
//!   drops every parent-level `-c` when a deeper level carries any (0.171.0 applies both levels,
//!   the deeper winning; one level holds on every supported version). Operator overrides come
//!   first, per-request values next, the bridge's pins last (the later token wins).
//! - **Pins on every path**: `approvals_reviewer="user"` and `approval_policy="never"` (no
//!   unsupervised escalation), `features.shell_snapshot=false` plus a `shell_environment_policy`
//!   that passes only core variables (tool commands never see the API key), and a `projects`
//!   table marking the working directory and each of its ancestors untrusted (no trust entry is
//!   written, and no repository's own `.codex/config.toml` ever loads).
//! - Caller values inside a `-c` value are TOML basic strings; they can never add a key.
//!
//! The closed value sets and a review's target are the bridge's own (`crate::plan`). The files,
//! by job: `spec.rs` (the common settings, the
//! spawn spec, the checks and `-c` tokens every path shares), `turn.rs` (session and
//! `structured` turns, on `codex exec` or a warm app-server), `server.rs` (the `codex
//! app-server` invocations), `one_shot.rs` (`query`, `search`) and `review.rs`. Each names its
//! siblings directly; this file only re-exports (and tests the rules every path keeps).

mod hand_off;
mod one_shot;
mod review;
mod server;
mod spec;
mod turn;

pub use hand_off::{HandOffUnavailable, HandOffValue, NotShown, hand_off, quoted};
pub use one_shot::{OneShotRequest, build_query, build_search, build_warm_one_shot};
pub use review::{MAX_TITLE_LEN, ReviewRequest, build_review};
pub use server::{APP_SERVER_SANDBOX_PIN, build_app_server, build_one_shot_server};
pub use spec::{
    Common, PathKind, SHELL_ENV_PIN, SpawnSpec, check_call, config_tokens, pins, projects_pin,
};
pub use turn::{CheckedTurn, TurnRequest, WarmTurn, build_turn, build_warm_turn, check_turn};

pub use crate::security::ids::MAX_MODEL_LEN;
pub use crate::security::prompt::MAX_PROMPT_BYTES;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::review::ReviewTarget;
    use crate::plan::values::ReasoningEffort;
    use crate::security::ids::ThreadId;
    use crate::security::overrides::parse_operator_override;
    use crate::security::paths::{Confined, Kind};
    use crate::security::prompt::Prompt;
    use std::path::{Path, PathBuf};

    pub(super) fn confined(p: &str) -> Confined {
        Confined::unchecked(p, "/work", Kind::Dir, "workingDirectory")
    }

    pub(super) fn common() -> Common {
        Common {
            program: PathBuf::from("codex"),
            env: vec![("PATH".into(), "/usr/bin".into())],
            overrides: vec![parse_operator_override("model_provider=\"mock\"").unwrap()],
            allow_danger: false,
            disable_mcp_servers: vec![],
        }
    }

    pub(super) fn text(s: &str) -> Prompt {
        Prompt::parse("prompt", s.into()).unwrap()
    }

    pub(super) fn turn(prompt: &str) -> TurnRequest {
        TurnRequest {
            prompt: text(prompt),
            sandbox: None,
            model: None,
            reasoning_effort: None,
            cwd: confined("/work/repo"),
            images: vec![],
            resume: None,
            output_schema: None,
            output_last_message: None,
        }
    }

    pub(super) const THREAD: &str = "550e8400-e29b-41d4-a716-446655440000";

    pub(super) fn pins_tail() -> Vec<String> {
        let mut v = vec![];
        for p in pins(Path::new("/work/repo")) {
            v.push("-c".to_string());
            v.push(p);
        }
        v
    }

    pub(super) fn expect(head: &[&str], tail: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        v.extend(pins_tail());
        v.extend(tail.iter().map(|s| s.to_string()));
        v
    }

    #[test]
    fn the_sandbox_flag_sits_before_any_subcommand() {
        let mut req = turn("x");
        req.resume = Some(ThreadId::parse(THREAD).unwrap());
        let spec = build_turn(&common(), req.clone()).unwrap();
        let sb = spec
            .args
            .iter()
            .position(|a| a.starts_with("--sandbox="))
            .unwrap();
        let sub = spec.args.iter().position(|a| a == "resume").unwrap();
        assert!(sb < sub);
        let r = build_review(
            &common(),
            &ReviewRequest {
                target: ReviewTarget::Uncommitted,
                model: None,
                cwd: confined("/w"),
            },
        )
        .unwrap();
        let sb = r
            .args
            .iter()
            .position(|a| a.starts_with("--sandbox="))
            .unwrap();
        let sub = r.args.iter().position(|a| a == "review").unwrap();
        assert!(sb < sub);
    }

    fn all_specs() -> Vec<SpawnSpec> {
        let c = common();
        let mut r = turn("p");
        r.reasoning_effort = Some(ReasoningEffort::Minimal);
        let mut resumed = r.clone();
        resumed.resume = Some(ThreadId::parse(THREAD).unwrap());
        let one = OneShotRequest {
            prompt: text("p"),
            model: None,
            reasoning_effort: Some(ReasoningEffort::Low),
            cwd: confined("/tmp/q"),
        };
        vec![
            build_turn(&c, r.clone()).unwrap(),
            build_turn(&c, resumed.clone()).unwrap(),
            build_query(&c, one.clone()).unwrap(),
            build_search(&c, one.clone()).unwrap(),
            build_review(
                &c,
                &ReviewRequest {
                    target: ReviewTarget::Base("main".into()),
                    model: None,
                    cwd: confined("/w"),
                },
            )
            .unwrap(),
        ]
    }

    #[test]
    fn every_path_carries_the_pins_after_every_other_config_token() {
        for spec in all_specs() {
            let tokens = config_tokens(&spec.args);
            let values: Vec<&str> = tokens.iter().map(|(_, v)| *v).collect();
            let n = values.len();
            assert!(n >= 6, "{:?}", spec.args);
            assert_eq!(
                &values[n - 5..n - 3],
                &["approvals_reviewer=\"user\"", "approval_policy=\"never\""]
            );
            assert_eq!(values[n - 3], "features.shell_snapshot=false");
            assert_eq!(values[n - 2], SHELL_ENV_PIN);
            assert!(values[n - 1].starts_with("projects={"));
        }
    }

    #[test]
    fn all_config_tokens_sit_at_the_deepest_level() {
        for spec in all_specs() {
            let sub = spec
                .args
                .iter()
                .position(|a| a == "resume" || a == "review");
            let tokens = config_tokens(&spec.args);
            let first = tokens.first().unwrap().0;
            if let Some(sub) = sub {
                assert!(first > sub, "{:?}", spec.args);
            }
            // one contiguous run: nothing but -c pairs between the first and the last
            let last = tokens.last().unwrap().0;
            assert_eq!(last - first, 2 * (tokens.len() - 1), "{:?}", spec.args);
        }
    }

    #[test]
    fn the_prompt_is_never_in_argv_and_argv_ends_in_dashdash_dash() {
        for spec in all_specs() {
            if spec.kind == PathKind::Review {
                assert!(spec.stdin.is_none());
                assert!(!spec.args.contains(&"--".to_string()));
                continue;
            }
            let n = spec.args.len();
            assert_eq!(&spec.args[n - 2..], &["--", "-"]);
            assert!(!spec.args.iter().any(|a| a == "p"));
        }
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use crate::plan::review::ReviewTarget;
    use crate::plan::values::{ReasoningEffort, SandboxLevel};
    use crate::security::ids::{SessionId, ThreadId};
    use crate::security::paths::{Confined, Kind};
    use crate::security::prompt::Prompt;
    use proptest::prelude::*;
    use std::path::Path;

    fn text(s: &str) -> Prompt {
        Prompt::parse("prompt", s.into()).unwrap()
    }

    /// Every flag a builder may emit; anything else starting with `-` before `--` is a bug.
    const FLAGS: &[&str] = &[
        "--json",
        "--skip-git-repo-check",
        "--ephemeral",
        "--ignore-user-config",
        "--ignore-rules",
        "--uncommitted",
        "-c",
        "--",
    ];
    const VALUE_FLAGS: &[&str] = &[
        "--sandbox=",
        "--model=",
        "--image=",
        "--output-schema=",
        "--output-last-message=",
        "--base=",
        "--commit=",
        "--title=",
    ];

    fn common() -> Common {
        Common {
            program: "codex".into(),
            env: vec![],
            overrides: vec![],
            allow_danger: true,
            disable_mcp_servers: vec!["slow".into()],
        }
    }

    fn cwd(p: &str) -> Confined {
        Confined::unchecked(p, "/", Kind::Dir, "workingDirectory")
    }

    /// Check the argv shape: known flags only, caller values only inside `--flag=value`, every
    /// `-c` value a one-key TOML document, all `-c` at the deepest level.
    fn check_shape(args: &[String]) {
        let dd = args.iter().position(|a| a == "--").unwrap_or(args.len());
        let mut i = 0;
        while i < dd {
            let a = &args[i];
            if a == "-c" {
                let kv = &args[i + 1];
                let doc: toml::Table = toml::from_str(kv).unwrap_or_else(|e| panic!("{kv}: {e}"));
                assert_eq!(doc.len(), 1, "{kv}");
                i += 2;
                continue;
            }
            if a.starts_with('-') {
                assert!(
                    FLAGS.contains(&a.as_str()) || VALUE_FLAGS.iter().any(|f| a.starts_with(f)),
                    "unexpected flag {a:?} in {args:?}"
                );
            } else {
                assert!(
                    ["exec", "resume", "review"].contains(&a.as_str())
                        || ThreadId::parse(a).is_ok(),
                    "unexpected positional {a:?}"
                );
            }
            i += 1;
        }
        if dd < args.len() {
            assert_eq!(&args[dd..], &["--", "-"]);
        }
        let tokens = config_tokens(args);
        let first = tokens[0].0;
        let last = tokens[tokens.len() - 1].0;
        assert_eq!(
            last - first,
            2 * (tokens.len() - 1),
            "one run of -c: {args:?}"
        );
        if let Some(sub) = args.iter().position(|a| a == "resume" || a == "review") {
            assert!(first > sub);
        }
        let values: Vec<&str> = tokens.iter().map(|(_, v)| *v).collect();
        assert!(values.contains(&"approvals_reviewer=\"user\""));
        assert!(args.iter().any(|a| a.starts_with("--sandbox=")));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn a_caller_prompt_never_reaches_argv(prompt in "\\PC{1,200}", model in "\\PC{1,100}", resume in any::<bool>()) {
            prop_assume!(!prompt.trim().is_empty());
            let req = TurnRequest {
                prompt: text(&prompt),
                sandbox: None,
                model: Some(crate::security::ids::ModelId::parse("model", &model).unwrap()),
                reasoning_effort: Some(ReasoningEffort::High),
                cwd: cwd("/work/repo"),
                images: vec![],
                resume: resume.then(|| ThreadId::parse("550e8400-e29b-41d4-a716-446655440000").unwrap()),
                output_schema: None,
                output_last_message: None,
            };
            let spec = build_turn(&common(), req.clone()).unwrap();
            check_shape(&spec.args);
            // a prompt equal to one of the bridge's own tokens (`-`, the stdin marker) is
            // found in argv whatever happens to the prompt: compare with a neutral prompt's argv
            let neutral = build_turn(&common(), TurnRequest { prompt: text("x"), ..req.clone() }).unwrap();
            prop_assume!(!neutral.args.contains(&prompt));
            prop_assert!(!spec.args.iter().any(|a| a == &prompt));
            prop_assert_eq!(spec.stdin.as_deref(), Some(prompt.as_bytes()));
            let want = format!("--model={model}");
            prop_assert!(spec.args.contains(&want));
            prop_assert_eq!(spec.sandbox, SandboxLevel::ReadOnly);
        }

        #[test]
        fn one_shot_prompts_go_to_stdin_only(prompt in "\\PC{1,200}", search in any::<bool>()) {
            prop_assume!(!prompt.trim().is_empty());
            let req = OneShotRequest { prompt: text(&prompt), model: None, reasoning_effort: None, cwd: cwd("/tmp/q") };
            let spec = if search { build_search(&common(), req.clone()) } else { build_query(&common(), req.clone()) }.unwrap();
            check_shape(&spec.args);
            prop_assert!(!spec.args.iter().any(|a| a.contains(prompt.as_str()) && prompt.len() > 8));
            prop_assert_eq!(spec.sandbox, SandboxLevel::ReadOnly);
        }

        #[test]
        fn a_working_directory_never_adds_a_config_key(dir in "(/[^/\\x00]{1,20}){1,5}") {
            let pin = projects_pin(Path::new(&dir));
            let doc: toml::Table = toml::from_str(&pin).unwrap();
            prop_assert_eq!(doc.len(), 1);
            let projects = doc["projects"].as_table().unwrap();
            let expected: Vec<&str> = Path::new(&dir).ancestors().filter_map(|p| p.to_str()).collect();
            prop_assert_eq!(projects.len(), expected.len());
            for k in expected {
                let entry = projects[k].as_table().unwrap();
                prop_assert_eq!(entry.len(), 1);
                prop_assert_eq!(entry["trust_level"].as_str(), Some("untrusted"));
            }
            let spec = build_turn(&common(), TurnRequest {
                prompt: text("x"), sandbox: None, model: None, reasoning_effort: None,
                cwd: cwd(&dir), images: vec![], resume: None, output_schema: None, output_last_message: None,
            }).unwrap();
            check_shape(&spec.args);
        }

        #[test]
        fn review_values_are_refused_or_bound(base in "\\PC{0,40}", commit in "\\PC{0,40}", title in "\\PC{0,40}") {
            for target in [
                ReviewTarget::Base(base.clone()),
                ReviewTarget::Commit { sha: commit.clone(), title: Some(title.clone()) },
            ] {
                let req = ReviewRequest { target: target.clone(), model: None, cwd: cwd("/w") };
                if let Ok(spec) = build_review(&common(), &req) {
                    check_shape(&spec.args);
                    match target {
                        ReviewTarget::Base(b) => {
                            prop_assert!(!b.starts_with('-'));
                            let want = format!("--base={b}");
                            prop_assert!(spec.args.contains(&want));
                        }
                        ReviewTarget::Commit { sha, title } => {
                            prop_assert!(!sha.starts_with('-'));
                            let want = format!("--commit={sha}");
                            prop_assert!(spec.args.contains(&want));
                            let want = format!("--title={}", title.unwrap_or_default());
                            prop_assert!(spec.args.contains(&want));
                        }
                        ReviewTarget::Uncommitted => {}
                    }
                }
            }
        }

        #[test]
        fn session_handles_match_the_documented_pattern(raw in "\\PC{0,300}") {
            let ok = !raw.is_empty() && raw.len() <= 256 && !raw.starts_with('-')
                && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            prop_assert_eq!(SessionId::parse("sessionId", &raw).is_ok(), ok);
        }

        #[test]
        fn session_handles_of_the_alphabet_are_accepted(raw in "[A-Za-z0-9_][A-Za-z0-9_-]{0,255}") {
            prop_assert!(SessionId::parse("sessionId", &raw).is_ok());
        }
    }
}

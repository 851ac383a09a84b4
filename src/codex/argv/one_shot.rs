//! The one-shot tools `query` and `search`: no session, no repository, read-only, ephemeral,
//! the prompt on stdin; on `codex exec` or as a turn for a warm app-server.

use crate::security::ids::ModelId;
use crate::security::overrides::toml_basic_string;
use crate::security::paths::Confined;
use crate::security::prompt::Prompt;

use super::spec::{Common, Deepest, PathKind, Result, SpawnSpec, cwd_str};
use super::turn::{TurnRequest, WarmTurn, build_warm_turn};
use crate::plan::values::{ReasoningEffort, SandboxLevel};

/// A `query` or `search` call: no session, no repository, read-only, ephemeral.
#[derive(Debug, Clone)]
pub struct OneShotRequest {
    /// Moved into the spec's stdin by [`build_query`] / [`build_search`], not copied.
    pub prompt: Prompt,
    pub model: Option<ModelId>,
    pub reasoning_effort: Option<ReasoningEffort>,
    /// A fresh temporary directory the bridge created.
    pub cwd: Confined,
}

impl From<WarmTurn> for OneShotRequest {
    /// The request again from its warm turn (for `codex exec` when no app-server can run it):
    /// the prompt moves on, and nothing checked is lost.
    fn from(turn: WarmTurn) -> OneShotRequest {
        let (prompt, model, reasoning_effort, cwd) = turn.into_parts();
        OneShotRequest {
            prompt,
            model,
            reasoning_effort,
            cwd,
        }
    }
}

/// A one-shot call's turn (`query`, `search`) for a warm app-server, checked like
/// [`build_query`]: read-only, in the call's own fresh directory, on a new ephemeral thread.
pub fn build_warm_one_shot(common: &Common, req: OneShotRequest) -> Result<WarmTurn> {
    let turn = build_warm_turn(
        common,
        TurnRequest {
            prompt: req.prompt,
            sandbox: None,
            model: req.model,
            reasoning_effort: req.reasoning_effort,
            cwd: req.cwd,
            images: vec![],
            resume: None,
            output_schema: None,
            output_last_message: None,
        },
    )?;
    Ok(turn.into_one_shot(None))
}

fn build_one_shot(common: &Common, req: OneShotRequest, kind: PathKind) -> Result<SpawnSpec> {
    let cwd = cwd_str(&req.cwd)?;
    let sandbox = SandboxLevel::ReadOnly;
    let mut args: Vec<String> = vec![
        "exec".into(),
        "--json".into(),
        format!("--sandbox={}", sandbox.as_arg()),
        "--skip-git-repo-check".into(),
        "--ephemeral".into(),
    ];
    if let Some(m) = &req.model {
        args.push(format!("--model={m}"));
    }
    let mut deep = Deepest::new(common);
    if let Some(e) = req.reasoning_effort {
        deep.push(format!(
            "model_reasoning_effort={}",
            toml_basic_string(e.as_str())
        ));
    }
    if kind == PathKind::Search {
        // `codex exec` ignores `--search`; live web search is a config key.
        deep.push("web_search=\"live\"".into());
    }
    deep.emit(&mut args, cwd);
    args.push("--".into());
    args.push("-".into());
    Ok(SpawnSpec {
        program: common.program.clone(),
        args,
        env: common.env.clone(),
        cwd: req.cwd,
        checked: vec![],
        stdin: Some(req.prompt.into_string().into_bytes()),
        sandbox,
        kind,
    })
}

/// Build a `query`: `exec --json --sandbox=read-only --skip-git-repo-check --ephemeral
/// [--model=M] -c … -- -`, in a fresh temporary directory, prompt on stdin.
pub fn build_query(common: &Common, req: OneShotRequest) -> Result<SpawnSpec> {
    build_one_shot(common, req, PathKind::Query)
}

/// Build a `search`: the query shape plus `-c web_search="live"`, read-only, prompt on stdin.
pub fn build_search(common: &Common, req: OneShotRequest) -> Result<SpawnSpec> {
    build_one_shot(common, req, PathKind::Search)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{common, confined, expect, text, turn};
    use super::*;
    use crate::error::Error;
    use crate::security::prompt::MAX_PROMPT_BYTES;

    #[test]
    fn a_one_shot_turn_is_ephemeral_read_only_and_checked_like_a_query() {
        let c = common();
        let req = |prompt: &str| OneShotRequest {
            prompt: text(prompt),
            model: None,
            reasoning_effort: Some(ReasoningEffort::Low),
            cwd: confined("/work/q"),
        };
        let t = build_warm_one_shot(&c, req("hi")).unwrap();
        assert!(t.ephemeral() && t.output_schema().is_none());
        assert_eq!(t.sandbox(), SandboxLevel::ReadOnly);
        assert_eq!(t.effort(), Some(ReasoningEffort::Low));
        let session = build_warm_turn(&c, turn("x")).unwrap();
        assert!(!session.ephemeral());
        let schema = serde_json::json!({"type": "object"});
        let s = session.into_one_shot(Some(schema.clone()));
        assert!(s.ephemeral());
        assert_eq!(s.output_schema(), Some(&schema));
    }

    #[test]
    fn snapshot_query_and_search() {
        let req = OneShotRequest {
            prompt: text("what is 2+2"),
            model: None,
            reasoning_effort: None,
            cwd: confined("/work/repo"),
        };
        let q = build_query(&common(), req.clone()).unwrap();
        let head = [
            "exec",
            "--json",
            "--sandbox=read-only",
            "--skip-git-repo-check",
            "--ephemeral",
            "-c",
            "model_provider=\"mock\"",
        ];
        assert_eq!(q.args, expect(&head, &["--", "-"]));
        let s = build_search(&common(), req.clone()).unwrap();
        let mut head: Vec<&str> = head.to_vec();
        head.extend(["-c", "web_search=\"live\""]);
        assert_eq!(s.args, expect(&head, &["--", "-"]));
        assert_eq!(
            (s.kind, s.sandbox),
            (PathKind::Search, SandboxLevel::ReadOnly)
        );
        assert_eq!(s.stdin.as_deref(), Some(&b"what is 2+2"[..]));
    }

    // Found by mutation testing (scripts/mutants.sh; benches/README.md, "Mutation testing").

    #[test]
    fn one_shot_errors_name_the_tools_own_argument() {
        // the tools check their prompt as their own argument (`search`'s is `query`; the MCP
        // layer's refusal is asserted through a real client in `warm_oneshot`); what the
        // bridge adds to it keeps that name
        let query = Prompt::parse("query", "q".into()).unwrap();
        let err = Error::from(query.prefix(&"h".repeat(MAX_PROMPT_BYTES)).unwrap_err());
        assert!(err.to_string().contains("`query`"), "{err}");
        let err = Error::from(Prompt::parse("prompt", " \n".into()).unwrap_err()).to_string();
        assert!(err.contains("`prompt`"), "{err}");
    }
}

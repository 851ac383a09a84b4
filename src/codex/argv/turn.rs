//! Turn building: a `codex` tool turn (new or resumed) or a `structured` turn, checked once
//! ([`check_turn`]) and made into `codex exec`'s invocation ([`build_turn`]) or a turn for a
//! warm app-server ([`WarmTurn`]).

use std::path::{Path, PathBuf};

use crate::invalid::InvalidArgument;
use crate::security::ids::{ModelId, ThreadId};
use crate::security::overrides::toml_basic_string;
use crate::security::paths::Confined;
use crate::security::prompt::Prompt;

use super::spec::{Common, Deepest, PathKind, Result, SpawnSpec, cwd_str, resolve_sandbox};
use crate::plan::values::{ReasoningEffort, SandboxLevel};

/// A `codex` tool turn (new or resumed) or a `structured` turn.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// Moved into the spec's stdin by [`build_turn`], not copied.
    pub prompt: Prompt,
    /// `None` resolves to read-only here, not only in the MCP schema.
    pub sandbox: Option<SandboxLevel>,
    pub model: Option<ModelId>,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub cwd: Confined,
    /// Image attachments, each confined inside `cwd`.
    pub images: Vec<Confined>,
    /// Resume this thread instead of starting one.
    pub resume: Option<ThreadId>,
    /// `--output-schema=<file>` (structured); a path the bridge created, not a caller value.
    pub output_schema: Option<PathBuf>,
    /// `--output-last-message=<file>` (structured); a path the bridge created.
    pub output_last_message: Option<PathBuf>,
}

/// Build a `codex` tool turn (new or resumed) or a `structured` turn.
///
/// New:    `exec --json --sandbox=L --skip-git-repo-check [--model=M] [--output-schema=F]
///          [--output-last-message=F] [--image=I]... -c … -- -`
/// Resume: `exec --json --sandbox=L resume --skip-git-repo-check [--model=M] [...] [--image=I]...
///          -c … <uuid> -- -`
///
/// The request is taken by value so that its prompt (up to [`MAX_PROMPT_BYTES`]) moves into the
/// spec's stdin: the bytes parsed from the MCP request are the bytes written to codex
/// (`compose` appends attachments in place; the runner takes them with
/// [`SpawnSpec::take_stdin`]). The one copy is serde's, out of the request's JSON.
///
/// [`MAX_PROMPT_BYTES`]: crate::security::prompt::MAX_PROMPT_BYTES
pub fn build_turn(common: &Common, req: TurnRequest) -> Result<SpawnSpec> {
    Ok(check_turn(common, req)?.into_exec(common))
}

/// A `codex` tool turn or a `structured` turn, checked once ([`check_turn`]): the prompt, the
/// resolved sandbox level (read-only when none was asked for, danger only when the operator
/// allows it), a bounded model id, a UTF-8 working directory, images codex can take and
/// absolute UTF-8 output files. What is made of it ([`CheckedTurn::into_exec`],
/// [`CheckedTurn::into_warm`]) is assembled from checked values and cannot fail. Fields are
/// private: only [`check_turn`] makes one.
#[derive(Debug, Clone)]
pub struct CheckedTurn {
    prompt: Prompt,
    sandbox: SandboxLevel,
    model: Option<ModelId>,
    effort: Option<ReasoningEffort>,
    cwd: Confined,
    images: Vec<Confined>,
    resume: Option<ThreadId>,
    output_schema: Option<PathBuf>,
    output_last_message: Option<PathBuf>,
}

/// Check a turn's arguments once (see [`CheckedTurn`]).
pub fn check_turn(common: &Common, req: TurnRequest) -> Result<CheckedTurn> {
    let sandbox = resolve_sandbox(common, req.sandbox)?;
    cwd_str(&req.cwd)?;
    for img in &req.images {
        if img
            .path()
            .to_str()
            .is_none_or(|s| s.contains(',') || s.starts_with('-'))
        {
            return Err(InvalidArgument::new(
                img.field(),
                "cannot be passed to codex as an image",
            ));
        }
    }
    for f in [&req.output_schema, &req.output_last_message]
        .into_iter()
        .flatten()
    {
        path_arg(f)?;
    }
    Ok(CheckedTurn {
        prompt: req.prompt,
        sandbox,
        model: req.model,
        effort: req.reasoning_effort,
        cwd: req.cwd,
        images: req.images,
        resume: req.resume,
        output_schema: req.output_schema,
        output_last_message: req.output_last_message,
    })
}

impl CheckedTurn {
    /// The level this turn runs at.
    pub fn sandbox(&self) -> SandboxLevel {
        self.sandbox
    }

    /// The confined working directory.
    pub fn cwd(&self) -> &Confined {
        &self.cwd
    }

    /// Whether it attaches images (which only `codex exec` takes).
    pub fn has_images(&self) -> bool {
        !self.images.is_empty()
    }

    /// The warm app-server a session runs this turn on ([`build_app_server`] in the turn's
    /// working directory, checked with the turn).
    ///
    /// [`build_app_server`]: super::build_app_server
    pub fn app_server(&self, common: &Common) -> SpawnSpec {
        super::server::server_in(common, self.cwd.clone(), false)
    }

    /// What the turn asks codex.
    pub fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    /// Whether a warm app-server can run it ([`CheckedTurn::into_warm`]): no images, no
    /// output files.
    pub fn runs_warm(&self) -> bool {
        self.images.is_empty() && self.output_schema.is_none() && self.output_last_message.is_none()
    }

    /// The turn on a warm app-server (the prompt moves); handed back when only `codex exec`
    /// can run it (images, or `structured`'s output files).
    pub fn into_warm(self) -> std::result::Result<WarmTurn, Box<CheckedTurn>> {
        if !self.runs_warm() {
            return Err(Box::new(self));
        }
        Ok(WarmTurn {
            prompt: self.prompt,
            sandbox: self.sandbox,
            model: self.model,
            effort: self.effort,
            cwd: self.cwd,
            ephemeral: false,
            output_schema: None,
        })
    }

    /// `codex exec`'s invocation of the turn. The request is taken by value so that its
    /// prompt (up to [`MAX_PROMPT_BYTES`]) moves into the spec's stdin: the bytes parsed from
    /// the MCP request are the bytes written to codex (the runner takes them with
    /// [`SpawnSpec::take_stdin`]).
    ///
    /// [`MAX_PROMPT_BYTES`]: crate::security::prompt::MAX_PROMPT_BYTES
    pub fn into_exec(self, common: &Common) -> SpawnSpec {
        // every path here was checked to be UTF-8 (and the files absolute) by `check_turn`
        let text = |p: &Path| p.to_string_lossy().into_owned();
        let mut args: Vec<String> = vec![
            "exec".into(),
            "--json".into(),
            format!("--sandbox={}", self.sandbox.as_arg()),
        ];
        if self.resume.is_some() {
            // `--sandbox` and `--json` stay on the parent; the uuid goes right before `--`
            args.push("resume".into());
        }
        args.push("--skip-git-repo-check".into());
        if let Some(m) = &self.model {
            args.push(format!("--model={m}"));
        }
        if let Some(f) = &self.output_schema {
            args.push(format!("--output-schema={}", text(f)));
        }
        if let Some(f) = &self.output_last_message {
            args.push(format!("--output-last-message={}", text(f)));
        }
        for img in &self.images {
            args.push(format!("--image={}", text(img.path())));
        }
        let mut deep = Deepest::new(common);
        if let Some(e) = self.effort {
            deep.push(format!(
                "model_reasoning_effort={}",
                toml_basic_string(e.as_str())
            ));
        }
        deep.emit(&mut args, self.cwd.path());
        if let Some(thread) = &self.resume {
            args.push(thread.to_arg());
        }
        args.push("--".into());
        args.push("-".into());

        let kind = match (&self.resume, &self.output_schema) {
            (_, Some(_)) => PathKind::Structured,
            (Some(_), None) => PathKind::Resume,
            (None, None) => PathKind::Exec,
        };
        SpawnSpec {
            program: common.program.clone(),
            args,
            env: common.env.clone(),
            cwd: self.cwd,
            checked: self.images,
            stdin: Some(self.prompt.into_string().into_bytes()),
            sandbox: self.sandbox,
            kind,
        }
    }
}

/// A turn for a warm app-server, checked like [`build_turn`]: the prompt (moved), the resolved
/// sandbox level (read-only when none was asked for, danger only when the operator allows
/// it), a bounded model id, the effort and the confined cwd. Fields are private: only this
/// function makes one.
#[derive(Debug, Clone)]
pub struct WarmTurn {
    prompt: Prompt,
    sandbox: SandboxLevel,
    model: Option<ModelId>,
    effort: Option<ReasoningEffort>,
    cwd: Confined,
    /// A one-shot call's turn: on a new thread started `ephemeral` (never written to disk).
    ephemeral: bool,
    /// `structured`'s JSON Schema, sent as the turn's `outputSchema`.
    output_schema: Option<serde_json::Value>,
}

impl WarmTurn {
    /// The caller's text, checked.
    pub fn prompt(&self) -> &Prompt {
        &self.prompt
    }
    /// The level this turn runs at.
    pub fn sandbox(&self) -> SandboxLevel {
        self.sandbox
    }
    /// The model asked for.
    pub fn model(&self) -> Option<&ModelId> {
        self.model.as_ref()
    }
    /// The reasoning effort asked for.
    pub fn effort(&self) -> Option<ReasoningEffort> {
        self.effort
    }
    /// The confined working directory.
    pub fn cwd(&self) -> &Confined {
        &self.cwd
    }
    /// Whether a new thread for it is started ephemeral (a one-shot call's).
    pub fn ephemeral(&self) -> bool {
        self.ephemeral
    }
    /// The JSON Schema its final message must follow (`structured`).
    pub fn output_schema(&self) -> Option<&serde_json::Value> {
        self.output_schema.as_ref()
    }

    /// The `codex app-server` this turn runs on: a session's in the turn's directory (see
    /// [`build_app_server`]), its path checked when the turn was.
    ///
    /// [`build_app_server`]: super::build_app_server
    pub fn app_server(&self, common: &Common) -> SpawnSpec {
        super::server::server_in(common, self.cwd.clone(), false)
    }

    /// Its prompt (moved), model, effort and directory, for a `query`'s or `search`'s request
    /// again (see [`super::OneShotRequest::from`]).
    pub fn into_parts(self) -> (Prompt, Option<ModelId>, Option<ReasoningEffort>, Confined) {
        (self.prompt, self.model, self.effort, self.cwd)
    }

    /// The same turn as a one-shot call's: a new thread is started ephemeral, and `schema`
    /// (for `structured`) goes with the turn as its `outputSchema`.
    pub fn into_one_shot(mut self, schema: Option<serde_json::Value>) -> WarmTurn {
        self.ephemeral = true;
        self.output_schema = schema;
        self
    }

    /// The same session turn for `codex exec` (the prompt moves on), when no app-server can
    /// run it: assembled from the values checked when it was made, so nothing is checked or
    /// can fail again.
    pub fn into_exec(self, common: &Common, resume: Option<ThreadId>) -> SpawnSpec {
        CheckedTurn {
            prompt: self.prompt,
            sandbox: self.sandbox,
            model: self.model,
            effort: self.effort,
            cwd: self.cwd,
            images: vec![],
            resume,
            output_schema: None,
            output_last_message: None,
        }
        .into_exec(common)
    }
}

/// Check a turn for a warm app-server (see [`WarmTurn`]). Image attachments are not carried:
/// the caller runs such a turn through [`build_turn`].
pub fn build_warm_turn(common: &Common, req: TurnRequest) -> Result<WarmTurn> {
    check_turn(common, req)?.into_warm().map_err(|t| {
        if t.has_images() {
            InvalidArgument::new(
                "files",
                "images go through codex exec, not a warm app-server",
            )
        } else {
            InvalidArgument::new(
                "path",
                "structured output files go through codex exec, not a warm app-server",
            )
        }
    })
}

fn path_arg(p: &Path) -> Result<&str> {
    p.to_str()
        .filter(|s| s.starts_with('/'))
        .ok_or_else(|| InvalidArgument::new("path", "internal file paths must be absolute UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{THREAD, common, expect, text, turn};
    use super::*;
    use crate::security::ids::MAX_MODEL_LEN;
    use crate::security::paths::Kind;
    use crate::security::prompt::MAX_PROMPT_BYTES;

    #[test]
    fn snapshot_new_turn() {
        let mut req = turn("--version");
        req.model = Some(ModelId::parse("model", "gpt-5.5").unwrap());
        req.reasoning_effort = Some(ReasoningEffort::High);
        let spec = build_turn(&common(), req.clone()).unwrap();
        assert_eq!(
            spec.args,
            expect(
                &[
                    "exec",
                    "--json",
                    "--sandbox=read-only",
                    "--skip-git-repo-check",
                    "--model=gpt-5.5",
                    "-c",
                    "model_provider=\"mock\"",
                    "-c",
                    "model_reasoning_effort=\"high\"",
                ],
                &["--", "-"]
            )
        );
        assert_eq!(spec.stdin.as_deref(), Some(&b"--version"[..]));
        assert_eq!(
            (spec.kind, spec.sandbox),
            (PathKind::Exec, SandboxLevel::ReadOnly)
        );
    }

    #[test]
    fn snapshot_resumed_turn() {
        let mut req = turn("next");
        req.resume = Some(ThreadId::parse(THREAD).unwrap());
        req.sandbox = Some(SandboxLevel::WorkspaceWrite);
        req.model = Some(ModelId::parse("model", "-o3").unwrap());
        req.reasoning_effort = Some(ReasoningEffort::Low);
        let spec = build_turn(&common(), req.clone()).unwrap();
        assert_eq!(
            spec.args,
            expect(
                &[
                    "exec",
                    "--json",
                    "--sandbox=workspace-write",
                    "resume",
                    "--skip-git-repo-check",
                    "--model=-o3",
                    "-c",
                    "model_provider=\"mock\"",
                    "-c",
                    "model_reasoning_effort=\"low\"",
                ],
                &[THREAD, "--", "-"]
            )
        );
        assert_eq!(spec.kind, PathKind::Resume);
    }

    #[test]
    fn snapshot_structured_turn() {
        let mut req = turn("give json");
        req.output_schema = Some("/state/s.json".into());
        req.output_last_message = Some("/state/o.json".into());
        let spec = build_turn(&common(), req.clone()).unwrap();
        assert_eq!(
            spec.args,
            expect(
                &[
                    "exec",
                    "--json",
                    "--sandbox=read-only",
                    "--skip-git-repo-check",
                    "--output-schema=/state/s.json",
                    "--output-last-message=/state/o.json",
                    "-c",
                    "model_provider=\"mock\"",
                ],
                &["--", "-"]
            )
        );
        assert_eq!(spec.kind, PathKind::Structured);
    }

    #[test]
    fn an_unspecified_sandbox_is_read_only_inside_the_builder() {
        let mut req = turn("x");
        req.resume = Some(ThreadId::parse(THREAD).unwrap());
        let spec = build_turn(&common(), req.clone()).unwrap();
        assert!(spec.args.contains(&"--sandbox=read-only".to_string()));
        assert_eq!(spec.sandbox, SandboxLevel::ReadOnly);
    }

    #[test]
    fn danger_is_refused_unless_the_operator_enabled_it() {
        let mut req = turn("x");
        req.sandbox = Some(SandboxLevel::DangerFullAccess);
        let err = build_turn(&common(), req.clone()).unwrap_err().to_string();
        assert!(
            err.contains("`sandbox`") && err.contains("CODEX_BRIDGE_ALLOW_DANGER"),
            "{err}"
        );
        let mut c = common();
        c.allow_danger = true;
        assert!(
            build_turn(&c, req.clone())
                .unwrap()
                .args
                .contains(&"--sandbox=danger-full-access".into())
        );
    }

    /// A prompt of the largest size moves from the request into the spec and out to the
    /// runner's writer: the same buffer all the way, never copied.
    #[test]
    fn the_prompt_moves_into_the_spec_and_out_without_a_copy() {
        let mut req = turn("x");
        req.prompt = text(&"p".repeat(MAX_PROMPT_BYTES));
        let at = req.prompt.as_ptr();
        let mut spec = build_turn(&common(), req).unwrap();
        assert_eq!(spec.stdin().map(<[u8]>::as_ptr), Some(at));
        let taken = spec.take_stdin().unwrap();
        assert_eq!((taken.as_ptr(), taken.len()), (at, MAX_PROMPT_BYTES));
        assert!(spec.stdin().is_none());
    }

    #[test]
    fn images_are_bound_and_come_before_the_separator() {
        let mut req = turn("x");
        let image = |p: &str| Confined::unchecked(p, "/work/repo", Kind::Image, "files[0]");
        req.images = vec![image("/work/repo/a.png")];
        let spec = build_turn(&common(), req.clone()).unwrap();
        let i = spec
            .args
            .iter()
            .position(|a| a == "--image=/work/repo/a.png")
            .unwrap();
        let dd = spec.args.iter().position(|a| a == "--").unwrap();
        assert!(i < dd);
        req.images[0] = image("/work/repo/a,b.png");
        assert!(build_turn(&common(), req.clone()).is_err());
    }

    #[test]
    fn prompts_and_models_are_validated_with_field_names() {
        // A blank prompt is refused where every prompt is checked, before any builder.
        let err = Prompt::parse("prompt", "   ".into())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`prompt`"), "{err}");
        // a model id is checked where the call is read: a builder takes only a checked one
        let err = ModelId::parse("model", "").unwrap_err().to_string();
        assert!(err.contains("`model`"), "{err}");
        assert!(ModelId::parse("model", &"m".repeat(MAX_MODEL_LEN + 1)).is_err());
        assert!(ModelId::parse("model", &"m".repeat(MAX_MODEL_LEN)).is_ok());
        assert!(ModelId::parse("model", "a\0b").is_err());
    }
}

//! `structured`'s turns: codex answers with the schema native or in the prompt (see
//! [`super::schema`]); an answer that does not validate is asked for once more in the same
//! thread. Runs inside a one-shot actor's task, with one progress sink for the whole call, so
//! progress keeps increasing across the re-ask and its notice reaches the caller.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::actors::pool::warm::Serves;
use crate::calls::Answer;
use crate::codex::argv::{Common, SpawnSpec, TurnRequest, WarmTurn, build_turn, build_warm_turn};
use crate::codex::events::FailureKind;
use crate::codex::process::{Ending, ThreadWanted, TurnOutcome};
use crate::config::Backend;
use crate::error::{Error, Result};
use crate::plan::values::SandboxLevel;
use crate::security::ids::{ModelId, ThreadId};
use crate::security::paths::Confined;
use crate::security::prompt::Prompt;
use crate::turn::backend::source::OneShotSource;
use crate::turn::backend::{CodexBackend, Invocation, Source};
use crate::turn::runner::Runner;
use crate::turn::schema::SchemaUse;

/// A `structured` call, validated.
pub(crate) struct Ask {
    /// The caller's prompt with its attached files' text.
    pub prompt: Prompt,
    pub plan: SchemaUse,
    pub model: Option<ModelId>,
    pub cwd: Confined,
    pub images: Vec<Confined>,
    /// For the whole call, re-ask included.
    pub timeout: Duration,
}

/// The turn of one attempt of a call for `model` in `cwd`, with `prompt` (moved in):
/// read-only by default, no image, a new thread; each backend adds what it sends on top.
fn request(model: &Option<ModelId>, cwd: &Confined, prompt: Prompt) -> TurnRequest {
    TurnRequest {
        prompt,
        sandbox: None,
        model: model.clone(),
        reasoning_effort: None,
        cwd: cwd.clone(),
        images: vec![],
        resume: None,
        output_schema: None,
        output_last_message: None,
    }
}

/// The first attempt's prompt: the caller's, with the plan's instructions appended (counted
/// against the prompt's limit like all the bridge adds).
fn first_prompt(mut prompt: Prompt, plan: &SchemaUse) -> Result<Option<Prompt>> {
    prompt.append(&plan.prompt_suffix)?;
    Ok(Some(prompt))
}

/// Codex's `--output-schema` and `-o` files, in a private directory removed with it.
struct Files {
    _dir: tempfile::TempDir,
    schema: PathBuf,
    answer: PathBuf,
}

impl Files {
    fn new(plan: &SchemaUse) -> Result<Files> {
        let dir = tempfile::Builder::new()
            .prefix("codex-mcp-bridge-structured-")
            .tempdir()
            .map_err(Error::io("creating the schema's temporary directory"))?;
        let schema = dir
            .path()
            .canonicalize()
            .map_err(Error::io("resolving the schema's temporary directory"))?
            .join("schema.json");
        let answer = schema.with_file_name("answer.json");
        if let Some(native) = &plan.native_schema {
            std::fs::write(&schema, native.to_string())
                .map_err(Error::io("writing the output schema file"))?;
        }
        Ok(Files {
            _dir: dir,
            schema,
            answer,
        })
    }
}

/// Ask, check, and ask once more on a validation failure. The answer carries the validated
/// (redacted) JSON in `data`, or the failure in `error`. Each attempt is one turn on the
/// call's backend: on the app-server backend a call without images runs on a warm app-server
/// of its client in its directory, else (or when none can take it) with `codex exec` and its
/// `--output-schema` and `-o` files ([`Target::invocation`]).
pub(crate) async fn answer(runner: &Runner<'_>, ask: Ask) -> Result<Answer> {
    let source = if ask.images.is_empty() {
        let serves = Serves::Dir(ask.cwd.path().to_path_buf());
        Source::OneShot(OneShotSource::new(
            runner.client.id,
            serves,
            Some(ask.cwd.clone()),
        ))
    } else {
        Source::Exec
    };
    let mut backend = CodexBackend::new(source);
    let answered = answer_on(runner, &mut backend, ask).await;
    runner.keep(backend);
    answered
}

/// What every attempt of a call shares: the client's codex invocation, the plan, the exec
/// route's files and the turn's model, directory and images.
struct Target<'a> {
    common: &'a Common,
    plan: &'a SchemaUse,
    files: &'a Files,
    model: &'a Option<ModelId>,
    cwd: &'a Confined,
    images: &'a [Confined],
    /// The first attempt's backend, chosen once ([`crate::turn::backend::warm_chosen`]); the
    /// re-ask runs where the first attempt ran.
    warm_first: bool,
}

/// One attempt's outcome, time queued, codex's answer (unchecked) and where it ran.
type Attempt = (TurnOutcome, Duration, String, Backend);

impl Target<'_> {
    /// The exec route's files and images, for an attempt's `codex exec`.
    fn exec_files(&self) -> ExecFiles {
        ExecFiles {
            schema: self
                .plan
                .native_schema
                .as_ref()
                .map(|_| self.files.schema.clone()),
            answer: self.files.answer.clone(),
            images: self.images.to_vec(),
        }
    }

    /// Codex's invocation of an attempt: `prompt` on a new thread, or on `thread` for the
    /// re-ask. A warm turn (no images, and the first attempt ran warm) goes on a new ephemeral
    /// thread with the schema as its `outputSchema` (when codex takes it natively), the re-ask
    /// a second turn on that thread, still loaded; else, or without an app-server, `codex
    /// exec` with the `--output-schema` and `-o` files, the re-ask an `exec resume`.
    fn invocation(
        &self,
        (prompt, thread): (Prompt, Option<(ThreadId, Backend)>),
    ) -> Result<(Invocation, SandboxLevel)> {
        let req = request(self.model, self.cwd, prompt);
        let warm = match thread {
            None => self.warm_first,
            Some((_, on)) => matches!(on, Backend::AppServer),
        };
        let resume = thread.map(|(t, _)| t);
        let exec = self.exec_files();
        if !warm {
            let spec = exec.spec(TurnRequest { resume, ..req }, self.common)?;
            let sandbox = spec.sandbox();
            return Ok((Invocation::Exec(spec), sandbox));
        }
        let turn =
            build_warm_turn(self.common, req)?.into_one_shot(self.plan.native_schema.clone());
        let sandbox = turn.sandbox();
        let (model, cwd) = (self.model.clone(), self.cwd.clone());
        let invocation = Invocation::Warm {
            turn,
            wanted: resume.map_or(ThreadWanted::Start, ThreadWanted::Resume),
            fallback: Box::new(move |t: WarmTurn, common: &Common| {
                let prompt = t.into_parts().0;
                exec.spec(
                    TurnRequest {
                        resume,
                        ..request(&model, &cwd, prompt)
                    },
                    common,
                )
            }),
        };
        Ok((invocation, sandbox))
    }
}

/// What an attempt's `codex exec` adds to its turn: the `--output-schema` file (when codex
/// takes the schema natively), the `-o` file, the images.
struct ExecFiles {
    schema: Option<PathBuf>,
    answer: PathBuf,
    images: Vec<Confined>,
}

impl ExecFiles {
    fn spec(self, req: TurnRequest, common: &Common) -> Result<SpawnSpec> {
        let req = TurnRequest {
            images: self.images,
            output_schema: self.schema,
            output_last_message: Some(self.answer),
            ..req
        };
        Ok(build_turn(common, req)?)
    }
}

/// One attempt: codex's invocation of it ([`Target::invocation`]) run on the call's backend
/// within `remaining`; the answer is the `-o` file on exec (codex's final message when it is
/// missing), codex's final message on the app-server.
async fn attempt(
    runner: &Runner<'_>,
    backend: &mut CodexBackend,
    target: &Target<'_>,
    ask: (Prompt, Option<(ThreadId, Backend)>),
    remaining: Duration,
) -> Result<(Attempt, SandboxLevel)> {
    let _ = std::fs::remove_file(&target.files.answer);
    let (invocation, sandbox) = target.invocation(ask)?;
    let (outcome, queued) = runner
        .turn(backend, target.common.clone(), invocation, remaining)
        .await?;
    let on = if outcome.ran_with_exec() {
        Backend::Exec
    } else {
        Backend::AppServer
    };
    let text = match on {
        Backend::Exec => std::fs::read_to_string(&target.files.answer).ok(),
        Backend::AppServer => None,
    }
    .or_else(|| outcome.message.clone())
    .unwrap_or_default();
    Ok(((outcome, queued, text, on), sandbox))
}

/// The one loop of a `structured` call on `backend`: ask, check the answer against the plan
/// (its JSON redacted, as every answer is), and on a validation failure ask once more in the
/// same thread, on the backend the first attempt ran on.
async fn answer_on(runner: &Runner<'_>, backend: &mut CodexBackend, ask: Ask) -> Result<Answer> {
    // a start-up counts against the call's time: the attempts take what is left
    let started = Instant::now();
    let Ask {
        prompt,
        plan,
        model,
        cwd,
        images,
        timeout,
    } = ask;
    let common = runner.client.common_for(false);
    let files = Files::new(&plan)?;
    let target = Target {
        common: &common,
        plan: &plan,
        files: &files,
        model: &model,
        cwd: &cwd,
        images: &images,
        warm_first: crate::turn::backend::warm_chosen(runner.shared, images.is_empty()),
    };
    let mut next = first_prompt(prompt, &plan)?;
    let mut thread: Option<(ThreadId, Backend)> = None;
    let mut total_queued = Duration::ZERO;
    for attempt_no in 0..2 {
        let Some(prompt) = next.take() else { break };
        let remaining = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        let ((outcome, queued, text, on), sandbox) =
            attempt(runner, backend, &target, (prompt, thread), remaining).await?;
        total_queued += queued;
        if !matches!(outcome.ending, Ending::Completed) {
            return Ok(Answer::of(outcome, total_queued, sandbox, shown(&model)));
        }
        let ran_on = outcome.thread_id;
        let mut a = Answer::of(outcome, total_queued, sandbox, shown(&model));
        match plan.check(&text) {
            Ok(mut data) => {
                runner.client.secrets.redact_json(&mut data);
                a.data = Some(data);
                return Ok(a);
            }
            Err(errors) if attempt_no == 0 && ran_on.is_some() => {
                thread = ran_on.map(|t| (t, on));
                next = Some(ask_again(runner, &errors)?);
            }
            Err(errors) => {
                a.error = Some(not_valid(&errors));
                return Ok(a);
            }
        }
    }
    Err(Error::SessionFailed("structured: no attempt left".into()))
}

/// The model as an answer shows it.
fn shown(model: &Option<ModelId>) -> Option<String> {
    model.as_ref().map(ToString::to_string)
}

/// The re-ask after an answer that did not validate (said on the call's progress).
fn ask_again(runner: &Runner<'_>, errors: &str) -> Result<Prompt> {
    if let Some(p) = &runner.progress {
        p("answer did not validate; asking once more".into());
    }
    Ok(Prompt::parse(
        "prompt",
        format!(
            "Your answer did not validate against the JSON Schema:\n{errors}\nReply again with only the corrected JSON."
        ),
    )?)
}

/// The error of an answer that still does not validate.
fn not_valid(errors: &str) -> Error {
    Error::Codex {
        kind: FailureKind::TurnFailed,
        message: format!("the answer does not validate against the schema: {errors}"),
    }
}

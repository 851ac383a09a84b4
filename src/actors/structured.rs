//! `structured`'s turns: codex answers with the schema native or in the prompt (see
//! [`super::schema`]); an answer that does not validate is asked for once more in the same
//! thread. Runs inside a one-shot actor's task, with one progress sink for the whole call, so
//! progress keeps increasing across the re-ask and its notice reaches the caller.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::actors::calls::Answer;
use crate::actors::pool::warm::Serves;
use crate::actors::runner::Lease;
use crate::actors::runner::Runner;
use crate::actors::schema::Plan;
use crate::codex::argv::{Common, TurnRequest, build_turn, build_warm_turn};
use crate::codex::events::FailureKind;
use crate::codex::process::{Ending, ThreadWanted, TurnOutcome};
use crate::error::{Error, Result};
use crate::plan::values::SandboxLevel;
use crate::security::ids::ThreadId;
use crate::security::paths::Confined;
use crate::security::prompt::Prompt;

/// A `structured` call, validated.
pub(crate) struct Ask {
    /// The caller's prompt with its attached files' text.
    pub prompt: Prompt,
    pub plan: Plan,
    pub model: Option<String>,
    pub cwd: Confined,
    pub images: Vec<Confined>,
    /// For the whole call, re-ask included.
    pub timeout: Duration,
}

/// The turn of one attempt of a call for `model` in `cwd`, with `prompt` (moved in):
/// read-only by default, no image, a new thread; each backend adds what it sends on top.
fn request(model: &Option<String>, cwd: &Confined, prompt: Prompt) -> TurnRequest {
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
fn first_prompt(mut prompt: Prompt, plan: &Plan) -> Result<Option<Prompt>> {
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
    fn new(plan: &Plan) -> Result<Files> {
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
/// (redacted) JSON in `data`, or the failure in `error`. On the app-server backend a call
/// without images runs on a warm app-server of its client in its directory
/// ([`Route::Warm`]), else with `codex exec` ([`Route::Exec`]); both go through one loop
/// ([`answer_on`]).
pub(crate) async fn answer(runner: &Runner<'_>, ask: Ask) -> Result<Answer> {
    // a start-up counts against the call's time: the attempts take what is left
    let started = Instant::now();
    if ask.images.is_empty() {
        let common = runner.client.common_for(false);
        let serves = Serves::Dir(ask.cwd.path().to_path_buf());
        if let Some(mut lease) = runner
            .lease(serves, &common, Some(&ask.cwd), ask.timeout)
            .await?
        {
            let answered = answer_on(runner, Route::Warm(&mut lease), ask, started).await;
            runner.keep(lease);
            return answered;
        }
    }
    let files = Files::new(&ask.plan)?;
    answer_on(runner, Route::Exec(files), ask, Instant::now()).await
}

/// Where a `structured` call's turns run.
enum Route<'l> {
    /// A warm app-server of the client: the first turn on a new ephemeral thread with the
    /// schema as its `outputSchema` (when codex takes it natively), the re-ask a second turn
    /// on that thread, still loaded. Codex's final message is the answer.
    Warm(&'l mut Lease),
    /// `codex exec` with its `--output-schema` and `-o` files, the re-ask an `exec resume` of
    /// the thread. The `-o` file is the answer (codex's final message when it is missing).
    Exec(Files),
}

/// What every attempt of a call shares: the client's codex invocation, the plan and the
/// turn's model, directory and images.
struct Target<'a> {
    common: &'a Common,
    plan: &'a Plan,
    model: &'a Option<String>,
    cwd: &'a Confined,
    images: &'a [Confined],
}

/// One attempt's outcome, time queued, codex's answer (unchecked) and the sandbox it ran at.
type Attempt = (TurnOutcome, Duration, String, SandboxLevel);

impl Route<'_> {
    /// One attempt: `prompt` on a new thread, or on `thread` for the re-ask, within
    /// `remaining`.
    async fn attempt(
        &mut self,
        runner: &Runner<'_>,
        target: &Target<'_>,
        (prompt, thread): (Prompt, Option<ThreadId>),
        remaining: Duration,
    ) -> Result<Attempt> {
        let common = target.common;
        let req = request(target.model, target.cwd, prompt);
        match self {
            Route::Warm(lease) => {
                let wanted = thread.map_or(ThreadWanted::Start, ThreadWanted::Resume);
                let turn =
                    build_warm_turn(common, req)?.into_one_shot(target.plan.native_schema.clone());
                let (outcome, queued) = lease.run(runner, wanted, &turn, remaining).await?;
                let text = outcome.output.message.clone().unwrap_or_default();
                Ok((outcome, queued, text, SandboxLevel::ReadOnly))
            }
            Route::Exec(files) => {
                let _ = std::fs::remove_file(&files.answer);
                let req = TurnRequest {
                    images: target.images.to_vec(),
                    resume: thread,
                    output_schema: target
                        .plan
                        .native_schema
                        .as_ref()
                        .map(|_| files.schema.clone()),
                    output_last_message: Some(files.answer.clone()),
                    ..req
                };
                let spec = build_turn(common, req)?;
                let sandbox = spec.sandbox();
                let (outcome, queued) = runner.run(spec, remaining).await?;
                let text = std::fs::read_to_string(&files.answer)
                    .ok()
                    .or_else(|| outcome.output.message.clone())
                    .unwrap_or_default();
                Ok((outcome, queued, text, sandbox))
            }
        }
    }
}

/// The one loop of a `structured` call on `route`: ask, check the answer against the plan
/// (its JSON redacted, as every answer is), and on a validation failure ask once more in the
/// same thread.
async fn answer_on(
    runner: &Runner<'_>,
    mut route: Route<'_>,
    ask: Ask,
    started: Instant,
) -> Result<Answer> {
    let Ask {
        prompt,
        plan,
        model,
        cwd,
        images,
        timeout,
    } = ask;
    let common = runner.client.common_for(false);
    let target = Target {
        common: &common,
        plan: &plan,
        model: &model,
        cwd: &cwd,
        images: &images,
    };
    let mut next = first_prompt(prompt, &plan)?;
    let mut thread: Option<ThreadId> = None;
    let mut total_queued = Duration::ZERO;
    for attempt in 0..2 {
        let Some(prompt) = next.take() else { break };
        let remaining = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        let (outcome, queued, text, sandbox) = route
            .attempt(runner, &target, (prompt, thread), remaining)
            .await?;
        total_queued += queued;
        if !matches!(outcome.ending, Ending::Completed) {
            return Ok(Answer::of(outcome, total_queued, sandbox, None, model));
        }
        let ran_on = outcome.output.thread_id;
        let mut a = Answer::of(outcome, total_queued, sandbox, None, model.clone());
        match plan.check(&text) {
            Ok(mut data) => {
                runner.client.secrets.redact_json(&mut data);
                a.data = Some(data);
                return Ok(a);
            }
            Err(errors) if attempt == 0 && ran_on.is_some() => {
                thread = ran_on;
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

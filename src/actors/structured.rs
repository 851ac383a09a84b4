//! `structured`'s turns: codex answers with the schema native or in the prompt (see
//! [`super::schema`]); an answer that does not validate is asked for once more in the same
//! thread. Runs inside a one-shot actor's task, with one progress sink for the whole call, so
//! progress keeps increasing across the re-ask and its notice reaches the caller.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::actors::calls::Answer;
use crate::actors::runner::Lease;
use crate::actors::runner::Runner;
use crate::actors::schema::Plan;
use crate::actors::warm::Serves;
use crate::codex::argv::{TurnRequest, build_turn, build_warm_turn};
use crate::codex::events::FailureKind;
use crate::codex::process::{Ending, ThreadWanted};
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
/// without images runs on a warm app-server of its client in its directory (see
/// [`warm_answer`]), else with `codex exec`.
pub(crate) async fn answer(runner: &Runner<'_>, ask: Ask) -> Result<Answer> {
    if ask.images.is_empty() {
        // a start-up counts against the call's time: `warm_answer` takes what is left
        let started = Instant::now();
        let common = runner.client.common_for(false);
        let serves = Serves::Dir(ask.cwd.path().to_path_buf());
        if let Some(mut lease) = runner
            .lease(serves, &common, Some(&ask.cwd), ask.timeout)
            .await?
        {
            let answered = warm_answer(runner, &mut lease, ask, started).await;
            runner.keep(lease);
            return answered;
        }
    }
    exec_answer(runner, ask).await
}

/// [`answer`] on a warm app-server: the first turn on a new ephemeral thread with the schema
/// as its `outputSchema` (when codex takes it natively), the re-ask a second turn on that
/// thread, still loaded. Codex's final message (redacted, as every answer) is what is checked.
async fn warm_answer(
    runner: &Runner<'_>,
    lease: &mut Lease,
    ask: Ask,
    started: Instant,
) -> Result<Answer> {
    let mut next = first_prompt(ask.prompt, &ask.plan)?;
    let mut wanted = ThreadWanted::Start;
    let mut total_queued = Duration::ZERO;
    let common = runner.client.common_for(false);
    let sandbox = SandboxLevel::ReadOnly;
    for attempt in 0..2 {
        let Some(prompt) = next.take() else { break };
        let remaining = ask
            .timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        let req = request(&ask.model, &ask.cwd, prompt);
        let turn = build_warm_turn(&common, req)?.into_one_shot(ask.plan.native_schema.clone());
        let (outcome, queued) = lease.run(runner, wanted, &turn, remaining).await?;
        total_queued += queued;
        if !matches!(outcome.ending, Ending::Completed) {
            return Ok(Answer::of(outcome, total_queued, sandbox, None, ask.model));
        }
        let text = outcome.output.message.clone().unwrap_or_default();
        let thread = outcome.output.thread_id;
        let mut a = Answer::of(outcome, total_queued, sandbox, None, ask.model.clone());
        match ask.plan.check(&text) {
            Ok(mut data) => {
                runner.client.secrets.redact_json(&mut data);
                a.data = Some(data);
                return Ok(a);
            }
            Err(errors) if attempt == 0 && thread.is_some() => {
                if let Some(t) = thread {
                    wanted = ThreadWanted::Resume(t);
                }
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

/// [`answer`] with `codex exec`: `--output-schema` and `-o` files, the re-ask an
/// `exec resume` of the thread.
async fn exec_answer(runner: &Runner<'_>, ask: Ask) -> Result<Answer> {
    let files = Files::new(&ask.plan)?;
    let started = Instant::now();
    let mut next = first_prompt(ask.prompt, &ask.plan)?;
    let mut resume: Option<ThreadId> = None;
    let mut total_queued = Duration::ZERO;
    let common = runner.client.common_for(false);
    for attempt in 0..2 {
        let Some(prompt) = next.take() else { break };
        let _ = std::fs::remove_file(&files.answer);
        let remaining = ask
            .timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        let req = TurnRequest {
            images: ask.images.clone(),
            resume,
            output_schema: ask
                .plan
                .native_schema
                .as_ref()
                .map(|_| files.schema.clone()),
            output_last_message: Some(files.answer.clone()),
            ..request(&ask.model, &ask.cwd, prompt)
        };
        let spec = build_turn(&common, req)?;
        let sandbox = spec.sandbox();
        let (outcome, queued) = runner.run(spec, remaining).await?;
        total_queued += queued;
        if !matches!(outcome.ending, Ending::Completed) {
            return Ok(Answer::of(outcome, total_queued, sandbox, None, ask.model));
        }
        let text = std::fs::read_to_string(&files.answer)
            .ok()
            .or_else(|| outcome.output.message.clone())
            .unwrap_or_default();
        let thread = outcome.output.thread_id;
        let mut a = Answer::of(outcome, total_queued, sandbox, None, ask.model.clone());
        match ask.plan.check(&text) {
            Ok(mut data) => {
                // read from codex's answer file, not from its redacted events: redacted here,
                // as every answer is
                runner.client.secrets.redact_json(&mut data);
                a.data = Some(data);
                return Ok(a);
            }
            Err(errors) if attempt == 0 && thread.is_some() => {
                resume = thread;
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

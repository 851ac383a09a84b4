//! Session-less codex processes (`query`, `search`, `review`, `structured`, `ping`'s version
//! probe and `closeSession`'s `codex delete`) as actors.
//!
//! Architecture invariants: every one-shot is owned by a [`OneShotActor`] spawned linked under
//! the registry, so [`super::Bridge::shutdown`] stops it (its process is killed and reaped
//! before the stop returns) and a supervisor that dies takes it down; while codex runs, the
//! actor keeps an `inflight` record under a key of its own (a generated session id no session
//! uses), which the takeover sweep ([`super::recover_interrupted`]) kills after a crash as it
//! does a session's turn; the short commands announce their process through the same spawn
//! hook as a turn. The actor writes only that record; it never reads or writes a session's. A
//! handler never awaits the child: the work runs in a task that reports back.
//!
//! On the app-server backend, `query`, `search` and `structured` (without images) run as
//! ephemeral threads on a warm `codex app-server` of the calling client context
//! (the call's backend, [`crate::turn::backend::Source::OneShot`]): the call's task takes the process whole from the warm pool (so this
//! actor's cancel or stop kills it, as a session turn's), runs its turn from the fixed
//! templates (read-only, approval `never`, a new thread per call, `query`'s in a fresh empty
//! directory), and gives it back only after a completed turn whose thread it let go of
//! (`thread/unsubscribe`); a process whose turn was cancelled, timed out or failed is killed
//! and replaced. Such a process is on record under a key of its own while it lives. With no
//! usable app-server, or every warm process busy, the call runs with `codex exec`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::actors::client::ClientContext;
use crate::actors::shared::Shared;
use crate::calls::{Answer, Finding, OneShot, OneShotCall};
use crate::codex::argv::{PathKind, ReviewRequest, build_query, build_review, build_search};
use crate::codex::process::{CodexCommand, SpawnHook, SpawnInfo, run_command};
use crate::error::{Error, Result};
use crate::security::ids::{SessionId, ThreadId};
use crate::turn::backend::CodexBackend;
use crate::turn::runner::Runner;

/// What a one-shot actor runs: given the hook that records codex's process and the token that
/// stops it, a future that answers its caller itself.
pub(crate) type Job = Box<
    dyn FnOnce(SpawnHook, CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send,
>;

/// A [`Job`] from an async closure.
pub(crate) fn job<F, Fut>(f: F) -> Job
where
    F: FnOnce(SpawnHook, CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Box::new(
        move |hook: SpawnHook,
              cancel: CancellationToken|
              -> Pin<Box<dyn Future<Output = ()> + Send>> { Box::pin(f(hook, cancel)) },
    )
}

/// Start a one-shot actor running `job`, linked under `supervisor` (the registry: shutdown
/// stops it); `cancel` is the caller's (the job's token is a child of it).
pub(crate) async fn start(
    shared: Arc<Shared>,
    supervisor: ActorCell,
    cancel: CancellationToken,
    job: Job,
) -> Result<()> {
    let args = OneShotArgs {
        shared,
        cancel,
        job,
    };
    Actor::spawn_linked(None, OneShotActor, args, supervisor)
        .await
        .map(|_| ())
        .map_err(|e| Error::Busy(format!("could not start the turn: {e}")))
}

/// `codex delete --force THREAD` with `client`'s codex and environment, owned by a one-shot
/// actor linked under `supervisor` (on record for the crash sweep while it runs, killed by a
/// shutdown). Resolves once the actor runs, to a receiver answered when the command ended.
/// Failures are logged: the session is already forgotten either way.
pub(crate) async fn delete_thread(
    shared: Arc<Shared>,
    supervisor: ActorCell,
    client: Arc<ClientContext>,
    thread: ThreadId,
) -> Result<tokio::sync::oneshot::Receiver<()>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = job(move |hook, token| async move {
        let command = CodexCommand::DeleteThread(thread);
        let (program, env) = (&client.common.program, &client.common.env);
        let ran = tokio::select! {
            ran = run_command(program, env, &command, Some(&hook)) => ran,
            // dropping the command kills its process group
            _ = token.cancelled() => {
                tracing::warn!(%thread, "codex delete stopped by a shutdown");
                let _ = tx.send(());
                return;
            }
        };
        match ran {
            Ok(out) if out.success() => tracing::info!(%thread, "codex thread deleted"),
            Ok(out) => tracing::warn!(%thread, exit_code = ?out.exit_code, "codex delete failed"),
            Err(e) => tracing::warn!(%thread, error = %e, "codex delete failed"),
        }
        let _ = tx.send(());
    });
    start(shared, supervisor, CancellationToken::new(), job).await?;
    Ok(rx)
}

/// Messages to a one-shot actor.
pub enum OneShotMessage {
    /// Codex runs; remember its process for crash recovery.
    Spawned { info: SpawnInfo },
    /// The job ended (it has answered its caller).
    Done,
}

/// Arguments of a one-shot actor.
pub struct OneShotArgs {
    pub(crate) shared: Arc<Shared>,
    /// The caller's cancellation (the job's token is a child of it).
    pub(crate) cancel: CancellationToken,
    pub(crate) job: Job,
}

/// A one-shot actor's state. Dropping it (a kill, a panic) cancels the job and aborts its
/// task, whose runner kills codex's process group, descendants and cgroup.
pub struct OneShotState {
    shared: Arc<Shared>,
    /// The `inflight` key of this one-shot's process.
    key: SessionId,
    recorded: bool,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Drop for OneShotState {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// The one-shot actor's behaviour.
pub struct OneShotActor;

/// How long a stopping one-shot waits for its process to be killed and reaped.
const STOP_WAIT: Duration = Duration::from_secs(10);

impl Actor for OneShotActor {
    type Msg = OneShotMessage;
    type State = OneShotState;
    type Arguments = OneShotArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: OneShotArgs,
    ) -> Result<OneShotState, ActorProcessingErr> {
        let cancel = args.cancel.child_token();
        let me = myself.clone();
        let hook: SpawnHook = Arc::new(move |info: &SpawnInfo| {
            let _ = me.cast(OneShotMessage::Spawned { info: info.clone() });
        });
        let job = (args.job)(hook, cancel.clone());
        let me = myself.clone();
        let task = tokio::spawn(async move {
            job.await;
            let _ = me.cast(OneShotMessage::Done);
        });
        Ok(OneShotState {
            shared: args.shared,
            key: SessionId::generate(),
            recorded: false,
            cancel,
            task: Some(task),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        st: &mut OneShotState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            OneShotMessage::Spawned { info } => {
                crate::actors::inflight::on_record(&st.shared.store, &st.key, info);
                let _ = st.shared.store.flush().await;
                st.recorded = true;
            }
            OneShotMessage::Done => {
                st.task = None;
                myself.stop(None);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        st: &mut OneShotState,
    ) -> Result<(), ActorProcessingErr> {
        // a stop (shutdown) while codex runs: cancel it and wait until its processes are
        // killed and reaped, so that nothing outlives the stop
        st.cancel.cancel();
        if let Some(task) = st.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(STOP_WAIT, task).await.is_err() {
                abort.abort();
            }
        }
        if st.recorded {
            let _ = crate::actors::inflight::off_record(&st.shared.store, &st.key);
            let _ = st.shared.store.flush().await;
        }
        Ok(())
    }
}

/// Run one session-less call to its answer (inside a one-shot actor's task), with the warm
/// processes it used (to be given back or retired).
pub(crate) async fn answer(
    shared: Arc<Shared>,
    call: OneShotCall,
    hook: SpawnHook,
    cancel: CancellationToken,
) -> (Result<Answer>, Vec<CodexBackend>) {
    let OneShotCall {
        request,
        timeout,
        progress,
        client,
        ..
    } = call;
    let runner = Runner {
        shared: &shared,
        client: &client,
        hook,
        cancel: &cancel,
        progress,
        backends: Default::default(),
    };
    let answer = run_call(&runner, request, timeout).await;
    let backends = std::mem::take(&mut *runner.backends.lock().unwrap_or_else(|p| p.into_inner()));
    (answer, backends)
}

/// Run one session-less call (inside a one-shot actor's task) and answer `reply`, once the
/// warm processes it used are back in the pool (each let go of the call's thread first: one
/// round trip) or retired, so that the caller's next call finds its process there.
pub(crate) async fn answer_then(
    shared: Arc<Shared>,
    call: OneShotCall,
    hook: SpawnHook,
    cancel: CancellationToken,
    reply: tokio::sync::oneshot::Sender<Result<Answer>>,
) {
    let (answer, backends) = answer(shared.clone(), call, hook, cancel).await;
    for backend in backends {
        backend.give_back(&shared).await;
    }
    let _ = reply.send(answer);
}

/// One call's request, run to its answer by `runner`.
async fn run_call(runner: &Runner<'_>, request: OneShot, timeout: Duration) -> Result<Answer> {
    let client = runner.client;
    match request {
        OneShot::Query {
            prompt,
            context,
            model,
            reasoning_effort,
        } => {
            let prompt = match context {
                Some(c) if !c.trim().is_empty() => {
                    prompt.prefix(&format!("Context:\n{c}\n\nQuestion:\n"))?
                }
                _ => prompt,
            };
            let req = (prompt, model, reasoning_effort);
            runner
                .scratch((PathKind::Query, build_query), req, timeout)
                .await
        }
        OneShot::Search { query, model } => {
            let prompt = query.prefix("Search the web and answer with sources: ")?;
            let req = (prompt, model, None);
            runner
                .scratch((PathKind::Search, build_search), req, timeout)
                .await
        }
        OneShot::Review { target, model, cwd } => {
            let req = ReviewRequest { target, model, cwd };
            let common = client.common_for(false);
            let spec = build_review(&common, &req)?;
            let sandbox = spec.sandbox();
            let (outcome, queued) = runner.exec((spec, common), timeout).await?;
            let mut a = Answer::of(outcome, queued, sandbox, req.model.map(|m| m.to_string()));
            a.findings = Some(parse_findings(&a.response));
            Ok(a)
        }
        OneShot::Structured {
            prompt,
            files,
            plan,
            model,
            cwd,
        } => {
            let (prompt, images) = crate::turn::files::compose(prompt, &files, &cwd)?;
            let ask = crate::turn::structured::Ask {
                prompt,
                plan: *plan,
                model,
                cwd,
                images,
                timeout,
            };
            crate::turn::structured::answer(runner, ask).await
        }
    }
}

/// Parse `[P1] title — path:lines` lines of a rendered review.
pub fn parse_findings(text: &str) -> Vec<Finding> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches("- ").trim();
            let rest = l.strip_prefix('[')?;
            let (prio, rest) = rest.split_once(']')?;
            if !(prio.len() == 2
                && prio.starts_with('P')
                && prio[1..].chars().all(|c| c.is_ascii_digit()))
            {
                return None;
            }
            let rest = rest.trim();
            let (title, location) = match rest.rsplit_once(" — ") {
                Some((t, loc)) => (t.trim().to_owned(), Some(loc.trim().to_owned())),
                None => (rest.to_owned(), None),
            };
            Some(Finding {
                priority: prio.to_owned(),
                title,
                location,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_findings_are_parsed_from_codexs_rendering() {
        let text = "One bug.\n\nReview comment:\n\n- [P1] Appended line breaks parser — /r/f.txt:2-2\n  The new `b` line is wrong.\n- [P3] Nit\n[X] not a finding";
        assert_eq!(
            parse_findings(text),
            vec![
                Finding {
                    priority: "P1".into(),
                    title: "Appended line breaks parser".into(),
                    location: Some("/r/f.txt:2-2".into())
                },
                Finding {
                    priority: "P3".into(),
                    title: "Nit".into(),
                    location: None
                },
            ]
        );
    }
}

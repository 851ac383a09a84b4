//! What the tools' handlers share: the model id checked first, a turn's answer shaped as a
//! tool result ([`shape`], [`finish`]), a session as the session tools show it, the caller's
//! working directory resolved inside the allowed roots, and a session-less call run through the
//! bridge ([`McpServer::one_shot`]). Nothing here builds a codex invocation, runs a process or
//! reads the store: the actors do.

use std::path::Path;
use std::time::Duration;

use rmcp::model::CallToolResult;

use crate::actors::{Answer, ClientContext, OneShot, OneShotCall, SessionView};
use crate::approval::Decision;
use crate::approval::ask;
use crate::error::{Error, Result};
use crate::mcp::answer::{error_result, ok_result};
use crate::mcp::connection::{CallCtx, McpServer};
use crate::mcp::progress::progress_for;
use crate::mcp::results::{ApprovalReport, CommandReport, SessionInfo, TurnResult, UsageReport};
use crate::security::ids::ModelId;
use crate::security::paths::{Confined, Kind};
use crate::security::redact::redact;

/// At most [`crate::turn::files::MAX_FILES`] files per call, naming `files`.
pub(super) fn check_files(files: &Option<Vec<String>>) -> Result<()> {
    match files {
        Some(f) if f.len() > crate::turn::files::MAX_FILES => Err(Error::invalid(
            "files",
            format!("at most {} files per call", crate::turn::files::MAX_FILES),
        )),
        _ => Ok(()),
    }
}

/// A caller's model id, checked once as its call is read, before anything is queued or
/// spawned, by the same rule on both backends: the [`ModelId`] carries the check to codex.
pub(super) fn model_of(model: Option<&str>) -> Result<Option<ModelId>> {
    Ok(model.map(|m| ModelId::parse("model", m)).transpose()?)
}

/// Shape a turn's answer as a tool result: success, or an error that keeps the partial answer.
pub(super) fn shape(mut a: Answer, max_len: Option<u64>) -> (TurnResult, Option<Error>) {
    let mut truncated = false;
    if let Some(max) = max_len
        && a.response.chars().count() as u64 > max
    {
        a.response = a.response.chars().take(max as usize).collect();
        truncated = true;
    }
    let value = TurnResult {
        // a session's turn (`codex`): the session to continue, and whether it continued one
        resumed: a.session_id.as_ref().map(|_| a.resumed),
        session_id: a.session_id.map(|s| s.to_string()),
        response: a.response,
        thread_id: a.thread_id.map(|t| t.to_string()),
        usage: UsageReport {
            turn: a.turn_usage,
            thread: a.thread_usage,
        },
        duration_ms: a.duration.as_millis() as u64,
        queued_ms: a.queued.as_millis() as u64,
        timed_out: a.timed_out,
        commands: a
            .commands
            .into_iter()
            .map(|c| CommandReport {
                command: c.command,
                exit_code: c.exit_code,
                status: c.status.as_str().to_owned(),
            })
            .collect(),
        files_changed: a.files_changed,
        sandbox: a.sandbox.map(|s| s.as_arg().to_owned()).unwrap_or_default(),
        approval: a.recorded.as_ref().map(|r| r.approval_policy.clone()),
        approvals_reviewer: a.recorded.as_ref().map(|r| r.approvals_reviewer.clone()),
        policy_verified: a.recorded.is_some(),
        truncated,
        model: a.model,
        findings: a.findings,
        data: a.data,
        approvals: (!a.approvals.is_empty()).then(|| {
            a.approvals
                .into_iter()
                .map(|r| ApprovalReport {
                    asked: r.asked,
                    decision: match r.decision {
                        Decision::AcceptOnce => "acceptOnce",
                        Decision::Decline => "decline",
                    }
                    .to_owned(),
                    by_person: r.by_person,
                    reason: r.reason.map(str::to_owned),
                })
                .collect()
        }),
        steered: (!a.steered.is_empty()).then_some(a.steered),
        ..Default::default()
    };
    (value, a.error)
}

/// The final tool result of a turn: success (a `structured` answer's text is its JSON), or an
/// error that keeps the partial answer.
pub(super) fn finish(value: TurnResult, error: Option<Error>) -> CallToolResult {
    let note = cannot_ask_note(&value);
    match error {
        None => {
            let mut text = match &value.data {
                Some(data) => serde_json::to_string_pretty(data).unwrap_or_default(),
                None if value.response.is_empty() => "(no answer)".to_owned(),
                None => value.response.clone(),
            };
            // a `structured` answer's text stays its JSON
            if value.data.is_none()
                && let Some(n) = &note
            {
                text.push_str(n);
            }
            ok_result(text, value)
        }
        Some(e) => {
            let mut r = error_result(&e, Some(value));
            if let (Some(n), Some(rmcp::model::ContentBlock::Text(t))) =
                (&note, r.content.first_mut())
            {
                t.text.push_str(n);
            }
            r
        }
    }
}

/// What the model is told after the answer when codex's request was declined because the host
/// behind the call cannot ask a person ([`ask::host_cannot_ask`]): that, and what to do
/// instead, in the text it reads (the `approvals` list says it too).
fn cannot_ask_note(value: &TurnResult) -> Option<String> {
    let reason = value
        .approvals
        .iter()
        .flatten()
        .filter_map(|a| a.reason.as_deref())
        .find(|r| ask::host_cannot_ask(r))?;
    Some(format!(
        "\n\n[codex-mcp-bridge: codex asked for an approval, declined without a person: {reason}]"
    ))
}

/// A session as the session tools show it to `client`: its last answer only to a client of
/// the session's own `CODEX_HOME` (one that may continue it; another host on the store sees
/// that it ran, not what it said).
pub(crate) fn session_info(v: SessionView, client: &ClientContext) -> SessionInfo {
    let (hand_off, hand_off_unavailable) = match v.hand_off(client.codex_program()) {
        Some(Ok(h)) => (Some(h), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    let own_home = v
        .codex_home
        .as_deref()
        .is_some_and(|h| std::path::Path::new(h) == client.codex_home);
    SessionInfo {
        session_id: v.session_id,
        thread_id: v.thread_id.map(|t| t.to_string()),
        working_directory: v.working_directory,
        model: v.model,
        created_ms: v.created_ms,
        last_used_ms: v.last_used_ms,
        turn_count: v.turn_count,
        usage: v.usage,
        last_status: v.last_status,
        last_error: v.last_error,
        last_response: v.last_response.filter(|_| own_home),
        name: v.name,
        dropped_turns: v.dropped_turns,
        compactions: v.compactions,
        last_compaction: v
            .last_compaction
            .map(|(b, a)| crate::mcp::results::Compaction {
                tokens_before: b,
                tokens_after: a,
            }),
        hand_off,
        hand_off_unavailable,
        live: v.live,
        worktree: v.worktree,
    }
}

impl McpServer {
    fn first_root(&self) -> &Path {
        &self.client.config.roots[0]
    }

    /// Resolve a caller's working directory inside the allowed roots (relative paths are
    /// relative to the first root).
    /// A directory in a session's own worktree, wherever it lies, is refused: only the session
    /// that made it works there (it names none: it continues where it is bound).
    pub(crate) fn resolve_dir(&self, raw: &str) -> Result<Confined> {
        let dir = crate::confine::resolve(
            "workingDirectory",
            raw,
            self.first_root(),
            &self.client.config.roots,
            Kind::Dir,
        )?;
        if crate::confine::in_session_worktree(dir.path()) {
            return Err(Error::invalid(
                "workingDirectory",
                "lies in a session's own worktree: only that session works there (continue it \
                 by its sessionId, without workingDirectory)",
            ));
        }
        Ok(dir)
    }

    /// The working directory of a call that names none: the first of the client's roots that
    /// lies inside the allowed roots (when the client declares roots), else the first allowed
    /// root.
    pub(super) async fn default_dir(&self, ctx: &CallCtx) -> Result<Confined> {
        if let Some(peer) = &ctx.roots {
            for root in self.client_roots.get(peer).await {
                let raw = root.to_string_lossy();
                match self.resolve_dir(&raw) {
                    Ok(dir) => return Ok(dir),
                    Err(e) => tracing::info!(
                        root = %redact(&raw),
                        reason = %redact(&e.to_string()),
                        "a client root is not an allowed working directory: ignored"
                    ),
                }
            }
        }
        let root = self.first_root().to_string_lossy().into_owned();
        self.resolve_dir(&root)
    }

    /// Run a session-less call through the bridge, with one progress sink for all of it.
    pub(super) async fn one_shot(
        &self,
        request: OneShot,
        timeout: Duration,
        ctx: &CallCtx,
    ) -> crate::error::Result<CallToolResult> {
        let (progress, _guard) = progress_for(&ctx.progress, self.client.config.heartbeat);
        let answer = self
            .bridge
            .one_shot(OneShotCall {
                request,
                timeout,
                cancel: ctx.ct.child_token(),
                progress,
                client: self.client.clone(),
            })
            .await?;
        let (value, error) = shape(answer, None);
        Ok(finish(value, error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declined(reason: &str) -> ApprovalReport {
        ApprovalReport {
            asked: "Codex asks to run a command outside its sandbox".into(),
            decision: "decline".into(),
            by_person: false,
            reason: Some(reason.into()),
        }
    }

    fn text(r: &CallToolResult) -> &str {
        &r.content[0].as_text().unwrap().text
    }

    #[test]
    fn a_host_that_cannot_ask_is_named_to_the_model_with_what_to_do_instead() {
        let value = |reason: &str| TurnResult {
            response: "I could not create the file.".into(),
            approvals: Some(vec![declined(reason)]),
            ..Default::default()
        };
        for reason in [ask::HOST_CANNOT_ASK, ask::NO_ELICITATION] {
            let t = text(&finish(value(reason), None)).to_owned();
            assert!(t.starts_with("I could not create the file.\n\n[codex-mcp-bridge:"));
            assert!(
                t.contains("cannot ask a person") && t.contains("rerun"),
                "{t}"
            );
            // and on a failed turn too, after its message
            let e = Error::TimedOut {
                after: Duration::from_secs(1),
                partial: None,
            };
            let t = text(&finish(value(reason), Some(e))).to_owned();
            assert!(t.contains("cannot ask a person"), "{t}");
        }
        // a question put aside, or a person's decline: the answer alone
        let r = finish(value(ask::CANCELLED), None);
        assert_eq!(text(&r), "I could not create the file.");
        // a `structured` answer's text stays its JSON
        let mut v = value(ask::HOST_CANNOT_ASK);
        v.data = Some(serde_json::json!({"a": 1}));
        let t = text(&finish(v, None)).to_owned();
        assert!(serde_json::from_str::<serde_json::Value>(&t).is_ok(), "{t}");
    }
}

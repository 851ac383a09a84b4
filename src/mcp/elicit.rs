//! Asking a person through MCP elicitation (`elicitation/create`, form mode): codex's question
//! becomes a form on the client connection that started the turn; whatever does not come back
//! as an explicit accept is a decline.
//!
//! - [`form`] (pure) builds the request: a message with every field the person needs (the exact
//!   command, working directory and codex's reason; or the files and their diffs; or the
//!   permissions asked), each redacted with the connection's redactor, and a schema whose only
//!   field is the yes/no `approve` (default no); none for a question [`unshowable`] finds,
//!   which is declined without asking. Questions that need input (codex's
//!   `requestUserInput`, a nested MCP server's form) get their own fields instead.
//! - [`ask`] asks it on a peer, bounded by a timeout. A client that did not declare form
//!   elicitation is never asked; its decline, its cancel, no answer in time, a transport error
//!   or an answer that does not fit the form all mean decline.
//! - [`answer`] asks an [`Asked`] and answers codex with the outcome; [`DecisionRecord`] is what
//!   the turn's structured result lists (`approvals`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, PrimitiveSchemaDefinition, ProtocolVersion, StringSchema,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::task_manager::{TaskContext, TaskManager};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value};

use crate::actors::Progress;
pub use crate::codex::app_server::approval::DecisionRecord;
use crate::codex::app_server::approval::{Asked, Asker, Decision, Input, Question};
use crate::security::redact::ClientSecrets;

/// How long a person has to answer, unless the setting says otherwise: long enough to read a
/// command, short enough that a forgotten question does not hold a turn for long.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The field of an approval form.
pub const APPROVE_FIELD: &str = "approve";
/// Longest message sent to a client: a longer one is not sent (the question is declined), as
/// a message is never cut (the fields are bounded one by one before this).
pub const MAX_MESSAGE_CHARS: usize = 64 * 1024;
/// Longest `asked` text kept in a [`DecisionRecord`].
pub const MAX_RECORD_CHARS: usize = crate::codex::app_server::approval::MAX_RECORD_CHARS;

fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

/// What stands before each line of a field that runs over several lines.
pub const GUTTER: &str = "│ ";

/// The message a person reads: the question's title and fields, each redacted.
pub fn message(question: &Question, secrets: &ClientSecrets) -> String {
    let mut text = question.title().to_owned();
    for (label, value) in question.lines() {
        let value = secrets.redact(&value);
        if value.contains('\n') {
            // every line of a field that runs over several behind a gutter, and their count
            // in the label: lines of a command or a diff that imitate the form's own labels
            // or its closing sentence read as what they are, part of that field
            let n = value.split('\n').count();
            text.push_str(&format!("\n\n{label} ({n} lines):"));
            for line in value.split('\n') {
                text.push_str(&format!("\n{GUTTER}{line}"));
            }
        } else {
            text.push_str(&format!("\n{label}: {value}"));
        }
    }
    if !question.needs_input() {
        text.push_str(
            "\n\nApproving allows this one request, once. Nothing is remembered for later requests.",
        );
    }
    text
}

/// Why `question` cannot be put to a person as it is, if it cannot: a text that a form cannot
/// show as it is ([`Question::unreadable`], after redaction too), or a message longer than
/// [`MAX_MESSAGE_CHARS`]. Such a question is declined without asking, with this reason.
pub fn unshowable(question: &Question, secrets: &ClientSecrets) -> Option<&'static str> {
    if let Some(why) = question.unreadable() {
        return Some(why.reason());
    }
    let text = message(question, secrets);
    if text.chars().count() > MAX_MESSAGE_CHARS {
        return Some("not asked: the question is longer than a form shows whole");
    }
    // the redacted texts pass as well (a redaction marker is plain text)
    let mut redacted = question.clone();
    redact_fields(&mut redacted, secrets);
    redacted.unreadable().map(|why| why.reason())
}

/// `question` with every text redacted (for [`unshowable`]'s second look).
fn redact_fields(question: &mut Question, secrets: &ClientSecrets) {
    let r = |s: &mut String| *s = secrets.redact(s).into_owned();
    match question {
        Question::Command {
            command,
            cwd,
            reason,
            network_host,
            ..
        } => {
            r(command);
            cwd.iter_mut().chain(reason).chain(network_host).for_each(r);
        }
        Question::FileChange {
            reason,
            grant_root,
            files,
            ..
        } => {
            reason.iter_mut().chain(grant_root).for_each(r);
            for f in files.iter_mut().flatten() {
                r(&mut f.path);
                r(&mut f.kind);
                r(&mut f.diff);
            }
        }
        Question::Permissions {
            cwd,
            reason,
            read,
            write,
            ..
        } => {
            r(cwd);
            reason
                .iter_mut()
                .chain(read.iter_mut())
                .chain(write.iter_mut())
                .for_each(r);
        }
        Question::UserInput { questions } => {
            for q in questions {
                r(&mut q.header);
                r(&mut q.question);
                q.options.iter_mut().for_each(r);
            }
        }
        Question::McpElicitation {
            server,
            message,
            url,
            form,
        } => {
            r(server);
            r(message);
            url.iter_mut().for_each(r);
            if let Some(f) = form {
                secrets.redact_json(f);
            }
        }
    }
}

fn approval_schema() -> ElicitationSchema {
    ElicitationSchema::builder()
        .required_bool_with(APPROVE_FIELD, |b| {
            b.title("Allow this once")
                .description("Leave unchecked (or decline) to refuse.")
                .with_default(false)
        })
        // its one required field is among its properties
        .build_unchecked()
}

/// The form of a question: the message, and the schema of what the person fills in. `None` when
/// no form can carry it (a nested server's URL elicitation, or a form schema that is not the
/// flat object MCP allows): decline without asking.
pub fn form(question: &Question, secrets: &ClientSecrets) -> Option<ElicitRequestParams> {
    // only what a person can read as it is
    if unshowable(question, secrets).is_some() {
        return None;
    }
    let schema = match question {
        Question::UserInput { questions } => {
            let mut b = ElicitationSchema::builder();
            for q in questions {
                let title = secrets.redact(&q.header).into_owned();
                let mut desc = secrets.redact(&q.question).into_owned();
                if !q.options.is_empty() {
                    desc.push_str(&format!(
                        " (one of: {})",
                        secrets.redact(&q.options.join(", "))
                    ));
                }
                b = b.property(
                    q.id.clone(),
                    PrimitiveSchemaDefinition::String(
                        StringSchema::new().title(title).description(desc),
                    ),
                );
            }
            b.build_unchecked()
        }
        Question::McpElicitation { form: None, .. } => return None,
        Question::McpElicitation {
            form: Some(schema), ..
        } => {
            let mut schema = schema.clone();
            secrets.redact_json(&mut schema);
            let Value::Object(obj) = schema else {
                return None;
            };
            ElicitationSchema::from_json_schema(obj).ok()?
        }
        _ => approval_schema(),
    };
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(question, secrets),
        requested_schema: schema,
    })
}

/// Whether `peer` declared form elicitation.
pub fn can_ask(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// Where the person behind a call is asked.
#[derive(Clone)]
pub enum Channel {
    /// `elicitation/create` on the connection that made the call (a plain call, on a protocol
    /// before 2026-07-28, which forbids requests from the server).
    Peer(Peer<RoleServer>),
    /// The call's task: it reports `input_required` with the form in `inputRequests` while the
    /// question is open; the connection that started the task answers with `tasks/update`.
    Task(TaskContext, TaskManager, Arc<AtomicU64>),
    /// The call's answer on protocol 2026-07-28: an `InputRequiredResult` with the form in
    /// `inputRequests`; the client's retry of the call answers it ([`super::mrtr`]).
    Mrtr(super::mrtr::Asking),
}

/// Whether the request's client declared form elicitation.
pub fn declares_form(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

impl Channel {
    /// The channel of a plain call: its connection, when the client declared form elicitation
    /// and its protocol lets the server ask mid-call.
    pub fn of_request(ctx: &RequestContext<RoleServer>) -> Option<Channel> {
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        (declares_form(ctx) && !modern).then(|| Channel::Peer(ctx.peer.clone()))
    }

    /// The channel of a call that runs as a task whose client declared form elicitation.
    pub fn of_task(task: TaskContext, manager: TaskManager) -> Channel {
        Channel::Task(task, manager, Arc::new(AtomicU64::new(0)))
    }
}

/// The [`Asker`] of one call: each question of its turn asked on `channel` within `timeout`,
/// with a progress line while it is open, answered, logged and recorded.
pub fn asker(
    channel: Channel,
    secrets: ClientSecrets,
    timeout: Duration,
    progress: Option<Progress>,
) -> Asker {
    Arc::new(move |asked: Asked| {
        let (channel, secrets, progress) = (channel.clone(), secrets.clone(), progress.clone());
        Box::pin(async move {
            if let Some(p) = &progress {
                p(format!(
                    "waiting for a person to answer: {}",
                    asked.question.title()
                ));
            }
            let record = answer_on(&channel, asked, &secrets, timeout).await;
            if let Some(p) = &progress {
                p(match (record.decision, record.by_person) {
                    (Decision::AcceptOnce, _) => "a person allowed it once; codex continues".into(),
                    (Decision::Decline, true) => "a person declined; codex continues".into(),
                    (Decision::Decline, false) => format!(
                        "declined ({}); codex continues",
                        record.reason.unwrap_or("no answer")
                    ),
                });
            }
            record
        })
    })
}

/// Withdraws a task's input request when dropped (answering it with nothing: the waiting side
/// is gone by then, so the value goes nowhere).
struct Withdraw {
    manager: TaskManager,
    task: String,
    key: String,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let gone = [(std::mem::take(&mut self.key), Value::Null)];
        let _ = self.manager.update_task(&self.task, gone);
    }
}

/// The outcome of asking: the decision, the person's input (for questions that need it), and
/// the record.
#[derive(Debug, Clone, PartialEq)]
pub struct Asking {
    pub decision: Decision,
    pub input: Option<Input>,
    pub record: DecisionRecord,
}

/// Ask `question` on `peer` (the connection that started the turn), waiting at most `timeout`.
pub async fn ask(
    peer: &Peer<RoleServer>,
    question: &Question,
    secrets: &ClientSecrets,
    timeout: Duration,
) -> Asking {
    ask_on(&Channel::Peer(peer.clone()), question, secrets, timeout).await
}

/// Ask `question` on `channel`, waiting at most `timeout`: checked ([`askable`]), sent and
/// waited for ([`wait_for`]), and an accept read ([`accepted_input`]); anything else is a
/// decline.
pub async fn ask_on(
    channel: &Channel,
    question: &Question,
    secrets: &ClientSecrets,
    timeout: Duration,
) -> Asking {
    // what cannot be shown as it is is not asked, and its record holds it made visible
    if let Some(reason) = unshowable(question, secrets) {
        return Asking {
            decision: Decision::Decline,
            input: None,
            record: DecisionRecord::unasked(question, secrets, reason),
        };
    }
    let asked = cut(&message(question, secrets), MAX_RECORD_CHARS);
    let declined = |by_person, reason| Asking {
        decision: Decision::Decline,
        input: None,
        record: DecisionRecord {
            asked: asked.clone(),
            decision: Decision::Decline,
            by_person,
            reason,
        },
    };
    let params = match askable(channel, question, secrets) {
        Ok(params) => params,
        Err(reason) => return declined(false, Some(reason)),
    };
    let result = match wait_for(channel, params, timeout).await {
        Ok(result) => result,
        Err(reason) => return declined(false, Some(reason)),
    };
    if !matches!(result.action, ElicitationAction::Accept) {
        return declined(true, None);
    }
    match accepted_input(question, result.content.unwrap_or(Value::Null)) {
        Ok(input) => Asking {
            decision: Decision::AcceptOnce,
            input,
            record: DecisionRecord {
                asked,
                decision: Decision::AcceptOnce,
                by_person: true,
                reason: None,
            },
        },
        Err(reason) => declined(true, Some(reason)),
    }
}

/// The form to send for `question` on `channel`, or why it is declined without asking: a
/// client that cannot be asked, a command the redactor would change, a question with no form.
fn askable(
    channel: &Channel,
    question: &Question,
    secrets: &ClientSecrets,
) -> Result<ElicitRequestParams, &'static str> {
    if let Channel::Peer(peer) = channel
        && !can_ask(peer)
    {
        return Err("the client cannot be asked (no form elicitation)");
    }
    // a command whose text the redactor would hide cannot be judged from the form (the hidden
    // part may be what runs)
    if let Question::Command { command, .. } = question
        && secrets.redact(command) != command.as_str()
    {
        return Err("the command holds text that looks like a secret, which cannot be shown");
    }
    form(question, secrets).ok_or("the question has no form a client can show")
}

/// Send `params` on `channel` and wait at most `timeout` for the client's result, or say why
/// none came (no answer in time, the client could not be asked, the task or question gone, an
/// answer that is no elicitation result).
async fn wait_for(
    channel: &Channel,
    params: ElicitRequestParams,
    timeout: Duration,
) -> Result<ElicitResult, &'static str> {
    let value = match channel {
        Channel::Peer(peer) => {
            return match tokio::time::timeout(
                timeout,
                peer.create_elicitation_with_timeout(params, Some(timeout)),
            )
            .await
            {
                Err(_) => Err("no answer in time"),
                Ok(Err(e)) => {
                    tracing::info!(error = %e, "elicitation failed: declined");
                    Err("the client could not be asked")
                }
                Ok(Ok(r)) => Ok(r),
            };
        }
        Channel::Task(task, manager, seq) => {
            let key = format!("question-{}", seq.fetch_add(1, Ordering::Relaxed) + 1);
            let request = InputRequest::Elicitation(ElicitRequest::new(params));
            // however the wait ends (an answer, the timeout, the turn dropping the question),
            // the task stops showing the question: a later answer finds no key
            let _withdraw = Withdraw {
                manager: manager.clone(),
                task: task.task_id().to_owned(),
                key: key.clone(),
            };
            match tokio::time::timeout(timeout, task.request_input(key, request)).await {
                Err(_) => return Err("no answer in time"),
                Ok(Err(_)) => return Err("the task was cancelled"),
                Ok(Ok(v)) => v,
            }
        }
        Channel::Mrtr(asking) => {
            match tokio::time::timeout(timeout, asking.ask(params, timeout)).await {
                Err(_) => return Err("no answer in time"),
                Ok(Err(_)) => return Err("the question was withdrawn"),
                Ok(Ok(v)) => v,
            }
        }
    };
    serde_json::from_value::<ElicitResult>(value)
        .map_err(|_| "the answer was not an elicitation result")
}

/// What an accepted form carries for `question`: the answers of a `requestUserInput`, a nested
/// server's form, nothing for an approval; or why the accept is taken for a decline (no
/// answer, `approve` left unchecked).
fn accepted_input(question: &Question, content: Value) -> Result<Option<Input>, &'static str> {
    match question {
        Question::UserInput { questions } => {
            let answers: BTreeMap<String, String> = questions
                .iter()
                .filter_map(|q| {
                    let a = content.get(&q.id)?.as_str()?;
                    Some((q.id.clone(), a.to_owned()))
                })
                .collect();
            if answers.is_empty() {
                return Err("accepted without an answer");
            }
            Ok(Some(Input::Answers(answers)))
        }
        Question::McpElicitation { .. } => match content {
            Value::Object(m) => Ok(Some(Input::Form(m))),
            _ => Ok(Some(Input::Form(Map::new()))),
        },
        _ => {
            if content.get(APPROVE_FIELD) != Some(&Value::Bool(true)) {
                return Err("accepted without checking approve");
            }
            Ok(None)
        }
    }
}

/// Ask `asked` on `peer` within `timeout` (and before codex's own deadline for it), answer
/// codex, log and return the record. The decision in the record is what codex got.
pub async fn answer(
    peer: &Peer<RoleServer>,
    asked: Asked,
    secrets: &ClientSecrets,
    timeout: Duration,
) -> DecisionRecord {
    answer_on(&Channel::Peer(peer.clone()), asked, secrets, timeout).await
}

/// [`answer`] on `channel`.
pub async fn answer_on(
    channel: &Channel,
    asked: Asked,
    secrets: &ClientSecrets,
    timeout: Duration,
) -> DecisionRecord {
    // leave the client's answering task a moment to write before its own deadline
    let left = asked
        .deadline()
        .saturating_duration_since(Instant::now())
        .saturating_sub(Duration::from_millis(250));
    let outcome = ask_on(channel, &asked.question, secrets, timeout.min(left)).await;
    let mut record = outcome.record;
    let sent = asked.answer(outcome.decision, outcome.input);
    if sent != record.decision {
        record.decision = sent;
        record.reason = Some("the answer came after codex's deadline");
    }
    tracing::info!(
        asked = %record.asked,
        decision = ?record.decision,
        by_person = record.by_person,
        reason = record.reason.unwrap_or(""),
        "approval request answered"
    );
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::app_server::approval::InputQuestion;

    fn command() -> Question {
        Question::Command {
            command: "curl -H 'Authorization: Bearer sk-proj-abcdefghijklmnopqrstuvwxyz0123' x"
                .into(),
            cwd: Some("/w".into()),
            reason: Some("fetch it".into()),
            network_host: None,
            workdir: None,
            cwd_resolves_outside: false,
        }
    }

    #[test]
    fn lines_of_a_command_that_imitate_the_form_stand_behind_the_gutter() {
        let fake = "echo ok\nWorking directory: /w\nCodex's reason: list files\n\nApproving \
                    allows this one request, once. Nothing is remembered for later requests.\n:\n\
                    curl x|sh";
        let q = Question::Command {
            command: fake.into(),
            cwd: Some("/real".into()),
            reason: None,
            network_host: None,
            workdir: None,
            cwd_resolves_outside: false,
        };
        let text = message(&q, &ClientSecrets::default());
        assert!(text.contains("Command (7 lines):\n│ echo ok\n"), "{text}");
        // every imitation is marked as part of the command, the real fields are not
        for imitation in [
            "Working directory: /w",
            "Codex's reason",
            "Approving allows",
            "curl",
        ] {
            for line in text.lines().filter(|l| l.contains(imitation)) {
                if line == "Working directory: /real" {
                    continue;
                }
                assert!(
                    line.starts_with(GUTTER)
                        || line.starts_with("Approving allows") && text.ends_with(line),
                    "{line:?} in {text}"
                );
            }
        }
        assert!(text.contains("\nWorking directory: /real"), "{text}");
    }

    #[test]
    fn an_approval_form_shows_the_redacted_fields_and_one_yes_no() {
        let secrets = ClientSecrets::default();
        let Some(ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        }) = form(&command(), &secrets)
        else {
            panic!("a form")
        };
        assert!(message.starts_with("Codex asks to run a command outside its sandbox"));
        assert!(message.contains("Working directory: /w") && message.contains("fetch it"));
        assert!(
            !message.contains("sk-proj-abcdefghijklmnopqrstuvwxyz0123"),
            "{message}"
        );
        assert!(message.contains("once"), "{message}");
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(
            schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            [APPROVE_FIELD]
        );
        assert_eq!(schema["properties"][APPROVE_FIELD]["type"], "boolean");
        assert_eq!(schema["properties"][APPROVE_FIELD]["default"], false);
        assert_eq!(schema["required"], serde_json::json!([APPROVE_FIELD]));
    }

    #[test]
    fn questions_get_a_field_each_and_a_url_elicitation_no_form() {
        let secrets = ClientSecrets::default();
        let q = Question::UserInput {
            questions: vec![InputQuestion {
                id: "q1".into(),
                header: "Branch".into(),
                question: "Which branch?".into(),
                options: vec!["main".into(), "dev".into()],
                other: true,
                secret: false,
            }],
        };
        let Some(ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        }) = form(&q, &secrets)
        else {
            panic!()
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(schema["properties"]["q1"]["type"], "string");
        assert!(
            schema["properties"]["q1"]["description"]
                .as_str()
                .unwrap()
                .contains("main, dev")
        );
        let url = Question::McpElicitation {
            server: "s".into(),
            message: "go there".into(),
            form: None,
            url: Some("https://example.com".into()),
        };
        assert!(form(&url, &secrets).is_none());
        let nested = Question::McpElicitation {
            server: "s".into(),
            message: "name?".into(),
            form: Some(
                serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            ),
            url: None,
        };
        assert!(form(&nested, &secrets).is_some());
    }

    #[test]
    fn a_question_a_person_cannot_read_as_it_is_gets_no_form() {
        let secrets = ClientSecrets::default();
        let with = |command: &str, reason: &str| Question::Command {
            command: command.into(),
            cwd: Some("/w".into()),
            reason: Some(reason.into()),
            network_host: None,
            workdir: None,
            cwd_resolves_outside: false,
        };
        assert!(form(&with("ls -la", "list"), &secrets).is_some());
        for q in [
            with("touch /x\u{1b}[2K\rls -la", "list"),
            with("ls", "list \u{202e}txt.x"),
            with(&format!("ls{}touch /x", "\n".repeat(10)), "list"),
        ] {
            assert!(form(&q, &secrets).is_none(), "{q:?}");
            assert!(unshowable(&q, &secrets).unwrap().starts_with("not asked: "));
        }
    }

    #[test]
    fn a_record_serializes_as_the_result_lists_it() {
        let r = DecisionRecord {
            asked: "Codex asks".into(),
            decision: Decision::Decline,
            by_person: false,
            reason: Some("no answer in time"),
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"asked": "Codex asks", "decision": "decline", "byPerson": false,
                "reason": "no answer in time"})
        );
    }
}

//! Asking a person through MCP elicitation (`elicitation/create`, form mode): codex's question
//! becomes a form on the client connection that started the turn; whatever does not come back
//! as an explicit accept is a decline.
//!
//! - [`form`] (pure, in `super::form`) builds the request: a message with every field the person needs (the exact
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
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest,
    ProtocolVersion,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::task_manager::{TaskContext, TaskManager};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value};

pub mod budget;
pub mod form;
pub mod waiters;

use crate::actors::Progress;
pub use crate::approval::DecisionRecord;
use crate::approval::page::{Closed, PageDecision, PageError, PageQuestion, Pages, TurnPages};
use crate::approval::{Asked, Asker};
use crate::approval::{Decision, Input, Question};
use crate::security::redact::ClientSecrets;
pub use budget::Host;
use budget::Shows;
use waiters::Waiters;

/// How long a person has to answer, unless the setting says otherwise: long enough to read a
/// command, short enough that a forgotten question does not hold a turn for long.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub use crate::approval::message::{GUTTER, MAX_MESSAGE_CHARS, message};
pub use crate::approval::unasked::unshowable;
pub use budget::APPROVE_FIELD;
use form::cut;
pub use form::form;
/// Longest `asked` text kept in a [`DecisionRecord`].
pub const MAX_RECORD_CHARS: usize = crate::approval::MAX_RECORD_CHARS;

/// What the client behind `ctx` shows and can open, `None` when it declared no elicitation.
pub fn host_of(ctx: &RequestContext<RoleServer>) -> Option<Host> {
    let e = ctx.client_capabilities()?.elicitation?;
    let name = ctx.client_info().map(|i| i.name);
    Some(Host::named(
        name.as_deref(),
        e.form.is_some() || e.url.is_none(),
        e.url.is_some(),
    ))
}

/// What the client of the connection `peer` shows and can open (a connection that began with
/// `initialize`).
fn host_of_peer(peer: &Peer<RoleServer>) -> Host {
    let modes = peer.supported_elicitation_modes();
    let name = peer.peer_info().map(|i| i.client_info.name.clone());
    Host::named(
        name.as_deref(),
        modes.contains(&ElicitationMode::Form),
        modes.contains(&ElicitationMode::Url),
    )
}

/// Where the person behind a call is asked, and what their host shows.
#[derive(Clone)]
pub struct Channel {
    route: Route,
    host: Host,
}

/// How a question reaches the person's client.
#[derive(Clone)]
enum Route {
    /// `elicitation/create` on the connection that made the call (a plain call, on a protocol
    /// before 2026-07-28, which forbids requests from the server).
    Peer(Peer<RoleServer>),
    /// The call's task: it reports `input_required` with the form in `inputRequests` while the
    /// question is open; the connection that started the task answers with `tasks/update`.
    Task(TaskContext, TaskManager, Arc<AtomicU64>),
    /// The call's answer on protocol 2026-07-28: an `InputRequiredResult` with the form in
    /// `inputRequests`; the client's retry of the call answers it ([`crate::mcp::mrtr`]).
    Mrtr(crate::mcp::mrtr::RoundAsker),
    /// A background turn: whoever waits on it (`wait`), resolved per question
    /// ([`waiters`]).
    Waiters(Waiters<Channel>),
}

impl Channel {
    /// The channel of a plain call: its connection, when the client declared elicitation and
    /// its protocol lets the server ask mid-call.
    pub fn of_request(ctx: &RequestContext<RoleServer>) -> Option<Channel> {
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let host = host_of(ctx).filter(|_| !modern)?;
        Some(Channel {
            route: Route::Peer(ctx.peer.clone()),
            host,
        })
    }

    /// The channel of a call that runs as a task whose client (showing `host`) declared
    /// elicitation.
    pub fn of_task(task: TaskContext, manager: TaskManager, host: Host) -> Channel {
        Channel {
            route: Route::Task(task, manager, Arc::new(AtomicU64::new(0))),
            host,
        }
    }

    /// The channel of a 2026-07-28 call whose questions are its answers (MRTR).
    pub fn of_rounds(asking: crate::mcp::mrtr::RoundAsker, host: Host) -> Channel {
        Channel {
            route: Route::Mrtr(asking),
            host,
        }
    }

    /// The channel of a background turn: the client waiting on it when a question comes.
    pub fn of_waiters(waiters: Waiters<Channel>) -> Channel {
        Channel {
            route: Route::Waiters(waiters),
            // each question goes to a waiter's own channel, with its own host
            host: Host::named(None, false, false),
        }
    }

    /// The channel of the connection `peer`.
    pub fn of_peer(peer: &Peer<RoleServer>) -> Channel {
        Channel {
            route: Route::Peer(peer.clone()),
            host: host_of_peer(peer),
        }
    }
}

/// The pages of this process's questions (bound on the first question that needs one).
fn pages() -> &'static Pages {
    static PAGES: std::sync::OnceLock<Pages> = std::sync::OnceLock::new();
    PAGES.get_or_init(Pages::new)
}

/// The [`Asker`] of one call: each question of its turn asked on `channel` within `timeout`,
/// with a progress line while it is open, answered, logged and recorded.
pub fn asker(
    channel: Channel,
    secrets: ClientSecrets,
    timeout: Duration,
    progress: Option<Progress>,
) -> Asker {
    // the turn's pages say it ended once this asker (held by the turn) is gone
    let turn = Arc::new(TurnPages::new(pages()));
    Arc::new(move |asked: Asked| {
        let (channel, secrets, progress) = (channel.clone(), secrets.clone(), progress.clone());
        let turn = turn.clone();
        Box::pin(async move {
            if let Some(p) = &progress {
                p(format!(
                    "waiting for a person to answer: {}",
                    asked.question.title()
                ));
            }
            // a file change's accept is checked again before codex gets it (its paths must
            // resolve where they did when shown): the line does not say codex writes
            let change = matches!(asked.question, Question::FileChange { .. });
            let record = match &channel.route {
                Route::Waiters(w) => answer_waiting(w, asked, &secrets, timeout, &turn).await,
                _ => answer_of_turn(&channel, asked, &secrets, timeout, Some(&turn)).await,
            };
            if let Some(p) = &progress {
                p(match (record.decision, record.by_person) {
                    (Decision::AcceptOnce, _) if change => {
                        "a person allowed it once; its paths are checked again before codex writes"
                            .into()
                    }
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

/// How long `asked` may still be asked: up to codex's deadline for it, less a moment for the
/// client's answering task to write before it.
fn time_left(asked: &Asked) -> Duration {
    asked
        .deadline()
        .saturating_duration_since(Instant::now())
        .saturating_sub(Duration::from_millis(250))
}

/// Why a background turn's question was declined unasked.
pub const NOBODY_WAITING: &str = "nobody was waiting on the background turn (`wait`) while the \
     question was open: declined at the approval timeout";

/// Ask `asked` of the client waiting on a background turn now, or of the next to wait before
/// the question's time runs out (`timeout`, or codex's deadline); nobody: declined, recorded
/// so ([`NOBODY_WAITING`]).
async fn answer_waiting(
    waiters: &Waiters<Channel>,
    asked: Asked,
    secrets: &ClientSecrets,
    timeout: Duration,
    turn: &TurnPages,
) -> DecisionRecord {
    let until = Instant::now() + timeout.min(time_left(&asked));
    let Some((channel, _asking)) = waiters.current(until).await else {
        let record = DecisionRecord::unasked(&asked.question, secrets, NOBODY_WAITING);
        let _ = asked.answer(Decision::Decline, None);
        tracing::info!(asked = %record.asked, "a background turn's question: nobody waited");
        return record;
    };
    let left = until.saturating_duration_since(Instant::now());
    answer_of_turn(&channel, asked, secrets, left, Some(turn)).await
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
    ask_on(&Channel::of_peer(peer), question, secrets, timeout, None).await
}

/// How a question is put to the person.
enum Way {
    /// A form the host shows whole (the message a record keeps of it).
    Form(Box<ElicitRequestParams>, String),
    /// The question's page, through URL-mode elicitation.
    Page,
}

/// Why a question reaches nobody: it fits no form the host shows whole, and no page can be
/// opened for it (the client declared no URL mode, or the question needs input).
const FITS_NOTHING: &str = "not asked: the question does not fit what the person's host shows whole (three rows of 72 columns) and the client cannot open a page for it; a shorter command, or a change of one small file at a time, can be asked";
/// Why a cancel is no person's decline: the question was put aside in the host, undecided.
pub const CANCELLED: &str =
    "the client cancelled the question: no person decided (the question was put aside)";
/// Why a cancel that came at once is no person's decline either: the host cannot ask anyone,
/// and asking again will not help. Said so the model does something else.
pub const HOST_CANNOT_ASK: &str = "this host cannot ask a person: it cancelled the question at once, as a host that runs without a person does (`claude -p`); asking again from it will not help: rerun so that the work needs no approval (a sandbox that allows it, e.g. `workspace-write` for changes inside the working directory), or ask the user to run it in an interactive host that shows questions";
/// Why a client that declared no elicitation is never asked.
pub const NO_ELICITATION: &str = "this client cannot ask a person (it declared no elicitation): rerun so that the work needs no approval, or ask the user to run it in a host that shows questions";
/// A cancel within this long of asking is the host's own, not a person's: no person reads a
/// question that fast (`claude -p` cancels every question within milliseconds).
pub const AT_ONCE: Duration = Duration::from_secs(1);

/// Why a cancel that came `after` asking is a decline nobody made.
pub fn cancelled(after: Duration) -> &'static str {
    if after < AT_ONCE {
        HOST_CANNOT_ASK
    } else {
        CANCELLED
    }
}

/// Whether a decline for `reason` says that the host behind the call cannot ask a person at all
/// (the turn's answer then tells the model what to do instead).
pub fn host_cannot_ask(reason: &str) -> bool {
    reason == HOST_CANNOT_ASK || reason == NO_ELICITATION
}

/// Ask `question` on `channel`, waiting at most `timeout`: checked ([`way`]), then asked as a
/// form ([`ask_form`]) or on its page ([`ask_page`]); anything but an accept is a decline.
/// A question asked on its page is one of `turn`'s when given ([`TurnPages`]).
pub async fn ask_on(
    channel: &Channel,
    question: &Question,
    secrets: &ClientSecrets,
    timeout: Duration,
    turn: Option<&TurnPages>,
) -> Asking {
    // what cannot be shown as it is is not asked, and its record holds it made visible
    if let Some(reason) = unshowable(question, secrets) {
        return Asking {
            decision: Decision::Decline,
            input: None,
            record: DecisionRecord::unasked(question, secrets, reason),
        };
    }
    match way(channel.host, question, secrets) {
        Err(reason) => Asking {
            decision: Decision::Decline,
            input: None,
            record: DecisionRecord::unasked(question, secrets, reason),
        },
        Ok(Way::Form(params, shown)) => ask_form(channel, question, *params, shown, timeout).await,
        Ok(Way::Page) => ask_page(channel, question, secrets, timeout, turn).await,
    }
}

/// A decline of what `asked` recorded, by a person or not, for `reason`.
fn declined(asked: &str, by_person: bool, reason: Option<&'static str>) -> Asking {
    Asking {
        decision: Decision::Decline,
        input: None,
        record: DecisionRecord {
            asked: cut(asked, MAX_RECORD_CHARS),
            decision: Decision::Decline,
            by_person,
            reason,
        },
    }
}

/// Ask the form `params` (recorded as `shown`) and read the answer.
async fn ask_form(
    channel: &Channel,
    question: &Question,
    params: ElicitRequestParams,
    shown: String,
    timeout: Duration,
) -> Asking {
    let asked_at = Instant::now();
    let result = match wait_for(channel, params, timeout).await {
        Ok(result) => result,
        Err(reason) => return declined(&shown, false, Some(reason)),
    };
    match result.action {
        ElicitationAction::Accept => {}
        ElicitationAction::Decline => return declined(&shown, true, None),
        _ => return declined(&shown, false, Some(cancelled(asked_at.elapsed()))),
    }
    match accepted_input(question, result.content.unwrap_or(Value::Null)) {
        Ok(input) => Asking {
            decision: Decision::AcceptOnce,
            input,
            record: DecisionRecord {
                asked: cut(&shown, MAX_RECORD_CHARS),
                decision: Decision::AcceptOnce,
                by_person: true,
                reason: None,
            },
        },
        Err(reason) => declined(&shown, true, Some(reason)),
    }
}

/// The question's page: its title, every field redacted, and what approving grants.
fn page_question(question: &Question, secrets: &ClientSecrets) -> PageQuestion {
    PageQuestion {
        title: question.title().to_owned(),
        fields: question
            .lines()
            .into_iter()
            .map(|(label, text)| (label.to_owned(), secrets.redact(&text).into_owned()))
            .collect(),
        grants: match question {
            Question::Permissions { .. } => {
                "Approving grants these permissions for the rest of this turn only. Nothing is remembered for later requests.".to_owned()
            }
            _ => "Approving allows this one request, once. Nothing is remembered for later requests.".to_owned(),
        },
    }
}

/// How many times the host is asked to show a question's page (its address and code): after
/// "I'm done" with the page undecided, it is asked again, so the person sees the code again.
const MAX_PAGE_ASKS: u32 = 3;
/// How long after "I'm done" a decision on the page is awaited before the host asks again.
const PAGE_GRACE: Duration = Duration::from_secs(2);

/// Ask `question` on its page: the host gets a URL-mode elicitation; the decision is the
/// page's and nowhere else's. A host's accept only says the person is done: the answer waits
/// for the page until `timeout`. A host's decline or cancel ends the question.
async fn ask_page(
    channel: &Channel,
    question: &Question,
    secrets: &ClientSecrets,
    timeout: Duration,
    turn: Option<&TurnPages>,
) -> Asking {
    let shown = message(question, secrets);
    let until = tokio::time::Instant::now() + timeout;
    let mut page = match pages()
        .open(page_question(question, secrets), Instant::now() + timeout)
        .await
    {
        Ok(page) => page,
        Err(e) => return not_opened(&shown, e),
    };
    if let Some(turn) = turn {
        turn.add(&page);
    }
    let mut asked = 1;
    let closed = loop {
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: if asked == 1 {
                budget::page_message(question, &page.code)
            } else {
                budget::page_message_again(question, &page.code)
            },
            url: page.url.clone(),
            elicitation_id: uuid::Uuid::new_v4().to_string(),
        };
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        let asked_at = Instant::now();
        // the page first: a decision on it that is ready with the host's answer is the one
        // that counts (the page already told the person so)
        let host = tokio::select! {
            biased;
            decision = page.decided() => return decided_on_page(&shown, decision),
            host = wait_for(channel, params, left) => host,
        };
        match host {
            Ok(r) if matches!(r.action, ElicitationAction::Accept) => {
                // "I'm done": the page decides. Undecided after a moment, the host asks again
                // with the same address and code (its dialog is the only place the code is
                // shown, and it closed), at most MAX_PAGE_ASKS times; then the page alone, within
                // the time left.
                let grace = if asked < MAX_PAGE_ASKS {
                    tokio::time::Instant::now() + PAGE_GRACE
                } else {
                    until
                };
                match tokio::time::timeout_at(grace.min(until), page.decided()).await {
                    Ok(decision) => return decided_on_page(&shown, decision),
                    Err(_) if grace < until => {
                        asked += 1;
                        continue;
                    }
                    Err(_) => {
                        page.close(Closed::TimedOut);
                        return declined(
                            &shown,
                            false,
                            Some(
                                "accepted in the host, but not decided on the question's page in time",
                            ),
                        );
                    }
                }
            }
            Ok(r) if matches!(r.action, ElicitationAction::Decline) => break (true, None),
            // at once, the first time: a host that cannot ask; later, a question put aside
            Ok(_) if asked == 1 => break (false, Some(cancelled(asked_at.elapsed()))),
            Ok(_) => break (false, Some(CANCELLED)),
            Err(reason) => break (false, Some(reason)),
        }
    };
    page.close(if closed.0 {
        Closed::DeclinedInHost
    } else {
        Closed::Withdrawn
    });
    declined(&shown, closed.0, closed.1)
}

/// The decline of a question whose page could not be opened, with why.
fn not_opened(shown: &str, e: PageError) -> Asking {
    if let PageError::TooLarge { .. } = e {
        return declined(
            shown,
            false,
            Some("not asked: the question is larger than its page carries (256 KiB)"),
        );
    }
    tracing::warn!(error = %e, "the question's page could not be opened: declined");
    declined(
        shown,
        false,
        Some("not asked: the question's page could not be opened"),
    )
}

/// The outcome of a decision on the page.
fn decided_on_page(shown: &str, decision: PageDecision) -> Asking {
    match decision {
        PageDecision::Approve => Asking {
            decision: Decision::AcceptOnce,
            input: None,
            record: DecisionRecord {
                asked: cut(shown, MAX_RECORD_CHARS),
                decision: Decision::AcceptOnce,
                by_person: true,
                reason: None,
            },
        },
        PageDecision::Deny => declined(shown, true, None),
    }
}

/// How `question` is put to the person behind `host`, or why it is declined without asking: a
/// client that cannot be asked, a command the redactor would change, a question that fits no
/// form the host shows whole and no page.
fn way(host: Host, question: &Question, secrets: &ClientSecrets) -> Result<Way, &'static str> {
    if !host.form && !host.url {
        return Err(NO_ELICITATION);
    }
    // a command whose text the redactor would hide cannot be judged from the form (the hidden
    // part may be what runs)
    if let Question::Command { command, .. } = question
        && secrets.redact(command) != command.as_str()
    {
        return Err("the command holds text that looks like a secret, which cannot be shown");
    }
    if host.form
        && let Some(way) = shaped(question, secrets, host.shows)
    {
        return Ok(way);
    }
    let approval = matches!(
        question,
        Question::Command { .. } | Question::FileChange { .. } | Question::Permissions { .. }
    );
    if approval && host.url {
        return Ok(Way::Page);
    }
    if matches!(question, Question::McpElicitation { form: None, .. }) {
        return Err("the question has no form a client can show");
    }
    Err(FITS_NOTHING)
}

/// The form of `question` that a host showing `shows` shows whole, if there is one.
fn shaped(question: &Question, secrets: &ClientSecrets, shows: Shows) -> Option<Way> {
    let whole = form(question, secrets)?;
    if shows == Shows::Whole {
        let shown = message(question, secrets);
        return Some(Way::Form(Box::new(whole), shown));
    }
    if let Some(params) = budget::compact(question, secrets, shows) {
        let shown = shown_text(&params);
        return Some(Way::Form(Box::new(params), shown));
    }
    // a question that asks for input keeps its fields under a short message
    let short = match question {
        Question::UserInput { .. } => "Codex asks you (answer in the fields below):".to_owned(),
        Question::McpElicitation {
            server, message, ..
        } => format!(
            "A nested MCP server, {}, asks: {}",
            secrets.redact(server),
            secrets.redact(message)
        ),
        _ => return None,
    };
    let ElicitRequestParams::FormElicitationParams {
        requested_schema, ..
    } = whole
    else {
        return None;
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: short,
        requested_schema,
    };
    budget::overflow(&params, shows).is_none().then(|| {
        let shown = shown_text(&params);
        Way::Form(Box::new(params), shown)
    })
}

/// What a record keeps of a form as shown: its message and each field's title and
/// description.
fn shown_text(params: &ElicitRequestParams) -> String {
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = params
    else {
        return String::new();
    };
    let mut text = message.clone();
    if let Ok(schema) = serde_json::to_value(requested_schema) {
        for prop in schema["properties"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.values())
        {
            for k in ["title", "description"] {
                if let Some(s) = prop[k].as_str() {
                    text.push('\n');
                    text.push_str(s);
                }
            }
        }
    }
    text
}

/// Send `params` on `channel` and wait at most `timeout` for the client's result, or say why
/// none came (no answer in time, the client could not be asked, the task or question gone, an
/// answer that is no elicitation result).
async fn wait_for(
    channel: &Channel,
    params: ElicitRequestParams,
    timeout: Duration,
) -> Result<ElicitResult, &'static str> {
    let value = match &channel.route {
        Route::Peer(peer) => {
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
        Route::Task(task, manager, seq) => {
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
        // resolved to a waiter's channel before it gets here
        Route::Waiters(_) => return Err("nobody was waiting on the background turn"),
        Route::Mrtr(asking) => {
            match tokio::time::timeout(
                timeout,
                asking.ask(
                    InputRequest::Elicitation(ElicitRequest::new(params)),
                    timeout,
                ),
            )
            .await
            {
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
    answer_of_turn(&Channel::of_peer(peer), asked, secrets, timeout, None).await
}

/// [`answer`] on `channel`, its page (if any) one of `turn`'s.
async fn answer_of_turn(
    channel: &Channel,
    asked: Asked,
    secrets: &ClientSecrets,
    timeout: Duration,
    turn: Option<&TurnPages>,
) -> DecisionRecord {
    let outcome = ask_on(
        channel,
        &asked.question,
        secrets,
        timeout.min(time_left(&asked)),
        turn,
    )
    .await;
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
    use crate::approval::InputQuestion;

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

    #[test]
    fn a_whole_form_overflows_a_small_host_and_not_codex() {
        let secrets = ClientSecrets::default();
        let q = Question::Command {
            command: "ls".into(),
            cwd: Some("/w".into()),
            reason: Some("list".into()),
            network_host: None,
            workdir: None,
            cwd_resolves_outside: false,
        };
        let whole = form(&q, &secrets).unwrap();
        assert_eq!(
            budget::overflow(&whole, budget::SMALLEST),
            Some(budget::Overflow::Message(budget::ROWS, budget::COLUMNS))
        );
        assert_eq!(budget::overflow(&whole, Shows::Whole), None);
    }

    #[test]
    fn a_cancel_at_once_is_a_host_that_cannot_ask_and_a_later_one_a_question_put_aside() {
        // `claude -p` cancels every question about 8 ms after it is asked
        assert_eq!(cancelled(Duration::from_millis(8)), HOST_CANNOT_ASK);
        assert_eq!(cancelled(AT_ONCE), CANCELLED);
        assert_eq!(cancelled(Duration::from_secs(30)), CANCELLED);
        assert!(host_cannot_ask(HOST_CANNOT_ASK) && host_cannot_ask(NO_ELICITATION));
        assert!(!host_cannot_ask(CANCELLED) && !host_cannot_ask(FITS_NOTHING));
        // what the model reads says the host cannot ask and what to do instead
        for r in [HOST_CANNOT_ASK, NO_ELICITATION] {
            assert!(
                r.contains("cannot ask a person") && r.contains("rerun"),
                "{r}"
            );
        }
        assert_eq!(
            way(
                Host::named(None, false, false),
                &command(),
                &ClientSecrets::default()
            )
            .err(),
            Some(NO_ELICITATION)
        );
    }

    /// Claude Code (forms and pages, three rows): codex 0.171.0's short command with a
    /// sentence of a reason is a form, its reason cut; a command that does not fit its row
    /// goes to the page whole.
    #[test]
    fn claude_code_gets_a_short_command_as_a_form_and_a_long_one_on_the_page() {
        let secrets = ClientSecrets::default();
        let host = Host::named(Some("claude-code"), true, true);
        let q = |command: &str| Question::Command {
            command: command.into(),
            cwd: Some("/home/me/project".into()),
            reason: Some("Create the marker file you asked for so the build can go on".into()),
            network_host: None,
            workdir: None,
            cwd_resolves_outside: false,
        };
        match way(host, &q("/bin/bash -lc 'touch ../FORMFIT'"), &secrets) {
            Ok(Way::Form(params, shown)) => {
                assert!(
                    shown.contains("$ /bin/bash -lc 'touch ../FORMFIT'\nin /home/me/project"),
                    "{shown}"
                );
                assert!(
                    shown.contains("so the…"),
                    "the record keeps what was shown: {shown}"
                );
                assert_eq!(budget::overflow(&params, host.shows), None);
            }
            _ => panic!("a form"),
        }
        let long = format!("/bin/bash -lc 'touch {}'", "/home/me/project/x".repeat(4));
        assert!(matches!(way(host, &q(&long), &secrets), Ok(Way::Page)));
        // a host without pages is not asked what it cannot show whole
        let forms_only = Host::named(Some("claude-code"), true, false);
        assert_eq!(
            way(forms_only, &q(&long), &secrets).err(),
            Some(FITS_NOTHING)
        );
    }
}

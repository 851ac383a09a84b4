//! Asking the person behind a 2026-07-28 client through multi round-trip requests (MRTR,
//! SEP-2322): that protocol forbids requests from the server, so a question codex asks during a
//! plain `tools/call` is the call's answer, an `InputRequiredResult` with the form in
//! `inputRequests` and an opaque `requestState`; the client retries the same call with
//! `inputResponses` and the `requestState`, and gets the turn's result or the next question.
//!
//! - The call runs on a task of its own ([`Rounds::start`]): the turn stays paused in its
//!   session actor while its question is out, and goes on when the answer comes, or without it
//!   (a decline) when none comes within the approval timeout.
//! - [`Rounds`] is the one table of calls that asked (one per process, beside the task store):
//!   each under a random handle, with the client that made it, a digest of its tool and
//!   arguments ([`CallDigest`]: never the arguments themselves, which the caller checked as the
//!   tool does before anything is kept), its round and the question now open. `requestState`
//!   names the handle and the round and nothing else: what it means stays here, so an altered
//!   state finds nothing.
//! - A retry is checked before anything happens ([`RoundError`]): an unknown or expired state,
//!   another client's, an answered round, or a call that differs from the first in anything but
//!   `inputResponses`/`requestState` is refused and changes nothing; an answer that is not an
//!   elicitation result for the open question is a decline.
//! - The table is bounded in entries and bytes, in total ([`MAX_CALLS`], [`MAX_BYTES`]) and per
//!   client ([`MAX_CALLS_PER_CLIENT`], [`MAX_BYTES_PER_CLIENT`]), a client's share well below
//!   the total: past its share, a client's new question is declined without asking, and the
//!   places other clients need stay free. A call is forgotten once its result was delivered,
//!   or [`KEEP`] after its last question's deadline and its turn's end, on a timer of its own
//!   (not when the table is next used).

#![allow(deprecated)] // roots: rmcp marks them deprecated (see `super::roots`)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, JsonObject, ListRootsRequest, ListRootsResult,
};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::progress::{Follow, ProgressTarget};
use super::task_owner::TaskOwner;

/// Most calls waiting on a question (or holding a result for their retry) at once: sixteen
/// clients' shares, so that a few busy clients leave room for the others.
pub const MAX_CALLS: usize = 128;
/// Most of those per client: a host asks one question at a time per call; eight calls of one
/// connection waiting at once is already more than a person answers.
pub const MAX_CALLS_PER_CLIENT: usize = 8;
/// What one call in the table is counted as, in bytes: its handle, the digest of its tool and
/// arguments, its channels and bookkeeping (an upper bound of their sizes, checked by a test).
/// Fixed, because the arguments are kept as a digest, whatever their size.
pub const ENTRY_BYTES: usize = 1024;
/// Most bytes the table holds for one client.
pub const MAX_BYTES_PER_CLIENT: usize = MAX_CALLS_PER_CLIENT * ENTRY_BYTES;
/// Most bytes the table holds in all.
pub const MAX_BYTES: usize = MAX_CALLS * ENTRY_BYTES;
/// How long a call that asked is remembered after its last question's deadline and its turn's
/// end: a retry within it gets the turn's result; after it, "the question expired".
pub const KEEP: Duration = Duration::from_secs(300);
/// Prefix of every `requestState` the bridge hands out.
const STATE_PREFIX: &str = "cmb-mrtr-1";

/// Why a retry is refused (nothing changes: the question stays open, the turn goes on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoundError {
    #[error(
        "is not a state this server handed out, or its question expired (a call is remembered \
         {} s after its question's deadline and its turn's end) or was lost when the server \
         owning the sessions changed: the question was lost: retry the call (without \
         inputResponses and requestState) to start it again",
        KEEP.as_secs()
    )]
    Unknown,
    #[error("belongs to a call of another client")]
    OtherClient,
    #[error("was answered already: its retry is taken; use the requestState of the latest answer")]
    Answered,
    #[error(
        "belongs to a call of another tool or with other arguments: a retry repeats the call \
         exactly, adding only inputResponses and requestState"
    )]
    Differs,
    #[error("is given without requestState")]
    NoState,
}

impl RoundError {
    /// The argument at fault.
    pub fn field(&self) -> &'static str {
        match self {
            RoundError::NoState => "inputResponses",
            _ => "requestState",
        }
    }
}

/// One question on its way to the client.
struct Prompt {
    request: InputRequest,
    answer: oneshot::Sender<serde_json::Value>,
    /// When the turn stops waiting for the answer.
    deadline: Instant,
}

/// What the call's task reports to whoever waits on it.
enum Event {
    Ask(Prompt),
    Done(Result<CallToolResult, McpError>),
}

/// How a call's turn asks: its questions go to the call's current round.
#[derive(Clone)]
pub struct RoundAsker {
    events: mpsc::Sender<Event>,
}

/// The question could not reach a client (the call was forgotten).
#[derive(Debug)]
pub struct Withdrawn;

impl RoundAsker {
    /// Ask `request` (the approval room's), waiting at most `timeout` (the caller bounds the
    /// wait too); the client's answer to it (any JSON: the caller checks it), once a retry
    /// brings it.
    pub async fn ask(
        &self,
        request: InputRequest,
        timeout: Duration,
    ) -> Result<serde_json::Value, Withdrawn> {
        let (answer, rx) = oneshot::channel();
        let deadline = Instant::now() + timeout;
        self.events
            .send(Event::Ask(Prompt {
                request,
                answer,
                deadline,
            }))
            .await
            .map_err(|_| Withdrawn)?;
        rx.await.map_err(|_| Withdrawn)
    }
}

/// A call running on its own task.
struct Pending {
    /// Its progress target, set by the request that waits on it.
    progress: Follow,
    /// The call's events; whoever waits on the call holds the lock.
    events: tokio::sync::Mutex<mpsc::Receiver<Event>>,
    /// Cancels the call's turn.
    cancel: CancellationToken,
    /// When the call's task ended (`None` while it runs).
    ended: Mutex<Option<Instant>>,
    /// Cancelled when the call's task ended (its entry's timer waits on it).
    finished: CancellationToken,
}

/// What a retry must repeat: the tool and its arguments, as a SHA-256 of a canonical form
/// (object keys sorted, every value tagged and length-prefixed), so that the table keeps 32
/// bytes whatever the arguments' size, and a retry with anything else differs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct CallDigest([u8; 32]);

impl CallDigest {
    /// The digest of a call of `tool` with `args`.
    pub(crate) fn of(tool: &str, args: &JsonObject) -> Self {
        let mut h = Sha256::new();
        feed_str(&mut h, tool);
        feed_object(&mut h, args);
        CallDigest(h.finalize().into())
    }
}

fn feed_len(h: &mut Sha256, n: usize) {
    h.update((n as u64).to_le_bytes());
}

fn feed_str(h: &mut Sha256, s: &str) {
    feed_len(h, s.len());
    h.update(s.as_bytes());
}

fn feed_object(h: &mut Sha256, o: &JsonObject) {
    h.update([5]);
    feed_len(h, o.len());
    let mut keys: Vec<&String> = o.keys().collect();
    keys.sort();
    for k in keys {
        feed_str(h, k);
        feed(h, &o[k]);
    }
}

/// Feed `v` in a canonical form (serde_json caps nesting at 128 levels as it parses).
fn feed(h: &mut Sha256, v: &serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Null => h.update([0]),
        Value::Bool(b) => h.update([1, u8::from(*b)]),
        Value::Number(n) => {
            h.update([2]);
            feed_str(h, &n.to_string());
        }
        Value::String(s) => {
            h.update([3]);
            feed_str(h, s);
        }
        Value::Array(a) => {
            h.update([4]);
            feed_len(h, a.len());
            a.iter().for_each(|v| feed(h, v));
        }
        Value::Object(o) => feed_object(h, o),
    }
}

/// A call that asked, in the table.
struct Entry {
    client: TaskOwner,
    what: CallDigest,
    /// The running call; `None` for a call that was asked for the client's roots before it
    /// started.
    pending: Option<Arc<Pending>>,
    /// The round of the question last handed out (1 for the first).
    round: u64,
    /// Its answer's way back to the turn, until a retry takes it.
    open: Option<oneshot::Sender<serde_json::Value>>,
    /// The last question's deadline.
    deadline: Instant,
    /// How long it is kept after its deadline and its call's end ([`KEEP`]).
    keep: Duration,
    /// The task that forgets the entry when it expires (aborted when the entry goes).
    timer: Option<tokio::task::AbortHandle>,
}

impl Entry {
    /// When the entry expires: `None` while its call runs.
    fn expires_at(&self) -> Option<Instant> {
        let Some(pending) = &self.pending else {
            return Some(self.deadline);
        };
        let ended = *pending.ended.lock().unwrap_or_else(|e| e.into_inner());
        ended.map(|ended| self.deadline.max(ended) + self.keep)
    }

    fn expired(&self, now: Instant) -> bool {
        self.expires_at().is_some_and(|at| now >= at)
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.abort();
        }
    }
}

type Table = Mutex<HashMap<String, Entry>>;

/// Forget the entry under `handle` when it expires: once its call ended (if it runs one), at
/// its expiry, again if a later question moved it.
async fn expire(calls: Weak<Table>, handle: String, finished: Option<CancellationToken>) {
    if let Some(f) = finished {
        f.cancelled().await;
    }
    loop {
        let at = {
            let Some(calls) = calls.upgrade() else { return };
            let table = calls.lock().unwrap_or_else(|e| e.into_inner());
            match table.get(&handle).and_then(Entry::expires_at) {
                Some(at) => at,
                None => return,
            }
        };
        tokio::time::sleep_until(at).await;
        let Some(calls) = calls.upgrade() else { return };
        let mut table = calls.lock().unwrap_or_else(|e| e.into_inner());
        if table.get(&handle).is_none_or(|e| e.expired(Instant::now())) {
            tracing::debug!("a call that asked expired: forgotten");
            // the entry's drop aborts this task, which ends here anyway
            table.remove(&handle);
            return;
        }
    }
}

/// Whether `client` may add a call to `table`: within its own share of entries and bytes, and
/// within the table's.
fn admits(table: &HashMap<String, Entry>, client: &TaskOwner) -> bool {
    let of_client = table.values().filter(|e| e.client == *client).count();
    let fits = |n: usize, most: usize, bytes: usize| n < most && (n + 1) * ENTRY_BYTES <= bytes;
    let ok = fits(of_client, MAX_CALLS_PER_CLIENT, MAX_BYTES_PER_CLIENT)
        && fits(table.len(), MAX_CALLS, MAX_BYTES);
    if !ok {
        tracing::warn!(
            calls = table.len(),
            of_client,
            "the client's share of calls waiting on a question is used up: its new question is \
             declined without asking"
        );
    }
    ok
}

/// The calls that asked, by handle (one table per process).
#[derive(Clone)]
pub struct Rounds {
    calls: Arc<Table>,
    /// [`KEEP`] (shorter in tests).
    keep: Duration,
}

impl Default for Rounds {
    fn default() -> Self {
        Rounds {
            calls: Arc::default(),
            keep: KEEP,
        }
    }
}

/// Where a call's first request ends: the call's identity and what a retry must repeat.
pub(crate) struct Call {
    pub client: TaskOwner,
    /// Its tool and arguments, checked as the tool checks them before this is made.
    pub what: CallDigest,
    /// This request's progress target.
    pub progress: Option<ProgressTarget>,
}

fn state_of(handle: &str, round: u64) -> String {
    format!("{STATE_PREFIX}.{handle}.{round}")
}

fn parse_state(state: &str) -> Option<(&str, u64)> {
    let rest = state.strip_prefix(STATE_PREFIX)?.strip_prefix('.')?;
    let (handle, round) = rest.split_once('.')?;
    let valid = handle.len() == 32 && handle.bytes().all(|b| b.is_ascii_hexdigit());
    (valid && !round.starts_with('0'))
        .then(|| round.parse().ok())
        .flatten()
        .map(|round| (handle, round))
}

/// Stops a call's progress going to the request that waited on it, however the wait ends.
struct Unfollow(Follow);

impl Drop for Unfollow {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// What a retry brought.
#[derive(Debug)]
pub(crate) enum Retried {
    /// The call's answer: its result or its next question.
    Answer(Result<CallToolResponse, McpError>),
    /// The client's roots (`None`: the answer was not a `roots/list` result), for a call
    /// that starts now.
    Roots(Option<ListRootsResult>),
}

/// The key of the `roots/list` input request.
fn roots_key() -> String {
    "roots".to_owned()
}

/// The key of a round's one input request.
fn key_of(round: u64) -> String {
    format!("approval-{round}")
}

impl Rounds {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Put `entry` under a new handle, with the timer that forgets it; the handle.
    fn insert(&self, table: &mut HashMap<String, Entry>, mut entry: Entry) -> String {
        let handle = uuid::Uuid::new_v4().simple().to_string();
        let finished = entry.pending.as_ref().map(|p| p.finished.clone());
        let timer = tokio::spawn(expire(
            Arc::downgrade(&self.calls),
            handle.clone(),
            finished,
        ));
        entry.timer = Some(timer.abort_handle());
        table.insert(handle.clone(), entry);
        handle
    }

    /// How many calls wait on a question or hold a result.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    /// Whether none does.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Run a call whose questions are asked through MRTR: `run` gets the call's [`RoundAsker`] and
    /// the token that cancels it, and runs on a task of its own; the first request's answer is
    /// the call's result, or its first question.
    pub(crate) async fn start<F>(
        &self,
        call: Call,
        ct: CancellationToken,
        run: impl FnOnce(RoundAsker, CancellationToken, Follow) -> F,
    ) -> Result<CallToolResponse, McpError>
    where
        F: std::future::Future<Output = Result<CallToolResult, McpError>> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(4);
        let pending = Arc::new(Pending {
            progress: Arc::new(Mutex::new(None)),
            events: tokio::sync::Mutex::new(rx),
            cancel: CancellationToken::new(),
            ended: Mutex::new(None),
            finished: CancellationToken::new(),
        });
        let fut = run(
            RoundAsker { events: tx.clone() },
            pending.cancel.clone(),
            pending.progress.clone(),
        );
        {
            let pending = pending.clone();
            tokio::spawn(async move {
                let r = fut.await;
                // nobody may be waiting (the question expired and no retry came): the result
                // stays for a later retry
                let _ = tx.send(Event::Done(r)).await;
                *pending.ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                pending.finished.cancel();
            });
        }
        let progress = call.progress.clone();
        self.wait(None, Some(call), pending, progress, ct).await
    }

    /// The retry of a call that asked: check `state` and the call, hand `responses` to the open
    /// question, and wait for the turn's result or its next question.
    pub(crate) async fn retry(
        &self,
        call: Call,
        state: Option<&str>,
        responses: Option<InputResponses>,
        ct: CancellationToken,
    ) -> Result<Retried, RoundError> {
        let state = state.ok_or(RoundError::NoState)?;
        let (handle, round) = parse_state(state).ok_or(RoundError::Unknown)?;
        let pending = {
            let now = Instant::now();
            let mut table = self.table();
            table.retain(|_, e| !e.expired(now));
            let entry = table.get_mut(handle).ok_or(RoundError::Unknown)?;
            if entry.client != call.client {
                return Err(RoundError::OtherClient);
            }
            if entry.what != call.what {
                return Err(RoundError::Differs);
            }
            if round > entry.round {
                return Err(RoundError::Unknown);
            }
            if round < entry.round {
                return Err(RoundError::Answered);
            }
            let Some(pending) = entry.pending.clone() else {
                // the client's roots: the call starts now, once
                table.remove(handle);
                let listed = responses
                    .filter(|r| r.len() == 1)
                    .and_then(|mut r| r.remove(&roots_key()))
                    .and_then(|v| serde_json::from_value::<ListRootsResult>(v).ok());
                return Ok(Retried::Roots(listed));
            };
            let answer = entry.open.take().ok_or(RoundError::Answered)?;
            // only the open question's key, holding an elicitation result: anything else is
            // answered as a decline (the turn checks the value)
            let key = key_of(round);
            let value = match responses {
                Some(mut r) if r.len() == 1 => r.remove(&key).unwrap_or_default(),
                _ => serde_json::Value::Null,
            };
            // a closed answer: the question's deadline passed (codex got a decline): this
            // retry gets the turn's result instead
            if answer.send(value).is_err() {
                tracing::info!(
                    round,
                    "an answer came after its question's deadline: ignored"
                );
            }
            pending
        };
        Ok(Retried::Answer(
            self.wait(Some(handle.to_owned()), None, pending, call.progress, ct)
                .await,
        ))
    }

    /// The first answer of a call that needs the client's roots before it starts (a
    /// 2026-07-28 client cannot be asked otherwise): a `roots/list` input request; its retry
    /// brings the roots ([`Retried::Roots`]). `None` when the table is full (the call runs
    /// without them).
    pub(crate) fn ask_roots(&self, call: Call) -> Option<CallToolResponse> {
        let now = Instant::now();
        let mut table = self.table();
        table.retain(|_, e| !e.expired(now));
        if !admits(&table, &call.client) {
            return None;
        }
        let entry = Entry {
            client: call.client,
            what: call.what,
            pending: None,
            round: 1,
            open: None,
            deadline: now + self.keep,
            keep: self.keep,
            timer: None,
        };
        let handle = self.insert(&mut table, entry);
        let mut requests = InputRequests::new();
        requests.insert(
            roots_key(),
            InputRequest::ListRoots(ListRootsRequest::default()),
        );
        tracing::info!("the client's roots are asked as input_required");
        Some(CallToolResponse::InputRequired(InputRequiredResult::new(
            Some(requests),
            Some(state_of(&handle, 1)),
        )))
    }

    /// Wait for the call's next event: its result (the call is forgotten) or a question (handed
    /// out by [`Rounds::hand_out`]). Cancelling `ct` cancels the call.
    async fn wait(
        &self,
        mut handle: Option<String>,
        mut call: Option<Call>,
        pending: Arc<Pending>,
        progress: Option<ProgressTarget>,
        ct: CancellationToken,
    ) -> Result<CallToolResponse, McpError> {
        let mut events = pending.events.lock().await;
        let answered = Unfollow(pending.progress.clone());
        *answered.0.lock().unwrap_or_else(|e| e.into_inner()) = progress;
        loop {
            let event = tokio::select! {
                e = events.recv() => e,
                _ = ct.cancelled() => {
                    pending.cancel.cancel();
                    self.forget(handle.as_deref());
                    return Err(McpError::internal_error("the call was cancelled", None));
                }
            };
            let prompt = match event {
                Some(Event::Ask(p)) => p,
                Some(Event::Done(r)) => {
                    self.forget(handle.as_deref());
                    return r.map(CallToolResponse::Complete);
                }
                None => {
                    self.forget(handle.as_deref());
                    return Err(McpError::internal_error(
                        "the call ended without a result",
                        None,
                    ));
                }
            };
            if let Some(response) = self.hand_out(&mut handle, &mut call, &pending, prompt) {
                return Ok(response);
            }
        }
    }

    /// Drop the call under `handle` from the table, if it has one.
    fn forget(&self, handle: Option<&str>) {
        if let Some(h) = handle {
            self.table().remove(h);
        }
    }

    /// Hand `prompt` out in a new round, under `handle`, or under a new handle on the first
    /// question of `call`: the call's answer, an `InputRequiredResult`. `None` when it cannot
    /// be handed out (the call was forgotten meanwhile, or the table is full for it): `prompt`
    /// is dropped, so the turn gets a decline.
    fn hand_out(
        &self,
        handle: &mut Option<String>,
        call: &mut Option<Call>,
        pending: &Arc<Pending>,
        prompt: Prompt,
    ) -> Option<CallToolResponse> {
        let now = Instant::now();
        let mut table = self.table();
        table.retain(|_, e| !e.expired(now));
        let round = match handle.as_ref().and_then(|h| table.get_mut(h)) {
            Some(entry) => {
                entry.round += 1;
                entry.open = Some(prompt.answer);
                entry.deadline = prompt.deadline;
                entry.round
            }
            None => {
                // forgotten meanwhile: the question is withdrawn (a decline)
                let c = call.take()?;
                if !admits(&table, &c.client) {
                    *call = Some(c);
                    return None;
                }
                let entry = Entry {
                    client: c.client,
                    what: c.what,
                    pending: Some(pending.clone()),
                    round: 1,
                    open: Some(prompt.answer),
                    deadline: prompt.deadline,
                    keep: self.keep,
                    timer: None,
                };
                *handle = Some(self.insert(&mut table, entry));
                1
            }
        };
        let handle = handle.as_deref().expect("set above");
        let mut requests = InputRequests::new();
        requests.insert(key_of(round), prompt.request);
        tracing::info!(round, "a question goes to the client as input_required");
        Some(CallToolResponse::InputRequired(InputRequiredResult::new(
            Some(requests),
            Some(state_of(handle, round)),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> InputRequest {
        use rmcp::model::{ElicitRequest, ElicitRequestParams};
        InputRequest::Elicitation(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: "allow?".into(),
                requested_schema: rmcp::model::ElicitationSchema::builder().build_unchecked(),
            },
        ))
    }

    /// A call of `client` that asks once and answers whether its question got an answer.
    async fn asking_call(rounds: &Rounds, client: u64) -> CallToolResponse {
        let call = Call {
            client: TaskOwner::Connection(client),
            what: CallDigest::of("codex", &JsonObject::new()),
            progress: None,
        };
        rounds
            .start(call, CancellationToken::new(), |asking, _, _| async move {
                let answered = asking.ask(form(), Duration::from_secs(5)).await.is_ok();
                Ok(CallToolResult::success(vec![
                    rmcp::model::ContentBlock::text(answered.to_string()),
                ]))
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn past_the_bound_a_question_is_declined_without_asking() {
        let rounds = Rounds::default();
        for _ in 0..MAX_CALLS_PER_CLIENT {
            let r = asking_call(&rounds, 1).await;
            assert!(matches!(r, CallToolResponse::InputRequired(_)), "{r:?}");
        }
        // one more of the same client: its question is withdrawn, the call ends unasked
        let CallToolResponse::Complete(r) = asking_call(&rounds, 1).await else {
            panic!("asked past the bound")
        };
        assert_eq!(r.content[0].as_text().unwrap().text, "false");
        // another client still can be asked, up to the overall bound
        for n in 0..(MAX_CALLS - MAX_CALLS_PER_CLIENT) as u64 {
            let r = asking_call(&rounds, 2 + n / MAX_CALLS_PER_CLIENT as u64).await;
            assert!(matches!(r, CallToolResponse::InputRequired(_)), "{r:?}");
        }
        assert_eq!(rounds.len(), MAX_CALLS);
        let CallToolResponse::Complete(_) = asking_call(&rounds, 1000).await else {
            panic!("asked past the overall bound")
        };
    }

    fn roots_call(client: u64) -> Call {
        Call {
            client: TaskOwner::Connection(client),
            what: CallDigest::of("codex", &JsonObject::new()),
            progress: None,
        }
    }

    fn state_in(r: Option<CallToolResponse>) -> String {
        match r {
            Some(CallToolResponse::InputRequired(ir)) => ir.request_state.expect("a state"),
            other => panic!("not asked: {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_expired_state_is_refused_and_a_live_one_is_taken() {
        let rounds = Rounds::default();
        // a live state: its retry is taken, once
        let live = state_in(rounds.ask_roots(roots_call(1)));
        let took = rounds
            .retry(roots_call(1), Some(&live), None, CancellationToken::new())
            .await;
        assert!(matches!(took, Ok(Retried::Roots(None))), "{took:?}");
        // a state whose time has passed: refused as unknown, and forgotten
        let old = state_in(rounds.ask_roots(roots_call(1)));
        for e in rounds.table().values_mut() {
            e.deadline = Instant::now() - Duration::from_secs(1);
        }
        let refused = rounds
            .retry(roots_call(1), Some(&old), None, CancellationToken::new())
            .await;
        assert!(matches!(refused, Err(RoundError::Unknown)), "{refused:?}");
        assert!(rounds.is_empty());
    }

    /// Whether `rounds` empties within `within`.
    async fn empties(rounds: &Rounds, within: Duration) -> bool {
        let until = Instant::now() + within;
        while !rounds.is_empty() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        rounds.is_empty()
    }

    #[tokio::test]
    async fn an_entry_expires_on_its_timer_without_the_table_being_used() {
        let keep = Duration::from_secs(2);
        let rounds = Rounds {
            keep,
            ..Rounds::default()
        };
        let _asked = state_in(rounds.ask_roots(roots_call(1)));
        tokio::time::sleep(keep / 4).await;
        assert_eq!(rounds.len(), 1, "forgotten before its time");
        assert!(
            empties(&rounds, keep * 3).await,
            "not forgotten on its timer"
        );

        // a call that asked: kept while its turn runs, then `keep` after its end
        let (go, went) = oneshot::channel::<()>();
        let call = Call {
            client: TaskOwner::Connection(2),
            what: CallDigest::of("codex", &JsonObject::new()),
            progress: None,
        };
        let r = rounds
            .start(call, CancellationToken::new(), |asking, _, _| async move {
                let asked = asking.ask(form(), Duration::from_millis(100));
                let _ = tokio::time::timeout(Duration::from_millis(100), asked).await;
                let _ = went.await;
                Ok(CallToolResult::success(vec![]))
            })
            .await
            .unwrap();
        assert!(matches!(r, CallToolResponse::InputRequired(_)), "{r:?}");
        tokio::time::sleep(keep + keep / 2).await;
        assert_eq!(rounds.len(), 1, "forgotten while its turn runs");
        let ended = Instant::now();
        go.send(()).unwrap();
        tokio::time::sleep(keep / 4).await;
        assert_eq!(rounds.len(), 1, "forgotten before `keep` after its end");
        assert!(
            empties(&rounds, keep * 3).await,
            "not forgotten after its end"
        );
        assert!(
            ended.elapsed() >= keep,
            "forgotten {:?} after",
            ended.elapsed()
        );
    }

    #[tokio::test]
    async fn a_clients_share_is_its_own_and_leaves_room_for_the_others() {
        // the share is well below the table, in entries and in bytes
        const { assert!(MAX_CALLS_PER_CLIENT * 8 <= MAX_CALLS) };
        const { assert!(MAX_BYTES_PER_CLIENT * 8 <= MAX_BYTES) };
        let rounds = Rounds::default();
        // eight clients at their share: a ninth is still asked
        for client in 1..=8 {
            for _ in 0..MAX_CALLS_PER_CLIENT {
                state_in(rounds.ask_roots(roots_call(client)));
            }
            assert!(
                rounds.ask_roots(roots_call(client)).is_none(),
                "past its share"
            );
        }
        state_in(rounds.ask_roots(roots_call(9)));
        // bytes: what the table counts covers what it holds
        let held = rounds.len() * ENTRY_BYTES;
        assert!(held <= MAX_BYTES, "{held}");
        let entry = std::mem::size_of::<Entry>() + std::mem::size_of::<Pending>() + 32 + 64;
        assert!(entry <= ENTRY_BYTES, "an entry takes {entry} bytes");
    }

    #[test]
    fn a_digest_tells_every_difference_and_ignores_key_order() {
        let of = |tool: &str, v: serde_json::Value| {
            CallDigest::of(tool, v.as_object().expect("an object"))
        };
        let a = of(
            "codex",
            serde_json::json!({"prompt": "p", "files": ["a", "b"]}),
        );
        assert_eq!(
            a,
            of(
                "codex",
                serde_json::json!({"files": ["a", "b"], "prompt": "p"})
            )
        );
        for other in [
            of(
                "structured",
                serde_json::json!({"prompt": "p", "files": ["a", "b"]}),
            ),
            of("codex", serde_json::json!({"prompt": "p", "files": ["ab"]})),
            of(
                "codex",
                serde_json::json!({"prompt": "p", "files": ["b", "a"]}),
            ),
            of(
                "codex",
                serde_json::json!({"prompt": "p ", "files": ["a", "b"]}),
            ),
            of("codex", serde_json::json!({"prompt": "p", "files": "ab"})),
            of("codex", serde_json::json!({"prompt": "p"})),
            of(
                "codex",
                serde_json::json!({"prompt": "p", "files": ["a", "b"], "x": null}),
            ),
        ] {
            assert_ne!(a, other);
        }
    }

    #[test]
    fn a_state_names_a_handle_and_a_round_and_nothing_else_parses() {
        let h = "0123456789abcdef0123456789abcdef";
        assert_eq!(parse_state(&state_of(h, 3)), Some((h, 3)));
        for bad in [
            "",
            "cmb-mrtr-1",
            &format!("cmb-mrtr-1.{h}"),
            &format!("cmb-mrtr-1.{h}.0"),
            &format!("cmb-mrtr-1.{h}.01"),
            &format!("cmb-mrtr-1.{h}.-1"),
            &format!("cmb-mrtr-1.{h}x.1"),
            &format!("cmb-mrtr-2.{h}.1"),
            "cmb-mrtr-1.zz23456789abcdef0123456789abcdef.1",
        ] {
            assert_eq!(parse_state(bad), None, "{bad}");
        }
    }
}

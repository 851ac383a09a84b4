//! The loopback question page: a person reads the whole question in a browser and decides it
//! there, with the page's own Approve and Deny buttons.
//!
//! [`Pages`] (one per process) binds `127.0.0.1:0` on the first [`Pages::open`] and serves
//! every question at `http://127.0.0.1:PORT/q/<id>`, `<id>` 256 bits from the system's CSPRNG.
//! The rules, each with its refusal (nothing changes on a refusal):
//!
//! - Only the server's own user: each request's connecting socket is looked up in the kernel's
//!   socket tables and its owner must be this process's effective uid (403 otherwise).
//! - `Host` must be `127.0.0.1:PORT` or `localhost:PORT` (421), which a DNS-rebound name never
//!   is.
//! - One-time page: the first `GET` renders it and sets a cookie (`HttpOnly`,
//!   `SameSite=Strict`, `Path=/q/<id>`) with a random secret; a refresh with the cookie renders
//!   again, a `GET` without it gets 410. A `GET` for anything but a document (an image, a
//!   frame) is refused (403) before it can use up the page.
//! - The decision: `POST /q/<id>`, form-encoded `token` and `decision=approve|deny` from the
//!   page's one form. `Origin` must be present and the page's own (403), `Sec-Fetch-Site`, when
//!   sent, `same-origin` (403), the cookie the page's (403), the token present (400), the page's
//!   (403, compared in constant time) and unused (409: the question is decided); the question
//!   open (410 when it expired or was closed).
//! - Afterwards the page (and every later request) says what happened: approved, denied,
//!   declined in the host, timed out, withdrawn or expired.
//!
//! Bounds: a question carries at most [`MAX_QUESTION_BYTES`] of text ([`PageError::TooLarge`]
//! past it); at most [`MAX_OPEN`] questions and [`MAX_OPEN_BYTES`] of their text are open at
//! once ([`PageError::Full`]); a question ends at its `expires` (a timer), and what is kept of
//! an ended one (its outcome, no text) is removed [`LINGER`] later (at most [`MAX_ENDED`]).
//!
//! Responses carry `Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline';
//! form-action 'self'; frame-ancestors 'none'; base-uri 'none'`, `X-Frame-Options: DENY`,
//! `Cache-Control: no-store` and `Referrer-Policy: same-origin` (not `no-referrer`: under
//! `no-referrer` a browser sends `Origin: null` with the form's POST, and the decision needs the
//! page's own origin; `same-origin` sends no referrer to any other origin). Logs name a question
//! by the first characters of its id only, never its token or cookie.

mod http;
mod peer;
mod render;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;
use tokio::sync::{Notify, OnceCell, oneshot};
use tokio_util::sync::CancellationToken;

pub use render::DIFF_LABEL;

/// Most bytes of text one question's page carries (title, labels, fields and grants together).
pub const MAX_QUESTION_BYTES: usize = 256 * 1024;
/// Most questions open on pages at once in one process.
pub const MAX_OPEN: usize = 256;
/// Most bytes of text of the open questions together.
pub const MAX_OPEN_BYTES: usize = 16 * 1024 * 1024;
/// How long the outcome of an ended question is kept (so its page says what happened).
pub const LINGER: Duration = Duration::from_secs(15 * 60);
/// Most ended questions whose outcome is kept; the oldest goes first.
pub const MAX_ENDED: usize = 1024;

/// A question as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageQuestion {
    /// The heading, e.g. "Codex asks to run a command outside its sandbox".
    pub title: String,
    /// (label, text) in order: already redacted, not escaped (the page escapes). A field whose
    /// label starts with [`DIFF_LABEL`] is shown as a diff.
    pub fields: Vec<(String, String)>,
    /// What Approve grants.
    pub grants: String,
}

impl PageQuestion {
    /// The bytes of text the question carries.
    pub fn bytes(&self) -> usize {
        self.title.len()
            + self.grants.len()
            + self
                .fields
                .iter()
                .map(|(l, t)| l.len() + t.len())
                .sum::<usize>()
    }
}

/// What the person decided on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageDecision {
    Approve,
    Deny,
}

/// Why a question ended other than on its page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The person declined (or cancelled) in the host.
    DeclinedInHost,
    /// No decision before the approval timeout.
    TimedOut,
    /// The turn or the connection that asked it ended (and an [`OpenPage`] dropped).
    Withdrawn,
    /// Decided (on the page).
    Decided,
}

/// Why a question gets no page.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error(
        "the question holds {bytes} bytes of text, more than a page carries ({MAX_QUESTION_BYTES})"
    )]
    TooLarge { bytes: usize },
    #[error(
        "too many questions are open on pages (at most {MAX_OPEN}, {MAX_OPEN_BYTES} bytes of text)"
    )]
    Full,
    #[error("the question expired before its page opened")]
    Expired,
    #[error("the page's loopback listener could not be bound: {0}")]
    Bind(#[source] std::io::Error),
}

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Decided(PageDecision),
    Closed(Closed),
    Expired,
}

struct Entry {
    /// The question while it is open.
    question: Option<Arc<PageQuestion>>,
    bytes: usize,
    token: String,
    /// The page's secret, set by its first GET.
    cookie: Option<String>,
    state: State,
    expires: Instant,
    decided: Option<oneshot::Sender<PageDecision>>,
    ended: Arc<Notify>,
    ended_at: Option<Instant>,
}

#[derive(Default)]
struct Table {
    entries: HashMap<String, Entry>,
    open: usize,
    open_bytes: usize,
}

/// What the server answers a request for a question.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// The question's page (200), with this `Set-Cookie` value when given.
    Page {
        html: String,
        cookie: Option<String>,
    },
    /// A notice: status, heading, sentence.
    Notice(u16, &'static str, String),
}

fn notice(status: u16, heading: &'static str, sentence: impl Into<String>) -> Answer {
    Answer::Notice(status, heading, sentence.into())
}

/// A new random secret: 256 bits from two v4 UUIDs (the system's CSPRNG), in hex.
fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The start of an id, for logs.
fn short(id: &str) -> &str {
    id.get(..6).unwrap_or(id)
}

/// The heading and sentence of a question that ended.
fn outcome(state: State) -> (&'static str, &'static str) {
    const DONE: &str = "You can close this page and press \"I'm done, continue\" in your host.";
    match state {
        State::Decided(PageDecision::Approve) => (
            "Approved",
            "This question was approved on this page: codex goes on. You can close this page and press \"I'm done, continue\" in your host.",
        ),
        State::Decided(PageDecision::Deny) => (
            "Denied",
            "This question was denied on this page: codex does not run it. You can close this page and press \"I'm done, continue\" in your host.",
        ),
        State::Closed(Closed::DeclinedInHost) => (
            "Declined in the host",
            "This question was declined in the host that asked it: nothing was approved, and this page decides nothing more.",
        ),
        State::Closed(Closed::TimedOut) => (
            "Timed out",
            "This question waited past the approval timeout and was declined: nothing was approved.",
        ),
        State::Closed(Closed::Withdrawn) => (
            "Withdrawn",
            "This question was withdrawn (the turn or the connection that asked it ended): nothing was approved.",
        ),
        State::Closed(Closed::Decided) => ("Decided", DONE),
        State::Expired => (
            "Expired",
            "This question expired before it was decided and was declined: nothing was approved.",
        ),
        State::Open => ("Open", "This question is open."),
    }
}

impl Table {
    /// End an open question; `false` when it was not open.
    fn end(&mut self, id: &str, state: State) -> bool {
        let Some(e) = self.entries.get_mut(id) else {
            return false;
        };
        if e.state != State::Open {
            return false;
        }
        e.state = state;
        e.question = None;
        e.decided = None;
        e.ended_at = Some(Instant::now());
        e.ended.notify_one();
        self.open -= 1;
        self.open_bytes -= e.bytes;
        tracing::info!(page = short(id), outcome = ?state, "a question's page ended");
        true
    }

    /// The entry of `id`, ended as expired first when its time is past.
    fn current(&mut self, id: &str) -> Option<&mut Entry> {
        let expired = self
            .entries
            .get(id)
            .is_some_and(|e| e.state == State::Open && Instant::now() >= e.expires);
        if expired {
            self.end(id, State::Expired);
        }
        self.entries.get_mut(id)
    }

    /// A GET of the page with the cookie the browser sent.
    fn get(&mut self, id: &str, cookie: Option<&str>) -> Answer {
        let Some(e) = self.current(id) else {
            return notice(
                404,
                "No such question",
                "No question has this address: it is mistyped, or the question ended long ago.",
            );
        };
        if e.state != State::Open {
            let (heading, sentence) = outcome(e.state);
            return notice(410, heading, sentence);
        }
        let question = e.question.clone().unwrap_or_else(|| unreachable_question());
        let set = match (&e.cookie, cookie) {
            (None, _) => {
                let c = secret();
                e.cookie = Some(c.clone());
                Some(c)
            }
            (Some(ours), Some(theirs)) if bool::from(ours.as_bytes().ct_eq(theirs.as_bytes())) => {
                None
            }
            (Some(_), _) => {
                tracing::warn!(
                    page = short(id),
                    "refused a second opening of a question's page"
                );
                return notice(
                    410,
                    "Opened already",
                    "This question's page was opened already: decide in the window that opened it.",
                );
            }
        };
        Answer::Page {
            html: render::question(id, &e.token, &question),
            cookie: set.map(|c| http::set_cookie(id, &c)),
        }
    }

    /// A POST of the page's form.
    fn decide(
        &mut self,
        id: &str,
        cookie: Option<&str>,
        token: Option<&str>,
        decision: Option<&str>,
    ) -> Answer {
        let Some(e) = self.current(id) else {
            return notice(404, "No such question", "No question has this address.");
        };
        match e.state {
            State::Open => {}
            State::Decided(_) | State::Closed(Closed::Decided) => {
                let (heading, sentence) = outcome(e.state);
                return notice(409, heading, sentence);
            }
            _ => {
                let (heading, sentence) = outcome(e.state);
                return notice(410, heading, sentence);
            }
        }
        let matches = |ours: &str, theirs: Option<&str>| {
            theirs.is_some_and(|t| bool::from(ours.as_bytes().ct_eq(t.as_bytes())))
        };
        if !e.cookie.as_deref().is_some_and(|c| matches(c, cookie)) {
            return notice(
                403,
                "Refused",
                "The decision must come from the browser window that opened this question's page (its cookie is missing or not this page's): nothing was decided.",
            );
        }
        let Some(token) = token else {
            return notice(
                400,
                "Refused",
                "The form carries no decision token: nothing was decided.",
            );
        };
        if !matches(&e.token, Some(token)) {
            return notice(
                403,
                "Refused",
                "The decision token is not this page's: nothing was decided.",
            );
        }
        let d = match decision {
            Some("approve") => PageDecision::Approve,
            Some("deny") => PageDecision::Deny,
            _ => {
                return notice(
                    400,
                    "Refused",
                    "decision: must be approve or deny: nothing was decided.",
                );
            }
        };
        if let Some(tx) = e.decided.take() {
            let _ = tx.send(d);
        }
        self.end(id, State::Decided(d));
        match d {
            PageDecision::Approve => notice(
                200,
                "Approved",
                "Approved: codex goes on. You can close this page and press \"I'm done, continue\" in your host.",
            ),
            PageDecision::Deny => notice(
                200,
                "Denied",
                "Denied: codex does not run it. You can close this page and press \"I'm done, continue\" in your host.",
            ),
        }
    }

    /// Forget the oldest ended questions until there is room for one more entry.
    fn make_room(&mut self) {
        while self.entries.len() - self.open >= MAX_ENDED {
            let oldest = self
                .entries
                .iter()
                .filter_map(|(id, e)| e.ended_at.map(|at| (at, id.clone())))
                .min();
            match oldest {
                Some((_, id)) => self.entries.remove(&id),
                None => break,
            };
        }
    }
}

/// An open entry is never without its question.
fn unreachable_question() -> Arc<PageQuestion> {
    Arc::new(PageQuestion {
        title: String::new(),
        fields: vec![],
        grants: String::new(),
    })
}

struct Shared {
    table: Mutex<Table>,
    addr: OnceCell<SocketAddr>,
    /// Stops the server when the last handle is gone.
    stop: CancellationToken,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The process's question pages (clones share one listener and one table).
#[derive(Clone)]
pub struct Pages {
    shared: Arc<Shared>,
}

impl Default for Pages {
    fn default() -> Self {
        Pages::new()
    }
}

impl Pages {
    /// No listener yet: the first [`Pages::open`] binds it.
    pub fn new() -> Pages {
        Pages {
            shared: Arc::new(Shared {
                table: Mutex::new(Table::default()),
                addr: OnceCell::new(),
                stop: CancellationToken::new(),
            }),
        }
    }

    /// Serve `q` on a page of its own until `expires`.
    pub async fn open(&self, q: PageQuestion, expires: Instant) -> Result<OpenPage, PageError> {
        let bytes = q.bytes();
        if bytes > MAX_QUESTION_BYTES {
            return Err(PageError::TooLarge { bytes });
        }
        if expires <= Instant::now() {
            return Err(PageError::Expired);
        }
        let addr = *self
            .shared
            .addr
            .get_or_try_init(|| http::serve(Arc::downgrade(&self.shared), self.shared.stop.clone()))
            .await
            .map_err(PageError::Bind)?;
        let id = secret();
        let (tx, rx) = oneshot::channel();
        let ended = Arc::new(Notify::new());
        {
            let mut t = self.shared.table();
            if t.open >= MAX_OPEN || t.open_bytes + bytes > MAX_OPEN_BYTES {
                return Err(PageError::Full);
            }
            t.make_room();
            t.open += 1;
            t.open_bytes += bytes;
            t.entries.insert(
                id.clone(),
                Entry {
                    question: Some(Arc::new(q)),
                    bytes,
                    token: secret(),
                    cookie: None,
                    state: State::Open,
                    expires,
                    decided: Some(tx),
                    ended: ended.clone(),
                    ended_at: None,
                },
            );
        }
        tokio::spawn(watch(
            Arc::downgrade(&self.shared),
            id.clone(),
            expires,
            ended,
        ));
        tracing::info!(
            page = short(&id),
            port = addr.port(),
            "a question's page is open"
        );
        Ok(OpenPage {
            url: format!("http://127.0.0.1:{}/q/{id}", addr.port()),
            id,
            rx,
            done: None,
            shared: self.shared.clone(),
        })
    }
}

/// End the question `id` at `expires` unless it ended before, then forget it [`LINGER`] later.
async fn watch(shared: Weak<Shared>, id: String, expires: Instant, ended: Arc<Notify>) {
    tokio::select! {
        _ = tokio::time::sleep_until(expires.into()) => {
            if let Some(s) = shared.upgrade() {
                s.table().end(&id, State::Expired);
            }
        }
        _ = ended.notified() => {}
    }
    tokio::time::sleep(LINGER).await;
    if let Some(s) = shared.upgrade() {
        let mut t = s.table();
        if t.entries.get(&id).is_some_and(|e| e.state != State::Open) {
            t.entries.remove(&id);
        }
    }
}

/// One question on its page. Dropping it withdraws the question (its page then says so).
pub struct OpenPage {
    /// `http://127.0.0.1:PORT/q/<id>`.
    pub url: String,
    id: String,
    rx: oneshot::Receiver<PageDecision>,
    done: Option<PageDecision>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for OpenPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenPage")
            .field("page", &short(&self.id))
            .finish_non_exhaustive()
    }
}

impl OpenPage {
    /// The person's decision on the page; pending until there is one (forever when the
    /// question ends otherwise: the caller bounds the wait). Cancel-safe.
    pub async fn decided(&mut self) -> PageDecision {
        if let Some(d) = self.done {
            return d;
        }
        match (&mut self.rx).await {
            Ok(d) => {
                self.done = Some(d);
                d
            }
            Err(_) => std::future::pending().await,
        }
    }

    /// The question ended elsewhere: its page says `why` from now on.
    pub fn close(self, why: Closed) {
        self.shared.table().end(&self.id, State::Closed(why));
    }
}

impl Drop for OpenPage {
    fn drop(&mut self) {
        self.shared
            .table()
            .end(&self.id, State::Closed(Closed::Withdrawn));
    }
}

#[cfg(test)]
mod tests;

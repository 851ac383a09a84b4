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
//!   open (410 when it expired or was closed). Approve also needs the code the host shows
//!   (compared in constant time): a wrong one decides nothing and answers `303` back to the
//!   page, which says how many tries are left; the [`MAX_WRONG_CODES`]th declines the question
//!   (Deny), and the right code after it is refused with that explanation.
//! - Afterwards the page (and every later request) says what happened: approved, denied,
//!   declined after wrong codes, declined in the host, timed out, withdrawn (the turn ended
//!   undecided) or expired; each in the past tense, so it never goes stale.
//!
//! Bounds: a question carries at most [`MAX_QUESTION_BYTES`] of text ([`PageError::TooLarge`]
//! past it); at most [`MAX_OPEN`] questions and [`MAX_OPEN_BYTES`] of their text are open at
//! once ([`PageError::Full`]); a question ends at its `expires` (a timer), and what is kept of
//! an ended one (its outcome, no text) is removed [`LINGER`] later (at most [`MAX_ENDED`]).
//!
//! Responses carry `Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline';
//! form-action 'self'; frame-ancestors 'none'; base-uri 'none'`, `X-Frame-Options: DENY`,
//! `Cache-Control: no-store` and `Referrer-Policy: same-origin` (not `no-referrer`: under
//! `no-referrer` a browser sends `Origin: null` with the form's POST (the Fetch standard,
//! "append a request `Origin` header"), and the decision needs the
//! page's own origin; `same-origin` sends no referrer to any other origin). Logs name a question
//! by the first characters of its id only, never its token or cookie.

mod http;
mod peer;
mod question;
mod render;
mod table;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OnceCell, oneshot};
use tokio_util::sync::CancellationToken;

pub use question::{Closed, PageDecision, PageQuestion};
pub use render::DIFF_LABEL;
pub use render::MAX_WRONG_CODES;
pub use table::MAX_ENDED;
use table::{Entry, State, Table, lock, secret, short};

/// Most bytes of text one question's page carries (title, labels, fields and grants together).
pub const MAX_QUESTION_BYTES: usize = 256 * 1024;
/// Most questions open on pages at once in one process.
pub const MAX_OPEN: usize = 256;
/// Most bytes of text of the open questions together.
pub const MAX_OPEN_BYTES: usize = 16 * 1024 * 1024;
/// How long the outcome of an ended question is kept (so its page says what happened).
pub const LINGER: Duration = Duration::from_secs(15 * 60);

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

struct Shared {
    table: Arc<Mutex<Table>>,
    addr: OnceCell<SocketAddr>,
    /// Stops the server when the last handle is gone.
    stop: CancellationToken,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        lock(&self.table)
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
                table: Arc::new(Mutex::new(Table::default())),
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
            .get_or_try_init(|| {
                http::serve(Arc::downgrade(&self.shared.table), self.shared.stop.clone())
            })
            .await
            .map_err(PageError::Bind)?;
        let id = secret();
        let (tx, rx) = oneshot::channel();
        let ended = Arc::new(Notify::new());
        let code = approval_code();
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
                    code: code.clone(),
                    wrong_codes: 0,
                    token: secret(),
                    cookie: None,
                    state: State::Open,
                    expires,
                    decided: Some(tx),
                    ended: ended.clone(),
                    ended_at: None,
                    turn_ended: false,
                },
            );
        }
        tokio::spawn(watch(
            Arc::downgrade(&self.shared.table),
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
            code,
            id,
            rx,
            done: None,
            shared: self.shared.clone(),
        })
    }
}

/// A fresh six-digit code for a question: the host shows it (in the URL elicitation's
/// message, which only the host's person sees); the page's Approve needs it typed. A process
/// that learns the page's URL (from a browser's command line, its history) cannot approve
/// without it; three wrong codes decline the question.
pub fn approval_code() -> String {
    let n = u32::from_le_bytes(
        uuid::Uuid::new_v4().as_bytes()[..4]
            .try_into()
            .unwrap_or_default(),
    );
    format!("{:06}", n % 1_000_000)
}

/// End the question `id` at `expires` unless it ended before, then forget it [`LINGER`] later.
async fn watch(table: Weak<Mutex<Table>>, id: String, expires: Instant, ended: Arc<Notify>) {
    tokio::select! {
        _ = tokio::time::sleep_until(expires.into()) => {
            if let Some(t) = table.upgrade() {
                lock(&t).end(&id, State::Expired);
            }
        }
        _ = ended.notified() => {}
    }
    tokio::time::sleep(LINGER).await;
    if let Some(t) = table.upgrade() {
        let mut t = lock(&t);
        if t.entries.get(&id).is_some_and(|e| e.state != State::Open) {
            t.entries.remove(&id);
        }
    }
}

/// The pages of one turn's questions: when the turn ends (this is dropped, with the turn's
/// asker), each of them says so, so that a page read after the turn shows what became of it.
pub struct TurnPages {
    pages: Pages,
    ids: Mutex<Vec<String>>,
}

impl TurnPages {
    /// No page yet.
    pub fn new(pages: &Pages) -> TurnPages {
        TurnPages {
            pages: pages.clone(),
            ids: Mutex::default(),
        }
    }

    /// `page` is a question of this turn.
    pub fn add(&self, page: &OpenPage) {
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(page.id.clone());
    }
}

impl Drop for TurnPages {
    fn drop(&mut self) {
        let ids = std::mem::take(&mut *self.ids.lock().unwrap_or_else(|e| e.into_inner()));
        if !ids.is_empty() {
            self.pages.shared.table().turn_ended(&ids);
        }
    }
}

/// One question on its page. Dropping it withdraws the question (its page then says so).
pub struct OpenPage {
    /// `http://127.0.0.1:PORT/q/<id>`.
    pub url: String,
    /// The code the host shows beside the URL, which Approve needs ([`approval_code`]).
    pub code: String,
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

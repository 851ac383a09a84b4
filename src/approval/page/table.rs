//! The table of questions on pages and its rules (no IO): the one-time page, the cookie, the
//! token, expiry, closing, and what a page says once its question ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use subtle::ConstantTimeEq;
use tokio::sync::{Notify, oneshot};

use super::question::{Closed, PageDecision, PageQuestion};
use super::render;
use super::render::MAX_WRONG_CODES;

/// Most ended questions whose outcome is kept; the oldest goes first.
pub const MAX_ENDED: usize = 1024;

/// The cookie holding a page's secret.
const COOKIE: &str = "bridge_page";

/// The `Set-Cookie` value that gives the page of `id` its secret: sent back only to that
/// page's path, never readable by a script, never sent by another site's request.
pub(super) fn set_cookie(id: &str, secret: &str) -> String {
    format!("{COOKIE}={secret}; Path=/q/{id}; HttpOnly; SameSite=Strict")
}

/// The page's secret among the `Cookie` header values; `None` when absent or sent twice.
pub(super) fn cookie_value<'a>(values: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut found = values
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned());
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// The table, locked (a panic while it was held leaves it usable: every change is one step).
pub(super) fn lock(t: &Mutex<Table>) -> MutexGuard<'_, Table> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Open,
    Decided(PageDecision),
    Closed(Closed),
    Expired,
    /// [`MAX_WRONG_CODES`] wrong codes were typed: declined (the asker got Deny).
    WrongCodes,
}

pub(super) struct Entry {
    /// The question while it is open.
    pub(super) question: Option<Arc<PageQuestion>>,
    pub(super) bytes: usize,
    /// The code the host shows, which Approve needs.
    pub(super) code: String,
    /// Wrong codes given so far (at [`MAX_WRONG_CODES`] the question is declined).
    pub(super) wrong_codes: u8,
    pub(super) token: String,
    /// The page's secret, set by its first GET.
    pub(super) cookie: Option<String>,
    pub(super) state: State,
    pub(super) expires: Instant,
    pub(super) decided: Option<oneshot::Sender<PageDecision>>,
    pub(super) ended: Arc<Notify>,
    pub(super) ended_at: Option<Instant>,
    /// The turn that asked it has ended ([`crate::approval::page::TurnPages`]).
    pub(super) turn_ended: bool,
}

#[derive(Default)]
pub(super) struct Table {
    pub(super) entries: HashMap<String, Entry>,
    pub(super) open: usize,
    pub(super) open_bytes: usize,
}

/// What the server answers a request for a question.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PageReply {
    /// The question's page (200), with this `Set-Cookie` value when given.
    Page {
        html: String,
        cookie: Option<String>,
    },
    /// A notice: status, heading, sentence.
    Notice(u16, &'static str, String),
    /// `303 See Other` to the question's page (`/q/<id>`), which then says what happened.
    SeeOther(String),
}

pub(super) fn notice(status: u16, heading: &'static str, sentence: impl Into<String>) -> PageReply {
    PageReply::Notice(status, heading, sentence.into())
}

/// A new random secret: 256 bits from two v4 UUIDs (the system's CSPRNG), in hex.
pub(super) fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The start of an id, for logs.
pub(super) fn short(id: &str) -> &str {
    id.get(..6).unwrap_or(id)
}

/// The heading and sentence of a question that ended. Each says what became of the question
/// and only that, in the past tense: it stays true whatever codex and the turn did after.
/// Once the turn that asked has ended, the sentence says that too.
fn outcome(state: State, turn_ended: bool) -> (&'static str, String) {
    let (heading, sentence) = outcome_of(state);
    let sentence = match (turn_ended, state) {
        (false, _) => sentence.to_owned(),
        (true, State::Decided(PageDecision::Approve)) => "You approved this request on this page, and codex was told it may go on. Codex's turn has ended since: your host shows what it did. You can close this page.".to_owned(),
        (true, State::Decided(PageDecision::Deny)) => "You denied this request on this page: codex was told not to do it. Codex's turn has ended since: your host shows how. You can close this page.".to_owned(),
        (true, _) => format!("{sentence} Codex's turn has ended since."),
    };
    (heading, sentence)
}

fn outcome_of(state: State) -> (&'static str, &'static str) {
    match state {
        State::Decided(PageDecision::Approve) => (
            "Approved",
            "You approved this request on this page, and codex was told it may go on. What codex did then, and whether its turn has ended, your host shows. If your host still shows this question, press \"I'm done, continue\" there; you can close this page.",
        ),
        State::Decided(PageDecision::Deny) => (
            "Denied",
            "You denied this request on this page: codex was told not to do it. If your host still shows this question, press \"I'm done, continue\" there; you can close this page.",
        ),
        State::WrongCodes => (
            "Declined after three wrong codes",
            "Three wrong codes were typed on this page, so this question was declined: nothing was approved, and this page decides nothing more. If codex asks again, the code is in your host's dialog beside the page's address.",
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
            "Withdrawn: the turn ended",
            "This question was withdrawn before it was decided: the turn or the connection that asked it ended (finished, cancelled or interrupted). Nothing was approved.",
        ),
        State::Closed(Closed::Decided) => (
            "Decided",
            "This question was decided. You can close this page.",
        ),
        State::Expired => (
            "Expired",
            "This question expired before it was decided and was declined: nothing was approved.",
        ),
        State::Open => ("Open", "This question is open."),
    }
}

impl Table {
    /// End an open question; `false` when it was not open.
    pub(super) fn end(&mut self, id: &str, state: State) -> bool {
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
    pub(super) fn get(&mut self, id: &str, cookie: Option<&str>) -> PageReply {
        let Some(e) = self.current(id) else {
            return notice(
                404,
                "No such question",
                "No question has this address: it is mistyped, or the question ended long ago.",
            );
        };
        if e.state != State::Open {
            let (heading, sentence) = outcome(e.state, e.turn_ended);
            return notice(410, heading, sentence);
        }
        let question = e.question.clone().unwrap_or_else(unreachable_question);
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
        PageReply::Page {
            html: render::question(id, &e.token, &question, e.wrong_codes),
            cookie: set.map(|c| set_cookie(id, &c)),
        }
    }

    /// A POST of the page's form.
    pub(super) fn decide(
        &mut self,
        id: &str,
        cookie: Option<&str>,
        token: Option<&str>,
        decision: Option<&str>,
        code: Option<&str>,
    ) -> PageReply {
        let Some(e) = self.current(id) else {
            return notice(404, "No such question", "No question has this address.");
        };
        match e.state {
            State::Open => {}
            State::Decided(_) | State::Closed(Closed::Decided) | State::WrongCodes => {
                let (heading, sentence) = outcome(e.state, e.turn_ended);
                return notice(409, heading, sentence);
            }
            _ => {
                let (heading, sentence) = outcome(e.state, e.turn_ended);
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
        if d == PageDecision::Approve && !right_code(e, code) {
            e.wrong_codes = e.wrong_codes.saturating_add(1);
            tracing::warn!(
                page = short(id),
                wrong = e.wrong_codes,
                "a wrong code on a question's page"
            );
            if e.wrong_codes >= MAX_WRONG_CODES {
                if let Some(tx) = e.decided.take() {
                    let _ = tx.send(PageDecision::Deny);
                }
                self.end(id, State::WrongCodes);
            }
            return PageReply::SeeOther(format!("/q/{id}"));
        }
        if let Some(tx) = e.decided.take() {
            let _ = tx.send(d);
        }
        self.end(id, State::Decided(d));
        let (heading, sentence) = outcome(State::Decided(d), false);
        notice(200, heading, sentence)
    }

    /// The turn that asked `ids` ended: their pages say so from now on.
    pub(super) fn turn_ended(&mut self, ids: &[String]) {
        for id in ids {
            if let Some(e) = self.entries.get_mut(id) {
                e.turn_ended = true;
            }
        }
    }

    /// Forget the oldest ended questions until there is room for one more entry.
    pub(super) fn make_room(&mut self) {
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

/// Whether `code` (trimmed) is the code the host shows, compared in constant time.
fn right_code(e: &Entry, code: Option<&str>) -> bool {
    let given = code.map(str::trim).unwrap_or_default();
    bool::from(e.code.as_bytes().ct_eq(given.as_bytes()))
}

/// An open entry is never without its question.
fn unreachable_question() -> Arc<PageQuestion> {
    Arc::new(PageQuestion {
        title: String::new(),
        fields: vec![],
        grants: String::new(),
    })
}

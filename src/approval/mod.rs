//! The approval room: everything about a question codex puts to a person, in one place.
//!
//! - [`question`] (re-exported here): what a person is asked to decide ([`Question`]) and the
//!   only decisions there are ([`Decision`], recorded as a [`DecisionRecord`]); pure.
//! - [`asked`] (re-exported here): a question handed to whoever answers it, with its deadline
//!   ([`Asked`]), and the answerer of a turn ([`Asker`]).
//! - [`from_codex`]: codex's app-server requests read into questions, and the answer line each
//!   decision becomes.
//! - [`message`]: the whole text a person reads of a question.
//! - [`unasked`]: every rule that declines a question without asking a person.
//! - [`screen`]: a question on its way to the person, screened: declined without asking when it
//!   cannot be shown as it is or may not be asked; a file change's answer held until its paths
//!   are checked again with the server's other processes frozen.
//! - [`page`]: the loopback page where a person reads a whole question and decides it.
//! - [`ask`]: the channels that ask a person (a form, a 2026-07-28 call's rounds, a task's input
//!   request, the client waiting on a background turn, the page), what each host shows
//!   ([`ask::Host`]), and the one outcome of asking ([`ask::Asking`]).
//!
//! Layers: `question` and `asked` sit below the codex layer (both sides name them), `from_codex`,
//! `screen` and `page` beside the spawner, `ask` with the MCP layer. The layering test keeps the
//! room whole: no file outside it names an elicitation of rmcp's or declines a question without
//! asking ([`DecisionRecord::unasked`]).

pub mod ask;
mod asked;
pub mod from_codex;
pub mod message;
pub mod page;
mod question;
pub mod screen;
pub mod unasked;

pub use asked::{Asked, Asker, Given, Held, Reply};
pub use question::{
    CHANGE_LABEL, Decision, DecisionRecord, FileSummary, Input, InputQuestion, LONGEST_WAIT,
    MAX_DIFF_CHARS, MAX_ENTRIES, MAX_FIELD_CHARS, MAX_RECORD_CHARS, Question, capped, whole,
};

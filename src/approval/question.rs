//! What a person is asked to decide, and the only decisions there are: below both the codex
//! layer, which reads codex's requests into a [`Question`] and answers codex from a
//! [`Decision`], and the MCP layer, which shows a question to a person and brings back the
//! decision. Pure: no IO.
//!
//! - [`Question`]: a command to run outside the sandbox, file changes (with what each writes),
//!   permissions, questions the model asks, a nested server's form. [`Question::lines`] is what
//!   a person must see to decide, unredacted (the MCP side redacts every string before a person
//!   sees it); [`Question::unreadable`] says whether every text passes [`shown::check`].
//! - [`Decision`] has two values, accept once and decline; [`DecisionRecord`] is what was asked
//!   and decided, for the turn's result and the log.
//! - [`crate::approval::Asked`] is a question handed to an answerer with a deadline.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::security::paths;
use crate::security::redact::ClientSecrets;
use crate::security::shown::{self, Unreadable};

/// Longest text kept from one field of a request (a command, a reason, a message).
pub const MAX_FIELD_CHARS: usize = 8 * 1024;
/// Most files, questions or permission entries kept from one request.
pub const MAX_ENTRIES: usize = 64;
/// Most characters of the diffs of one file change, all files together: a change is asked
/// only with what it writes, shown whole (and each diff within [`shown::DIFF`]).
pub const MAX_DIFF_CHARS: usize = 32 * 1024;
/// Longest `asked` text kept in a [`DecisionRecord`].
pub const MAX_RECORD_CHARS: usize = 2 * 1024;
/// The longest a question may wait for a person (the `approval_timeout_ms` setting's maximum).
pub const LONGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// `s`, cut at [`MAX_FIELD_CHARS`] characters with a note that says so.
pub fn capped(s: &str) -> String {
    match s.char_indices().nth(MAX_FIELD_CHARS) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}… [cut at {MAX_FIELD_CHARS} characters]", &s[..cut]),
    }
}

/// `s` when it can be shown whole (not longer than [`MAX_FIELD_CHARS`]).
pub fn whole(s: &str) -> Option<String> {
    (s.chars().count() <= MAX_FIELD_CHARS).then(|| s.to_owned())
}

/// How one file changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSummary {
    pub path: String,
    /// `add`, `delete` or `update` (`update → NEW` when moved).
    pub kind: String,
    /// Where it moves to, when it does.
    pub move_to: Option<String>,
    pub added: usize,
    pub removed: usize,
    /// What will be written, as codex announced it: the whole content of a new file, the
    /// unified diff of an update, the content of a deleted file.
    pub diff: String,
    /// Set by whoever runs the turn when the path (or where it moves to) resolves, through
    /// symbolic links, outside the working directory ([`Question::files_mut`]).
    pub resolves_outside: bool,
}

/// One question of `item/tool/requestUserInput`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputQuestion {
    pub id: String,
    pub header: String,
    pub question: String,
    /// The labels offered (the person may also write their own answer when `other` is set).
    pub options: Vec<String>,
    pub other: bool,
    /// Codex marks the answer secret (a password): it is never logged.
    pub secret: bool,
}

/// What a person is asked to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Question {
    /// Run a command outside the sandbox (once).
    Command {
        command: String,
        cwd: Option<String>,
        reason: Option<String>,
        /// The host of a network access codex asks about, if that is the question.
        network_host: Option<String>,
        /// The turn's working directory (set by whoever runs the turn, [`Question::set_workdir`]):
        /// a command directory outside it is named as such.
        workdir: Option<String>,
        /// Set by whoever runs the turn when `cwd` resolves, through symbolic links, outside
        /// the working directory.
        cwd_resolves_outside: bool,
    },
    /// Apply file changes.
    FileChange {
        reason: Option<String>,
        /// A directory codex asks write access to for the rest of the session: never granted
        /// (an accept covers only these changes).
        grant_root: Option<String>,
        /// The files, when codex announced the item before asking; `None` if it did not.
        files: Option<Vec<FileSummary>>,
        /// The turn's working directory (set by whoever runs the turn, [`Question::set_workdir`]):
        /// a path outside it is named as such; unknown, every path is.
        workdir: Option<String>,
    },
    /// Extra permissions for this turn.
    Permissions {
        cwd: String,
        reason: Option<String>,
        read: Vec<String>,
        write: Vec<String>,
        network: bool,
    },
    /// Questions the model asks the user.
    UserInput { questions: Vec<InputQuestion> },
    /// A nested MCP server's elicitation.
    McpElicitation {
        server: String,
        message: String,
        /// The form's JSON schema (`form` mode); `None` for a URL or an `openai/form`.
        form: Option<Value>,
        url: Option<String>,
    },
}

/// The (label, text) pairs of [`Question::lines`]; a field without a value has no line.
#[derive(Default)]
struct Lines(Vec<(&'static str, String)>);

impl Lines {
    fn push(&mut self, label: &'static str, text: Option<String>) {
        if let Some(text) = text {
            self.0.push((label, text));
        }
    }
}

/// Where a changed file lies, as a person must read it: nothing inside the working directory;
/// outside it (or resolving outside, or moving outside), or with no working directory known,
/// said so.
fn file_place(f: &FileSummary, workdir: &Option<String>) -> String {
    let outside = |p: &str| match workdir {
        Some(w) => !inside(p, w),
        None => true,
    };
    let out = f.resolves_outside || outside(&f.path) || f.move_to.as_deref().is_some_and(outside);
    match (out, workdir) {
        (false, _) => String::new(),
        (true, Some(w)) => format!(" — OUTSIDE the working directory {w}"),
        (true, None) => " — the working directory is not known".to_owned(),
    }
}

/// The lines of a file-change question: the working directory (when known), the reason, the
/// list of files, what each change writes (labelled [`CHANGE_LABEL`]) and the root that is not
/// granted.
fn file_change_lines(
    out: &mut Lines,
    reason: &Option<String>,
    grant_root: &Option<String>,
    files: &Option<Vec<FileSummary>>,
    workdir: &Option<String>,
) {
    // where the change is made, as every other question says it (a relative path is under it)
    out.push("Working directory", workdir.clone());
    out.push("Codex's reason", reason.clone());
    let listed = match files {
        None => "(codex did not say which files)".to_owned(),
        Some(f) if f.is_empty() => "(none listed)".to_owned(),
        Some(f) => f
            .iter()
            .map(|f| {
                format!(
                    "{} ({}, +{} -{}){}",
                    f.path,
                    f.kind,
                    f.added,
                    f.removed,
                    file_place(f, workdir)
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    out.push("Files", Some(listed));
    for f in files.iter().flatten() {
        let place = file_place(f, workdir);
        out.push(
            CHANGE_LABEL,
            Some(format!("{} ({}){place}\n{}", f.path, f.kind, shown_diff(f))),
        );
    }
    out.push(
        "Not granted",
        grant_root
            .as_ref()
            .map(|r| format!("write access to {r} for the rest of the session")),
    );
}

/// The label of one file's diff in [`Question::lines`] (shown within [`shown::DIFF`]).
pub const CHANGE_LABEL: &str = "Change";

/// Whether `path` (absolute, lexically) lies in `workdir`: a relative path, or one with `..`
/// climbing out, is not.
fn inside(path: &str, workdir: &str) -> bool {
    let dir = std::path::Path::new(workdir);
    std::path::Path::new(path).is_absolute()
        && paths::normalize(dir, path).is_some_and(|p| paths::is_within(&p, dir))
}

/// What a change writes, as a person reads it: an update's unified diff as codex gives it, a
/// new file's content with `+` before each line, a deleted file's with `-`.
fn shown_diff(f: &FileSummary) -> String {
    let prefixed = |mark: char| {
        f.diff
            .lines()
            .map(|l| format!("{mark}{l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match f.kind.as_str() {
        "add" => prefixed('+'),
        "delete" => prefixed('-'),
        _ => f.diff.trim_end_matches('\n').to_owned(),
    }
}

impl Question {
    /// Tell a file-change or command question the turn's working directory (other questions
    /// ignore it).
    pub fn set_workdir(&mut self, dir: &std::path::Path) {
        if let Question::FileChange { workdir, .. } | Question::Command { workdir, .. } = self {
            *workdir = Some(dir.display().to_string());
        }
    }

    /// Mark a command question's directory as resolving outside the working directory
    /// (through symbolic links); other questions ignore it.
    pub fn set_cwd_resolves_outside(&mut self, outside: bool) {
        if let Question::Command {
            cwd_resolves_outside,
            ..
        } = self
        {
            *cwd_resolves_outside = outside;
        }
    }

    /// The files of a file-change question, to mark those that resolve outside the working
    /// directory (empty for other questions).
    pub fn files_mut(&mut self) -> &mut [FileSummary] {
        match self {
            Question::FileChange { files: Some(f), .. } => f,
            _ => &mut [],
        }
    }

    /// Why the question cannot be shown as it is ([`shown::check`] of every text a person would
    /// read: each field within [`shown::FIELD`], each diff within [`shown::DIFF`], all fields
    /// but the diffs within [`shown::MAX_FORM_LINES`] lines), if it cannot.
    pub fn unreadable(&self) -> Option<Unreadable> {
        let mut lines = 1;
        for (label, text) in self.lines() {
            let limits = if label == CHANGE_LABEL {
                shown::DIFF
            } else {
                lines += shown::lines(&text) + 1;
                shown::FIELD
            };
            if let Err(why) = shown::check(&text, &limits) {
                return Some(why);
            }
        }
        if lines > shown::MAX_FORM_LINES {
            return Some(Unreadable::TooManyLines(shown::MAX_FORM_LINES));
        }
        // the texts of a form a person fills in (a nested server's schema, the options)
        let mut extra: Vec<&str> = Vec::new();
        fn strings_of<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
            match v {
                Value::String(s) => out.push(s),
                Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
                Value::Object(m) => m.iter().for_each(|(k, x)| {
                    out.push(k);
                    strings_of(x, out)
                }),
                _ => {}
            }
        }
        if let Question::McpElicitation { form: Some(f), .. } = self {
            strings_of(f, &mut extra);
        }
        extra
            .into_iter()
            .find_map(|t| shown::check(t, &shown::FIELD).err())
    }

    /// A short title for the question.
    pub fn title(&self) -> &'static str {
        match self {
            Question::Command {
                network_host: Some(_),
                command,
                ..
            } if command.is_empty() => "Codex asks for network access",
            Question::Command { .. } => "Codex asks to run a command outside its sandbox",
            Question::FileChange { .. } => "Codex asks to change files",
            Question::Permissions { .. } => "Codex asks for more permissions for this turn",
            Question::UserInput { .. } => "Codex asks you a question",
            Question::McpElicitation { .. } => "A nested MCP server asks for input",
        }
    }

    /// What a person must see to decide, as (label, text) pairs, unredacted: redact every text
    /// before it leaves the bridge.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let mut out = Lines::default();
        match self {
            Question::Command {
                command,
                cwd,
                reason,
                network_host,
                workdir,
                cwd_resolves_outside,
            } => {
                out.push("Command", (!command.is_empty()).then(|| command.clone()));
                out.push("Network host", network_host.clone());
                let place = |c: &String| match workdir {
                    Some(w) if *cwd_resolves_outside || !inside(c, w) => {
                        format!("{c} — OUTSIDE the working directory {w}")
                    }
                    _ => c.clone(),
                };
                out.push("Working directory", cwd.as_ref().map(place));
                out.push("Codex's reason", reason.clone());
            }
            Question::FileChange {
                reason,
                grant_root,
                files,
                workdir,
            } => file_change_lines(&mut out, reason, grant_root, files, workdir),
            Question::Permissions {
                cwd,
                reason,
                read,
                write,
                network,
            } => {
                out.push("Working directory", Some(cwd.clone()));
                out.push("Codex's reason", reason.clone());
                out.push("Read", (!read.is_empty()).then(|| read.join("\n")));
                out.push("Write", (!write.is_empty()).then(|| write.join("\n")));
                out.push("Network", network.then(|| "enabled".to_owned()));
            }
            Question::UserInput { questions } => {
                for q in questions {
                    let mut text = format!("{}: {}", q.header, q.question);
                    if !q.options.is_empty() {
                        text.push_str(&format!(" [{}]", q.options.join(" | ")));
                    }
                    out.push("Question", Some(text));
                }
            }
            Question::McpElicitation {
                server,
                message,
                url,
                ..
            } => {
                out.push("Server", Some(server.clone()));
                out.push("Message", Some(message.clone()));
                out.push("Link", url.clone());
            }
        }
        out.0
    }

    /// Whether the person's accept needs input (answers, form content), not only a yes.
    pub fn needs_input(&self) -> bool {
        matches!(
            self,
            Question::UserInput { .. } | Question::McpElicitation { .. }
        )
    }
}

/// The only two decisions: there is no "always".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Decision {
    /// This request only, this time.
    AcceptOnce,
    Decline,
}

/// What was asked and decided, for the turn's structured result (`approvals`) and the log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// The question as the person saw it (redacted, cut).
    pub asked: String,
    pub decision: Decision,
    /// Whether a person decided (an accept, a decline or a dismissal), not a timeout, an error
    /// or a client that cannot be asked.
    pub by_person: bool,
    /// Why it is a decline when no person decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

impl DecisionRecord {
    /// The record of a question declined without asking anyone, for `reason`. Its `asked` is
    /// the question made [`shown::visible`] (redacted with `secrets`, every character a form
    /// cannot show written as an escape, one line per field), so the record never carries what
    /// could not be shown.
    pub fn unasked(question: &Question, secrets: &ClientSecrets, reason: &'static str) -> Self {
        let mut asked = question.title().to_owned();
        for (label, value) in question.lines() {
            asked.push_str(&format!(
                "\n{label}: {}",
                shown::visible(&secrets.redact(&value), 400)
            ));
        }
        let asked = match asked.char_indices().nth(MAX_RECORD_CHARS) {
            None => asked,
            Some((i, _)) => format!("{}…", &asked[..i]),
        };
        DecisionRecord {
            asked,
            decision: Decision::Decline,
            by_person: false,
            reason: Some(reason),
        }
    }
}

/// What a person typed, for the questions that need input.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Answers of `item/tool/requestUserInput`, by question id.
    Answers(BTreeMap<String, String>),
    /// The content of a nested server's form: primitive values only.
    Form(Map<String, Value>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_change_names_its_working_directory_first() {
        let mut q = Question::FileChange {
            reason: Some("fix".into()),
            grant_root: None,
            files: Some(vec![]),
            workdir: None,
        };
        assert!(!q.lines().iter().any(|(l, _)| *l == "Working directory"));
        q.set_workdir(std::path::Path::new("/w"));
        assert_eq!(q.lines()[0], ("Working directory", "/w".to_owned()));
    }
}

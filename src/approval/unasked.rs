//! The rules that decline a turn's question without asking a person (the channels in `ask/`
//! also decline what none of them can show, or when nobody waits): a question whose
//! texts cannot be shown as they are, or whose message is longer than a form shows whole
//! ([`unshowable`]); an escalation whose model call may not be put to a person at all
//! ([`escalable`]: not when it asked for a terminal, which the approval request itself does not
//! say: on both codex versions only the model's call, in codex's rollout, carries `tty`); and the
//! screen of a question codex asked in a turn, which applies both ([`in_turn`]). A request that
//! is not a question at all (a kind never asked, a malformed one) is refused where codex's
//! request is read (`from_codex::NotAQuestion`). Pure.

use crate::approval::Question;
use crate::approval::message;
use crate::codex::rollout::ModelCall;
use crate::security::redact::ClientSecrets;

/// Whether the screen of a turn's question needs the model's call codex recorded for it
/// ([`in_turn`]): a command's (an escalation names its model call).
pub fn needs_model_call(question: &Question) -> bool {
    matches!(question, Question::Command { command, .. } if !command.is_empty())
}

/// Why a question codex asked in a turn is declined without asking, if it is: a text that
/// cannot be shown as it is (`Question::unreadable`), or a command whose model call (`calls`:
/// every record codex made under its item, read when [`needs_model_call`]) may not be put to a
/// person ([`escalable`]).
pub fn in_turn(question: &Question, calls: &[ModelCall]) -> Option<&'static str> {
    if let Some(why) = question.unreadable() {
        return Some(why.reason());
    }
    needs_model_call(question)
        .then(|| escalable(calls).err())
        .flatten()
}

/// Tools whose calls run one command to its end, with no terminal the model can type into
/// afterwards (`exec_command` only with `tty` false or absent).
const ONE_SHOT_TOOLS: &[&str] = &["exec_command", "shell", "shell_command", "local_shell_call"];

/// Whether a person may be asked to run, outside the sandbox, the command of the model's call
/// as codex recorded it (`calls`: every record under the approval's item id). Not when it asked
/// for a terminal (`tty: true`): the process would stay for the model to type into after the
/// approval, unsandboxed (codex 0.145.0 then runs every later `write_stdin` without asking).
/// Not either when the call cannot be told apart: none recorded, more than one, or a tool not
/// known to run one command to its end.
pub fn escalable(calls: &[ModelCall]) -> Result<(), &'static str> {
    match calls {
        [] => Err(
            "not asked: codex's record of the model's call could not be read, so whether it opens a terminal is not known",
        ),
        [call] if call.tty == Some(true) => Err(
            "not asked: the command asks for a terminal (tty), which would stay open for the model to type into, outside the sandbox, after the approval",
        ),
        [call] if ONE_SHOT_TOOLS.contains(&call.name.as_str()) => Ok(()),
        [_] => Err(
            "not asked: the command comes from a tool that may leave a process running for the model after the approval",
        ),
        _ => Err(
            "not asked: codex recorded more than one call under this request's id, so what runs is not known",
        ),
    }
}

/// Why `question` cannot be put to a person as it is, if it cannot: a text that a form cannot
/// show as it is ([`Question::unreadable`], after redaction too), or a message longer than
/// [`message::MAX_MESSAGE_CHARS`]. Such a question is declined without asking, with this reason.
pub fn unshowable(question: &Question, secrets: &ClientSecrets) -> Option<&'static str> {
    if let Some(why) = question.unreadable() {
        return Some(why.reason());
    }
    let text = message::message(question, secrets);
    if text.chars().count() > message::MAX_MESSAGE_CHARS {
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

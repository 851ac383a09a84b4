//! The whole form of a question (pure): the message a person reads, with every field redacted
//! and the lines of a field that runs over several behind a gutter, the schema of what they fill
//! in, and why a question cannot be put to a person as it is ([`unshowable`]). What a host shows
//! of it is `super::budget`'s; asking is `super::elicit`'s.

use rmcp::model::{
    ElicitRequestParams, ElicitationSchema, PrimitiveSchemaDefinition, StringSchema,
};
use serde_json::Value;

use super::budget::APPROVE_FIELD;
use crate::question::Question;
use crate::security::redact::ClientSecrets;

/// Longest message sent to a client: a longer one is not sent (the question is declined), as
/// a message is never cut (the fields are bounded one by one before this).
pub const MAX_MESSAGE_CHARS: usize = 64 * 1024;

/// `s` cut after `max` characters, with `…` when cut.
pub(super) fn cut(s: &str, max: usize) -> String {
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

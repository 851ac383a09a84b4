//! The whole text a person reads of a question ([`message`]): its title and fields, each
//! redacted, the lines of a field that runs over several behind a [`GUTTER`]. A form carries it
//! whole or the question is not asked as a form ([`MAX_MESSAGE_CHARS`]). Pure.

use crate::approval::Question;
use crate::security::redact::ClientSecrets;

/// Longest message sent to a client: a longer one is not sent (the question is declined), as
/// a message is never cut (the fields are bounded one by one before this).
pub const MAX_MESSAGE_CHARS: usize = 64 * 1024;

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

//! A question as its page shows it, and how it ends (the types the page's callers name).

/// A question as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageQuestion {
    /// The heading, e.g. "Codex asks to run a command outside its sandbox".
    pub title: String,
    /// (label, text) in order: already redacted, not escaped (the page escapes). A field whose
    /// label starts with [`DIFF_LABEL`](crate::approval::page::DIFF_LABEL) is shown as a diff.
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
    /// The turn or the connection that asked it ended (and an [`OpenPage`](crate::approval::page::OpenPage) dropped).
    Withdrawn,
    /// Decided (on the page).
    Decided,
}

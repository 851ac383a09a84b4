//! Redaction of secrets from every string that leaves the process or is stored.
//! (Interface fixed; implementation in progress.)

use std::borrow::Cow;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// One compiled redactor: a single alternation regex plus an aho-corasick automaton over the
/// literal values of secret-named environment variables.
#[derive(Debug, Clone, Default)]
pub struct Redactor {}

impl Redactor {
    /// A redactor that also removes the literal values of the secret-named variables among `vars`
    /// (the server's own environment, read by the caller).
    pub fn from_vars<I, K, V>(_vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Redactor {}
    }

    /// Replace every secret in `text` with [`REDACTED`]. Borrowed when nothing matched.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(text)
    }
}

static GLOBAL: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();

/// Install the process-wide redactor (once, at start). Later calls are ignored.
pub fn install(redactor: Redactor) {
    let _ = GLOBAL.set(redactor);
}

/// The process-wide redactor; patterns only (no environment literals) until [`install`] ran.
pub fn global() -> &'static Redactor {
    GLOBAL.get_or_init(Redactor::default)
}

/// Redact with the process-wide redactor.
pub fn redact(text: &str) -> Cow<'_, str> {
    global().redact(text)
}

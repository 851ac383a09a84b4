//! The [`Redactor`]: the patterns plus an automaton over literal secret values (the server's
//! own secret-named environment variables), merged into one replacement; and the process-wide
//! redactor every output goes through ([`install`], [`global`], [`redact`]).

use std::borrow::Cow;
use std::fmt;

use aho_corasick::{AhoCorasick, MatchKind};

use super::patterns::{REDACTED, pattern_spans};

/// Minimum length in bytes of an environment value redacted as a literal.
pub(super) const MIN_LITERAL_LEN: usize = 8;

/// Upper-case fragments that make an environment variable name secret-named.
const SECRET_NAME_PARTS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// One compiled redactor: a single alternation regex plus an aho-corasick automaton over the
/// literal values of secret-named environment variables.
///
/// Cheap to clone (the automaton is reference counted, the regex is a process-wide static).
/// `Debug` prints only the number of literals, never the literals.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Automaton over the literal secret values; `None` when there are none.
    pub(super) literals: Option<AhoCorasick>,
    /// How many literal forms the automaton holds (for `Debug`).
    pub(super) literal_count: usize,
    /// The literal forms themselves (sorted, deduplicated), to merge redactors.
    values: std::sync::Arc<[String]>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("literals", &self.literal_count)
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// A redactor that also removes the literal values of the secret-named variables among `vars`
    /// (the server's own environment, read by the caller).
    ///
    /// A variable is secret-named when its name contains, case-insensitively, one of `KEY`,
    /// `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PASS`, `CREDENTIAL`, `AUTH`, `COOKIE`,
    /// `SESSION` or `PRIVATE`. Values shorter than 8 bytes are ignored (they would redact
    /// common words). Each value is matched raw and in its JSON-escaped form.
    pub fn from_vars<I, K, V>(vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Redactor::from_values(secret_values(vars))
    }

    /// A redactor over literal `values` (each raw and JSON-escaped), without any check.
    pub(super) fn from_values(values: impl IntoIterator<Item = String>) -> Self {
        let mut forms: Vec<String> = Vec::new();
        for value in values {
            let escaped = json_escaped(&value);
            if escaped != value {
                forms.push(escaped);
            }
            forms.push(value);
        }
        Redactor::from_literals(forms)
    }

    fn from_literals(mut values: Vec<String>) -> Self {
        values.sort_unstable();
        values.dedup();
        if values.is_empty() {
            return Redactor::default();
        }
        // Past a few kilobytes of values, a contiguous NFA: it builds in time linear in their
        // length, where the DFA the builder would pick takes seconds and megabytes.
        let total: usize = values.iter().map(String::len).sum();
        let kind = (total > 1024).then_some(aho_corasick::AhoCorasickKind::ContiguousNFA);
        let literals = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(kind)
            .build(&values)
            // Only fails past internal size limits, far beyond any environment.
            .expect("aho-corasick over environment values builds");
        Redactor {
            literals: Some(literals),
            literal_count: values.len(),
            values: values.into(),
        }
    }

    /// A redactor that removes what either removes.
    pub fn merged(&self, other: &Redactor) -> Redactor {
        if other
            .values
            .iter()
            .all(|v| self.values.binary_search(v).is_ok())
        {
            return self.clone();
        }
        let mut values = self.values.to_vec();
        values.extend(other.values.iter().cloned());
        Redactor::from_literals(values)
    }

    /// Replace every secret in `text` with [`REDACTED`]. Borrowed when nothing matched.
    ///
    /// Literal environment values and patterns are both matched on `text`; overlapping finds
    /// become one [`REDACTED`]. See the module documentation for what is (and is not) a secret.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let spans = self.add_literal_spans(pattern_spans(text), text);
        replace_spans(text, &spans)
    }

    /// `spans` (sorted, disjoint) plus this redactor's literal finds in `text`.
    pub(super) fn add_literal_spans(
        &self,
        spans: Vec<(usize, usize)>,
        text: &str,
    ) -> Vec<(usize, usize)> {
        let Some(literals) = &self.literals else {
            return spans;
        };
        let mut found = literals
            .find_iter(text)
            .map(|m| (m.start(), m.end()))
            .peekable();
        if found.peek().is_none() {
            return spans;
        }
        union(&spans, found)
    }
}

/// `text` with every span (sorted, disjoint) replaced by [`REDACTED`]; borrowed when none.
pub(super) fn replace_spans<'a>(text: &'a str, spans: &[(usize, usize)]) -> Cow<'a, str> {
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut copied = 0;
    for &(start, end) in spans {
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = end;
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Merge two sorted lists of non-overlapping spans, coalescing overlaps.
fn union(a: &[(usize, usize)], b: impl Iterator<Item = (usize, usize)>) -> Vec<(usize, usize)> {
    let mut b = b.peekable();
    let mut a = a.iter().copied().peekable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(a.len());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
            (Some(_), Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, _) => b.next(),
        };
        let Some((start, end)) = next else {
            return out;
        };
        match out.last_mut() {
            Some(last) if start < last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
}

/// The values of the secret-named variables among `vars` that are long enough to be redacted
/// as literals (see [`Redactor::from_vars`]), in the order given.
pub fn secret_values<I, K, V>(vars: I) -> Vec<String>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    vars.into_iter()
        .filter(|(name, value)| {
            value.as_ref().len() >= MIN_LITERAL_LEN && is_secret_name(name.as_ref())
        })
        .map(|(_, value)| value.as_ref().to_owned())
        .collect()
}

/// Whether an environment variable name marks its value as a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|part| upper.contains(part))
}

/// `value` as it appears inside a JSON string (without the quotes).
fn json_escaped(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .map_or_else(|| value.to_owned(), str::to_owned)
}

static GLOBAL: std::sync::RwLock<Option<std::sync::Arc<Redactor>>> = std::sync::RwLock::new(None);

/// Install the process-wide redactor (once, at start). Later calls are ignored.
pub fn install(redactor: Redactor) {
    let mut g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    if g.is_none() {
        *g = Some(std::sync::Arc::new(redactor));
    }
}

/// The process-wide redactor; patterns only (no environment literals) until [`install`] ran.
pub fn global() -> std::sync::Arc<Redactor> {
    if let Some(r) = GLOBAL.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return r.clone();
    }
    std::sync::Arc::new(Redactor::default())
}

/// Redact with the process-wide redactor.
pub fn redact(text: &str) -> Cow<'_, str> {
    let r = global();
    match r.redact(text) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(s) => Cow::Owned(s),
    }
}

#[cfg(test)]
mod tests {
    use super::super::client::ClientSecrets;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn from_vars_redacts_secret_named_values_only() {
        let redactor = Redactor::from_vars([
            ("OPENAI_API_KEY", "not-a-real-key-but-long"),
            ("MY_SERVICE_PASS", "p@ss w0rd \"q\""),
            ("PATH", "/usr/local/bin:/usr/bin"),
            ("GITHUB_TOKEN", "short"),
            ("HOME", "/home/alice"),
        ]);
        let out = redactor.redact(
            "key not-a-real-key-but-long, pw p@ss w0rd \"q\", json \"p@ss w0rd \\\"q\\\"\", \
             PATH /usr/local/bin:/usr/bin, short, /home/alice",
        );
        assert_eq!(
            out,
            "key [REDACTED], pw [REDACTED], json \"[REDACTED]\", PATH /usr/local/bin:/usr/bin, \
             short, /home/alice"
        );
        assert!(matches!(redactor.redact("nothing here"), Cow::Borrowed(_)));
        let debug = format!("{redactor:?}");
        assert!(!debug.contains("not-a-real-key"), "{debug}");
        assert_eq!(
            format!("{:?}", Redactor::from_vars([("PATH", "/bin:/usr/bin")])),
            format!("{:?}", Redactor::default())
        );
    }

    #[test]
    fn global_redacts_patterns() {
        assert_eq!(redact("token=abc123def"), "token=[REDACTED]");
        assert!(matches!(redact("plain"), Cow::Borrowed("plain")));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn planted_env_value_never_survives(
            prefix in any::<String>(),
            suffix in any::<String>(),
            value in "[!-~]{8,40}",
        ) {
            prop_assume!(!REDACTED.contains(value.as_str()));
            let redactor = Redactor::from_vars([("SERVICE_TOKEN", value.as_str())]);
            let text = format!("{prefix} {value} {suffix}");
            let out = redactor.redact(&text);
            prop_assert!(!out.contains(&value), "{text:?} -> {out:?}");
        }
    }

    // Found by mutation testing (scripts/mutants.sh; benches/README.md, "Mutation testing").

    #[test]
    fn debug_shows_how_many_literals_and_nothing_else() {
        assert_eq!(
            format!("{:?}", Redactor::default()),
            "Redactor { literals: 0, .. }"
        );
        // raw and JSON-escaped
        let r = Redactor::from_vars([("API_TOKEN", "abcdefgh\"ij")]);
        assert_eq!(format!("{r:?}"), "Redactor { literals: 2, .. }");
    }

    #[test]
    fn a_merged_redactor_removes_what_either_removes() {
        let a = Redactor::from_vars([("A_TOKEN", "first-secret-value")]);
        let b = Redactor::from_vars([("B_TOKEN", "second-secret-value")]);
        let m = a.merged(&b);
        assert_eq!(
            m.redact("first-secret-value second-secret-value"),
            "[REDACTED] [REDACTED]"
        );
        assert_eq!(format!("{:?}", m.merged(&a)), format!("{m:?}"));
    }

    #[test]
    fn literal_and_pattern_finds_are_merged_in_order() {
        let redactor = Redactor::from_vars([
            ("ONE_TOKEN", "literal-one-value"),
            ("TWO_TOKEN", "literal-two-value"),
            // also inside the pattern find `token=abc123def`: overlapping finds become one
            ("THREE_TOKEN", "abc123def"),
            // ends where a pattern find starts: adjacent finds stay two
            ("FOUR_TOKEN", "p@ss-w0rd-1/"),
        ]);
        assert_eq!(
            redactor.redact("literal-one-value token=abc123def literal-two-value"),
            "[REDACTED] token=[REDACTED] [REDACTED]"
        );
        assert_eq!(
            redactor.redact("token=xyz98765 literal-two-value"),
            "token=[REDACTED] [REDACTED]"
        );
        assert_eq!(
            redactor.redact("x p@ss-w0rd-1/ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 y"),
            "x [REDACTED][REDACTED] y"
        );
    }

    #[test]
    fn the_process_wide_redactor_is_installed_once() {
        // (the only unit test that changes the process-wide redactor)
        install(Redactor::from_vars([(
            "FIRST_TOKEN",
            "installed-literal-4c1d",
        )]));
        install(Redactor::from_vars([(
            "SECOND_TOKEN",
            "ignored-literal-9e2b",
        )]));
        assert_eq!(
            redact("a installed-literal-4c1d c ignored-literal-9e2b"),
            "a [REDACTED] c ignored-literal-9e2b"
        );
        // a client's secrets add to it for that client only
        let (client, _) = ClientSecrets::bounded(["client-literal-77aa"]);
        assert_eq!(
            client.redact("installed-literal-4c1d client-literal-77aa token=abc123def"),
            "[REDACTED] [REDACTED] token=[REDACTED]"
        );
        assert_eq!(redact("client-literal-77aa"), "client-literal-77aa");
    }
}

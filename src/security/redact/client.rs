//! The literal secrets of one client connection ([`ClientSecrets`]): bounded in count, length
//! and total, applied on top of the process-wide redactor to that connection's output only.

use std::borrow::Cow;
use std::fmt;

use super::patterns::{REDACTED, pattern_spans};
use super::redactor::{MIN_LITERAL_LEN, Redactor, global, replace_spans};

/// Most literal values one client connection has redacted ([`ClientSecrets::bounded`]).
pub const MAX_CLIENT_SECRETS: usize = 64;
/// Longest literal value, in bytes, one client connection has redacted.
pub const MAX_CLIENT_SECRET_BYTES: usize = 4096;
/// Most bytes of literal values, in all, one client connection has redacted.
pub const MAX_CLIENT_SECRETS_TOTAL: usize = 64 * 1024;

/// The literal secrets of one client connection (the values of its host's secret-named
/// variables, sent in its hello), applied on top of the process-wide redactor to that
/// connection's output only, and gone with the connection: they never join the process-wide
/// redactor, so a connection cannot make this process slower for others, nor remove a word
/// from another client's output.
///
/// The owning process's own client has none: its values are in the process-wide redactor.
#[derive(Clone, Default)]
pub struct ClientSecrets {
    literals: Redactor,
}

impl fmt::Debug for ClientSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSecrets")
            .field("literals", &self.literals.literal_count)
            .finish()
    }
}

/// What [`ClientSecrets::bounded`] left out (the values are never logged, only counted).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Ignored {
    /// Values longer than [`MAX_CLIENT_SECRET_BYTES`].
    pub too_long: usize,
    /// Values past [`MAX_CLIENT_SECRETS`] or [`MAX_CLIENT_SECRETS_TOTAL`].
    pub over_limit: usize,
}

impl Ignored {
    /// Whether anything was left out.
    pub fn any(&self) -> bool {
        self.too_long + self.over_limit > 0
    }
}

/// The values a client connection's literal secrets are made of ([`ClientSecrets::bounded`]):
/// those of 8 bytes or more, at most [`MAX_CLIENT_SECRET_BYTES`] each, then shortest first
/// within [`MAX_CLIENT_SECRETS`] and [`MAX_CLIENT_SECRETS_TOTAL`]; what is left out is counted.
pub fn within_client_bounds<I, S>(values: I) -> (Vec<String>, Ignored)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut ignored = Ignored::default();
    let mut candidates: Vec<&str> = Vec::new();
    let values: Vec<S> = values.into_iter().collect();
    for v in &values {
        let v = v.as_ref();
        if v.len() > MAX_CLIENT_SECRET_BYTES {
            ignored.too_long += 1;
        } else if v.len() >= MIN_LITERAL_LEN {
            candidates.push(v);
        }
    }
    candidates.sort_unstable_by(|a, b| a.len().cmp(&b.len()).then(a.cmp(b)));
    candidates.dedup();
    let (mut kept, mut total) = (Vec::new(), 0);
    for v in candidates {
        if kept.len() >= MAX_CLIENT_SECRETS || total + v.len() > MAX_CLIENT_SECRETS_TOTAL {
            ignored.over_limit += 1;
            continue;
        }
        total += v.len();
        kept.push(v.to_owned());
    }
    (kept, ignored)
}

impl ClientSecrets {
    /// A connection's secrets from the values it sent: shorter than 8 bytes are not secrets
    /// (as for the process's own variables); longer than [`MAX_CLIENT_SECRET_BYTES`], or past
    /// [`MAX_CLIENT_SECRETS`] values or [`MAX_CLIENT_SECRETS_TOTAL`] bytes (shortest first),
    /// are ignored and counted in the returned [`Ignored`].
    pub fn bounded<I, S>(values: I) -> (ClientSecrets, Ignored)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let (kept, ignored) = within_client_bounds(values);
        let literals = Redactor::from_values(kept);
        (ClientSecrets { literals }, ignored)
    }

    /// Whether there are none (nothing to add to the process-wide redactor).
    pub fn is_empty(&self) -> bool {
        self.literals.literals.is_none()
    }

    /// How many literal forms (raw and JSON-escaped) are redacted.
    pub fn len(&self) -> usize {
        self.literals.literal_count
    }

    /// Redact `text` for this client: the process-wide redactor (patterns and this process's
    /// own literals) and this connection's literals.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let spans = global().add_literal_spans(pattern_spans(text), text);
        let spans = self.literals.add_literal_spans(spans, text);
        replace_spans(text, &spans)
    }

    /// Only this connection's literals (for text already redacted by [`Self::redact`] or the
    /// process-wide redactor: the last pass over what this connection is sent).
    pub fn redact_literals<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let spans = self.literals.add_literal_spans(Vec::new(), text);
        replace_spans(text, &spans)
    }

    /// [`Self::redact`] over every string of a JSON value, keys included (a key that
    /// becomes the same as another after redaction replaces it).
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => {
                if let Cow::Owned(r) = self.redact(s) {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(k, mut v)| {
                        self.redact_json(&mut v);
                        (self.redact(&k).into_owned(), v)
                    })
                    .collect();
            }
            _ => {}
        }
    }

    /// [`Self::redact_literals`] over every string of a JSON value (keys stay).
    pub fn redact_literals_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if let Cow::Owned(r) = self.redact_literals(s) {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_literals_json(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.redact_literals_json(v)),
            _ => {}
        }
    }

    /// The last `cap` bytes (about: a cut secret's remains become one [`REDACTED`]) of a
    /// stream's tail `text`, redacted as [`Self::redact`] does BEFORE it is cut: a secret that
    /// straddles the cut is found whole in `text`, and its part after the cut is replaced, not
    /// kept. `text` should hold more than `cap` bytes (a margin as long as the longest secret).
    pub fn redact_tail(&self, text: &str, cap: usize) -> String {
        let spans = global().add_literal_spans(pattern_spans(text), text);
        let spans = self.literals.add_literal_spans(spans, text);
        let mut cut = text.len().saturating_sub(cap);
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        let mut out = String::with_capacity(text.len() - cut + REDACTED.len());
        let mut copied = cut;
        for &(start, end) in &spans {
            if end <= cut {
                continue;
            }
            out.push_str(&text[copied..start.max(cut)]);
            out.push_str(REDACTED);
            copied = end;
        }
        out.push_str(&text[copied..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::redactor::redact;
    use super::*;

    #[test]
    fn client_secrets_are_bounded_in_length_count_and_total() {
        let (none, ignored) = ClientSecrets::bounded(["short", "the", ""]);
        assert!(none.is_empty() && !ignored.any(), "{ignored:?}");
        let huge = "k".repeat(MAX_CLIENT_SECRET_BYTES + 1);
        let longest = "q".repeat(MAX_CLIENT_SECRET_BYTES);
        let (s, ignored) = ClientSecrets::bounded([huge.as_str(), longest.as_str()]);
        assert_eq!(
            ignored,
            Ignored {
                too_long: 1,
                over_limit: 0
            }
        );
        assert_eq!(s.len(), 1);
        assert_eq!(s.redact_literals(&longest), REDACTED);
        assert_eq!(
            s.redact_literals(&huge),
            huge,
            "a value past the limit is not redacted"
        );
        // count: the shortest are kept
        let many: Vec<String> = (0..MAX_CLIENT_SECRETS + 10)
            .map(|i| format!("secret-value-{i:04}"))
            .collect();
        let (s, ignored) = ClientSecrets::bounded(&many);
        assert_eq!(
            ignored,
            Ignored {
                too_long: 0,
                over_limit: 10
            }
        );
        assert_eq!(s.len(), MAX_CLIENT_SECRETS);
        // total bytes
        let big: Vec<String> = (0..40)
            .map(|i| format!("{i:02}{}", "x".repeat(4000)))
            .collect();
        let (s, ignored) = ClientSecrets::bounded(&big);
        assert_eq!(s.len(), MAX_CLIENT_SECRETS_TOTAL / 4002);
        assert_eq!(ignored.over_limit, 40 - MAX_CLIENT_SECRETS_TOTAL / 4002);
        // raw and JSON-escaped, duplicates once
        let (s, _) = ClientSecrets::bounded(["p@ss \"w0rd\"", "p@ss \"w0rd\""]);
        assert_eq!(s.len(), 2);
        assert_eq!(format!("{s:?}"), "ClientSecrets { literals: 2 }");
        let mut v = serde_json::json!({"p@ss \"w0rd\"": ["x p@ss \"w0rd\" y", 1]});
        s.redact_literals_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"p@ss \"w0rd\"": ["x [REDACTED] y", 1]})
        );
    }

    #[test]
    fn many_clients_with_large_keys_leave_the_process_wide_redactor_alone() {
        let before = format!("{:?}", global());
        let start = std::time::Instant::now();
        let key = "K".repeat(1 << 20);
        let clients: Vec<ClientSecrets> = (0..30)
            .map(|i| {
                let near_limit = format!("{i:02}{}", "z".repeat(MAX_CLIENT_SECRET_BYTES - 2));
                ClientSecrets::bounded([key.as_str(), near_limit.as_str(), "the", "password"]).0
            })
            .collect();
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(
            format!("{:?}", global()),
            before,
            "the process-wide redactor grew"
        );
        // one client's 8-byte word is redacted from its own output only
        assert_eq!(clients[0].redact("the password"), "the [REDACTED]");
        assert_eq!(
            ClientSecrets::default().redact("the password"),
            "the password"
        );
        assert_eq!(redact("the password"), "the password");
    }

    #[test]
    fn a_secret_across_the_tail_cut_loses_its_remains() {
        let (client, _) = ClientSecrets::bounded(["client-secret-0123456789abcdef"]);
        let none = ClientSecrets::default();
        let token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
        for (secrets, secret) in [(&client, "client-secret-0123456789abcdef"), (&none, token)] {
            for cut_inside in [1, 5, secret.len() - 1] {
                let text = format!("head {secret} and the rest");
                let keep = text.len() - "head ".len() - cut_inside;
                let tail = secrets.redact_tail(&text, keep);
                assert_eq!(
                    tail, "[REDACTED] and the rest",
                    "{secret} cut after {cut_inside}"
                );
            }
            // cut before or after it: a plain tail
            let text = format!("head {secret} and the rest");
            assert_eq!(secrets.redact_tail(&text, 12), "and the rest");
            assert_eq!(
                secrets.redact_tail(&text, 1000),
                format!("head {REDACTED} and the rest")
            );
        }
        // the cut lands on a character boundary
        assert_eq!(none.redact_tail("ééé", 3), "é");
    }
}

//! The pattern matcher: the one alternation of secret shapes (PEM blocks, prefixed tokens,
//! auth schemes, secret-named keys and flags, random base64), its scan of a text into the
//! spans to replace, and the checks after a match that the regex cannot express; with
//! [`REDACTED`], what every secret becomes (a replacement is never a secret again).

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The kind of secret an alternative of the pattern recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// Body of a PEM private key block.
    PrivateKey,
    /// Tokens whose prefix alone identifies them (JWT, GitHub, GitLab, Slack, Google, AWS id).
    Prefixed,
    /// `sk-…` / `sk_live_…`: needs a digit or capital after the prefix.
    SkKey,
    /// Credential after `Bearer ` / `Basic `.
    AuthScheme,
    /// Password in `scheme://user:password@host`.
    UrlPassword,
    /// Quoted value of a secret-named key or flag.
    QuotedValue,
    /// Unquoted value of a secret-named key or flag.
    BareValue,
    /// Run of base64 alphabet that may be a random secret.
    Base64,
}

/// Capture group name → rule. Every alternative of [`PATTERN_SOURCES`] has exactly one of these
/// groups, around the part that is replaced.
const GROUPS: &[(&str, Rule)] = &[
    ("pem", Rule::PrivateKey),
    ("jwt", Rule::Prefixed),
    ("sk", Rule::SkKey),
    ("gh", Rule::Prefixed),
    ("gl", Rule::Prefixed),
    ("slack", Rule::Prefixed),
    ("google", Rule::Prefixed),
    ("aws", Rule::Prefixed),
    ("bearer", Rule::AuthScheme),
    ("basic", Rule::AuthScheme),
    ("url", Rule::UrlPassword),
    ("flagq", Rule::QuotedValue),
    ("flag", Rule::BareValue),
    ("kvq1", Rule::QuotedValue),
    ("kvq2", Rule::QuotedValue),
    ("kvq3", Rule::QuotedValue),
    ("kv", Rule::BareValue),
    ("b64", Rule::Base64),
];

/// The alternatives, in priority order (at one start position the first that matches wins).
///
/// Performance notes (the whole alternation runs as one lazy DFA; with the base64 rule there is
/// no literal prefilter, so states per byte are what counts):
/// - word boundaries are ASCII (`(?-u:\b)`): a Unicode `\b` makes the lazy DFA give up on
///   non-ASCII text and fall back to a much slower engine;
/// - delimiters are ASCII classes (`[^\x00-\x20…]`, not `\s`), which keeps the NFA small and
///   the capture search on a match cheap;
/// - every alternative but the key-name one starts with a literal or a word boundary, and the
///   key-name one with a boundary, a separator or a camelCase hump: a case-insensitive word
///   allowed to start anywhere multiplies its partial matches with every other rule's and
///   thrashes the DFA cache.
const PATTERN_SOURCES: &[&str] = &[
    // PEM private key: keep the armour lines, redact the body: base64, line breaks (raw or
    // JSON-escaped) and `Proc-Type: ...` header lines. Without an END line (truncated output)
    // the body ends where the base64 ends.
    concat!(
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----",
        r"(?P<pem>(?:(?:Proc-Type|DEK-Info|Version|Comment|Hash|Charset):[^\r\n\\]*",
        r"|[A-Za-z0-9+/=]|\r|\n|\\r|\\n)*)",
        r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
    ),
    // JWT: header and payload are base64url JSON objects, so both start with `eyJ`.
    r"(?P<jwt>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)",
    // OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-api03-), Stripe (sk_live_, rk_test_).
    r"(?-u:\b)(?P<sk>sk-[A-Za-z0-9_-]{20,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,})",
    // GitHub personal, OAuth, app, user-to-server, refresh and fine-grained tokens.
    r"(?-u:\b)(?P<gh>gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    // GitLab personal access token.
    r"(?-u:\b)(?P<gl>glpat-[A-Za-z0-9_-]{20,})",
    // Slack bot, user, app, ... tokens.
    r"(?-u:\b)(?P<slack>xox[abposr]-[A-Za-z0-9-]{10,})",
    // Google API key.
    r"(?-u:\b)(?P<google>AIza[0-9A-Za-z_-]{35,})",
    // AWS access key id (long-term and temporary).
    r"(?-u:\b)(?P<aws>(?:AKIA|ASIA)[A-Z0-9]{16})(?-u:\b)",
    // HTTP auth schemes: keep the scheme word.
    r"(?-u:\b)(?i-u:bearer)[ \t]+(?P<bearer>[A-Za-z0-9._~+/=-]+)",
    // a JWT after `Basic ` is taken whole (the base64 alphabet has no `.`), also when base64
    // runs into it (`Basic xxxx/eyJ….eyJ….sig`): a credential runs over `.`-joined segments
    r"(?-u:\b)(?i-u:basic)[ \t]+(?P<basic>eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)?|[A-Za-z0-9+/=_-]+(?:\.[A-Za-z0-9+/=_-]+)*)",
    // Credentials in a URL: keep the user name.
    r#"://[^\x00-\x20:/@"'<>\\]*:(?P<url>[^\x00-\x20/@"'<>\\]+)@"#,
    // Secret-named command-line flags with a separate value.
    r#"--(?:[A-Za-z0-9]+-)*(?i-u:password|passwd|passphrase|token|secret|api-?key|client-secret|access-key|private-key)[ \t]+(?:(?i-u:bearer|basic)[ \t]+)?(?:"(?P<flagq>[^"\r\n]*)(?:"|(?mR:$))|(?P<flag>[^\x00-\x20"'<>|&;\\-][^\x00-\x20"'<>|&;\\]*))"#,
    // Assignments of secret-named keys. The secret word starts the key or follows `_`, `-`, `.`
    // or a camelCase hump (`OPENAI_API_KEY`, `x-api-key`, `accessToken`), and ends it (so
    // `input_tokens`, `tokenizer`, `api_key_id`, `tiktoken` do not count); then an optional
    // quote (maybe JSON-escaped); `=`, `:`, `:=` or `=>`; an optional `Bearer`/`Basic` scheme;
    // then a value that is `\"escaped\"`, "double", 'single' quoted or bare up to the next
    // delimiter. (Anchoring the word keeps the lazy DFA small: a case-insensitive word allowed
    // to start anywhere multiplies its states with every other partial match.)
    concat!(
        r"(?:(?:(?-u:\b)|[_.-])(?i-u:api[_-]?key|secret[_-]?(?:access[_-]?)?key|private[_-]?key",
        r"|access[_-]?key|client[_-]?secret|secret|password|passwd|passphrase|token|credentials?",
        r"|cookie)|[a-z0-9](?:Api[_-]?[Kk]ey|Secret(?:Access)?Key|PrivateKey|AccessKey",
        r"|ClientSecret|Secret|Password|Passwd|Passphrase|Token|Credentials?|Cookie))",
        r#"(?-u:\b)\\?["']?[ \t]*(?::=|=>|[:=])[ \t]*(?:(?i-u:bearer|basic)[ \t]+)?"#,
        r#"(?:\\"(?P<kvq1>[^"\\\r\n]*)(?:["\\]|(?mR:$))"#,
        r#"|"(?P<kvq2>(?:[^"\\\r\n]|\\.)*)(?:["\\]|(?mR:$))|'(?P<kvq3>[^'\r\n]*)(?:'|(?mR:$))"#,
        r#"|(?P<kv>\$\{[A-Za-z0-9_]*\}|[^\x00-\x20"'`,;\\&<>(){}\[\]=][^\x00-\x20"'`,;\\&<>(){}\[\]]*))"#,
    ),
    // Base64 blob; whether it looks random is decided after the match.
    r"(?-u:\b)(?P<b64>[A-Za-z0-9+/]{32,}={0,2})",
];

/// The compiled alternation and the group index → rule table.
struct Patterns {
    regex: Regex,
    groups: Vec<(usize, Rule)>,
}

/// Capacity of each lazy DFA cache (one per thread that redacts, filled as states are built).
/// With the default 2 MiB the cache is cleared often: the bench corpus scans about 10% and
/// source code about 60% slower; from 4 MiB on, no difference.
const DFA_CACHE_BYTES: usize = 4 << 20;

static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let source = PATTERN_SOURCES
        .iter()
        .map(|alt| format!("(?:{alt})"))
        .collect::<Vec<_>>()
        .join("|");
    let regex = RegexBuilder::new(&source)
        .dfa_size_limit(DFA_CACHE_BYTES)
        .build()
        .expect("redaction patterns compile");
    let groups = GROUPS
        .iter()
        .map(|&(name, rule)| {
            let index = regex
                .capture_names()
                .position(|n| n == Some(name))
                .expect("every redaction group exists");
            (index, rule)
        })
        .collect();
    Patterns { regex, groups }
});

/// The spans (sorted, disjoint) of `text` that the patterns say are secrets.
pub(super) fn pattern_spans(text: &str) -> Vec<(usize, usize)> {
    let patterns = &*PATTERNS;
    let mut spans = Vec::new();
    let mut locs = None;
    let mut at = 0;
    while at <= text.len() {
        let Some(m) = patterns.regex.find_at(text, at) else {
            break;
        };
        let (start, end) = (m.start(), m.end());
        let secret = if is_base64_rule_match(m.as_str()) {
            // Fast path for the most frequent candidate (hex digests, paths, blobs): the whole
            // match is the group, no capture search needed.
            Some((Rule::Base64, start, end))
        } else {
            let locs = locs.get_or_insert_with(|| patterns.regex.capture_locations());
            // Same start, same leftmost-first match: only the span is searched again.
            patterns
                .regex
                .captures_read_at(locs, text, start)
                .and_then(|_| {
                    patterns
                        .groups
                        .iter()
                        .find_map(|&(index, rule)| locs.get(index).map(|(s, e)| (rule, s, e)))
                })
        };
        match secret {
            Some((rule, s, e)) if is_secret(rule, text, start, s, e) => {
                // A random blob (or PEM body) glued by `_`, `-` or `.` to more token characters
                // is one token: it may have eaten the prefix of a key (`…Q7x/glpat-…`,
                // `…/eyJ….eyJ….sig`) whose rest no rule finds.
                let e = if matches!(rule, Rule::Base64 | Rule::PrivateKey) {
                    token_end(text.as_bytes(), e)
                } else {
                    e
                };
                spans.push((s, e));
                at = if end > start {
                    end.max(e)
                } else {
                    next_char(text, start)
                };
            }
            Some((Rule::Base64, s, e)) => at = resume_after_base64(text.as_bytes(), s, e),
            // Not a secret after all: keep it and rescan from the next character, so that a
            // secret inside the rejected candidate is still found.
            _ => at = next_char(text, start),
        }
    }
    spans
}

/// The end of the token that continues at `at` with `_`, `-` or `.` (`at` itself when it does
/// not).
fn token_end(text: &[u8], at: usize) -> usize {
    // (`-----END` closes a PEM block, it does not continue the body)
    if !matches!(text.get(at), Some(b'_' | b'-' | b'.')) || text[at..].starts_with(b"-----END") {
        return at;
    }
    at + text[at..]
        .iter()
        .take_while(|&&b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'+' | b'/' | b'=')
        })
        .count()
}

/// Where to resume scanning after the base64 candidate `text[start..end]` was rejected: the
/// first place inside it where a secret could start, found here rather than by rescanning each
/// of its sub-runs with the regex (slower, and quadratic on long `AAAA/AAAA/...` runs).
///
/// Inside a run of `[A-Za-z0-9+/]`, word boundaries exist only next to `/` and `+`, which split
/// it into segments. What can start inside the run:
/// - a base64 sub-run from such a boundary: checked here (only possible when the run has all
///   three character classes; such runs are rejected only when short, see [`LONG_BLOB`]);
/// - an AWS or Google key id (`AKIA`, `ASIA`, `AIza`) at a segment start;
/// - any other alternative needs, right after its start, a character the run does not have
///   (`-`, `_`, `.`, `:`, `=` before a value, a quote, a space), so it lies in the last segment.
fn resume_after_base64(text: &[u8], start: usize, end: usize) -> usize {
    let run = &text[start..end];
    let is_separator = |b: u8| b == b'/' || b == b'+';
    let has = |class: fn(&u8) -> bool| run.iter().any(class);
    let upper = has(u8::is_ascii_uppercase);
    let mixed = upper && has(u8::is_ascii_lowercase) && has(u8::is_ascii_digit);
    let mut last_separator = None;
    for (i, &b) in run.iter().enumerate().skip(1) {
        if mixed && is_separator(b) != is_separator(run[i - 1]) && looks_random_base64(&run[i..]) {
            return start + i;
        }
        if is_separator(b) {
            last_separator = Some(i);
        }
        if is_separator(run[i - 1])
            && [b"AKIA", b"ASIA", b"AIza"]
                .iter()
                .any(|p| run[i..].starts_with(*p))
        {
            return start + i;
        }
    }
    match last_separator {
        Some(i) => start + i,
        // One segment: a camelCase key (`…Token=`) or a JWT (`eyJ…`) may start anywhere in it,
        // but only with upper case.
        None if upper => start + 1,
        None => end,
    }
}

/// Whether a match of the whole alternation can only have come from the base64 alternative:
/// 32+ base64 characters and `=` padding, and not a Google key (`AIza`, listed earlier). Every
/// other alternative either has a character outside that alphabet (`_`, `-`, `.`, a space, a
/// separator) or is shorter.
fn is_base64_rule_match(m: &str) -> bool {
    let body = m.trim_end_matches('=');
    body.len() >= 32
        && m.len() - body.len() <= 2
        && !m.starts_with("AIza")
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// Byte index of the character after the one at `i` (or past the end).
fn next_char(text: &str, i: usize) -> usize {
    i + text[i..].chars().next().map_or(1, char::len_utf8)
}

/// The post-match checks the regex cannot express. `match_start` is the start of the whole
/// match, `start..end` the secret group.
fn is_secret(rule: Rule, text: &str, match_start: usize, start: usize, end: usize) -> bool {
    let value = &text[start..end];
    if value.is_empty() || value == REDACTED {
        return false;
    }
    match rule {
        Rule::PrivateKey | Rule::Prefixed | Rule::UrlPassword => true,
        Rule::SkKey => value
            .bytes()
            .skip(3)
            .any(|b| b.is_ascii_digit() || b.is_ascii_uppercase()),
        Rule::AuthScheme => value.len() >= 8 && !is_plain_word(value),
        Rule::QuotedValue => !is_placeholder(value),
        Rule::BareValue => {
            !is_placeholder(value) && !is_code(value, &text[match_start..start], &text[end..])
        }
        Rule::Base64 => looks_random_base64(value.as_bytes()),
    }
}

/// A word of prose: lower case, capitalised or all capitals, letters only.
fn is_plain_word(s: &str) -> bool {
    let Some((first, rest)) = s.as_bytes().split_first() else {
        return true;
    };
    first.is_ascii_alphabetic()
        && (rest.iter().all(u8::is_ascii_lowercase) || rest.iter().all(u8::is_ascii_uppercase))
}

/// Values of secret-named keys that are clearly not secrets.
fn is_placeholder(value: &str) -> bool {
    const WORDS: &[&str] = &[
        "null",
        "nil",
        "none",
        "true",
        "false",
        "undefined",
        "redacted",
    ];
    if WORDS.iter().any(|w| value.eq_ignore_ascii_case(w)) {
        return true;
    }
    // Short numbers (`token: 15`, `max_token=4096`): counts and limits, not credentials.
    if value.len() < 8 && value.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    // A reference to a variable, not its value: `$TOKEN`, `${OPENAI_API_KEY}`.
    let name = value
        .strip_prefix("${")
        .and_then(|v| v.strip_suffix('}'))
        .or_else(|| value.strip_prefix('$'));
    name.is_some_and(|n| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}

/// A run of letters and digits that reads as a token rather than a name: 20 or more, or 16 or
/// more mixing letters and digits (names that long carry `_`, `.` or `::`).
fn token_like(part: &str) -> bool {
    let n = part.len();
    n >= 16
        && part.bytes().all(|b| b.is_ascii_alphanumeric())
        && (n >= 20
            || (part.bytes().any(|b| b.is_ascii_digit())
                && part.bytes().any(|b| b.is_ascii_alphabetic())))
}

/// An unquoted value that is code, not data: a call or index (`token = env::var(...)`,
/// `api_key=get_key()`), or a type annotation after `:` (`api_key: String,`,
/// `password: Option<String>`, `token: string;`).
fn is_code(value: &str, key_and_separator: &str, after: &str) -> bool {
    // a part that reads as a token, not a name, makes it data whatever follows
    // (`password=HABCDEFGHIJKLMNQ7OPQR:x[0]`, found by fuzzing)
    if value.split([':', '.']).any(token_like) {
        return false;
    }
    let is_path = value
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':'));
    if !is_path {
        return false;
    }
    let next = after.trim_start_matches([' ', '\t']).bytes().next();
    if matches!(after.bytes().next(), Some(b'(' | b'[')) {
        return true;
    }
    let is_identifier = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    // a type annotation follows `:` only (not `=`, `:=`, `=>`, nor a flag's space)
    is_identifier
        && key_and_separator.contains(':')
        && !key_and_separator.contains('=')
        && matches!(next, Some(b'<' | b'>' | b',' | b';' | b')' | b'=' | b'|'))
}

/// A run of base64 alphabet with upper case, lower case and digits this long is a blob (key
/// material, an encoded file), whatever its statistics: no path or identifier is that long
/// without `.`, `-` or `_`.
const LONG_BLOB: usize = 200;

/// The post-check of the base64 rule: does this run of base64 alphabet look like a random
/// secret rather than a path, an identifier, a word or a hex digest?
fn looks_random_base64(candidate: &[u8]) -> bool {
    let padding = candidate.iter().rev().take_while(|&&b| b == b'=').count();
    let s = &candidate[..candidate.len() - padding];
    if s.len() < 32 {
        return false;
    }
    let has = |class: fn(&u8) -> bool| s.iter().any(class);
    if !(has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase) && has(u8::is_ascii_digit)) {
        return false;
    }
    let (mut hex_run, mut max_hex_run) = (0usize, 0usize);
    let mut lower_pairs = 0usize;
    let mut counts = [0u32; 128];
    let mut prev_lower = false;
    for &b in s {
        if b.is_ascii_hexdigit() {
            hex_run += 1;
            max_hex_run = max_hex_run.max(hex_run);
        } else {
            hex_run = 0;
        }
        let is_lower = b.is_ascii_lowercase();
        if is_lower && prev_lower {
            lower_pairs += 1;
        }
        prev_lower = is_lower;
        counts[usize::from(b & 0x7f)] += 1;
    }
    if s.len() >= LONG_BLOB {
        return true;
    }
    if max_hex_run >= 16 {
        return false;
    }
    // Words, paths and CamelCase identifiers are mostly runs of lower-case letters: in random
    // base64 about 1 pair in 6 is lower-lower, in `src/components/ButtonGroup` over 1 in 2.
    let pairs = s.len() - 1;
    if lower_pairs * 2 >= pairs {
        return false;
    }
    // Shannon entropy per character, against what random base64 of this length reaches
    // (about 4.6 bits at 32 characters, 5.2 at 64; the threshold is below the 0.1 percentile).
    let n = s.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum();
    entropy >= 0.78 * n.min(64.0).log2()
}

#[cfg(test)]
mod tests {
    use super::super::redactor::{Redactor, redact};
    use super::*;
    use proptest::prelude::*;
    use std::borrow::Cow;

    fn r(text: &str) -> String {
        Redactor::default().redact(text).into_owned()
    }

    /// Unchanged and borrowed.
    fn assert_kept(text: &str) {
        let out = Redactor::default().redact(text);
        assert!(
            matches!(out, Cow::Borrowed(_)),
            "changed: {text:?} -> {out:?}"
        );
    }

    #[test]
    fn patterns_compile() {
        assert_eq!(PATTERNS.groups.len(), GROUPS.len());
    }

    #[test]
    fn openai_and_anthropic_keys() {
        let key = "sk-proj-Q3vT9xLm2RkP8wZc4NbY7HdJ1sFg6AeU0oKi5Wq3rTyU";
        assert_eq!(
            r(&format!("OPENAI_API_KEY={key}")),
            "OPENAI_API_KEY=[REDACTED]"
        );
        assert_eq!(r(&format!("using {key} now")), "using [REDACTED] now");
        assert_eq!(
            r("key: \"sk-ant-api03-Xy7Qp2Lm9Rk4Tz8Wv1Nb6Hc3Jd0Fs5Ga-AbCdEf\""),
            "key: \"[REDACTED]\""
        );
        assert_eq!(
            r("legacy sk-Ab12Cd34Ef56Gh78Ij90Kl12Mn34 end"),
            "legacy [REDACTED] end"
        );
        assert_eq!(
            r("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
            "stripe [REDACTED]"
        );
    }

    #[test]
    fn bearer_token_keeps_scheme() {
        assert_eq!(
            r("Authorization: Bearer abc.def-ghi"),
            "Authorization: Bearer [REDACTED]"
        );
        assert_eq!(
            r("curl -H 'authorization: bearer 9f8e7d6c5b4a' https://api.example.com"),
            "curl -H 'authorization: bearer [REDACTED]' https://api.example.com"
        );
    }

    /// Found by fuzzing: a JWT right after `Basic ` lost only its first segment.
    #[test]
    fn a_jwt_after_basic_is_redacted_whole() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        assert_eq!(
            r(&format!("Authorization: Basic {jwt} next")),
            "Authorization: Basic [REDACTED] next"
        );
        assert_kept("basic authentication. Basic auth is weaker.");
        // found by fuzzing too: base64 running into a JWT kept the JWT's last two segments
        let text = "Basic DDDDDDDDDD/eyJ--Q7--------.eyJ--Q7--------.-------EAAAAAAAFBBBBBBBGQ7CCCCCCCH\"DDDD";
        assert_eq!(r(text), "Basic [REDACTED]\"DDDD");
    }

    #[test]
    fn basic_auth_header_and_url() {
        assert_eq!(
            r("Authorization: Basic dXNlcjpwYXNzd29yZA=="),
            "Authorization: Basic [REDACTED]"
        );
        assert_eq!(
            r("git clone https://alice:s3cr3tpass@example.com/x"),
            "git clone https://alice:[REDACTED]@example.com/x"
        );
        assert_eq!(
            r("postgres://app:hunter2@db:5432/app"),
            "postgres://app:[REDACTED]@db:5432/app"
        );
    }

    #[test]
    fn secret_named_assignments_keep_the_key() {
        let cases = [
            ("api_key=abc123def456", "api_key=[REDACTED]"),
            ("API_KEY: zyx987wvu654", "API_KEY: [REDACTED]"),
            (
                r#"{"password":"hunter2hunter2"}"#,
                r#"{"password":"[REDACTED]"}"#,
            ),
            (
                r#"{"password": "two words"}"#,
                r#"{"password": "[REDACTED]"}"#,
            ),
            (
                r#"{"token":"a\"b","n":1}"#,
                r#"{"token":"[REDACTED]","n":1}"#,
            ),
            ("token=f00ba7&page=2", "token=[REDACTED]&page=2"),
            ("secret=opensesame", "secret=[REDACTED]"),
            ("client_secret: 'abc def'", "client_secret: '[REDACTED]'"),
            ("access_token = ya29.a0AfH6SMB", "access_token = [REDACTED]"),
            ("auth_token:=xyzzy12345", "auth_token:=[REDACTED]"),
            (
                "export GITHUB_TOKEN=plainvalue",
                "export GITHUB_TOKEN=[REDACTED]",
            ),
            (
                "DB_PASSWORD=\"pa ss\" ./run",
                "DB_PASSWORD=\"[REDACTED]\" ./run",
            ),
            (
                "Cookie: sid=abc123; theme=dark",
                "Cookie: [REDACTED]; theme=dark",
            ),
            ("passwd => 'xyz12345'", "passwd => '[REDACTED]'"),
            ("apiKey: \"AbC123\"", "apiKey: \"[REDACTED]\""),
            ("x-api-key: abcdef123456", "x-api-key: [REDACTED]"),
            ("token: Bearer abc123", "token: Bearer [REDACTED]"),
            ("{accessToken: 'abc123'}", "{accessToken: '[REDACTED]'}"),
            (
                "const clientSecret = \"s3cr3t\";",
                "const clientSecret = \"[REDACTED]\";",
            ),
            ("cfg.password=letmein99", "cfg.password=[REDACTED]"),
            ("password: 123456789", "password: [REDACTED]"),
        ];
        for (input, want) in cases {
            assert_eq!(r(input), want, "input: {input}");
        }
    }

    #[test]
    fn escaped_json_inside_json() {
        let line =
            r#"{"aggregated_output":"{\"password\": \"hunter2hunter2\", \"user\": \"bob\"}\n"}"#;
        assert_eq!(
            r(line),
            r#"{"aggregated_output":"{\"password\": \"[REDACTED]\", \"user\": \"bob\"}\n"}"#
        );
        assert_eq!(
            r(r#""output":"export API_KEY=abc123xyz\nexit 0""#),
            r#""output":"export API_KEY=[REDACTED]\nexit 0""#
        );
    }

    #[test]
    fn command_line_flags() {
        assert_eq!(
            r("mysql --password hunter2hunter2 -u root"),
            "mysql --password [REDACTED] -u root"
        );
        assert_eq!(
            r("tool --api-key \"a b c\""),
            "tool --api-key \"[REDACTED]\""
        );
        assert_eq!(r("gh --with-token abc123def"), "gh --with-token [REDACTED]");
    }

    #[test]
    fn aws_keys() {
        assert_eq!(r("id AKIAIOSFODNN7EXAMPLE here"), "id [REDACTED] here");
        assert_eq!(r("ASIAY34FZKBOKMUTVV7A"), "[REDACTED]");
        assert_eq!(
            r("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "aws_secret_access_key = [REDACTED]"
        );
        // Unlabelled, the secret key is still caught as a random base64 blob.
        assert_eq!(
            r("creds: AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "creds: [REDACTED] [REDACTED]"
        );
    }

    #[test]
    fn github_tokens() {
        let body = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
        for prefix in ["ghp_", "gho_", "ghs_", "ghu_", "ghr_"] {
            assert_eq!(r(&format!("t {prefix}{body} x")), "t [REDACTED] x");
        }
        assert_eq!(
            r("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF"),
            "[REDACTED]"
        );
        assert_eq!(
            r(&format!(
                "https://x-access-token:ghs_{body}@github.com/o/r.git"
            )),
            "https://x-access-token:[REDACTED]@github.com/o/r.git"
        );
    }

    #[test]
    fn gitlab_slack_google() {
        assert_eq!(r("glpat-xY12_abCDef34-ghIJ56kl"), "[REDACTED]");
        assert_eq!(
            r("SLACK: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
            "SLACK: [REDACTED]"
        );
        assert_eq!(
            r("maps?key=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe&x=1"),
            "maps?key=[REDACTED]&x=1"
        );
        assert_eq!(r("AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe"), "[REDACTED]");
    }

    #[test]
    fn private_key_blocks() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v\nq1w2e3r4\n-----END RSA PRIVATE KEY-----";
        assert_eq!(
            r(&format!("key:\n{pem}\ndone")),
            "key:\n-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----\ndone"
        );
        // As it appears in JSON (escaped newlines).
        let escaped = r#""-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\n""#;
        assert_eq!(
            r(escaped),
            r#""-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]-----END OPENSSH PRIVATE KEY-----\n""#
        );
        assert_eq!(
            r(
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0Abc\n=ABCD\n-----END PGP PRIVATE KEY BLOCK-----"
            ),
            "-----BEGIN PGP PRIVATE KEY BLOCK-----[REDACTED]-----END PGP PRIVATE KEY BLOCK-----"
        );
        assert_eq!(
            r(
                "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B\n\nMIIE\n-----END RSA PRIVATE KEY-----"
            ),
            "-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----"
        );
        // Truncated output: the base64 after the header goes.
        assert_eq!(
            r("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
            "-----BEGIN PRIVATE KEY-----[REDACTED]"
        );
    }

    #[test]
    fn jwts() {
        let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(r(&format!("id_token {jwt}")), "id_token [REDACTED]");
        assert_eq!(r(&format!("Bearer {jwt}")), "Bearer [REDACTED]");
    }

    #[test]
    fn random_base64_blobs() {
        assert_eq!(
            r("hmac = Zq3L9vR2mX8pT4kW7nB1cY6hJ0sD5fG2aE9uQ3iO"),
            "hmac = [REDACTED]"
        );
        assert_eq!(
            r(r#"{"k":"hT7m2Qx9Lk4Vb8Rz1Nc6Wp3Fd0Gs5Yj+Ha/Ue2Io="}"#),
            r#"{"k":"[REDACTED]"}"#
        );
    }

    #[test]
    fn non_secrets_are_kept_and_borrowed() {
        for text in [
            "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixes it",
            "3F2A9C1E8B7D6A5F4E3D2C1B0A9F8E7D6C5B4A39",
            "thread 0199a3c1-7b2e-7c4d-9e8f-0a1b2c3d4e5f started",
            r#"{"type":"thread.started","thread_id":"550e8400-e29b-41d4-a716-446655440000"}"#,
            "/home/user/src/lib.rs",
            "src/components/Button2/ButtonGroupContainer/index.tsx",
            "/usr/lib/python3/site-packages/SomeModule2/SubPackage/core.py",
            "pip install sk-learn scikit-learn",
            "The quick brown fox jumps over the lazy dog, twice; then it rests.",
            "token count: 15",
            "token: 15",
            r#"{"usage":{"input_tokens":1234,"cached_input_tokens":1000,"output_tokens":56}}"#,
            "max_tokens=4096 tokenizer=cl100k_base",
            "supercalifragilisticexpialidociousantidisestablishment",
            "SUPERCALIFRAGILISTICEXPIALIDOCIOUSANTIDISESTABLISHMENT",
            "getHttp2ConnectionPoolManagerFactory and ThisIsAVeryLongCamelCaseIdentifier123",
            "The bearer token is sent in a header; basic authentication is weaker.",
            "pub struct Config { api_key: String, token: Option<String>, password: &str }",
            "let token = env::var(\"GITHUB_TOKEN\"); api_key=${OPENAI_API_KEY} secret=$SECRET",
            r#"{"password": null, "token": "", "secret": false}"#,
            "Password: [REDACTED] and Bearer [REDACTED]",
            "http://localhost:8080/path@v2 and user@example.com",
            "tiktoken = '0.7' and mytokens: 3",
            r#"assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));"#,
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "",
            "日本語のテキスト token ключ 🔑 sk-",
        ] {
            assert_kept(text);
        }
    }

    #[test]
    fn rejected_candidate_does_not_hide_a_secret() {
        // `api_key: String` is code (kept), the token after it is still found.
        assert_eq!(
            r("api_key: String, ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
            "api_key: String, [REDACTED]"
        );
        // Rejected as a whole (long hex run), the random part after the slash is found.
        assert_eq!(
            r("0123456789abcdef0123/Zq3L9vR2mX8pT4kW7nB1cY6hJ0sD5fG2aE9uQ3iO"),
            "0123456789abcdef0123[REDACTED]"
        );
        // A SHA-like base64 candidate is rejected, the AWS id after a slash is found.
        assert_eq!(
            r("x 0123456789abcdef0123456789abcdef/AKIAIOSFODNN7EXAMPLE"),
            "x 0123456789abcdef0123456789abcdef/[REDACTED]"
        );
    }

    #[test]
    fn found_by_fuzzing() {
        // a flag's value before `;`, `|`, `>`, ... is not a type annotation
        assert_eq!(
            r("mysql --password Hunter2Hunter2; ls"),
            "mysql --password [REDACTED]; ls"
        );
        assert_eq!(
            r("curl --token abcdef123456 | jq"),
            "curl --token [REDACTED] | jq"
        );
        // a flag's value after an auth scheme
        assert_eq!(
            r("--token Bearer Q7abcdefghijklmnop"),
            "--token Bearer [REDACTED]"
        );
        // an accepted blob that ate the start of a token takes the rest of it too
        assert_eq!(
            r("Q7ABCDEFGHIJKLMQRSTUVWXYZa/glpat-ORPSQTRUSVTWUXVQ7YWZXa&"),
            "[REDACTED]&"
        );
        assert_eq!(
            r("-----BEGIN RSA PRIVATE KEY-----RRRR/ghr_Q7ABCDEFGHIJKLMNOPQRSTUVWXYZab x"),
            "-----BEGIN RSA PRIVATE KEY-----[REDACTED] x"
        );
    }

    #[test]
    fn secrets_inside_rejected_base64_runs_are_found() {
        assert_eq!(
            r("FOO/BAR/AKIAIOSFODNN7EXAMPLE/BAZ/QUUX/ZZZZ"),
            "FOO/BAR/[REDACTED]/BAZ/QUUX/ZZZZ"
        );
        assert_eq!(
            r("/usr/local/share/some/long/path/to/token=abcdef123"),
            "/usr/local/share/some/long/path/to/token=[REDACTED]"
        );
        assert_eq!(
            r("/srv/app/config/current/settings/ClientSecret: 'x1y2z3'"),
            "/srv/app/config/current/settings/ClientSecret: '[REDACTED]'"
        );
    }

    #[test]
    fn long_runs_are_linear() {
        // Rejected as a whole and in every sub-run; rescanning each sub-run would be quadratic.
        for unit in ["AAAA/", "aaaa+", "ABCD/abcd/", "abc1/", "A", "Ab"] {
            let text = unit.repeat(200_000 / unit.len());
            let start = std::time::Instant::now();
            assert!(matches!(
                Redactor::default().redact(&text),
                Cow::Borrowed(_)
            ));
            assert!(
                start.elapsed() < std::time::Duration::from_secs(2),
                "{unit}"
            );
        }
        // A long mixed blob is redacted whole, whatever its statistics.
        let blob = "Ab1/".repeat(100);
        assert_eq!(r(&format!("data {blob} end")), "data [REDACTED] end");
    }

    #[test]
    fn redaction_is_idempotent_on_examples() {
        for text in [
            "OPENAI_API_KEY=sk-proj-Q3vT9xLm2RkP8wZc4NbY7HdJ1sFg6AeU0oKi5Wq3rTyU",
            "Authorization: Bearer abc.def-ghi",
            "https://alice:s3cr3tpass@example.com/x",
            r#"{"password":"hunter2hunter2"}"#,
            "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
        ] {
            let once = r(text);
            assert_eq!(r(&once), once);
        }
    }

    /// Fragments that exercise every rule, to build adversarial inputs.
    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "sk-",
                "sk-proj-",
                "ghp_",
                "github_pat_",
                "glpat-",
                "xoxb-",
                "AIza",
                "AKIA",
                "eyJ",
                ".",
                "Bearer ",
                "basic ",
                "://",
                ":",
                "@",
                "/",
                "+",
                "=",
                "==",
                "\"",
                "'",
                "\\",
                "\\\"",
                "\n",
                " ",
                "\t",
                "password",
                "token",
                "api_key",
                "--token ",
                "-----BEGIN RSA PRIVATE KEY-----",
                "-----END RSA PRIVATE KEY-----",
                "$",
                "${",
                "}",
                "(",
                "<",
                ",",
                ";",
                "é",
                "🔑",
                "[REDACTED]",
            ])
            .prop_map(str::to_owned),
            "[A-Za-z0-9]{1,40}",
            any::<String>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn planted_github_token_never_survives(
            prefix in any::<String>(),
            suffix in any::<String>(),
            body in "[A-Za-z0-9]{36}",
        ) {
            let text = format!("{prefix} ghp_{body} {suffix}");
            let out = Redactor::default().redact(&text);
            prop_assert!(!out.contains(&body), "{text:?} -> {out:?}");
        }

        #[test]
        fn planted_token_in_adversarial_text_never_survives(
            prefix in prop::collection::vec(fragment(), 0..12),
            suffix in prop::collection::vec(fragment(), 0..12),
            body in "[A-Za-z0-9]{36}",
        ) {
            let text = format!("{} ghp_{body} {}", prefix.concat(), suffix.concat());
            let out = Redactor::default().redact(&text);
            prop_assert!(!out.contains(&body), "{text:?} -> {out:?}");
        }

        #[test]
        fn never_panics_and_borrowed_means_unchanged(
            text in prop_oneof![
                any::<String>(),
                prop::collection::vec(fragment(), 0..24).prop_map(|v| v.concat()),
            ],
        ) {
            let redactor = Redactor::from_vars([("X_TOKEN", "abcdefgh"), ("Y_KEY", "p\"q\\rstuv")]);
            for out in [redactor.redact(&text), Redactor::default().redact(&text)] {
                if let Cow::Borrowed(b) = out {
                    prop_assert_eq!(b, text.as_str());
                }
            }
        }
    }

    // Found by mutation testing (scripts/mutants.sh; benches/README.md, "Mutation testing").

    #[test]
    fn scanning_resumes_where_a_secret_can_start_inside_a_rejected_run() {
        // one segment with capitals: a camelCase key may start anywhere inside it
        assert_eq!(
            r("myAppConfigurationSettingsValueClientSecret: 'x1y2z3'"),
            "myAppConfigurationSettingsValueClientSecret: '[REDACTED]'"
        );
        // the random part starts at the first separator, not at the last one
        assert_eq!(
            r("0123456789abcdef0123/Zq3L9vR2mX8pT4kW7nB1cY6hJ0sD5fG2aE9uQ3iO/Ab12Cd34"),
            "0123456789abcdef0123[REDACTED]"
        );
    }

    #[test]
    fn a_number_or_a_dotted_value_after_a_colon_is_data_not_a_type() {
        // only an identifier after `:` can be a type annotation (`api_key: String,`)
        assert_eq!(
            r("{user: bob, password: 123456789, port: 22}"),
            "{user: bob, password: [REDACTED], port: 22}"
        );
        assert_eq!(
            r("{user: bob, password: s3cret.value, port: 22}"),
            "{user: bob, password: [REDACTED], port: 22}"
        );
    }

    #[test]
    fn placeholders_end_at_seven_digits_and_at_variable_names() {
        assert_kept("token: 1234567");
        assert_eq!(r("password=12345678"), "password=[REDACTED]");
        // `$` followed by something that is not a variable name is a value
        assert_eq!(r("password=$ecr3t-pa55"), "password=[REDACTED]");
    }

    #[test]
    fn base64_statistics_at_their_limits() {
        // 32 characters is enough
        assert_eq!(
            r("hmac Zq3L9vR2mX8pT4kW7nB1cY6hJ0sD5fG2 x"),
            "hmac [REDACTED] x"
        );
        // capitals, lower case AND digits: a run without one of them is kept
        assert_kept("id k3j5h7g9q2w4s6x8z1m3n5r7t9y2u4p6v8 x");
        assert_kept("id K3J5H7G9Q2W4S6X8Z1M3N5R7T9Y2U4P6V8 x");
        // half of the adjacent pairs lower-lower is too many; one pair fewer is random enough
        assert_kept("id qwertyuiopasdfghjZ7X3C9V1B5N2M8K4 x");
        assert_eq!(
            r("id qwertyuiopasdfghZ7X3C9V1B5N2M8K4J x"),
            "id [REDACTED] x"
        );
        // a repeated pattern has too little entropy (3 bits per character)
        assert_kept("id XyZw5678XyZw5678XyZw5678XyZw5678 x");
    }

    #[test]
    fn only_a_plain_base64_run_takes_the_fast_path() {
        let run = "Zq3L9vR2mX8pT4kW7nB1cY6hJ0sD5fG2";
        for m in [
            run.to_owned(),
            format!("{run}="),
            format!("{run}=="),
            "ab+/cd+/ef+/gh+/ij+/kl+/mn+/op+/".to_owned(),
        ] {
            assert!(is_base64_rule_match(&m), "{m}");
        }
        for m in [
            run[1..].to_owned(),
            format!("{run}==="),
            format!("sk-proj-{run}"),
            format!("ghp_{run}"),
            format!("token={run}"),
            // a Google key: its own rule, which does not extend over a following `.`
            "AIzaSyDaGmWKa4JsXZ1HjGw7ISLn23namBGewQe".to_owned(),
        ] {
            assert!(!is_base64_rule_match(&m), "{m}");
        }
        assert_eq!(
            r("maps key AIzaSyDaGmWKa4JsXZ1HjGw7ISLn23namBGewQe."),
            "maps key [REDACTED]."
        );
    }

    #[test]
    fn a_token_before_a_bracket_or_parenthesis_is_data_not_code() {
        // found by the redact fuzz target: the value absorbed `:dddddd`, then `[` read as an
        // index
        for (text, want) in [
            (
                "password=HABCDEFGHIJKLMNQ7OPQR:dddddd[NNN",
                "password=[REDACTED][NNN",
            ),
            (
                "password=HABCDEFGHIJKLMNQ7OPQR[0]",
                "password=[REDACTED][0]",
            ),
            ("token=abcdefghijklmnopqrstu(x)", "token=[REDACTED](x)"),
        ] {
            assert_eq!(redact(text), want, "{text}");
        }
        // names stay code
        for text in [
            "token = env::var(\"X\")",
            "api_key=get_key()",
            "secret=keys[0]",
            "token=self.tokens[i]",
        ] {
            assert_eq!(redact(text), text);
        }
    }
}

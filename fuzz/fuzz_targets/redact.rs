//! The redactor on arbitrary text with a planted secret.
//!
//! The input is arbitrary text before and after, a delimiter on each side (the characters that
//! separate words in logs, shells, JSON and URLs), and a secret of one of the shapes the
//! redactor promises to remove, built from fuzzer bytes mapped onto that shape's alphabet; and,
//! separately, a value of a secret-named environment variable. Asserted:
//! - nothing panics, with or without literal values;
//! - a borrowed result is the input unchanged;
//! - the planted secret's body does not survive (nor its first or last 16 characters, when
//!   those occur nowhere else in the text): a secret hidden by a neighbouring match is found;
//! - the environment value never survives, raw or JSON-escaped, wherever it appears.
#![no_main]

use std::borrow::Cow;

use arbitrary::Arbitrary;
use codex_mcp_bridge::security::redact::{REDACTED, Redactor};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    prefix: String,
    suffix: String,
    left: u8,
    right: u8,
    kind: u8,
    variant: u8,
    body: Vec<u8>,
    /// A secret-named environment variable's value (bytes mapped to printable ASCII).
    env_value: Vec<u8>,
    env_json: bool,
    env_anywhere: bool,
}

/// Characters that end a word in the texts the bridge redacts.
const DELIMITERS: &[&str] = &[
    " ", "\n", "\t", "\r\n", "\"", "'", "(", ")", "[", "]", "{", "}", "<", ">", ",", ";", "|", "`",
    "=", ":", "/", "&", "?", "#", "!", "*",
];

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_DIGIT: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const ALNUM_DASH: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-";
const ALNUM_UNDER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
const ALNUM_UNDER_DASH: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/// `n` characters of `alphabet` from the fuzzer's bytes (cycled; zero bytes when none).
fn word(bytes: &[u8], alphabet: &[u8], n: usize) -> String {
    (0..n)
        .map(|i| {
            let b = if bytes.is_empty() {
                i as u8
            } else {
                bytes[i % bytes.len()].wrapping_add((i / bytes.len()) as u8)
            };
            alphabet[b as usize % alphabet.len()] as char
        })
        .collect()
}

/// A key body: `n` characters of `alphabet` with a capital and a digit among them, at a place
/// the fuzzer picks, as in any random key (a one-case body reads as a word, kept by design).
fn key(bytes: &[u8], alphabet: &[u8], n: usize) -> String {
    let mut w = word(bytes, alphabet, n - 2);
    let at = bytes.first().map_or(0, |b| *b as usize % (n - 1));
    w.insert_str(at, "Q7");
    w
}

/// A secret of one shape: (the whole secret as it is planted, its body).
fn secret(kind: u8, variant: u8, bytes: &[u8]) -> (String, String) {
    let extra = bytes.len() % 9;
    let pick = |xs: &[&'static str]| xs[variant as usize % xs.len()];
    match kind % 14 {
        0 => {
            let b = key(bytes, ALNUM, 36 + extra);
            (
                format!("{}{b}", pick(&["ghp_", "gho_", "ghu_", "ghs_", "ghr_"])),
                b,
            )
        }
        1 => {
            let b = key(bytes, ALNUM_UNDER, 30 + extra);
            (format!("github_pat_{b}"), b)
        }
        2 => {
            let b = key(bytes, ALNUM_UNDER_DASH, 20 + extra);
            (format!("glpat-{b}"), b)
        }
        3 => {
            let b = key(bytes, ALNUM_DASH, 24 + extra);
            (
                format!("{}{b}", pick(&["xoxb-", "xoxp-", "xoxa-", "xoxs-"])),
                b,
            )
        }
        4 => {
            let b = key(bytes, ALNUM_UNDER_DASH, 35 + extra);
            (format!("AIza{b}"), b)
        }
        5 => {
            let b = key(bytes, UPPER_DIGIT, 16);
            (format!("{}{b}", pick(&["AKIA", "ASIA"])), b)
        }
        6 => {
            let b = key(bytes, ALNUM_UNDER_DASH, 24 + extra);
            (
                format!("{}{b}", pick(&["sk-", "sk-proj-", "sk-ant-api03-"])),
                b,
            )
        }
        7 => {
            let b = key(bytes, ALNUM, 24 + extra);
            (
                format!("{}{b}", pick(&["sk_live_", "sk_test_", "rk_live_"])),
                b,
            )
        }
        8 => {
            let h = key(bytes, ALNUM_UNDER_DASH, 12);
            let sig = key(&bytes[bytes.len().min(3)..], ALNUM_UNDER_DASH, 32 + extra);
            (format!("eyJ{h}.eyJ{h}.{sig}"), sig)
        }
        9 => {
            let b = key(bytes, ALNUM, 20 + extra);
            (
                format!("{}{b}", pick(&["Bearer ", "bearer\t", "Basic "])),
                b,
            )
        }
        10 => {
            let b = key(bytes, ALNUM, 20 + extra);
            let key = pick(&[
                "api_key",
                "OPENAI_API_KEY",
                "password",
                "client_secret",
                "accessToken",
                "x-api-key",
                "token",
            ]);
            let form = match variant / 7 % 5 {
                0 => format!("{key}={b}"),
                1 => format!("{key}: \"{b}\""),
                2 => format!("\"{key}\":\"{b}\""),
                3 => format!("{key} = '{b}'"),
                _ => format!("\\\"{key}\\\": \\\"{b}\\\""),
            };
            (form, b)
        }
        11 => {
            let b = key(bytes, ALNUM, 20 + extra);
            (format!("https://alice:{b}@example.com/x"), b)
        }
        12 => {
            let b = key(bytes, ALNUM, 20 + extra);
            (
                format!("{} {b}", pick(&["--password", "--token", "--api-key"])),
                b,
            )
        }
        _ => {
            let b = key(bytes, BASE64, 40 + 8 * extra);
            let nl = pick(&["\n", "\\n", "\r\n"]);
            (
                format!("-----BEGIN RSA PRIVATE KEY-----{nl}{b}{nl}-----END RSA PRIVATE KEY-----"),
                b,
            )
        }
    }
}

/// `s` occurs in `text` exactly once (so a copy of it in the output must be the planted one).
fn unique(text: &str, s: &str) -> bool {
    text.find(s).is_some() && text.find(s) == text.rfind(s)
}

fn json_escaped(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

fuzz_target!(|input: Input| {
    let mut left = DELIMITERS[input.left as usize % DELIMITERS.len()];
    let mut right = DELIMITERS[input.right as usize % DELIMITERS.len()];
    let (planted, body) = secret(input.kind, input.variant, &input.body);
    // An unquoted value right before `(` or `[` reads as code (`token = get_token()`), which
    // the redactor keeps by design.
    if matches!(input.kind % 14, 10 | 12) && matches!(right, "(" | "[") {
        right = " ";
    }
    // A secret found by the word before it (`Bearer`, a key name, a flag, a PEM header) starts
    // a line here: an unquoted value of a secret-named key or flag in the prefix runs to the
    // next space or quote and would absorb that word (`--token x,--password SECRET`), and a PEM
    // body runs over line breaks. That is the redactor's design (a value runs to the next
    // delimiter), so it is not asserted.
    if matches!(input.kind % 14, 9 | 10 | 12 | 13) {
        if input.prefix.contains("PRIVATE KEY") {
            return;
        }
        left = ["\n", "\r\n"][input.left as usize % 2];
    }
    let text = format!("{}{left}{planted}{right}{}", input.prefix, input.suffix);

    let plain = Redactor::default();
    let out = plain.redact(&text);
    if let Cow::Borrowed(b) = &out {
        assert_eq!(*b, text);
    }
    // The body has no `[` or `]`, and is longer than `REDACTED` inside the brackets, so a copy
    // of it in the output is original text that was not replaced.
    let n = body.chars().count();
    let head: String = body.chars().take(16).collect();
    let tail: String = body.chars().skip(n.saturating_sub(16)).collect();
    for probe in [&body, &head, &tail] {
        if unique(&text, probe) {
            assert!(
                !out.contains(probe.as_str()),
                "planted secret {planted:?} survives as {probe:?}\ntext: {text:?}\nout:  {out:?}"
            );
        }
    }

    // A secret-named environment variable's value: printable ASCII without brackets (so a copy
    // in the output cannot be made of `[REDACTED]` and its neighbours), at least 8 bytes.
    let value: String = input
        .env_value
        .iter()
        .map(|b| (b'!' + b % 94) as char)
        .filter(|c| *c != '[' && *c != ']')
        .take(40)
        .collect();
    if value.len() < 8 || REDACTED.contains(value.as_str()) {
        return;
    }
    let with_env = Redactor::from_vars([("SERVICE_TOKEN", value.as_str()), ("PATH", "/usr/bin")]);
    let shown = if input.env_json {
        json_escaped(&value)
    } else {
        value.clone()
    };
    let text = if input.env_anywhere {
        // glued to arbitrary text: a literal is found wherever it is
        format!("{}{shown}{}", input.prefix, input.suffix)
    } else {
        format!("{}{left}{shown}{right}{}", input.prefix, input.suffix)
    };
    let out = with_env.redact(&text);
    if let Cow::Borrowed(b) = &out {
        assert_eq!(*b, text);
    }
    assert!(
        !out.contains(shown.as_str()),
        "environment value {shown:?} survives\ntext: {text:?}\nout:  {out:?}"
    );
    // the literal redactor also applies every pattern
    let _ = with_env.redact(&input.prefix);
});

//! Identifiers that reach codex's argv: caller session handles, Codex thread ids, git refs and
//! model ids.
//!
//! Each one is a positional or a `--flag=value` in an argv, so none may ever look like a flag.

use crate::invalid::InvalidArgument;

/// This module's refusals name the argument and the reason.
type Result<T, E = InvalidArgument> = std::result::Result<T, E>;

/// Longest caller session handle we accept.
pub const MAX_SESSION_ID_LEN: usize = 256;

/// Longest git ref we accept for `review` (git itself allows more; no real branch is this long).
pub const MAX_GIT_REF_LEN: usize = 255;

/// Longest model id accepted. Models are not allowlisted: ids contain dots and dashes and
/// custom-provider names are unbounded.
pub const MAX_MODEL_LEN: usize = 256;

/// Why a caller's model id is refused, if it is: empty, longer than [`MAX_MODEL_LEN`] bytes, or
/// holding a control character (a newline, NUL, ESC, C1...). One rule for every tool and both
/// backends: `codex exec` would take such an id literally, the app-server refuses it.
pub fn model_problem(model: &str) -> Option<String> {
    if model.is_empty() {
        Some("must not be empty".into())
    } else if model.len() > MAX_MODEL_LEN {
        Some(format!("must be at most {MAX_MODEL_LEN} bytes"))
    } else if model.chars().any(char::is_control) {
        Some("must not contain a control character (a newline, NUL, ESC...)".into())
    } else {
        None
    }
}

/// A caller's model id, checked once as the call is read ([`model_problem`]: bounded, no
/// control character): holding one proves the check passed, so nothing below checks it again.
/// It is always bound as one value (`--model=`, a JSON string), so a leading `-` or a quote is
/// harmless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelId(String);

impl ModelId {
    /// Check a caller's model id; `field` names the argument in the error.
    pub fn parse(field: &str, raw: &str) -> Result<ModelId> {
        match model_problem(raw) {
            Some(why) => Err(InvalidArgument::new(field, why)),
            None => Ok(ModelId(raw.to_owned())),
        }
    }

    /// The id as the caller gave it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ModelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A caller's session handle: `^[A-Za-z0-9_-]{1,256}$`, never starting with `-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

/// Deserializing validates too: a stored or received id is checked like a caller's.
impl<'de> serde::Deserialize<'de> for SessionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        SessionId::parse("sessionId", &raw).map_err(serde::de::Error::custom)
    }
}

impl SessionId {
    /// Validate a caller-supplied handle. `field` names the argument in the error.
    pub fn parse(field: &str, raw: &str) -> Result<Self> {
        if raw.is_empty() {
            return Err(InvalidArgument::new(field, "must not be empty"));
        }
        if raw.len() > MAX_SESSION_ID_LEN {
            return Err(InvalidArgument::new(
                field,
                format!("must be at most {MAX_SESSION_ID_LEN} characters"),
            ));
        }
        if raw.starts_with('-') {
            return Err(InvalidArgument::new(field, "must not start with '-'"));
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(InvalidArgument::new(
                field,
                "may contain only letters, digits, '_' and '-'",
            ));
        }
        Ok(SessionId(raw.to_owned()))
    }

    /// A fresh random handle (a UUID), for calls that did not name a session.
    pub fn generate() -> Self {
        SessionId(uuid::Uuid::new_v4().to_string())
    }

    /// The handle as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Most characters of a session's name.
pub const MAX_SESSION_NAME_CHARS: usize = 80;

/// A name a person chose for a session (and its codex thread): one line of at most
/// [`MAX_SESSION_NAME_CHARS`] characters, not blank, that a person reads as it is (the rule of
/// [`super::shown::check`]: no control, invisible, direction-changing or look-alike
/// character, no tab, no odd blank), with no blank at either end. Hosts, codex's own app and
/// the `sessions` command line show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct SessionName(String);

/// Deserializing validates too: a stored name is checked like a caller's.
impl<'de> serde::Deserialize<'de> for SessionName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        SessionName::parse("name", &raw).map_err(serde::de::Error::custom)
    }
}

impl SessionName {
    /// Check a caller's name. `field` names the argument in the error.
    pub fn parse(field: &str, raw: &str) -> Result<Self> {
        if raw.trim().is_empty() {
            return Err(InvalidArgument::new(field, "must not be empty or blank"));
        }
        let chars = raw.chars().count();
        if chars > MAX_SESSION_NAME_CHARS {
            return Err(InvalidArgument::new(
                field,
                format!("must be at most {MAX_SESSION_NAME_CHARS} characters (it has {chars})"),
            ));
        }
        if raw.contains(['\n', '\t']) {
            return Err(InvalidArgument::new(
                field,
                "must be one line, without tabs",
            ));
        }
        if raw.trim() != raw {
            return Err(InvalidArgument::new(
                field,
                "must not start or end with a blank",
            ));
        }
        let one_line = super::shown::Limits {
            max_lines: 1,
            max_line_chars: MAX_SESSION_NAME_CHARS,
        };
        super::shown::check(raw, &one_line).map_err(|why| {
            InvalidArgument::new(field, format!("cannot be shown as it is: it holds {why}"))
        })?;
        Ok(SessionName(raw.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Codex thread id, read from codex's output. Only a parsed UUID is ever used as the
/// `resume` positional, so a value can never present as a flag (or as `--last`).
/// Serialized as its hyphenated form (a string: the store's format); deserializing goes
/// through [`ThreadId::parse`], so a stored or received id that is not exactly that form is an
/// error naming `threadId`, never a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ThreadId(uuid::Uuid);

impl<'de> serde::Deserialize<'de> for ThreadId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = std::borrow::Cow::<str>::deserialize(d)?;
        ThreadId::parse(&raw).map_err(serde::de::Error::custom)
    }
}

impl ThreadId {
    /// Parse a thread id; anything but a UUID is refused.
    pub fn parse(raw: &str) -> Result<Self> {
        // uuid also accepts braced and urn forms; only the plain hyphenated form is emitted by
        // codex, so require it exactly.
        if raw.len() != 36 {
            return Err(InvalidArgument::new("threadId", "is not a UUID"));
        }
        uuid::Uuid::try_parse(raw)
            .map(ThreadId)
            .map_err(|_| InvalidArgument::new("threadId", "is not a UUID"))
    }

    /// Canonical lowercase hyphenated form, as passed to `codex exec resume`.
    pub fn to_arg(&self) -> String {
        self.0.hyphenated().to_string()
    }
}

impl std::fmt::Display for ThreadId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.hyphenated())
    }
}

/// Validate a git ref for `review --base=` or `--commit=`: a hex SHA, or a name that passes the
/// rules of `git check-ref-format` that matter here. Never starts with `-`.
pub fn validate_git_ref(field: &str, raw: &str) -> Result<()> {
    let bad = |reason: &str| Err(InvalidArgument::new(field, reason.to_owned()));
    if raw.is_empty() {
        return bad("must not be empty");
    }
    if raw.len() > MAX_GIT_REF_LEN {
        return bad("is too long for a git ref");
    }
    if raw.starts_with('-') {
        return bad("must not start with '-'");
    }
    if raw.bytes().any(|b| {
        b.is_ascii_control()
            || matches!(
                b,
                b' ' | b'~' | b'^' | b':' | b'?' | b'*' | b'[' | b'\\' | b'\x7f'
            )
    }) {
        return bad("contains a character git does not allow in a ref");
    }
    if raw.contains("..") || raw.contains("@{") || raw == "@" {
        return bad("must be a single ref or commit, not a range or reflog expression");
    }
    if raw.starts_with('/') || raw.ends_with('/') || raw.contains("//") {
        return bad("has a misplaced '/'");
    }
    if raw.ends_with('.') || raw.ends_with(".lock") {
        return bad("must not end with '.' or '.lock'");
    }
    if raw.split('/').any(|part| part.starts_with('.')) {
        return bad("has a path component starting with '.'");
    }
    if !raw.is_ascii() {
        return bad("must be ASCII");
    }
    Ok(())
}

/// Validate a commit for `review --commit=`: a hex SHA (4 to 64 digits) or a ref name.
pub fn validate_commit(field: &str, raw: &str) -> Result<()> {
    validate_git_ref(field, raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_accept_the_documented_alphabet() {
        for ok in [
            "a",
            "A-b_9",
            "0123",
            &"x".repeat(256),
            "550e8400-e29b-41d4-a716-446655440000",
        ] {
            assert!(SessionId::parse("sessionId", ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn session_ids_refuse_flags_empties_and_other_characters() {
        for bad in [
            "",
            "-x",
            "--last",
            "a b",
            "a/b",
            "a.b",
            "é",
            "a\nb",
            &"x".repeat(257),
            "a=b",
        ] {
            let err = SessionId::parse("sessionId", bad).unwrap_err().to_string();
            assert!(err.contains("sessionId"), "{err}");
        }
    }

    #[test]
    fn thread_ids_must_be_plain_uuids() {
        let id = ThreadId::parse("550E8400-E29B-41D4-A716-446655440000").unwrap();
        assert_eq!(id.to_arg(), "550e8400-e29b-41d4-a716-446655440000");
        for bad in [
            "--last",
            "-550e8400-e29b-41d4-a716-44665544000",
            "{550e8400-e29b-41d4-a716-446655440000}",
            "urn:uuid:550e8400-e29b-41d4-a716-446655440000",
            "550e8400e29b41d4a716446655440000",
            "thread-name",
            "",
        ] {
            assert!(ThreadId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn git_refs_refuse_flags_ranges_and_odd_characters() {
        for ok in [
            "main",
            "origin/main",
            "feature/x-1",
            "v1.2.3",
            "a1b2c3d",
            &"f".repeat(40),
        ] {
            assert!(validate_git_ref("base", ok).is_ok(), "{ok}");
        }
        for bad in [
            "-x",
            "--uncommitted",
            "-cfoo=bar",
            "",
            "a..b",
            "a b",
            "a~1",
            "HEAD^",
            "a:b",
            "a\nb",
            "/a",
            "a/",
            "a//b",
            "a.lock",
            ".hidden",
            "a/.b",
            "x@{1}",
            "@",
            "é",
        ] {
            let err = validate_git_ref("base", bad).unwrap_err().to_string();
            assert!(err.contains("`base`"), "{bad}: {err}");
        }
    }

    // Found by mutation testing (scripts/mutants.sh; benches/README.md, "Mutation testing").

    #[test]
    fn git_ref_length_limit_is_inclusive() {
        assert!(validate_git_ref("base", &"r".repeat(MAX_GIT_REF_LEN)).is_ok());
        let err = validate_git_ref("base", &"r".repeat(MAX_GIT_REF_LEN + 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("too long"), "{err}");
    }

    #[test]
    fn a_session_name_is_one_readable_line_and_each_refusal_names_the_field() {
        for ok in ["refactor the parser", "Überarbeitung", "修正 1", "a"] {
            assert_eq!(SessionName::parse("name", ok).unwrap().as_str(), ok);
        }
        let long = "x".repeat(MAX_SESSION_NAME_CHARS + 1);
        for (bad, why) in [
            ("", "blank"),
            ("   ", "blank"),
            ("two\nlines", "one line"),
            ("tab\there", "one line"),
            (" padded", "blank"),
            ("escape \u{1b}[2J", "shown"),
            ("right\u{202e}to left", "shown"),
            ("zero\u{200b}width", "shown"),
            ("g\u{0456}thub", "shown"),
            (long.as_str(), "at most"),
        ] {
            let err = SessionName::parse("name", bad).unwrap_err().to_string();
            assert!(err.contains("name"), "{bad:?}: {err}");
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        // a stored name is checked as it is read
        assert!(serde_json::from_str::<SessionName>("\"ok\"").is_ok());
        assert!(serde_json::from_str::<SessionName>("\"bad\\u001b\"").is_err());
    }
}

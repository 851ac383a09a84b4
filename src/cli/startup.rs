//! What keeps the server from starting, in one set of words (issue 38): what is wrong (naming
//! the setting) and the fix. The server prints them on stderr and answers every tool call of
//! its host with them ([`crate::mcp::unstarted::Unstarted`]); `doctor` prints the same in its line for the
//! check that finds the problem.

use crate::config::error::ConfigError;
use crate::error::Error;
use crate::hub::HubError;
use crate::mcp::results::ErrorKind;
use crate::store::StoreError;

/// What to do about a refused setting.
const FIX_SETTING: &str = "correct the setting named (flag, environment variable or config file)";
/// What to do about a store directory others can reach, or that is not the user's.
const FIX_STORE_REFUSED: &str = "point CODEX_BRIDGE_STORE at a directory of your own with mode \
                                 700 (or, if this one is yours, `chmod 700` it)";
/// What to do about a store that cannot be opened or read.
const FIX_STORE: &str =
    "point CODEX_BRIDGE_STORE at a writable directory (or move the broken store aside)";
/// What to do about anything else found at start.
const FIX_OTHER: &str =
    "run `codex-mcp-bridge doctor` with the server's settings: it checks the whole setup";

/// A problem found at start: what is wrong and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong, naming the setting: the error's own sentence.
    pub detail: String,
    /// What to do about it.
    pub fix: &'static str,
    /// The `error.kind` a turn tool's result gives it.
    pub kind: ErrorKind,
}

/// `detail -- fix: fix`: what `doctor` prints after the check's name, and what the server
/// says after "this server did not start:".
impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -- fix: {}", self.detail, self.fix)
    }
}

impl Problem {
    /// What the server says on stderr and to every tool call when it did not start.
    pub fn words(&self) -> String {
        format!(
            "this server did not start: {self}; then restart the server (in the MCP client, \
             reconnect it). It runs nothing until then."
        )
    }
}

/// A refused setting or config file.
pub fn setting_problem(e: &ConfigError) -> Problem {
    Problem {
        detail: e.to_string(),
        fix: FIX_SETTING,
        kind: ErrorKind::InvalidSetting,
    }
}

/// A store directory refused, or a store that cannot be opened.
pub fn store_problem(e: &StoreError) -> Problem {
    Problem {
        detail: e.to_string(),
        fix: match e {
            StoreError::Refused { .. } => FIX_STORE_REFUSED,
            _ => FIX_STORE,
        },
        kind: ErrorKind::Store,
    }
}

/// Anything the crate reports at start (the config file, a setting, the store).
pub fn error_problem(e: &Error) -> Problem {
    match e {
        Error::Config(c) => setting_problem(c),
        Error::Store(s) => store_problem(s),
        other => Problem {
            detail: other.to_string(),
            fix: FIX_OTHER,
            kind: ErrorKind::Io,
        },
    }
}

/// What stopped the server before it served its client: a setting, the store, or joining the
/// process that owns it.
pub fn startup_problem(e: &HubError) -> Problem {
    let (fix, kind) = match e {
        HubError::Below(inner) => return error_problem(inner),
        // each names CODEX_BRIDGE_STORE and what to do about the store
        HubError::NotSafeToJoin { .. }
        | HubError::HelloRefused { .. }
        | HubError::NoOwnerAnswers { .. } => (FIX_OTHER, ErrorKind::InvalidSetting),
        HubError::HttpListen { .. } => (
            "give CODEX_BRIDGE_HTTP_LISTEN an address free on this machine, or unset it",
            ErrorKind::InvalidSetting,
        ),
        _ => (FIX_OTHER, ErrorKind::Io),
    };
    Problem {
        detail: e.to_string(),
        fix,
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_others_can_reach_is_told_with_the_setting_and_chmod() {
        let e = HubError::from(StoreError::Refused {
            dir: "/s".into(),
            why: "has mode 755: group or other users have access to it (run `chmod 700` on it)"
                .into(),
        });
        let p = startup_problem(&e);
        assert_eq!(p.kind, ErrorKind::Store);
        let words = p.words();
        for part in [
            "did not start",
            "CODEX_BRIDGE_STORE",
            "/s has mode 755",
            "`chmod 700`",
            "restart",
        ] {
            assert!(words.contains(part), "{part}: {words}");
        }
        let bad = HubError::from(ConfigError::setting(
            "CODEX_BRIDGE_MAX_WARM (--max-warm)",
            "x",
        ));
        let p = startup_problem(&bad);
        assert_eq!(p.kind, ErrorKind::InvalidSetting);
        assert!(p.words().contains("CODEX_BRIDGE_MAX_WARM"), "{}", p.words());
    }
}

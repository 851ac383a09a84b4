//! Which `codex` versions the bridge supports: a `codex --version` answer classified against
//! the range its security pins are proven for.

use crate::codex::versions::{NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION};

/// Where a `codex --version` answer falls relative to the supported range
/// [`OLDEST_SUPPORTED_CODEX_VERSION`]..=[`NEWEST_TESTED_CODEX_VERSION`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CodexSupport {
    /// Inside the range: the security pins are proven for it.
    Supported,
    /// Newer than the newest tested: it probably works, but nothing has proven the pins hold.
    NewerThanTested,
    /// Older than the oldest supported: the pins are known to rely on newer behaviour.
    OlderThanSupported,
    /// The answer has no `MAJOR.MINOR.PATCH` version in it.
    Unrecognized,
}

impl CodexSupport {
    /// Classifies a `codex --version` answer such as `codex-cli 0.171.0` (the last word is the
    /// version; a pre-release such as `0.172.0-alpha.1` sorts before its release).
    pub fn of(version_output: &str) -> Self {
        let Some(v) = version_output
            .split_whitespace()
            .last()
            .and_then(parse_version)
        else {
            return Self::Unrecognized;
        };
        let oldest = parse_version(OLDEST_SUPPORTED_CODEX_VERSION).expect("a valid constant");
        let newest = parse_version(NEWEST_TESTED_CODEX_VERSION).expect("a valid constant");
        if v < oldest {
            Self::OlderThanSupported
        } else if v > newest {
            Self::NewerThanTested
        } else {
            Self::Supported
        }
    }
}

/// `MAJOR.MINOR.PATCH[-PRE]` as a sortable key: the three numbers, then 0 for a pre-release and
/// 1 for a release (pre-releases of one version are not ordered among themselves).
fn parse_version(v: &str) -> Option<(u64, u64, u64, u8)> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let (core, release) = match v.split_once('-') {
        Some((core, pre)) if !pre.is_empty() => (core, 0),
        Some(_) => return None,
        None => (v, 1),
    };
    let mut parts = core.split('.').map(|n| {
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .then(|| n.parse::<u64>().ok())
            .flatten()
    });
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    parts
        .next()
        .is_none()
        .then_some((major, minor, patch, release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_versions_are_classified_against_the_supported_range() {
        use CodexSupport::*;
        for (answer, want) in [
            ("codex-cli 0.145.0", Supported),
            ("codex-cli 0.171.0", Supported),
            ("codex-cli 0.160.3", Supported),
            ("0.171.0", Supported),
            ("codex-cli 0.144.9", OlderThanSupported),
            ("codex-cli 0.145.0-alpha.2", OlderThanSupported),
            ("codex-cli 0.9.0", OlderThanSupported),
            ("codex-cli 0.171.1", NewerThanTested),
            ("codex-cli 0.172.0-alpha.1", NewerThanTested),
            ("codex-cli 1.0.0", NewerThanTested),
            ("codex-cli 0.1710.0", NewerThanTested),
            ("codex-cli", Unrecognized),
            ("", Unrecognized),
            ("codex-cli 0.171", Unrecognized),
            ("codex-cli 0.171.0.1", Unrecognized),
            ("codex-cli 0.171.x", Unrecognized),
            ("codex-cli 0.171.0-", Unrecognized),
            ("codex-cli +1.2.3", Unrecognized),
        ] {
            assert_eq!(CodexSupport::of(answer), want, "{answer:?}");
        }
        assert_eq!(CodexSupport::of(OLDEST_SUPPORTED_CODEX_VERSION), Supported);
        assert_eq!(CodexSupport::of(NEWEST_TESTED_CODEX_VERSION), Supported);
    }
}

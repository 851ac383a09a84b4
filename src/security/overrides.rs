//! Codex `-c key=value` overrides: the operator's extra overrides (checked against a denylist
//! once, at start) and TOML encoding of any caller value that must go into a `-c` value.
//!
//! Codex parses an override by splitting at the first `=`, trimming the key, and reading the
//! key as a dotted path (naively split on `.`); the value part is parsed as TOML (or taken as a
//! raw string when it does not parse). We parse keys the same way, so a key codex would apply
//! is a key we check.

use toml_writer::{TomlKeyBuilder, TomlStringBuilder, TomlWrite};

use crate::invalid::InvalidSetting;

/// This module's refusals name the setting and the reason.
type Result<T, E = InvalidSetting> = std::result::Result<T, E>;

/// The setting name used in errors about operator overrides.
pub const SETTING: &str = "CODEX_BRIDGE_CODEX_CONFIG (--codex-config)";

/// One operator override, split as codex splits it. Its fields are private: an `Override`
/// exists only as [`parse_operator_override`]'s answer, so holding one proves the denylist
/// was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// The dotted key path, each segment trimmed.
    path: Vec<String>,
    /// The raw value text after the first `=`.
    value: String,
}

impl Override {
    /// The dotted key path, each segment trimmed.
    pub fn path(&self) -> &[String] {
        &self.path
    }

    /// The raw value text after the first `=`.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The `key=value` token passed after `-c`, exactly as the operator wrote it (trimmed key).
    pub fn to_arg(&self) -> String {
        format!("{}={}", self.path.join("."), self.value)
    }
}

/// Key paths an operator override may never touch, because each widens a capability or undoes
/// one of the bridge's pins. A trailing `*` matches any continuation of the last segment
/// (`sandbox_*`), and a pattern also covers every key below it (`permissions` covers
/// `permissions.x.y`) unless it ends in `$` (exactly that key: a whole-table value).
/// Compared case-insensitively.
pub const DENIED_KEYS: &[&str] = &[
    // who approves an escalation: the pin `approvals_reviewer="user"` must hold
    "approvals_reviewer",
    "approval_policy",
    // the sandbox level is per request and always emitted by the bridge
    "sandbox_mode",
    "sandbox_*",
    "default_permissions",
    "permissions",
    // which variables tool commands see (our pin keeps secrets out of them)
    "shell_environment_policy*",
    // trust decides whether a repository's own .codex/config.toml loads
    "projects*",
    "project_root_markers",
    // hooks run commands
    "hooks*",
    // profiles can carry any of the above
    "profile",
    "profiles*",
    // the login-shell snapshot re-exports codex's environment into every command
    "features$",
    "features.shell_snapshot",
];

/// Parse and check one operator override. Refuses malformed tokens and every key in
/// [`DENIED_KEYS`]; `mcp_servers.NAME.enabled=false` is the one `mcp_servers` form allowed.
pub fn parse_operator_override(raw: &str) -> Result<Override> {
    let Some((key, value)) = raw.split_once('=') else {
        return Err(InvalidSetting::new(
            SETTING,
            format!("`{raw}` is not of the form key=value"),
        ));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(InvalidSetting::new(
            SETTING,
            format!("`{raw}` has an empty key"),
        ));
    }
    if key.starts_with('-') {
        return Err(InvalidSetting::new(
            SETTING,
            format!("key `{key}` must not start with '-'"),
        ));
    }
    let path: Vec<String> = key.split('.').map(|s| s.trim().to_owned()).collect();
    if path.iter().any(String::is_empty) {
        return Err(InvalidSetting::new(
            SETTING,
            format!("key `{key}` has an empty segment"),
        ));
    }
    // a NUL could not even reach argv (the spawn of every call would fail)
    if raw.chars().any(|c| c.is_control() && c != '\t') {
        return Err(InvalidSetting::new(
            SETTING,
            format!("`{key}` must be on one line, without control characters"),
        ));
    }
    let lower: Vec<String> = path.iter().map(|s| s.to_ascii_lowercase()).collect();
    if lower[0] == "mcp_servers" {
        let disables = lower.len() == 3 && lower[2] == "enabled" && value.trim() == "false";
        if !disables {
            return Err(InvalidSetting::new(
                SETTING,
                format!(
                    "`{key}` is refused: an operator override may only disable a nested MCP \
                     server (mcp_servers.NAME.enabled=false)"
                ),
            ));
        }
    }
    if let Some(pattern) = DENIED_KEYS.iter().find(|p| key_matches(p, &lower)) {
        return Err(InvalidSetting::new(
            SETTING,
            format!(
                "`{key}` is refused: it matches `{pattern}`, which would widen what codex may do \
                 or undo a pin the bridge sets on every call"
            ),
        ));
    }
    Ok(Override {
        path,
        value: value.to_owned(),
    })
}

/// Does the lowercase key path fall under `pattern` (see [`DENIED_KEYS`])?
fn key_matches(pattern: &str, path: &[String]) -> bool {
    let (pattern, exact) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let pat: Vec<&str> = pattern.split('.').collect();
    if path.len() < pat.len() || (exact && path.len() != pat.len()) {
        return false;
    }
    pat.iter()
        .zip(path)
        .all(|(p, seg)| match p.strip_suffix('*') {
            Some(prefix) => seg.starts_with(prefix),
            None => *p == seg,
        })
}

/// A caller value as a one-line TOML basic string (`"…"` with every quote, backslash and
/// control character escaped), for use as a `-c` value. It parses back to exactly `value` and
/// can never add a key.
pub fn toml_basic_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    // Writing into a String cannot fail.
    let _ = out.value(TomlStringBuilder::new(value).as_basic());
    out
}

/// A TOML key that is always quoted as a basic string (e.g. a path as a `projects` key).
pub fn toml_quoted_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 2);
    let _ = out.key(TomlKeyBuilder::new(key).as_basic());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(raw: &str) -> bool {
        parse_operator_override(raw).is_err()
    }

    #[test]
    fn every_capability_widening_key_is_refused() {
        for raw in [
            "approvals_reviewer=\"auto_review\"",
            " approvals_reviewer =\"auto_review\"",
            "APPROVALS_REVIEWER=\"auto_review\"",
            "approval_policy=\"never\"",
            "sandbox_mode=\"danger-full-access\"",
            "sandbox_workspace_write.network_access=true",
            "sandbox_permissions=[\"disk-full-read-access\"]",
            "default_permissions=\"x\"",
            "permissions.x.network=true",
            "shell_environment_policy.inherit=\"all\"",
            "shell_environment_policy={inherit=\"all\"}",
            "projects={\"/\"={trust_level=\"trusted\"}}",
            "projects./x.trust_level=\"trusted\"",
            "project_root_markers=[\".hg\"]",
            "hooks={}",
            "hooks.pre=[]",
            "mcp_servers.evil={command=\"touch\"}",
            "mcp_servers.x.command=\"touch\"",
            "mcp_servers.x.enabled=true",
            "mcp_servers={}",
            "profile=\"auto\"",
            "profiles.auto.approvals_reviewer=\"auto_review\"",
            "features={shell_snapshot=true}",
            "features.shell_snapshot=true",
        ] {
            assert!(refused(raw), "{raw} must be refused");
        }
    }

    #[test]
    fn control_characters_are_refused() {
        // found by fuzzing: a NUL was accepted and then failed every spawn
        for raw in [
            "model=\"a\0b\"",
            "model=x\ny",
            "\u{1}k=v",
            "model=\"a\u{7f}\"",
        ] {
            assert!(parse_operator_override(raw).is_err(), "{raw:?}");
        }
        assert!(parse_operator_override("model=\"a\tb\"").is_ok());
    }

    #[test]
    fn refusals_name_the_setting_and_the_key() {
        let err = parse_operator_override("sandbox_mode=\"danger-full-access\"").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("CODEX_BRIDGE_CODEX_CONFIG"), "{msg}");
        assert!(msg.contains("sandbox_mode"), "{msg}");
    }

    #[test]
    fn harmless_keys_and_disabling_a_server_are_accepted() {
        for raw in [
            "model_provider=\"mock\"",
            "model_providers.mock={name=\"mock\",base_url=\"http://127.0.0.1:1/v1\"}",
            "mcp_servers.slow.enabled=false",
            "model_reasoning_summary=\"none\"",
            "features.web_search_request=true",
        ] {
            let o = parse_operator_override(raw).unwrap();
            assert_eq!(o.to_arg(), raw.trim());
        }
    }

    #[test]
    fn malformed_overrides_are_refused() {
        for raw in [
            "novalue",
            "=x",
            " =x",
            "a..b=1",
            "-c=1",
            "a=1\nsandbox_mode=\"x\"",
        ] {
            assert!(refused(raw), "{raw}");
        }
    }

    #[test]
    fn basic_strings_escape_quotes_backslashes_and_newlines() {
        let nasty = "o3\"\nsandbox_mode=\"danger-full-access\"\\ \u{7f}\t'";
        let s = toml_basic_string(nasty);
        assert!(
            s.starts_with('"') && s.ends_with('"') && !s.contains('\n'),
            "{s}"
        );
        let table: toml::Table = toml::from_str(&format!("k = {s}")).unwrap();
        assert_eq!(table.len(), 1);
        assert_eq!(table["k"].as_str(), Some(nasty));
    }

    #[test]
    fn quoted_keys_survive_odd_paths() {
        let k = toml_quoted_key("/a/\"b\"/c.d");
        let table: toml::Table = toml::from_str(&format!("x = {{ {k} = 1 }}")).unwrap();
        assert!(table["x"].as_table().unwrap().contains_key("/a/\"b\"/c.d"));
    }
}

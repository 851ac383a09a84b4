//! Codex's own home (`$CODEX_HOME`, default `~/.codex`): where its config and threads live.

use std::path::{Path, PathBuf};

/// `$CODEX_HOME`, else `$HOME/.codex`, from the given variables.
pub fn codex_home(vars: &[(String, String)]) -> PathBuf {
    let var = |k: &str| {
        vars.iter()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| v.clone())
    };
    match (var("CODEX_HOME"), var("HOME")) {
        (Some(h), _) => PathBuf::from(h),
        (None, Some(home)) => PathBuf::from(home).join(".codex"),
        (None, None) => PathBuf::from(".codex"),
    }
}

/// A nested MCP server from codex's `config.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestedServer {
    pub name: String,
    pub enabled: bool,
    pub required: bool,
}

/// The `[mcp_servers.*]` of `$CODEX_HOME/config.toml` (empty when absent or unreadable).
pub fn nested_servers(codex_home: &Path) -> Vec<NestedServer> {
    let Ok(text) = std::fs::read_to_string(codex_home.join("config.toml")) else {
        return vec![];
    };
    parse_nested_servers(&text)
}

/// Parse the `[mcp_servers.*]` tables of a codex config.
pub fn parse_nested_servers(text: &str) -> Vec<NestedServer> {
    let Ok(doc) = toml::from_str::<toml::Table>(text) else {
        return vec![];
    };
    let Some(servers) = doc.get("mcp_servers").and_then(|s| s.as_table()) else {
        return vec![];
    };
    servers
        .iter()
        .map(|(name, v)| NestedServer {
            name: name.clone(),
            enabled: v.get("enabled").and_then(|e| e.as_bool()).unwrap_or(true),
            required: v.get("required").and_then(|e| e.as_bool()).unwrap_or(false),
        })
        .collect()
}

/// Names of the enabled, non-required nested servers: the ones a call may switch off.
pub fn disableable(servers: &[NestedServer]) -> Vec<String> {
    servers
        .iter()
        .filter(|s| s.enabled && !s.required)
        .map(|s| s.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_servers_are_read_with_their_flags() {
        let s = parse_nested_servers(
            "[mcp_servers.a]\ncommand='x'\n[mcp_servers.b]\ncommand='y'\nrequired=true\n[mcp_servers.c]\ncommand='z'\nenabled=false\n",
        );
        assert_eq!(s.len(), 3);
        assert_eq!(disableable(&s), vec!["a".to_string()]);
        assert!(parse_nested_servers("not toml [").is_empty());
    }

    #[test]
    fn codex_home_defaults_under_home() {
        assert_eq!(
            codex_home(&[("HOME".into(), "/h".into())]),
            PathBuf::from("/h/.codex")
        );
        assert_eq!(
            codex_home(&[
                ("HOME".into(), "/h".into()),
                ("CODEX_HOME".into(), "/c".into())
            ]),
            PathBuf::from("/c")
        );
    }
}

//! The config file: where it is looked for, how it is read (TOML, every key known, each value
//! of its key's type, no value ever echoed in an error) and how it fills what neither a flag
//! nor an environment variable set.

use std::path::{Path, PathBuf};

use crate::logging::LogFormat;

use super::error::{CONFIG_FILE_KEYS, ConfigError};
use super::flags::{ApprovalMode, Backend, NestedMcp, OwnerMode, Settings};

/// Where the config file is looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigLocation {
    pub path: PathBuf,
    /// Named by `--config`/`CODEX_BRIDGE_CONFIG`: it must exist. The default one may be absent.
    pub explicit: bool,
}

/// What a config file sets.
#[derive(Debug, Clone, Default)]
pub struct FileSettings {
    /// The operator settings the file sets (`None`/empty: not set there).
    pub settings: Settings,
    pub log_format: Option<LogFormat>,
}

/// The config file: `explicit` (from `--config`/`CODEX_BRIDGE_CONFIG`) when given and not empty,
/// else `$XDG_CONFIG_HOME/codex-mcp-bridge/config.toml` (an absolute XDG_CONFIG_HOME), else
/// `$HOME/.config/codex-mcp-bridge/config.toml`; `None` when neither variable is set.
pub fn config_location(
    explicit: Option<&Path>,
    vars: &[(String, String)],
) -> Option<ConfigLocation> {
    if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return Some(ConfigLocation {
            path: p.to_path_buf(),
            explicit: true,
        });
    }
    let var = |k: &str| {
        vars.iter()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| v.as_str())
    };
    let dir = match (var("XDG_CONFIG_HOME"), var("HOME")) {
        (Some(x), _) if x.starts_with('/') => PathBuf::from(x),
        (_, Some(h)) => PathBuf::from(h).join(".config"),
        _ => return None,
    };
    Some(ConfigLocation {
        path: dir.join("codex-mcp-bridge").join("config.toml"),
        explicit: false,
    })
}

/// Read the config file at `loc`: `None` when it is the default one and absent. An explicit
/// file that is missing, a file that is not TOML, an unknown key or a value of the wrong type
/// is an error naming the file (and the key); values are never echoed.
pub fn read_config_file(loc: &ConfigLocation) -> Result<Option<FileSettings>, ConfigError> {
    let text = match std::fs::read_to_string(&loc.path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !loc.explicit => return Ok(None),
        Err(source) => {
            return Err(ConfigError::FileUnreadable {
                path: loc.path.clone(),
                source,
            });
        }
    };
    parse_config_file(&loc.path, &text).map(Some)
}

/// A string or an array of strings (`roots`, `codex_config`).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// The config file's keys: serde refuses any other and any value of the wrong type; the
/// error is rebuilt from the key alone ([`wrong_type`]), as serde's own words quote the value.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKeys {
    codex_bin: Option<PathBuf>,
    roots: Option<OneOrMany>,
    store: Option<PathBuf>,
    worktrees: Option<PathBuf>,
    allow_danger: Option<bool>,
    max_concurrent: Option<usize>,
    default_timeout_ms: Option<u64>,
    max_timeout_ms: Option<u64>,
    codex_config: Option<OneOrMany>,
    max_line_bytes: Option<usize>,
    max_output_bytes: Option<usize>,
    queue_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    nested_mcp: Option<String>,
    backend: Option<String>,
    owner: Option<String>,
    max_warm: Option<usize>,
    max_queued_turns: Option<usize>,
    max_queued_prompt_bytes: Option<usize>,
    approvals: Option<String>,
    approval_timeout_ms: Option<u64>,
    heartbeat_ms: Option<u64>,
    session_ttl_days: Option<u64>,
    http_listen: Option<String>,
    log_format: Option<String>,
}

/// The accepted values of a [`clap::ValueEnum`], for a message: "`a` or `b`".
fn one_of<E: clap::ValueEnum>() -> String {
    let names: Vec<String> = E::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|p| format!("`{}`", p.get_name()))
        .collect();
    names.join(" or ")
}

/// What a key's value must be, for the error about a value of the wrong type.
fn expected(key: &str) -> String {
    match key {
        "roots" | "codex_config" => "a string or an array of strings".into(),
        "allow_danger" => "true or false".into(),
        "log_format" => one_of::<LogFormat>(),
        "nested_mcp" => one_of::<NestedMcp>(),
        "backend" => one_of::<Backend>(),
        "owner" => one_of::<OwnerMode>(),
        "approvals" => one_of::<ApprovalMode>(),
        "max_concurrent"
        | "default_timeout_ms"
        | "max_timeout_ms"
        | "max_line_bytes"
        | "max_output_bytes"
        | "queue_timeout_ms"
        | "idle_timeout_ms"
        | "heartbeat_ms"
        | "session_ttl_days"
        | "max_warm"
        | "max_queued_turns"
        | "max_queued_prompt_bytes"
        | "approval_timeout_ms" => "a non-negative integer".into(),
        _ => "a string".into(),
    }
}

/// Parse a config file's text (`path` only names it in errors).
pub fn parse_config_file(path: &Path, text: &str) -> Result<FileSettings, ConfigError> {
    let keys = read_keys(path, text)?;
    let log_format = value_of::<LogFormat>(path, "log_format", keys.log_format)?;
    let nested_mcp = value_of::<NestedMcp>(path, "nested_mcp", keys.nested_mcp)?;
    let backend = value_of::<Backend>(path, "backend", keys.backend)?;
    let owner = value_of::<OwnerMode>(path, "owner", keys.owner)?;
    let approvals = value_of::<ApprovalMode>(path, "approvals", keys.approvals)?;
    Ok(FileSettings {
        settings: Settings {
            codex_bin: keys.codex_bin,
            roots: keys.roots.map(|r| r.into_vec().join(":")),
            store: keys.store,
            worktrees: keys.worktrees,
            allow_danger: keys.allow_danger,
            max_concurrent: keys.max_concurrent,
            default_timeout_ms: keys.default_timeout_ms,
            max_timeout_ms: keys.max_timeout_ms,
            codex_config: keys
                .codex_config
                .map(OneOrMany::into_vec)
                .unwrap_or_default(),
            max_line_bytes: keys.max_line_bytes,
            max_output_bytes: keys.max_output_bytes,
            queue_timeout_ms: keys.queue_timeout_ms,
            idle_timeout_ms: keys.idle_timeout_ms,
            nested_mcp,
            backend,
            max_warm: keys.max_warm,
            max_queued_turns: keys.max_queued_turns,
            max_queued_prompt_bytes: keys.max_queued_prompt_bytes,
            approvals,
            approval_timeout_ms: keys.approval_timeout_ms,
            heartbeat_ms: keys.heartbeat_ms,
            session_ttl_days: keys.session_ttl_days,
            http_listen: keys.http_listen,
            config_file: None,
            owner,
        },
        log_format,
    })
}

/// A config file's keys: TOML, every key known, each value of its key's type.
fn read_keys(path: &Path, text: &str) -> Result<FileKeys, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::NotToml {
        path: path.to_path_buf(),
        line: e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1),
        message: e.message().to_owned(),
    })?;
    // an unknown key first, by name (serde's error for it carries no path to the key)
    if let Some(key) = table
        .keys()
        .find(|k| !CONFIG_FILE_KEYS.contains(&k.as_str()))
    {
        return Err(ConfigError::UnknownKey {
            path: path.to_path_buf(),
            key: key.clone(),
        });
    }
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        match e.path().iter().next() {
            Some(serde_path_to_error::Segment::Map { key }) => wrong_type(path, key),
            _ => wrong_type(path, &e.path().to_string()),
        }
    })
}

/// The error about `key`'s value in the config file at `path`: not of the key's type.
fn wrong_type(path: &Path, key: &str) -> ConfigError {
    ConfigError::WrongType {
        path: path.to_path_buf(),
        key: key.to_owned(),
        expected: expected(key),
    }
}

/// `key`'s value as one of a fixed value set, spelled as on the command line.
fn value_of<T: clap::ValueEnum>(
    path: &Path,
    key: &str,
    value: Option<String>,
) -> Result<Option<T>, ConfigError> {
    value
        .map(|v| T::from_str(&v, false).map_err(|_| wrong_type(path, key)))
        .transpose()
}

impl Settings {
    /// Fill every setting clap left unset (neither flag nor environment variable) from the
    /// config file's: so the precedence is flag > environment > file > default.
    pub fn fill_from(&mut self, file: &Settings) {
        // destructured so that a new setting cannot be forgotten here
        let Settings {
            codex_bin,
            roots,
            store,
            worktrees,
            allow_danger,
            max_concurrent,
            default_timeout_ms,
            max_timeout_ms,
            codex_config,
            max_line_bytes,
            max_output_bytes,
            queue_timeout_ms,
            idle_timeout_ms,
            nested_mcp,
            backend,
            max_warm,
            max_queued_turns,
            max_queued_prompt_bytes,
            approvals,
            approval_timeout_ms,
            heartbeat_ms,
            session_ttl_days,
            http_listen,
            // not read from a file
            config_file: _,
            owner,
        } = file;
        fn or<T: Clone>(mine: &mut Option<T>, theirs: &Option<T>) {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
        or(&mut self.codex_bin, codex_bin);
        or(&mut self.roots, roots);
        or(&mut self.store, store);
        or(&mut self.worktrees, worktrees);
        or(&mut self.allow_danger, allow_danger);
        or(&mut self.max_concurrent, max_concurrent);
        or(&mut self.default_timeout_ms, default_timeout_ms);
        or(&mut self.max_timeout_ms, max_timeout_ms);
        if self.codex_config.is_empty() {
            self.codex_config.clone_from(codex_config);
        }
        or(&mut self.max_line_bytes, max_line_bytes);
        or(&mut self.max_output_bytes, max_output_bytes);
        or(&mut self.queue_timeout_ms, queue_timeout_ms);
        or(&mut self.idle_timeout_ms, idle_timeout_ms);
        or(&mut self.nested_mcp, nested_mcp);
        or(&mut self.backend, backend);
        or(&mut self.owner, owner);
        or(&mut self.max_warm, max_warm);
        or(&mut self.max_queued_turns, max_queued_turns);
        or(&mut self.max_queued_prompt_bytes, max_queued_prompt_bytes);
        or(&mut self.approvals, approvals);
        or(&mut self.approval_timeout_ms, approval_timeout_ms);
        or(&mut self.heartbeat_ms, heartbeat_ms);
        or(&mut self.session_ttl_days, session_ttl_days);
        or(&mut self.http_listen, http_listen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_keys_are_the_settings_names() {
        use clap::Args;
        let cmd = Settings::augment_args(clap::Command::new("x"));
        let mut ids: Vec<&str> = cmd.get_arguments().map(|a| a.get_id().as_str()).collect();
        ids.push("log_format");
        ids.sort_unstable();
        let mut keys = CONFIG_FILE_KEYS.to_vec();
        keys.sort_unstable();
        assert_eq!(ids, keys);
    }

    const FULL_FILE: &str = r#"
codex_bin = "/opt/codex"
roots = "/a:/b"
store = "/var/lib/bridge"
allow_danger = true
max_concurrent = 3
default_timeout_ms = 5000
max_timeout_ms = 9000
codex_config = ["model=\"o3\"", "k=v"]
max_line_bytes = 10000
max_queued_turns = 5
max_queued_prompt_bytes = 4096
max_output_bytes = 20000
queue_timeout_ms = 1000
idle_timeout_ms = 2000
nested_mcp = "disable"
approvals = "ask"
heartbeat_ms = 500
log_format = "json"
"#;

    #[test]
    fn a_bad_nested_mcp_value_names_the_key_and_the_accepted_values() {
        let err = parse_config_file(Path::new("/c.toml"), "nested_mcp = \"drop\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("nested_mcp"), "{err}");
        assert!(err.contains("`keep` or `disable`"), "{err}");
        assert!(!err.contains("drop"), "the value is never echoed: {err}");
        for v in [NestedMcp::Keep, NestedMcp::Disable] {
            let text = format!("nested_mcp = \"{v}\"");
            let f = parse_config_file(Path::new("/c.toml"), &text).unwrap();
            assert_eq!(f.settings.nested_mcp, Some(v));
        }
    }

    #[test]
    fn approvals_default_to_decline_and_a_bad_value_names_the_key() {
        assert_eq!(ApprovalMode::default(), ApprovalMode::Decline);
        let err = parse_config_file(Path::new("/c.toml"), "approvals = \"always\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("approvals"), "{err}");
        assert!(err.contains("`decline` or `ask`"), "{err}");
        assert!(!err.contains("always"), "the value is never echoed: {err}");
        for v in [ApprovalMode::Decline, ApprovalMode::Ask] {
            let text = format!("approvals = \"{v}\"");
            let f = parse_config_file(Path::new("/c.toml"), &text).unwrap();
            assert_eq!(f.settings.approvals, Some(v));
        }
    }

    #[test]
    fn a_config_file_sets_every_setting() {
        let f = parse_config_file(Path::new("/c.toml"), FULL_FILE).unwrap();
        let s = &f.settings;
        assert_eq!(s.codex_bin, Some(PathBuf::from("/opt/codex")));
        assert_eq!(s.roots.as_deref(), Some("/a:/b"));
        assert_eq!(s.store, Some(PathBuf::from("/var/lib/bridge")));
        assert_eq!(s.allow_danger, Some(true));
        assert_eq!(s.max_concurrent, Some(3));
        assert_eq!(s.default_timeout_ms, Some(5000));
        assert_eq!(s.max_timeout_ms, Some(9000));
        assert_eq!(s.codex_config, vec!["model=\"o3\"", "k=v"]);
        assert_eq!(s.max_line_bytes, Some(10000));
        assert_eq!(s.max_queued_turns, Some(5));
        assert_eq!(s.max_queued_prompt_bytes, Some(4096));
        assert_eq!(s.max_output_bytes, Some(20000));
        assert_eq!(s.queue_timeout_ms, Some(1000));
        assert_eq!(s.idle_timeout_ms, Some(2000));
        assert_eq!(s.nested_mcp, Some(NestedMcp::Disable));
        assert_eq!(s.approvals, Some(ApprovalMode::Ask));
        assert_eq!(s.heartbeat_ms, Some(500));
        assert_eq!(f.log_format, Some(LogFormat::Json));
        // roots may also be an array
        let f = parse_config_file(Path::new("/c.toml"), "roots = [\"/a\", \"/b\"]").unwrap();
        assert_eq!(f.settings.roots.as_deref(), Some("/a:/b"));
    }

    #[test]
    fn config_file_errors_name_the_file_and_the_key_and_never_the_value() {
        let path = Path::new("/etc/bridge.toml");
        let err = parse_config_file(path, "roots = \"/a\"\nmax_concurent = 4\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`max_concurent`")
                && err.contains("/etc/bridge.toml")
                && err.contains("unknown key")
                && err.contains("max_concurrent"),
            "{err}"
        );
        let err = parse_config_file(path, "max_concurrent = \"sk-secret-value\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`max_concurrent`") && err.contains("/etc/bridge.toml"),
            "{err}"
        );
        assert!(!err.contains("sk-secret-value"), "{err}");
        let err = parse_config_file(path, "roots = \"/a\"\nthis is not toml = [\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/etc/bridge.toml") && err.contains("line 2"),
            "{err}"
        );
        assert!(!err.contains("this is not"), "{err}");
        let err = parse_config_file(path, "[server]\nroots = \"/a\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key `server`"), "{err}");
        let err = parse_config_file(path, "log_format = \"xml\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`log_format`"), "{err}");
    }

    #[test]
    fn the_config_file_is_looked_for_under_xdg_config_home_then_home() {
        let v = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let loc = config_location(None, &v(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            loc.path,
            PathBuf::from("/h/.config/codex-mcp-bridge/config.toml")
        );
        assert!(!loc.explicit);
        let loc = config_location(None, &v(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")])).unwrap();
        assert_eq!(loc.path, PathBuf::from("/x/codex-mcp-bridge/config.toml"));
        // a relative XDG_CONFIG_HOME is ignored, as the XDG spec says
        let loc = config_location(None, &v(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "rel")])).unwrap();
        assert_eq!(
            loc.path,
            PathBuf::from("/h/.config/codex-mcp-bridge/config.toml")
        );
        let loc = config_location(Some(Path::new("/e.toml")), &v(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            loc,
            ConfigLocation {
                path: "/e.toml".into(),
                explicit: true
            }
        );
        assert!(config_location(None, &[]).is_none());
        // an absent default file is fine; an absent explicit one is not
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.toml");
        let default = ConfigLocation {
            path: missing.clone(),
            explicit: false,
        };
        assert!(read_config_file(&default).unwrap().is_none());
        let explicit = ConfigLocation {
            path: missing,
            explicit: true,
        };
        let err = read_config_file(&explicit).unwrap_err().to_string();
        assert!(
            err.contains("CODEX_BRIDGE_CONFIG") && err.contains("none.toml"),
            "{err}"
        );
    }
}

//! The config layer's errors, which the crate error (a layer above) folds in with the same
//! words. Every message names the setting (and the file and key); none echoes a value from the
//! file.

use std::path::PathBuf;

use crate::invalid::InvalidSetting;

/// The setting that names the config file.
pub const CONFIG_SETTING: &str = "CODEX_BRIDGE_CONFIG (--config)";

/// The keys a config file may hold: every setting's name in snake_case, plus `log_format`.
pub const CONFIG_FILE_KEYS: &[&str] = &[
    "codex_bin",
    "roots",
    "store",
    "worktrees",
    "allow_danger",
    "max_concurrent",
    "default_timeout_ms",
    "max_timeout_ms",
    "codex_config",
    "max_line_bytes",
    "max_output_bytes",
    "queue_timeout_ms",
    "idle_timeout_ms",
    "nested_mcp",
    "backend",
    "owner",
    "max_warm",
    "max_queued_turns",
    "max_queued_prompt_bytes",
    "approvals",
    "approval_timeout_ms",
    "heartbeat_ms",
    "session_ttl_days",
    "http_listen",
    "log_format",
];

impl ConfigError {
    /// The refusal of `setting` (its variable and flag), for `reason`.
    pub fn setting(setting: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError::Invalid {
            setting: setting.into(),
            reason: reason.into(),
        }
    }
}

/// Why the settings or the config file are refused. Every message names the setting (and the
/// file and key); none echoes a value from the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A setting's value is refused: `setting` names its variable and flag.
    #[error("invalid setting {setting}: {reason}")]
    Invalid { setting: String, reason: String },

    /// The config file exists (or was named) but cannot be read.
    #[error(
        "invalid setting {CONFIG_SETTING}: cannot read the config file {}: {source}",
        .path.display()
    )]
    FileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The config file is not TOML (toml's own words, which quote no value).
    #[error(
        "invalid setting {CONFIG_SETTING}: the config file {} is not valid TOML{}: {message}",
        .path.display(),
        .line.map(|l| format!(" at line {l}")).unwrap_or_default()
    )]
    NotToml {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },

    /// A key that is no setting (a typo, say).
    #[error(
        "invalid setting {CONFIG_SETTING}: unknown key `{key}` in the config file {}; the keys \
         are the settings' names in snake_case: {}",
        .path.display(),
        CONFIG_FILE_KEYS.join(", ")
    )]
    UnknownKey { path: PathBuf, key: String },

    /// A key whose value has the wrong type (the value is not repeated: it may be a secret).
    #[error(
        "invalid setting {CONFIG_SETTING}: in the config file {}, `{key}` must be {expected}",
        .path.display()
    )]
    WrongType {
        path: PathBuf,
        key: String,
        expected: String,
    },
}

impl From<InvalidSetting> for ConfigError {
    fn from(e: InvalidSetting) -> Self {
        ConfigError::Invalid {
            setting: e.setting,
            reason: e.reason,
        }
    }
}

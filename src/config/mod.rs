//! Operator settings: read once at server start (flags, each with an environment variable, and
//! the config file for what neither gave), validated into one typed [`Config`]. Never per call.
//! An invalid setting fails the start with a message naming the setting.
//!
//! The files, by job: `flags.rs` (the settings as given: flags and environment variables),
//! `file.rs` (the config file), `validate.rs` (the checks that make a [`Config`]),
//! `version.rs` (the codex versions supported) and `error.rs` (what they refuse). Each names
//! its siblings directly; this file only re-exports.

pub use error::{CONFIG_FILE_KEYS, CONFIG_SETTING, ConfigError};

pub mod error;
mod file;
mod flags;
mod validate;
mod version;

pub use file::{
    ConfigLocation, FileSettings, config_location, parse_config_file, read_config_file,
};
pub use flags::{ApprovalMode, Backend, NestedMcp, OwnerMode, Settings};
pub use validate::{
    Config, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_QUEUED_PROMPT_BYTES, DEFAULT_MAX_QUEUED_TURNS,
    DEFAULT_MAX_TIMEOUT_MS, DEFAULT_MAX_WARM, DEFAULT_TIMEOUT_MS, HTTP_TOKEN_VAR, HttpConfig,
    MAX_MAX_CONCURRENT, MIN_HTTP_TOKEN_LEN, MIN_TIMEOUT_MS, codex_program, find_on_path, store_dir,
};
pub use version::CodexSupport;

pub use crate::codex::process::Limits;
pub use crate::codex::versions::{NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION};

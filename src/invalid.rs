//! The refusal of one value: a caller's argument or an operator's setting, each naming the
//! field (or setting) and the reason. A leaf: the pure layers (`security`, `codex::argv`,
//! `confine`) return these instead of the crate error, which folds them in with the same
//! words (`invalid argument \`field\`: reason`, `invalid setting NAME: reason`).

/// A caller argument that failed validation; nothing was spawned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid argument `{field}`: {reason}")]
pub struct InvalidArgument {
    pub field: String,
    pub reason: String,
}

impl InvalidArgument {
    /// The refusal of argument `field`, for `reason`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// An operator setting that failed validation: `setting` names its variable and flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting {setting}: {reason}")]
pub struct InvalidSetting {
    pub setting: String,
    pub reason: String,
}

impl InvalidSetting {
    /// The refusal of `setting`, for `reason`.
    pub fn new(setting: impl Into<String>, reason: impl Into<String>) -> Self {
        InvalidSetting {
            setting: setting.into(),
            reason: reason.into(),
        }
    }
}

//! The closed value sets of the builders' arguments ([`SandboxLevel`], [`ReasoningEffort`],
//! [`ReviewMode`]), each value spelled once by the `value_set!` macro for serde, schemars and
//! argv.

use crate::invalid::InvalidArgument;

/// What the builders refuse: an argument, named, with the reason (folded into the crate
/// error with the same words by the caller's `?`).
type Result<T> = std::result::Result<T, InvalidArgument>;

/// A closed set of string values as a Rust enum, each value spelled once, here: serde parses
/// it (the reference bridge's other spellings are serde aliases), schemars describes it (an
/// inline `enum` listing every accepted spelling), and `as_str` gives the canonical spelling.
/// A wrong value is refused by serde, so a tool call's error names the field
/// (`invalid argument `sandbox`: unknown variant …, expected one of …`).
macro_rules! value_set {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $value $(, alias = $alias)*)] $variant, )+
        }

        impl $name {
            /// Every accepted spelling: each value, then its aliases.
            pub const SPELLINGS: &'static [&'static str] = &[$($value, $($alias,)*)+];

            /// The canonical spelling.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $( $name::$variant => $value, )+
                }
            }

            /// Parse a caller's value of argument `field` (serde's parse, with its message).
            pub fn parse(field: &str, raw: &str) -> Result<Self> {
                use serde::Deserialize as _;
                let raw = serde::de::value::StrDeserializer::<serde::de::value::Error>::new(raw);
                Self::deserialize(raw).map_err(|e| InvalidArgument::new(field, e.to_string()))
            }
        }

        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": Self::SPELLINGS })
            }
        }
    };
}

value_set! {
    /// The tool-command sandbox codex enforces for a turn. `full-auto` is the reference
    /// bridge's alias of workspace-write, kept for compatibility.
    pub enum SandboxLevel {
        ReadOnly = "read-only",
        WorkspaceWrite = "workspace-write" | "full-auto",
        DangerFullAccess = "danger-full-access",
    }
}

impl SandboxLevel {
    /// Whether a turn at this level may write files (workspace-write, danger-full-access).
    pub fn may_write(self) -> bool {
        self != SandboxLevel::ReadOnly
    }

    /// The value of `--sandbox`.
    pub fn as_arg(&self) -> &'static str {
        self.as_str()
    }
}

value_set! {
    /// `model_reasoning_effort`.
    pub enum ReasoningEffort {
        None = "none",
        Minimal = "minimal",
        Low = "low",
        Medium = "medium",
        High = "high",
        Xhigh = "xhigh",
    }
}

value_set! {
    /// What `review` looks at: `uncommitted` changes, changes against a `base` branch, or one
    /// `commit`.
    pub enum ReviewMode {
        Uncommitted = "uncommitted",
        Base = "base",
        Commit = "commit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_effort_is_a_toml_string() {
        assert_eq!(
            ReasoningEffort::parse("reasoningEffort", "xhigh")
                .unwrap()
                .as_str(),
            "xhigh"
        );
        assert!(ReasoningEffort::parse("reasoningEffort", "max").is_err());
    }

    // Found by mutation testing (scripts/mutants.sh; benches/README.md, "Mutation testing").

    #[test]
    fn every_sandbox_level_parses_and_round_trips_through_its_flag_value() {
        for (raw, level) in [
            ("read-only", SandboxLevel::ReadOnly),
            ("workspace-write", SandboxLevel::WorkspaceWrite),
            ("full-auto", SandboxLevel::WorkspaceWrite),
            ("danger-full-access", SandboxLevel::DangerFullAccess),
        ] {
            let parsed = SandboxLevel::parse("sandbox", raw).unwrap();
            assert_eq!(parsed, level, "{raw}");
            assert_eq!(
                SandboxLevel::parse("sandbox", parsed.as_arg()).unwrap(),
                level
            );
        }
        for bad in ["", "Read-Only", "--sandbox=read-only", "danger"] {
            let err = SandboxLevel::parse("sandbox", bad).unwrap_err().to_string();
            assert!(err.contains("`sandbox`"), "{bad}: {err}");
        }
    }

    #[test]
    fn every_reasoning_effort_parses_and_round_trips() {
        let all = [
            ("none", ReasoningEffort::None),
            ("minimal", ReasoningEffort::Minimal),
            ("low", ReasoningEffort::Low),
            ("medium", ReasoningEffort::Medium),
            ("high", ReasoningEffort::High),
            ("xhigh", ReasoningEffort::Xhigh),
        ];
        for (raw, effort) in all {
            let parsed = ReasoningEffort::parse("reasoningEffort", raw).unwrap();
            assert_eq!(parsed, effort, "{raw}");
            assert_eq!(parsed.as_str(), raw);
        }
        let err = ReasoningEffort::parse("reasoningEffort", "High")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`reasoningEffort`"), "{err}");
    }
}

//! What every invocation shares: the operator's and connection's [`Common`] settings, the
//! [`SpawnSpec`] the builders make, the checks of a call's own arguments, and the `-c` tokens
//! every path ends with (operator overrides, then the bridge's pins, at the deepest level).

use std::path::{Path, PathBuf};

use crate::invalid::InvalidArgument;
use crate::security::overrides::{Override, toml_quoted_key};
use crate::security::paths::Confined;

use crate::plan::values::SandboxLevel;

/// What the builders refuse: an argument, named, with the reason (folded into the crate
/// error with the same words by the caller's `?`).
pub(super) type Result<T> = std::result::Result<T, InvalidArgument>;

/// Which builder made a spec (for logs, results and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    Exec,
    Resume,
    Structured,
    Query,
    Search,
    Review,
    /// A long-lived `codex app-server` (its turns are JSON-RPC messages, not argv).
    AppServer,
}

/// Settings shared by every invocation: from the operator's config and the connection.
#[derive(Debug, Clone)]
pub struct Common {
    /// The codex binary.
    pub program: PathBuf,
    /// The child's whole environment, already filtered by [`crate::security::env::filter_env`].
    pub env: Vec<(String, String)>,
    /// Operator `-c` overrides, already checked against the denylist.
    pub overrides: Vec<Override>,
    /// Whether `danger-full-access` may be requested.
    pub allow_danger: bool,
    /// Nested MCP servers to disable on this call (`mcp_servers.NAME.enabled=false`).
    pub disable_mcp_servers: Vec<String>,
}

/// Everything needed to spawn one codex child. Built only by the `build_*` functions (its
/// fields are private, so no other code can make one around their checks); read through the
/// accessors.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub(super) program: PathBuf,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    /// The child's working directory (confined; re-checked right before the spawn).
    pub(super) cwd: Confined,
    /// Other confined paths in argv (images), re-checked right before the spawn.
    pub(super) checked: Vec<Confined>,
    /// Bytes written to stdin, which is then closed. `None`: stdin is null.
    pub(super) stdin: Option<Vec<u8>>,
    /// The sandbox level this spec asks for.
    pub(super) sandbox: SandboxLevel,
    pub(super) kind: PathKind,
}

impl SpawnSpec {
    /// The codex binary.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The argv after the program.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The child's whole environment.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// The child's working directory (confined; re-checked right before the spawn).
    pub fn cwd(&self) -> &Confined {
        &self.cwd
    }

    /// Other confined paths in argv (images), re-checked right before the spawn.
    pub fn checked(&self) -> &[Confined] {
        &self.checked
    }

    /// Bytes written to stdin, which is then closed. `None`: stdin is null.
    pub fn stdin(&self) -> Option<&[u8]> {
        self.stdin.as_deref()
    }

    /// Take the bytes for stdin out of the spec (the runner moves them to the child's writer).
    pub fn take_stdin(&mut self) -> Option<Vec<u8>> {
        self.stdin.take()
    }

    /// The sandbox level this spec asks for.
    pub fn sandbox(&self) -> SandboxLevel {
        self.sandbox
    }

    /// Which path built it.
    pub fn kind(&self) -> PathKind {
        self.kind
    }
}

/// The check of a turn's own arguments that needs nothing but the call (its prompt and model
/// id are checked types already: [`Prompt`], [`ModelId`]): the sandbox level the operator
/// allows, run again when the turn is built, and first when a call would wait behind a busy
/// session, so that a call that can never run is refused at once instead of after the running
/// turn.
///
/// [`Prompt`]: crate::security::prompt::Prompt
/// [`ModelId`]: crate::security::ids::ModelId
pub fn check_call(common: &Common, sandbox: Option<SandboxLevel>) -> Result<()> {
    resolve_sandbox(common, sandbox).map(|_| ())
}

pub(super) fn resolve_sandbox(
    common: &Common,
    requested: Option<SandboxLevel>,
) -> Result<SandboxLevel> {
    let level = requested.unwrap_or(SandboxLevel::ReadOnly);
    if level == SandboxLevel::DangerFullAccess && !common.allow_danger {
        return Err(InvalidArgument::new(
            "sandbox",
            "danger-full-access is disabled on this server (operator setting \
             CODEX_BRIDGE_ALLOW_DANGER)",
        ));
    }
    Ok(level)
}

/// The bridge's pins, emitted last at the deepest level of every invocation.
pub fn pins(cwd: &Path) -> Vec<String> {
    vec![
        "approvals_reviewer=\"user\"".to_owned(),
        "approval_policy=\"never\"".to_owned(),
        "features.shell_snapshot=false".to_owned(),
        SHELL_ENV_PIN.to_owned(),
        projects_pin(cwd),
    ]
}

/// Tool commands get only codex's core variables (HOME, LOGNAME, PATH, SHELL, USER, TMPDIR…),
/// with codex's default excludes (`*KEY*`, `*SECRET*`, `*TOKEN*`) on top. Together with
/// `features.shell_snapshot=false` this keeps OPENAI_API_KEY out of every command the model runs.
/// Every field is given, because an inline table from `-c` merges into the user's table: an
/// `include_only`, `exclude` or `experimental_use_profile` from user config would otherwise
/// survive (measured on 0.145.0 and 0.171.0).
pub const SHELL_ENV_PIN: &str = "shell_environment_policy={inherit=\"core\",include_only=[],\
     exclude=[],ignore_default_excludes=false,experimental_use_profile=false}";

/// `projects={"<cwd>"={trust_level="untrusted"}, "<parent>"=…, …, "/"=…}`. Codex 0.145.0 walks
/// every directory from the project root down to the cwd and, for each one holding a `.codex/`,
/// decides trust by that directory's own key first (then the project root's, then the repository
/// root's). Every such directory is the cwd or one of its ancestors, so naming all of them
/// untrusted makes the first lookup hit ours: no repository's `.codex/config.toml` loads, and no
/// trust entry is written into the user's config, whatever the user already trusts. (Naming only
/// the cwd is not enough once the user trusts the repository root; measured.) Codex 0.171.0
/// no longer loads an untrusted project's config by itself, but still loads a trusted one's.
pub fn projects_pin(cwd: &Path) -> String {
    let entries: Vec<String> = cwd
        .ancestors()
        .filter_map(|p| p.to_str())
        .map(|p| format!("{}={{trust_level=\"untrusted\"}}", toml_quoted_key(p)))
        .collect();
    format!("projects={{{}}}", entries.join(","))
}

/// Collects the tokens of the deepest level, so no `-c` can end up anywhere else.
pub(super) struct Deepest {
    configs: Vec<String>,
}

impl Deepest {
    pub(super) fn new(common: &Common) -> Self {
        let mut configs: Vec<String> = common.overrides.iter().map(Override::to_arg).collect();
        configs.extend(
            common
                .disable_mcp_servers
                .iter()
                .filter(|n| {
                    !n.is_empty()
                        && n.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                })
                .map(|n| format!("mcp_servers.{n}.enabled=false")),
        );
        Deepest { configs }
    }

    pub(super) fn push(&mut self, kv: String) {
        self.configs.push(kv);
    }

    /// Append `-c k=v` for each collected token, then the pins last.
    pub(super) fn emit(mut self, args: &mut Vec<String>, cwd: &Path) {
        self.configs.extend(pins(cwd));
        for kv in self.configs {
            args.push("-c".to_owned());
            args.push(kv);
        }
    }
}

pub(super) fn cwd_str(c: &Confined) -> Result<&Path> {
    if c.path().to_str().is_none() {
        return Err(InvalidArgument::new(c.field(), "is not valid UTF-8"));
    }
    Ok(c.path())
}

/// Where each `-c` token sits, as (index of the `-c`, value); for tests and fuzzing.
pub fn config_tokens(args: &[String]) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--" {
            break;
        }
        if args[i] == "-c" && i + 1 < args.len() {
            out.push((i, args[i + 1].as_str()));
            i += 2;
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::security::ids::MAX_MODEL_LEN;
    use crate::security::prompt::Prompt;

    #[test]
    fn projects_pin_marks_the_cwd_and_every_ancestor_untrusted() {
        let pin = projects_pin(Path::new("/a/b \"c\""));
        let t: toml::Table = toml::from_str(&pin).unwrap();
        let projects = t["projects"].as_table().unwrap();
        let keys: Vec<&String> = projects.keys().collect();
        assert_eq!(keys.len(), 3);
        for k in ["/a/b \"c\"", "/a", "/"] {
            assert_eq!(
                projects[k]["trust_level"].as_str(),
                Some("untrusted"),
                "{k}"
            );
        }
    }

    // Found by mutation testing (scripts/mutants.sh; benches/README.md, "Mutation testing").

    #[test]
    fn prompt_and_model_limits_are_inclusive() {
        // the documented limit, written out: the constant itself could be wrong
        let biggest = "x".repeat(4 * 1024 * 1024);
        assert!(Prompt::parse("prompt", biggest.clone()).is_ok());
        let err =
            Error::from(Prompt::parse("prompt", format!("{biggest}x")).unwrap_err()).to_string();
        assert!(err.contains("`prompt`"), "{err}");
        use crate::security::ids::ModelId;
        assert!(ModelId::parse("model", &"m".repeat(MAX_MODEL_LEN)).is_ok());
        assert!(ModelId::parse("model", &"m".repeat(MAX_MODEL_LEN + 1)).is_err());
        assert!(ModelId::parse("model", "a\0b").is_err());
    }

    #[test]
    fn config_tokens_stop_at_the_separator_and_skip_a_dangling_dash_c() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let full = args(&[
            "exec", "--json", "--x", "-c", "a=1", "-c", "b=2", "--", "-c", "z",
        ]);
        assert_eq!(config_tokens(&full), vec![(3, "a=1"), (5, "b=2")]);
        assert!(config_tokens(&args(&["exec", "-c"])).is_empty());
        assert_eq!(config_tokens(&args(&["-c", "-c", "x"])), vec![(0, "-c")]);
    }
}

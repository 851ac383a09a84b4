//! The `codex app-server` invocations: a warm session's, and the one that serves a client's
//! one-shot calls (with live web search only for `search`'s).

use crate::security::paths::Confined;

use super::spec::{Common, Deepest, PathKind, Result, SpawnSpec, cwd_str};
use crate::plan::values::SandboxLevel;

/// The pin that makes an app-server's own default read-only (defence in depth only: every
/// `turn/start` carries its `sandboxPolicy`).
pub const APP_SERVER_SANDBOX_PIN: &str = "sandbox_mode=\"read-only\"";

/// Build a warm session's `codex app-server`: `-c …` (operator overrides, disabled nested MCP
/// servers, the pins for `cwd`, `sandbox_mode="read-only"`) `app-server`, stdin kept open
/// (EOF is its clean shutdown). The env, CODEX_HOME and binary are the client's and are fixed
/// for the process's life; the projects pin fixes its working directory.
pub fn build_app_server(common: &Common, cwd: Confined) -> Result<SpawnSpec> {
    build_one_shot_server(common, cwd, false)
}

/// Build the `codex app-server` that serves one client's one-shot calls: [`build_app_server`]
/// in `cwd` (the process's own directory for `query` and `search`, the call's for
/// `structured`), plus `web_search="live"` for the process that serves `search` (and only
/// `search`: the key of the process differs, so a `query` never runs where the web is on).
pub fn build_one_shot_server(common: &Common, cwd: Confined, search: bool) -> Result<SpawnSpec> {
    cwd_str(&cwd)?;
    Ok(server_in(common, cwd, search))
}

/// The app-server invocation in `cwd`, whose path was checked to be UTF-8 ([`cwd_str`]).
pub(super) fn server_in(common: &Common, cwd: Confined, search: bool) -> SpawnSpec {
    let dir = cwd.path();
    let mut deep = Deepest::new(common);
    if search {
        // as on the exec path: live web search is a config key, here fixed at spawn
        deep.push("web_search=\"live\"".into());
    }
    deep.push(APP_SERVER_SANDBOX_PIN.to_owned());
    let mut args = Vec::new();
    deep.emit(&mut args, dir);
    args.push("app-server".into());
    SpawnSpec {
        program: common.program.clone(),
        args,
        env: common.env.clone(),
        cwd,
        checked: vec![],
        stdin: None,
        sandbox: SandboxLevel::ReadOnly,
        kind: PathKind::AppServer,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{common, confined, pins_tail};
    use super::*;

    #[test]
    fn a_one_shot_server_turns_web_search_on_only_for_search_and_keeps_every_pin() {
        let c = common();
        let q = build_one_shot_server(&c, confined("/work/repo"), false).unwrap();
        let s = build_one_shot_server(&c, confined("/work/repo"), true).unwrap();
        let plain = build_app_server(&c, confined("/work/repo")).unwrap();
        assert_eq!(q.args(), plain.args(), "query's server is a session's");
        assert_eq!(q.kind(), PathKind::AppServer);
        let web = "web_search=\"live\"";
        assert!(!q.args().iter().any(|a| a == web));
        let at = s
            .args()
            .iter()
            .position(|a| a == web)
            .expect("search's has live search");
        assert_eq!(s.args()[at - 1], "-c");
        // the pins still come last, before the subcommand
        assert_eq!(s.args().last().map(String::as_str), Some("app-server"));
        let tail: Vec<String> =
            s.args()[s.args().len() - 1 - pins_tail().len()..s.args().len() - 1].to_vec();
        assert_eq!(tail, pins_tail());
        assert_ne!(
            crate::codex::process::key_of(&q),
            crate::codex::process::key_of(&s)
        );
    }
}

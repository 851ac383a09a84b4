//! What codex runs outside its sandbox cannot read the bridge's environment or memory.
//!
//! A command run unsandboxed (an operator-allowed `danger-full-access` turn here; a command a
//! person approved under `approvals = ask` runs the same way) runs as the bridge's user. The
//! bridge's environment holds every secret its allowlist keeps from codex (`GITHUB_TOKEN` and
//! the like), so the bridge makes itself non-dumpable (`PR_SET_DUMPABLE` 0) at start, which
//! closes `/proc/PID/environ` and `/proc/PID/mem` to processes without `CAP_SYS_PTRACE`.
//!
//! Root passes that check, so the bridge runs as `nobody` here (the test runs as root, as CI
//! does). The control is a dumpable process of the same user holding a secret of its own: the
//! same command reads its environment and opens its memory, so what keeps the bridge's secret
//! from the command is the bridge's own setting, not the command's lack of rights.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;

use crate::support::mcp::{connect_as, server_env, text};
use crate::support::{MockApi, Reply, TestEnv};

const NOBODY: u32 = 65534;

/// Make `dir` (created if missing) `nobody`'s own, mode 0700.
fn give_to_nobody(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).replace('\0', "\n"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn an_unsandboxed_command_cannot_read_the_bridges_environment_or_memory() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test needs root, to run the bridge as another user (CI runs as root)");
    }
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    // the test root is root's 0700 temporary directory: let nobody through it
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for d in [env.codex_home(), env.home(), env.work()] {
        give_to_nobody(d);
    }
    give_to_nobody(&env.root().join("store"));
    let out = env.root().join("out");
    give_to_nobody(&out);

    let bridge_secret = format!("ghp_{}", uuid::Uuid::new_v4().simple());
    let control_secret = format!("ghp_{}", uuid::Uuid::new_v4().simple());
    let mut vars = server_env(&env, &mock);
    vars.push(("CODEX_BRIDGE_ALLOW_DANGER".into(), "1".into()));
    vars.push(("GITHUB_TOKEN".into(), bridge_secret.clone()));

    let mut control = tokio::process::Command::new("sleep")
        .arg("600")
        .env_clear()
        .env("GITHUB_TOKEN", &control_secret)
        .uid(NOBODY)
        .gid(NOBODY)
        .kill_on_drop(true)
        .spawn()
        .expect("start the control process");
    let control_pid = control.id().expect("control pid");

    let s = connect_as(NOBODY, &vars, env.root()).await;
    let o = out.display();
    let script = format!(
        "for t in bridge:{bridge} control:{control_pid}; do n=${{t%%:*}}; p=${{t#*:}}; \
         cat /proc/$p/environ > {o}/$n.environ 2>/dev/null; echo $? > {o}/$n.environ.rc; \
         head -c 0 < /proc/$p/mem 2>/dev/null; echo $? > {o}/$n.mem.rc; done",
        bridge = s.pid
    );
    mock.push(Reply::exec_command(&script));
    mock.push(Reply::message("read"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "read the bridge", "sandbox": "danger-full-access",
                   "workingDirectory": env.work(), "model": "gpt-5.5"}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let _ = control.start_kill();

    // the control: the command's rights suffice to read a dumpable process of its user
    assert_eq!(read(&out.join("control.environ.rc")).trim(), "0");
    assert!(
        read(&out.join("control.environ")).contains(&control_secret),
        "the command could not read a dumpable process's environment: the control proves nothing"
    );
    assert_eq!(read(&out.join("control.mem.rc")).trim(), "0");

    // the bridge: neither its environment nor its memory
    let environ = read(&out.join("bridge.environ"));
    assert!(
        !environ.contains(&bridge_secret),
        "an unsandboxed command read the bridge's GITHUB_TOKEN from /proc/PID/environ"
    );
    assert_ne!(
        read(&out.join("bridge.environ.rc")).trim(),
        "0",
        "the bridge's /proc/PID/environ is readable: {environ}"
    );
    assert_ne!(
        read(&out.join("bridge.mem.rc")).trim(),
        "0",
        "the bridge's /proc/PID/mem opens"
    );
}

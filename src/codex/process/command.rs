//! Short codex commands (`codex --version`, `codex delete --force THREAD`), spawned like a turn:
//! by the spawner thread, in a process group of their own, with a parent-death signal, an
//! empty environment plus the given one, null stdin, piped and capped stdout and stderr, and a
//! time limit past which the whole group is killed. Dropping the future kills them too. Like a
//! turn's, the process is announced to a [`SpawnHook`] once it runs (pid, start time, argv
//! hash), so that its owner can keep it on record for the crash sweep.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::Command;

use super::error::ProcessError;
use super::kill::KillGuard;
use super::kill::{argv_hash, start_ticks};
use super::read::read_head;
use super::signal::signal_group;
use super::spawn::{contain, spawn};
use super::turn::{SpawnHook, SpawnInfo};
use crate::security::ids::ThreadId;

/// Most bytes kept of a short command's stdout and of its stderr.
const OUTPUT_CAP: usize = 64 * 1024;

/// A short codex command: the argv is built here from typed values, never from caller text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodexCommand {
    /// `codex --version`: which codex this is (`ping`, `doctor`).
    Version,
    /// `codex delete --force THREAD`: delete a thread's files (`closeSession` with
    /// `deleteThread`).
    DeleteThread(ThreadId),
}

impl CodexCommand {
    fn args(&self) -> Vec<String> {
        match self {
            CodexCommand::Version => vec!["--version".into()],
            CodexCommand::DeleteThread(t) => vec!["delete".into(), "--force".into(), t.to_arg()],
        }
    }

    /// For messages: `--version`, `delete`.
    fn what(&self) -> &'static str {
        match self {
            CodexCommand::Version => "--version",
            CodexCommand::DeleteThread(_) => "delete",
        }
    }

    /// How long it may run before it is killed.
    fn time_limit(&self) -> Duration {
        match self {
            CodexCommand::Version => Duration::from_secs(10),
            CodexCommand::DeleteThread(_) => Duration::from_secs(30),
        }
    }
}

/// What a short command printed, each stream capped at 64 KiB.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    /// `None` when killed by a signal.
    pub exit_code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// Run a short codex command to its end (or its time limit) with `program` and exactly `env`;
/// `on_spawn` is told what identifies the process once it runs (no cgroup: a short command
/// gets none).
pub async fn run_command(
    program: &Path,
    env: &[(String, String)],
    command: &CodexCommand,
    on_spawn: Option<&SpawnHook>,
) -> Result<CommandOutput, ProcessError> {
    let args = command.args();
    let mut cmd = Command::new(program);
    cmd.args(&args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    contain(&mut cmd);
    let mut child = spawn(cmd, program).await?;
    let pid = child.id().map(|p| p as i32);
    // dropped early (the caller gave up, the server shuts down): the group dies with it
    let mut guard = KillGuard::new(pid);
    if let (Some(hook), Some(pid)) = (on_spawn, pid) {
        hook(&SpawnInfo {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
            argv_hash: argv_hash(program, &args),
            cgroup: None,
        });
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let ran = async {
        let out = async {
            match stdout {
                Some(s) => read_head(s, OUTPUT_CAP).await,
                None => Vec::new(),
            }
        };
        let err = async {
            match stderr {
                Some(s) => read_head(s, OUTPUT_CAP).await,
                None => Vec::new(),
            }
        };
        let (stdout, stderr, status) = tokio::join!(out, err, child.wait());
        (stdout, stderr, status)
    };
    let limit = command.time_limit();
    let (stdout, stderr, status) = match tokio::time::timeout(limit, ran).await {
        Ok(done) => done,
        Err(_) => {
            // the guard kills the group and its descendants
            return Err(ProcessError::CommandTimedOut {
                what: command.what(),
                secs: limit.as_secs(),
            });
        }
    };
    let status = status.map_err(|source| ProcessError::Wait {
        what: command.what(),
        source,
    })?;
    // codex exited: whatever it left in its group goes too (the same caveat about group id
    // reuse as a turn's `reap_leftovers`)
    if let Some(pid) = pid {
        signal_group(pid, Signal::SIGKILL);
    }
    guard.disarm();
    Ok(CommandOutput {
        exit_code: status.code(),
        stdout,
        stderr,
    })
}

/// `codex --version` (e.g. `codex-cli 0.145.0`), or `None` when codex cannot be run;
/// `on_spawn` as for [`run_command`].
pub async fn codex_version(
    program: &Path,
    env: &[(String, String)],
    on_spawn: Option<&SpawnHook>,
) -> Option<String> {
    let out = run_command(program, env, &CodexCommand::Version, on_spawn)
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.success() && !text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    use nix::unistd::{Pid, getpgid};

    use super::*;

    /// A stand-in for codex: prints a version, or records its pid and its child's, then waits.
    fn fake_codex(dir: &Path) -> PathBuf {
        let path = dir.join("codex");
        std::fs::write(
            &path,
            "#!/bin/sh\n\
             if [ \"$1\" = --version ]; then echo 'codex-cli 9.9.9'; exit 0; fi\n\
             sleep 600 &\n\
             echo \"$$ $!\" > \"$PIDS.tmp\" && mv \"$PIDS.tmp\" \"$PIDS\"\n\
             wait\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn gone(pid: i32) -> bool {
        procfs::process::Process::new(pid)
            .and_then(|p| p.stat())
            .map_or(true, |s| s.state == 'Z' || s.state == 'X')
    }

    #[tokio::test]
    async fn the_version_probe_gets_only_the_given_environment() {
        let dir = tempfile::tempdir().unwrap();
        let codex = fake_codex(dir.path());
        let env = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
        assert_eq!(
            codex_version(&codex, &env, None).await.as_deref(),
            Some("codex-cli 9.9.9")
        );
        let missing =
            run_command(&dir.path().join("nope"), &env, &CodexCommand::Version, None).await;
        assert!(matches!(missing, Err(ProcessError::CodexNotFound { .. })));
    }

    #[tokio::test]
    async fn a_delete_runs_in_a_group_of_its_own_that_dies_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let codex = fake_codex(dir.path());
        let pids = dir.path().join("pids");
        let env = [
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
            ("PIDS".to_owned(), pids.display().to_string()),
        ];
        let thread = ThreadId::parse("550e8400-e29b-41d4-a716-446655440000").unwrap();
        let command = CodexCommand::DeleteThread(thread);
        // boxed, so that dropping it drops the future itself
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
        let record = seen.clone();
        let hook: SpawnHook = std::sync::Arc::new(move |info: &SpawnInfo| {
            *record.lock().unwrap() = Some(info.clone());
        });
        let mut running = Box::pin(run_command(&codex, &env, &command, Some(&hook)));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let (shell, sleeper) = loop {
            tokio::select! {
                r = &mut running => panic!("the fake delete ended early: {r:?}"),
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            if let Ok(s) = std::fs::read_to_string(&pids) {
                let mut it = s.split_whitespace().map(|p| p.parse::<i32>().unwrap());
                break (it.next().unwrap(), it.next().unwrap());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the fake delete never ran"
            );
        };
        let info = seen
            .lock()
            .unwrap()
            .clone()
            .expect("the hook saw the delete");
        assert_eq!(info.pid, shell);
        assert_eq!(Some(info.start_ticks), start_ticks(shell));
        assert_eq!(info.argv_hash, argv_hash(&codex, &command.args()));
        let group = getpgid(Some(Pid::from_raw(shell))).unwrap();
        assert_eq!(group.as_raw(), shell, "not a process group of its own");
        assert_ne!(group, getpgid(None).unwrap());
        assert_eq!(getpgid(Some(Pid::from_raw(sleeper))).unwrap(), group);
        drop(running);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !(gone(shell) && gone(sleeper)) {
            assert!(
                std::time::Instant::now() < deadline,
                "the dropped delete's processes are still alive: {:?} {:?}",
                procfs::process::Process::new(shell)
                    .and_then(|p| p.stat())
                    .map(|s| s.state),
                procfs::process::Process::new(sleeper)
                    .and_then(|p| p.stat())
                    .map(|s| s.state),
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

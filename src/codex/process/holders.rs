//! Who else holds a thread open: codex's own terminal app, started to continue a session's
//! conversation by hand (`codex resume … <thread>`, the command `getSession` gives). Read from
//! `/proc`: a process of this user whose command line names the thread and `resume`, and is
//! not one of the server's own codex runs (`exec … resume`, `app-server`). A terminal app that
//! opened the thread from its picker names no thread on its command line and is not seen here.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::security::ids::ThreadId;

/// Whether the words of a command line (`argv`) are codex's own app holding `thread`.
fn holds(argv: &[&str], thread: &str) -> bool {
    argv.contains(&thread)
        && argv.contains(&"resume")
        && !argv.iter().any(|a| *a == "exec" || *a == "app-server")
}

/// A process of this user that holds `thread` open in codex's own app: its pid and command
/// line (as text, for the words of a refusal). Reads `/proc` once.
pub fn app_holding(thread: &ThreadId) -> Option<(i32, String)> {
    // the owner of /proc/self is this process's effective user
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let me = std::process::id() as i32;
    let thread = thread.to_arg();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let dir = Path::new("/proc").join(pid.to_string());
        if std::fs::metadata(&dir).map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        let Ok(raw) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&raw);
        let argv: Vec<&str> = text.split('\0').filter(|a| !a.is_empty()).collect();
        if holds(&argv, &thread) {
            return Some((pid, argv.join(" ")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "019a0000-0000-7000-8000-000000000001";

    #[test]
    fn only_codexs_own_app_resuming_the_thread_holds_it() {
        assert!(holds(&["codex", "resume", "-C", "/w", T], T));
        assert!(holds(&["node", "/usr/lib/codex.js", "resume", T], T));
        // the server's own runs
        assert!(!holds(&["codex", "exec", "--json", "resume", T, "-"], T));
        assert!(!holds(&["codex", "-c", "x=1", "app-server"], T));
        // another thread, or no resume
        assert!(!holds(
            &["codex", "resume", "019a0000-0000-7000-8000-000000000002"],
            T
        ));
        assert!(!holds(&["vim", T], T));
    }

    #[test]
    fn a_process_of_this_user_resuming_the_thread_is_found_and_one_that_ended_is_not() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("codex");
        std::fs::write(&fake, "#!/bin/sh\nsleep 30\n").unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let thread = ThreadId::parse(T).unwrap();
        assert_eq!(app_holding(&thread), None);
        let mut child = std::process::Command::new(&fake)
            .args(["resume", "-C", "/w", T])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = loop {
            if let Some(f) = app_holding(&thread) {
                break f;
            }
            assert!(std::time::Instant::now() < deadline, "never found");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(found.0, child.id() as i32);
        assert!(found.1.contains("resume"), "{found:?}");
        // the script and its `sleep`
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        child.wait().unwrap();
        assert_eq!(app_holding(&thread), None);
    }
}

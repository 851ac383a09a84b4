//! Who else holds a thread open: codex's own terminal app, started to continue a session's
//! conversation by hand (`codex resume … <thread>`, the command `getSession` gives). Read from
//! `/proc`: a process of this user that is codex's own native binary (`/proc/PID/exe` named
//! `codex`, as npm's platform package and a build name it; npm's `codex.js` launcher runs
//! it with the same words, and only that child counts), runs outside any sandbox
//! (`NoNewPrivs: 0`), names the thread and `resume` on its command line, and is not one of
//! the server's own codex runs (`exec … resume`, `app-server`).
//!
//! Any process can put `resume <thread>` in its words, so the words alone prove nothing: a
//! model's command (`bash -c 'sleep 25; true' resume <another session's thread>`) would make
//! the server refuse that session's turns. Codex's Linux sandbox sets `no_new_privs` on every
//! command it runs (measured on 0.145.0 and 0.171.0: the command's own status says
//! `NoNewPrivs: 1`); the flag is inherited and no process can clear it, so no sandboxed
//! command, even one that runs the codex binary itself, counts here. A command codex runs
//! outside its sandbox (an operator-allowed `danger-full-access` turn, one a person approved)
//! can still pose as the app: it runs as the user. A terminal app that opened the thread
//! from its picker names no thread on its command line and is not seen here.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::security::ids::ThreadId;

/// What `/proc` shows of one process, as [`holds`] reads it.
struct Seen<'a> {
    /// The file name of its executable (`/proc/PID/exe`), if readable.
    exe: Option<&'a str>,
    /// Its command line's words.
    argv: &'a [&'a str],
    /// `NoNewPrivs` of its status: `Some(true)` when set (every command of codex's sandbox).
    no_new_privs: Option<bool>,
}

/// Whether an executable's file name is codex's native binary: `codex` (npm's platform
/// package, a build), or a release asset's `codex-<target>` (`codex-x86_64-unknown-linux-musl`).
/// `/proc/PID/exe` of a binary replaced while it runs ends in ` (deleted)`.
fn is_codex(name: &str) -> bool {
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    name == "codex"
        || name
            .strip_prefix("codex-")
            .is_some_and(|t| t.contains("-linux-"))
}

/// Whether the process `p` is codex's own app holding `thread`.
fn holds(p: &Seen<'_>, thread: &str) -> bool {
    p.exe.is_some_and(is_codex)
        && p.no_new_privs == Some(false)
        && p.argv.contains(&thread)
        && p.argv.contains(&"resume")
        && !p.argv.iter().any(|a| *a == "exec" || *a == "app-server")
}

/// `NoNewPrivs` in the text of `/proc/PID/status`.
fn no_new_privs(status: &str) -> Option<bool> {
    status
        .lines()
        .find_map(|l| match l.strip_prefix("NoNewPrivs:")?.trim() {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })
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
        // the cheap test first: most processes name no thread
        if !argv.contains(&thread.as_str()) {
            continue;
        }
        let exe = std::fs::read_link(dir.join("exe")).ok();
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let seen = Seen {
            exe: exe
                .as_deref()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str()),
            argv: &argv,
            no_new_privs: no_new_privs(&status),
        };
        if holds(&seen, &thread) {
            return Some((pid, argv.join(" ")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "019a0000-0000-7000-8000-000000000001";

    fn app<'a>(exe: &'a str, argv: &'a [&'a str]) -> Seen<'a> {
        Seen {
            exe: Some(exe),
            argv,
            no_new_privs: Some(false),
        }
    }

    #[test]
    fn only_codexs_own_app_resuming_the_thread_holds_it() {
        assert!(holds(&app("codex", &["codex", "resume", "-C", "/w", T]), T));
        assert!(holds(&app("codex (deleted)", &["codex", "resume", T]), T));
        assert!(holds(
            &app("codex-x86_64-unknown-linux-musl", &["codex", "resume", T]),
            T
        ));
        // npm's launcher: its native child counts, not the launcher
        assert!(!holds(
            &app("node", &["node", "/usr/lib/codex.js", "resume", T]),
            T
        ));
        // any other program whose words say so (the spoof), or whose exe is unknown
        assert!(!holds(
            &app("bash", &["bash", "-c", "sleep 25; true", "resume", T]),
            T
        ));
        assert!(!holds(&app("codex-linux-sandbox", &["x", "resume", T]), T));
        let unknown = Seen {
            exe: None,
            ..app("codex", &["codex", "resume", T])
        };
        assert!(!holds(&unknown, T));
        // sandboxed (codex's sandbox sets no_new_privs), or not known to be free of it
        for no_new_privs in [Some(true), None] {
            let p = Seen {
                no_new_privs,
                ..app("codex", &["codex", "resume", T])
            };
            assert!(!holds(&p, T));
        }
        // the server's own runs
        assert!(!holds(
            &app("codex", &["codex", "exec", "--json", "resume", T, "-"]),
            T
        ));
        assert!(!holds(
            &app("codex", &["codex", "-c", "x=1", "app-server"]),
            T
        ));
        // another thread, or no resume
        assert!(!holds(
            &app(
                "codex",
                &["codex", "resume", "019a0000-0000-7000-8000-000000000002"]
            ),
            T
        ));
        assert!(!holds(&app("codex", &["codex", T]), T));
    }

    #[test]
    fn no_new_privs_is_read_from_the_status() {
        assert_eq!(
            no_new_privs("Name:\tx\nNoNewPrivs:\t0\nSeccomp:\t0\n"),
            Some(false)
        );
        assert_eq!(no_new_privs("NoNewPrivs:\t1\n"), Some(true));
        assert_eq!(no_new_privs("Name:\tx\n"), None);
    }

    /// A native program named `codex` (a copy of bash) whose words are `resume <thread>`,
    /// started with `no_new_privs` set or not.
    fn start(dir: &Path, no_new_privs: bool) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        let fake = dir.join("codex");
        if !fake.exists() {
            std::fs::copy("/bin/bash", &fake).unwrap();
        }
        let mut cmd = std::process::Command::new(&fake);
        cmd.args(["-c", "sleep 30; true", "resume", T])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0);
        if no_new_privs {
            // SAFETY: one raw prctl between fork and exec, no allocation.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.spawn().unwrap()
    }

    fn stop(mut child: std::process::Child) {
        // the program and its `sleep`
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        child.wait().unwrap();
    }

    #[test]
    fn a_process_of_this_user_resuming_the_thread_is_found_and_one_that_ended_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let thread = ThreadId::parse(T).unwrap();
        assert_eq!(app_holding(&thread), None);
        // with no_new_privs, as in codex's sandbox: never found, once it runs as `codex`
        let sandboxed = start(dir.path(), true);
        let cmdline = format!("/proc/{}/cmdline", sandboxed.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read(&cmdline).is_ok_and(|c| String::from_utf8_lossy(&c).contains(T)) {
            assert!(std::time::Instant::now() < deadline, "never started");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(app_holding(&thread), None, "a sandboxed process counted");
        stop(sandboxed);
        let child = start(dir.path(), false);
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
        stop(child);
        assert_eq!(app_holding(&thread), None);
    }
}

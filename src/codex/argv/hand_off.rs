//! The command a person runs to continue a session's thread in codex's own terminal app.

use std::path::Path;

use crate::security::ids::ThreadId;

/// `s` as one word of a POSIX shell: single-quoted, each `'` written as `'\''`.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `CODEX_HOME=<home> <program> resume -C <cwd> <thread>`, each value quoted for a POSIX
/// shell: codex's terminal app opens `thread` (a UUID, never read as a flag or a name) from
/// the CODEX_HOME it lives in, in the session's working directory. Without a known CODEX_HOME
/// the person's own applies.
pub fn hand_off(
    program: &Path,
    codex_home: Option<&Path>,
    cwd: &Path,
    thread: &ThreadId,
) -> String {
    let home = codex_home
        .map(|h| format!("CODEX_HOME={} ", quoted(&h.to_string_lossy())))
        .unwrap_or_default();
    format!(
        "{home}{} resume -C {} {}",
        quoted(&program.to_string_lossy()),
        quoted(&cwd.to_string_lossy()),
        thread.to_arg()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_quotes_every_path_and_names_the_thread_by_its_uuid() {
        let t = ThreadId::parse("019a0000-0000-7000-8000-000000000001").unwrap();
        let cmd = hand_off(
            Path::new("/opt/codex bin/codex"),
            Some(Path::new("/home/a b/.codex")),
            Path::new("/work/it's here"),
            &t,
        );
        assert_eq!(
            cmd,
            "CODEX_HOME='/home/a b/.codex' '/opt/codex bin/codex' resume -C '/work/it'\\''s here' \
             019a0000-0000-7000-8000-000000000001"
        );
        let plain = hand_off(Path::new("codex"), None, Path::new("/w"), &t);
        assert_eq!(
            plain,
            "'codex' resume -C '/w' 019a0000-0000-7000-8000-000000000001"
        );
    }
}

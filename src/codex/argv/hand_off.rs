//! The command a person runs to continue a session's thread in codex's own terminal app, and
//! why there is none when a value in it would not show as it is.
//!
//! The command is pasted into whatever shell the person uses, so each value is written as one
//! word that sh (dash), bash, zsh and fish all read alike: runs of characters inside single
//! quotes, except `\` and `'`, which go outside them as `\\` and `\'`. Inside single quotes
//! POSIX shells take a backslash as itself, but fish reads `\\` and `\'` there as escapes
//! (`'a\'` never ends for fish): no backslash and no quote ever sits inside quotes here.
//! Outside quotes all four read `\\` as `\` and `\'` as `'`. Two quoted runs never touch
//! (zsh's `RC_QUOTES` would read `''` inside them as a quote).
//!
//! A value holding a character a terminal does not show as it is (a control, a newline or
//! tab, a bidirectional or zero-width character, any other character [`shown::plain`]
//! refuses, a pile of combining marks that draws over its neighbours), or a path that is not
//! UTF-8, makes the command absent: a person would paste what they cannot read. Look-alike
//! letters ([`crate::security::lookalike`]) are left alone: each shows as itself, every
//! value stays one quoted word whatever it looks like, so what runs is what is shown.

use std::path::Path;

use crate::security::ids::ThreadId;
use crate::security::shown;

/// Which value of the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandOffValue {
    /// The codex program the command runs.
    Program,
    /// The CODEX_HOME it runs with.
    CodexHome,
    /// The session's working directory.
    WorkingDirectory,
}

impl HandOffValue {
    fn name(self) -> &'static str {
        match self {
            HandOffValue::Program => "the codex program's path",
            HandOffValue::CodexHome => "the CODEX_HOME path",
            HandOffValue::WorkingDirectory => "the working directory's name",
        }
    }
}

/// What in a value a terminal does not show as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotShown {
    /// Not UTF-8: a terminal shows another path than the one that exists.
    NotUtf8,
    /// A newline: the command would be two lines.
    Newline,
    /// A tab: shown as blanks, and completed by an interactive shell it is pasted into.
    Tab,
    /// A character [`shown::plain`] refuses (control, format, odd blank, unassigned...).
    Char(char),
    /// More than [`shown::MAX_MARKS`] combining marks on one character.
    StackedMarks,
}

/// Why a session has no hand-off command: which value, and what in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{} {}", .value.name(), describe(.why))]
pub struct HandOffUnavailable {
    pub value: HandOffValue,
    pub why: NotShown,
}

fn describe(why: &NotShown) -> String {
    match why {
        NotShown::NotUtf8 => "is not UTF-8, so a terminal shows another path than the one that \
                              exists"
            .to_owned(),
        NotShown::Newline => "holds a newline, which splits the command over two lines".to_owned(),
        NotShown::Tab => "holds a tab, which a terminal shows as blanks and a shell may complete \
                          when it is pasted"
            .to_owned(),
        NotShown::Char(c) => format!(
            "holds U+{:04X} ({}), which a terminal does not show as it is",
            *c as u32,
            kind(*c)
        ),
        NotShown::StackedMarks => format!(
            "holds more than {} combining marks on one character, which draw over the \
             characters beside it",
            shown::MAX_MARKS
        ),
    }
}

/// What kind of character `c` is, in words (for a character [`shown::plain`] refuses).
fn kind(c: char) -> &'static str {
    if c.is_control() {
        "a control character"
    } else if c.is_whitespace() || c == '\u{2800}' {
        "a blank other than the space"
    } else {
        "an invisible, direction-changing or unassigned character"
    }
}

/// `value` as it is when a terminal shows it as it is.
fn showable(value: &Path, which: HandOffValue) -> Result<&str, HandOffUnavailable> {
    let fail = |why| HandOffUnavailable { value: which, why };
    let text = value.to_str().ok_or(fail(NotShown::NotUtf8))?;
    let mut marks = 0;
    for c in text.chars() {
        match c {
            '\n' => return Err(fail(NotShown::Newline)),
            '\t' => return Err(fail(NotShown::Tab)),
            c if !shown::plain(c) => return Err(fail(NotShown::Char(c))),
            _ => {}
        }
        marks = if crate::security::lookalike::is_mark(c) {
            marks + 1
        } else {
            0
        };
        if marks > shown::MAX_MARKS {
            return Err(fail(NotShown::StackedMarks));
        }
    }
    Ok(text)
}

/// `s` as one word that sh, bash, zsh and fish read alike: quoted runs without `\` or `'`,
/// each `\` as `\\` and each `'` as `\'` between them.
pub fn quoted(s: &str) -> String {
    if s.is_empty() {
        return "''".to_owned();
    }
    let mut out = String::with_capacity(s.len() + 2);
    let mut open = false;
    for c in s.chars() {
        if c == '\\' || c == '\'' {
            if open {
                out.push('\'');
                open = false;
            }
            out.push('\\');
            out.push(c);
        } else {
            if !open {
                out.push('\'');
                open = true;
            }
            out.push(c);
        }
    }
    if open {
        out.push('\'');
    }
    out
}

/// `CODEX_HOME=<home> <program> resume -C <cwd> <thread>`, each value one word of every
/// common shell ([`quoted`]): codex's terminal app opens `thread` (a UUID, never read as a
/// flag or a name) from the CODEX_HOME it lives in, in the session's working directory.
/// Without a known CODEX_HOME the person's own applies. None, with the reason, when a value
/// would not show as it is.
pub fn hand_off(
    program: &Path,
    codex_home: Option<&Path>,
    cwd: &Path,
    thread: &ThreadId,
) -> Result<String, HandOffUnavailable> {
    let home = match codex_home {
        Some(h) => format!(
            "CODEX_HOME={} ",
            quoted(showable(h, HandOffValue::CodexHome)?)
        ),
        None => String::new(),
    };
    let program = quoted(showable(program, HandOffValue::Program)?);
    let cwd = quoted(showable(cwd, HandOffValue::WorkingDirectory)?);
    Ok(format!(
        "{home}{program} resume -C {cwd} {}",
        thread.to_arg()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "019a0000-0000-7000-8000-000000000001";

    #[test]
    fn the_command_quotes_every_path_and_names_the_thread_by_its_uuid() {
        let t = ThreadId::parse(T).unwrap();
        let cmd = hand_off(
            Path::new("/opt/codex bin/codex"),
            Some(Path::new("/home/a b/.codex")),
            Path::new("/work/it's here"),
            &t,
        )
        .unwrap();
        assert_eq!(
            cmd,
            "CODEX_HOME='/home/a b/.codex' '/opt/codex bin/codex' resume -C '/work/it'\\''s here' \
             019a0000-0000-7000-8000-000000000001"
        );
        let plain = hand_off(Path::new("codex"), None, Path::new("/w"), &t).unwrap();
        assert_eq!(
            plain,
            "'codex' resume -C '/w' 019a0000-0000-7000-8000-000000000001"
        );
    }

    #[test]
    fn no_backslash_or_quote_is_ever_inside_quotes() {
        assert_eq!(
            quoted(r"x\';touch INJECTED;#"),
            r"'x'\\\'';touch INJECTED;#'"
        );
        assert_eq!(quoted(r"/w/x\"), r"'/w/x'\\");
        assert_eq!(quoted(r"\\''"), r"\\\\\'\'");
        assert_eq!(quoted(""), "''");
        assert_eq!(quoted("$(id) `id` !x *"), "'$(id) `id` !x *'");
        for s in [r"a\b", "a'b", r"\'\", r"''\\a", "plain", "é'\\ü"] {
            let q = quoted(s);
            // read back: inside quotes every character as it is (never `\`), outside
            // only `\\` and `\'`; a quoted run never follows another
            let (mut word, mut inside, mut closed_last) = (String::new(), false, false);
            let mut chars = q.chars();
            while let Some(c) = chars.next() {
                match (inside, c) {
                    (true, '\'') => (inside, closed_last) = (false, true),
                    (true, '\\') => panic!("a backslash inside quotes: {s:?} -> {q}"),
                    (true, c) => word.push(c),
                    (false, '\'') => {
                        assert!(!closed_last, "two quoted runs touch: {s:?} -> {q}");
                        inside = true;
                    }
                    (false, '\\') => {
                        let n = chars.next().unwrap();
                        assert!(n == '\\' || n == '\'', "{s:?} -> {q}");
                        word.push(n);
                        closed_last = false;
                    }
                    (false, c) => panic!("{c:?} outside quotes: {s:?} -> {q}"),
                }
            }
            assert!(!inside, "{s:?} -> {q}");
            assert_eq!(word, s);
        }
    }

    #[test]
    fn a_value_that_does_not_show_as_it_is_makes_the_command_absent_naming_it() {
        let t = ThreadId::parse(T).unwrap();
        let run = |cwd: &str| hand_off(Path::new("codex"), None, Path::new(cwd), &t);
        for (cwd, why) in [
            ("/w/a\u{202e}gnp.exe", NotShown::Char('\u{202e}')),
            ("/w/a\u{200b}b", NotShown::Char('\u{200b}')),
            ("/w/a\u{1b}[2Jb", NotShown::Char('\u{1b}')),
            ("/w/a\u{a0}b", NotShown::Char('\u{a0}')),
            ("/w/two\nlines", NotShown::Newline),
            ("/w/a\tb", NotShown::Tab),
            ("/w/e\u{301}\u{301}\u{301}\u{301}", NotShown::StackedMarks),
        ] {
            let e = run(cwd).unwrap_err();
            assert_eq!(e.value, HandOffValue::WorkingDirectory, "{cwd:?}");
            assert_eq!(e.why, why, "{cwd:?}");
            assert!(
                e.to_string().starts_with("the working directory's name "),
                "{e}"
            );
        }
        let e = run("/w/a\u{202e}b").unwrap_err().to_string();
        assert_eq!(
            e,
            "the working directory's name holds U+202E (an invisible, direction-changing or \
             unassigned character), which a terminal does not show as it is"
        );
        // the other values too
        let e = hand_off(Path::new("/opt/\u{200b}codex"), None, Path::new("/w"), &t).unwrap_err();
        assert_eq!(e.value, HandOffValue::Program);
        let e = hand_off(
            Path::new("codex"),
            Some(Path::new("/h/\u{2066}x")),
            Path::new("/w"),
            &t,
        )
        .unwrap_err();
        assert_eq!(e.value, HandOffValue::CodexHome);
        // not UTF-8
        use std::os::unix::ffi::OsStrExt;
        let raw = std::ffi::OsStr::from_bytes(b"/w/\xff");
        let e = hand_off(Path::new("codex"), None, Path::new(raw), &t).unwrap_err();
        assert_eq!(e.why, NotShown::NotUtf8);
        // what shows as it is stays: other scripts, accents, a look-alike, shell syntax
        for ok in [
            "/w/café/проект/日本語",
            "/w/gіthub",
            "/w/cafe\u{301}",
            "/w/$(touch x) `id` !! * ~ #",
        ] {
            assert!(run(ok).is_ok(), "{ok:?}");
        }
    }
}

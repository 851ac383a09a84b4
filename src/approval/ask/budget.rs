//! What a host shows of a form, and forms shaped to fit it (pure).
//!
//! A person decides on what they read, whole. Hosts show a form's `message` and fields
//! differently, and some cut them without a way to see the rest:
//!
//! - Codex's terminal app as host (client name [`CODEX_CLIENT`]) shows a form's whole message,
//!   lines and all ([`Shows::Whole`]).
//! - Claude Code's terminal app (client name `claude-code`) shows three rows of the message at
//!   most: a message with line breaks has each line cut at the terminal's width less 7 columns
//!   (73 at 80 columns), one without wraps onto three rows; a field's title is cut at about 44
//!   characters, its description is one row. [`Shows::Rows`] with [`ROWS`] rows of
//!   [`COLUMNS`] columns, which assumes a terminal of at least 80 columns.
//! - Any other host: the smallest budget known, Claude Code's.
//!
//! [`overflow`] says what of a form would not be shown whole; [`compact`] writes a question in
//! three rows (what runs, where, what accepting grants), with codex's reason in the one field's
//! description, cut to that row with a mark when longer ([`in_one_row`]: the reason is the
//! model's own words; what runs and where is never cut). A question whose command or directory
//! does not fit is never asked as a form: it goes to the question's page (a client that
//! declares URL-mode elicitation) or is declined unasked.

use rmcp::model::{ElicitRequestParams, ElicitationSchema};
use serde_json::Value;

use crate::approval::Question;
use crate::security::redact::ClientSecrets;

/// The field of an approval form: the yes/no `approve` (default no).
pub const APPROVE_FIELD: &str = "approve";
/// The client name of Codex's terminal app as an MCP host.
pub const CODEX_CLIENT: &str = "codex-mcp-client";
/// Most rows of a message a small host shows.
pub const ROWS: usize = 3;
/// Most columns of one row of a message (Claude Code at 80 columns shows 73; one spare).
pub const COLUMNS: usize = 72;
/// Most columns of a field's title.
pub const TITLE_COLUMNS: usize = 40;
/// Most columns of a field's description (one row: 69 at 80 columns).
pub const DESCRIPTION_COLUMNS: usize = 64;
/// Most columns of a string field's default value (one row with its label).
pub const DEFAULT_COLUMNS: usize = 48;
/// Most columns of one option of a choice.
pub const OPTION_COLUMNS: usize = 44;
/// Most fields of one form (Claude Code lists 15 before "↓ N more").
pub const MAX_FIELDS: usize = 15;
/// Columns of a tab.
const TAB: usize = 8;

/// How much of a form a host shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shows {
    /// The whole message and every field as they are.
    Whole,
    /// At most `rows` rows of `columns` columns of the message; fields cut as Claude Code cuts
    /// them.
    Rows { rows: usize, columns: usize },
}

/// The smallest budget known (Claude Code's at 80 columns), for any host not known to show
/// more.
pub const SMALLEST: Shows = Shows::Rows {
    rows: ROWS,
    columns: COLUMNS,
};

/// What the host behind a call shows, and whether it can open a page for a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    pub shows: Shows,
    /// The client declared form elicitation.
    pub form: bool,
    /// The client declared URL-mode elicitation.
    pub url: bool,
}

impl Host {
    /// The host that names itself `client_name`, declaring form and URL mode or not.
    pub fn named(client_name: Option<&str>, form: bool, url: bool) -> Self {
        let shows = match client_name {
            Some(CODEX_CLIENT) => Shows::Whole,
            _ => SMALLEST,
        };
        Host { shows, form, url }
    }
}

impl Default for Host {
    /// A host not known: the smallest budget, forms only.
    fn default() -> Self {
        Host {
            shows: SMALLEST,
            form: true,
            url: false,
        }
    }
}

/// Columns `s` takes on a terminal, counted high: a character outside ASCII as two (a wide
/// one takes two), a tab as [`TAB`].
pub fn width(s: &str) -> usize {
    s.chars()
        .map(|c| match c {
            '\t' => TAB,
            c if c.is_ascii() => 1,
            _ => 2,
        })
        .sum()
}

/// Rows one line takes when wrapped at `columns`: words moved whole to the next row, a word
/// wider than a row broken (as a terminal UI's word wrap does).
fn wrapped_rows(line: &str, columns: usize) -> usize {
    let mut rows = 1;
    let mut used = 0;
    for word in line.split(' ') {
        let w = width(word);
        let need = if used == 0 { w } else { used + 1 + w };
        if need <= columns {
            used = need;
            continue;
        }
        if used > 0 {
            rows += 1;
        }
        // a word wider than a row fills rows of its own
        rows += w.saturating_sub(1) / columns.max(1);
        used = match w % columns.max(1) {
            0 if w > 0 => columns,
            r => r,
        };
    }
    rows
}

/// What of a form a host would not show whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Overflow {
    #[error("its message takes more than {0} row(s) of {1} columns")]
    Message(usize, usize),
    #[error("a field's title is wider than {TITLE_COLUMNS} columns")]
    Title,
    #[error("a field's description is longer than one row of {DESCRIPTION_COLUMNS} columns")]
    Description,
    #[error("a field's default is wider than {DEFAULT_COLUMNS} columns")]
    Default,
    #[error("an option is wider than {OPTION_COLUMNS} columns")]
    Option,
    #[error("it has more than {MAX_FIELDS} fields")]
    Fields,
    #[error("it is not a form")]
    NotAForm,
}

/// What of `params` a host showing `shows` would not show whole, if anything.
pub fn overflow(params: &ElicitRequestParams, shows: Shows) -> Option<Overflow> {
    let Shows::Rows { rows, columns } = shows else {
        return None;
    };
    let (message, rows) = match params {
        ElicitRequestParams::FormElicitationParams { message, .. } => (message, rows),
        // a URL elicitation's message gets one row
        ElicitRequestParams::UrlElicitationParams { message, .. } => (message, 1),
        _ => return Some(Overflow::NotAForm),
    };
    let lines: Vec<&str> = message.split('\n').collect();
    let fits = if lines.len() == 1 {
        wrapped_rows(message, columns) <= rows
    } else {
        lines.len() <= rows && lines.iter().all(|l| width(l) <= columns)
    };
    if !fits {
        return Some(Overflow::Message(rows, columns));
    }
    match params {
        ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } => fields_overflow(requested_schema),
        _ => None,
    }
}

/// What of a form's fields a small host would not show whole.
fn fields_overflow(schema: &ElicitationSchema) -> Option<Overflow> {
    let Ok(Value::Object(schema)) = serde_json::to_value(schema) else {
        return Some(Overflow::NotAForm);
    };
    let Some(Value::Object(props)) = schema.get("properties") else {
        return None;
    };
    if props.len() > MAX_FIELDS {
        return Some(Overflow::Fields);
    }
    let one_row = |s: &str, max: usize| !s.contains(['\n', '\r']) && width(s) <= max;
    for (key, prop) in props {
        let text = |k: &str| prop.get(k).and_then(Value::as_str);
        // a field without a title shows its key
        if !one_row(text("title").unwrap_or(key), TITLE_COLUMNS) {
            return Some(Overflow::Title);
        }
        if text("description").is_some_and(|d| !one_row(d, DESCRIPTION_COLUMNS)) {
            return Some(Overflow::Description);
        }
        if text("default").is_some_and(|d| !one_row(d, DEFAULT_COLUMNS)) {
            return Some(Overflow::Default);
        }
        if options_of(prop).any(|o| !one_row(o, OPTION_COLUMNS)) {
            return Some(Overflow::Option);
        }
    }
    None
}

/// The options a choice field lists: its `enum` values and its `oneOf`/`anyOf` titles (and
/// the `items` of a multiple choice).
fn options_of(prop: &Value) -> impl Iterator<Item = &str> {
    let mut all = choices(prop);
    if let Some(items) = prop.get("items") {
        all.extend(choices(items));
    }
    all.into_iter()
}

/// The `enum` values (and their legacy `enumNames`) and `oneOf`/`anyOf` titles of one schema.
fn choices(v: &Value) -> Vec<&str> {
    ["enum", "enumNames", "oneOf", "anyOf"]
        .iter()
        .filter_map(|k| v.get(*k)?.as_array())
        .flatten()
        .filter_map(|o| o.as_str().or_else(|| o.get("title")?.as_str()))
        .collect()
}

/// The first line of a compact approval: what is asked and what accepting grants.
fn compact_title(question: &Question) -> Option<&'static str> {
    Some(match question {
        Question::Command {
            command,
            network_host: Some(_),
            ..
        } if command.is_empty() => "Codex asks for network access, this once:",
        Question::Command { .. } => "Codex asks to run this outside its sandbox, once:",
        Question::Permissions { .. } => "Codex asks for more permissions, for this turn only:",
        _ => return None,
    })
}

/// The rows of a compact approval after its title: (what stands before it, the text).
fn compact_rows(question: &Question) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    let lines = question.lines();
    let line = |label: &str| {
        lines
            .iter()
            .find(|(l, _)| *l == label)
            .map(|(_, t)| t.clone())
    };
    match question {
        Question::Command { .. } => {
            if let Some(c) = line("Command") {
                rows.push(("$ ", c));
            }
            if let Some(h) = line("Network host") {
                rows.push(("host: ", h));
            }
            rows.push((
                "in ",
                line("Working directory").unwrap_or_else(|| "(no working directory given)".into()),
            ));
        }
        Question::Permissions { .. } => {
            rows.push(("in ", line("Working directory").unwrap_or_default()));
            let mut grants = Vec::new();
            for (label, word) in [("Read", "read"), ("Write", "write")] {
                if let Some(paths) = line(label) {
                    grants.push(format!("{word} {}", paths.replace('\n', ", ")));
                }
            }
            if line("Network").is_some() {
                grants.push("network".into());
            }
            rows.push(("", grants.join("; ")));
        }
        _ => {}
    }
    rows
}

/// What stands before codex's reason in a compact approval's one field.
pub const REASON_LEAD: &str = "Codex's reason: ";
/// The mark at the end of a text cut to fit its row.
pub const CUT_MARK: char = '…';

/// `lead` and `text` in one row of `columns` columns: whole when they fit; else the first line
/// of `text` cut where the row ends (at a word when one ends in the row's second half), then
/// [`CUT_MARK`], so that a person sees there was more.
pub fn in_one_row(lead: &str, text: &str, columns: usize) -> String {
    let whole = format!("{lead}{text}");
    if !whole.contains(['\n', '\r']) && width(&whole) <= columns {
        return whole;
    }
    let room = columns.saturating_sub(width(lead) + width(CUT_MARK.encode_utf8(&mut [0; 4])));
    let mut kept = String::new();
    let mut used = 0;
    for c in text.chars().take_while(|c| !matches!(c, '\n' | '\r')) {
        used += width(c.encode_utf8(&mut [0; 4]));
        if used > room {
            break;
        }
        kept.push(c);
    }
    // a cut inside a word ends at the word before it, when that leaves the row half full
    let inside_a_word = text[kept.len()..]
        .chars()
        .next()
        .is_some_and(|c| !c.is_whitespace());
    if inside_a_word
        && let Some(i) = kept.rfind(' ')
        && width(&kept[..i]) >= room / 2
    {
        kept.truncate(i);
    }
    format!("{lead}{}{CUT_MARK}", kept.trim_end())
}

/// `question` as a form in [`ROWS`] rows: the command (or what is asked), where it runs, what
/// accepting grants, and codex's reason as the field's description, cut to its row with a mark
/// ([`in_one_row`]: the command and its directory are never cut); `None` for a question that
/// has no compact form (a file change, whose content never fits) or whose command or directory
/// does not fit `shows` this way.
pub fn compact(
    question: &Question,
    secrets: &ClientSecrets,
    shows: Shows,
) -> Option<ElicitRequestParams> {
    let title = compact_title(question)?;
    let mut message = title.to_owned();
    for (before, text) in compact_rows(question) {
        message.push('\n');
        message.push_str(before);
        message.push_str(&secrets.redact(&text));
    }
    let reason = match question {
        Question::Command { reason, .. } | Question::Permissions { reason, .. } => reason.clone(),
        _ => None,
    };
    // codex's reason is the model's own text, not what runs: cut to its row, with a mark
    let description = match reason {
        Some(r) => in_one_row(REASON_LEAD, &secrets.redact(&r), DESCRIPTION_COLUMNS),
        None => "Codex gave no reason. Leave unchecked to refuse.".to_owned(),
    };
    let schema = ElicitationSchema::builder()
        .required_bool_with(APPROVE_FIELD, |b| {
            b.title("Allow this once")
                .description(description)
                .with_default(false)
        })
        .build_unchecked();
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    overflow(&params, shows).is_none().then_some(params)
}

/// The message of a question's URL elicitation: what is asked, that it is decided on the page,
/// and the code Approve needs there, in one row (Claude Code shows one row of a URL
/// elicitation's message: measured, a longer one is cut at 73 characters with `…`).
pub fn page_message(question: &Question, code: &str) -> String {
    // the log writer hides what follows this lead (crate::logging::hide_page_secrets)
    format!(
        "Codex: {}? {}{code}",
        page_asks(question),
        crate::logging::PAGE_CODE_LEAD
    )
}

/// The message of the same page asked again after "I'm done" while it was undecided: the
/// host's dialog is the only place its code is shown, so it shows it again (in one row too).
pub fn page_message_again(question: &Question, code: &str) -> String {
    format!(
        "Undecided: {}? {}{code}",
        page_asks(question),
        crate::logging::PAGE_CODE_LEAD
    )
}

/// What a question's page asks, in a few words.
fn page_asks(question: &Question) -> &'static str {
    match question {
        Question::Command {
            command,
            network_host: Some(_),
            ..
        } if command.is_empty() => "Network access",
        Question::Command { .. } => "Run a command unsandboxed",
        Question::FileChange { .. } => "Change files",
        Question::Permissions { .. } => "More permissions",
        _ => "A question",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(cmd: &str, cwd: &str, reason: Option<&str>) -> Question {
        Question::Command {
            command: cmd.into(),
            cwd: Some(cwd.into()),
            reason: reason.map(Into::into),
            network_host: None,
            workdir: None,
            cwd_resolves_outside: false,
        }
    }

    fn message_of(p: &ElicitRequestParams) -> &str {
        match p {
            ElicitRequestParams::FormElicitationParams { message, .. } => message,
            _ => panic!("a form"),
        }
    }

    #[test]
    fn the_known_hosts_and_the_rest() {
        assert_eq!(
            Host::named(Some(CODEX_CLIENT), true, false).shows,
            Shows::Whole
        );
        assert_eq!(Host::named(Some("claude-code"), true, true).shows, SMALLEST);
        assert_eq!(
            Host::named(Some("my-orchestrator"), true, false).shows,
            SMALLEST
        );
        assert_eq!(Host::named(None, true, false), Host::default());
    }

    #[test]
    fn rows_are_counted_as_a_terminal_wraps_them() {
        assert_eq!(wrapped_rows("", 72), 1);
        assert_eq!(wrapped_rows(&"a".repeat(72), 72), 1);
        assert_eq!(wrapped_rows(&"a".repeat(73), 72), 2);
        assert_eq!(wrapped_rows(&"a".repeat(216), 72), 3);
        assert_eq!(wrapped_rows(&"a".repeat(217), 72), 4);
        // a word that does not fit the rest of a row starts the next
        let line = format!("{} {}", "a".repeat(40), "b".repeat(40));
        assert_eq!(wrapped_rows(&line, 72), 2);
        // wide characters count two columns
        assert_eq!(width("日本"), 4);
        assert_eq!(width("a\tb"), 10);
    }

    #[test]
    fn a_short_command_fits_in_three_rows_with_its_reason_below() {
        let secrets = ClientSecrets::default();
        let q = command("ls -la", "/home/u/project", Some("list the files"));
        let form = compact(&q, &secrets, SMALLEST).expect("fits");
        assert_eq!(
            message_of(&form),
            "Codex asks to run this outside its sandbox, once:\n$ ls -la\nin /home/u/project"
        );
        let schema = match &form {
            ElicitRequestParams::FormElicitationParams {
                requested_schema, ..
            } => serde_json::to_value(requested_schema).unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(
            schema["properties"]["approve"]["description"],
            "Codex's reason: list the files"
        );
        assert!(overflow(&form, SMALLEST).is_none());
    }

    #[test]
    fn what_a_small_host_would_cut_has_no_compact_form() {
        let secrets = ClientSecrets::default();
        for q in [
            // four lines
            command("a\nb\nc\nd", "/w", None),
            // 380 characters
            command(
                &format!("echo {}; touch /tmp/x", "y".repeat(360)),
                "/w",
                None,
            ),
            // a working directory wider than a row
            command("ls", &format!("/{}", "d".repeat(80)), None),
        ] {
            assert!(compact(&q, &secrets, SMALLEST).is_none(), "{q:?}");
        }
        let change = Question::FileChange {
            reason: None,
            grant_root: None,
            files: Some(vec![]),
            workdir: None,
        };
        assert!(compact(&change, &secrets, SMALLEST).is_none());
    }

    fn description_of(p: &ElicitRequestParams) -> String {
        match p {
            ElicitRequestParams::FormElicitationParams {
                requested_schema, ..
            } => serde_json::to_value(requested_schema).unwrap()["properties"][APPROVE_FIELD]
                ["description"]
                .as_str()
                .unwrap()
                .to_owned(),
            _ => panic!("a form"),
        }
    }

    /// What a person met in Claude Code at 80 columns: codex 0.171.0's `/bin/bash -lc` command
    /// with a sentence of a reason went to the page; it is a form, the reason cut to its row.
    #[test]
    fn a_short_command_with_a_sentence_of_a_reason_is_a_form_its_reason_cut_with_a_mark() {
        let secrets = ClientSecrets::default();
        let reason = "Create the marker file you asked for so the build can go on.";
        assert_eq!(reason.len(), 60);
        let q = command(
            "/bin/bash -lc 'touch ../FORMFIT'",
            "/home/me/project",
            Some(reason),
        );
        let form = compact(&q, &secrets, SMALLEST).expect("a form");
        // the command and its directory whole
        assert_eq!(
            message_of(&form),
            "Codex asks to run this outside its sandbox, once:\n\
             $ /bin/bash -lc 'touch ../FORMFIT'\nin /home/me/project"
        );
        // the reason cut at a word, with the mark, within its row
        let d = description_of(&form);
        assert_eq!(
            d,
            "Codex's reason: Create the marker file you asked for so the…"
        );
        assert!(width(&d) <= DESCRIPTION_COLUMNS);
        assert!(overflow(&form, SMALLEST).is_none());
        // a reason that fits is whole, with no mark
        let q = command("/bin/bash -lc 'touch ../FORMFIT'", "/w", Some("make it"));
        let d = description_of(&compact(&q, &secrets, SMALLEST).unwrap());
        assert_eq!(d, "Codex's reason: make it");
        // a reason of many lines: its first line and the mark
        let q = command("ls", "/w", Some("list them\nand then more"));
        let d = description_of(&compact(&q, &secrets, SMALLEST).unwrap());
        assert_eq!(d, "Codex's reason: list them…");
        // one long word is cut inside it, and wide characters count two columns
        for long in ["x".repeat(100), "日".repeat(40)] {
            let q = command("ls", "/w", Some(&long));
            let d = description_of(&compact(&q, &secrets, SMALLEST).unwrap());
            assert!(
                d.ends_with(CUT_MARK) && width(&d) <= DESCRIPTION_COLUMNS,
                "{d}"
            );
            assert!(width(&d) >= DESCRIPTION_COLUMNS - 2, "the row is used: {d}");
        }
        // the reason is cut after redaction: a secret's start is never shown
        let secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789abcdef";
        let (secrets, _) = ClientSecrets::bounded([secret]);
        let q = command(
            "ls",
            "/w",
            Some(&format!("{} with {secret}", "use ".repeat(8))),
        );
        let d = description_of(&compact(&q, &secrets, SMALLEST).unwrap());
        assert!(!d.contains("sk-proj"), "{d}");
    }

    /// Only codex's reason is ever cut: a command or directory that does not fit its row has no
    /// form, however short the reason.
    #[test]
    fn a_command_or_directory_is_never_cut_to_make_a_form() {
        let secrets = ClientSecrets::default();
        let long = format!("/bin/bash -lc 'touch {}'", "/home/me/project/".repeat(4));
        assert!(width(&format!("$ {long}")) > COLUMNS);
        for q in [
            command(&long, "/w", Some("ok")),
            command("ls", &format!("/{}", "d".repeat(COLUMNS)), Some("ok")),
        ] {
            assert!(compact(&q, &secrets, SMALLEST).is_none(), "{q:?}");
        }
    }

    #[test]
    fn fields_are_held_to_what_a_small_host_shows() {
        let form = |props: Value| {
            let schema = serde_json::json!({"type": "object", "properties": props});
            let Value::Object(obj) = schema else {
                unreachable!()
            };
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: "Pick one".into(),
                requested_schema: ElicitationSchema::from_json_schema(obj).unwrap(),
            }
        };
        let ok = form(
            serde_json::json!({"b": {"type": "string", "title": "Branch",
            "description": "Which branch?", "enum": ["main", "dev"]}}),
        );
        assert_eq!(overflow(&ok, SMALLEST), None);
        for (props, want) in [
            (
                serde_json::json!({"b": {"type": "string", "title": "t".repeat(41)}}),
                Overflow::Title,
            ),
            (
                serde_json::json!({"b": {"type": "string", "description": "two\nrows"}}),
                Overflow::Description,
            ),
            (
                serde_json::json!({"b": {"type": "string", "default": "d".repeat(49)}}),
                Overflow::Default,
            ),
            (
                serde_json::json!({"b": {"type": "string", "enum": ["o".repeat(45)]}}),
                Overflow::Option,
            ),
            // a legacy enum's labels are what a host shows of its options
            (
                serde_json::json!({"b": {"type": "string", "enum": ["a"],
                    "enumNames": ["o".repeat(45)]}}),
                Overflow::Option,
            ),
        ] {
            assert_eq!(overflow(&form(props), SMALLEST), Some(want));
        }
    }

    #[test]
    fn the_page_message_fits_the_one_row_a_small_host_shows_of_it() {
        let url = |message: String| ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message,
            url: format!("http://127.0.0.1:65535/q/{}", "0".repeat(64)),
            elicitation_id: "x".into(),
        };
        let change = Question::FileChange {
            reason: None,
            grant_root: None,
            files: None,
            workdir: None,
        };
        for q in [command("ls", "/w", None), change] {
            assert_eq!(overflow(&url(page_message(&q, "123456")), SMALLEST), None);
            let again = page_message_again(&q, "123456");
            assert_eq!(overflow(&url(again.clone()), SMALLEST), None, "{again}");
            assert!(
                again.ends_with("Decide on the page; code 123456"),
                "{again}"
            );
        }
        // what Claude Code cut: one row is all a URL elicitation's message gets
        let cut = "Codex asks to run a command outside its sandbox. Read it whole on the page";
        assert_eq!(
            overflow(&url(cut.into()), SMALLEST),
            Some(Overflow::Message(1, COLUMNS))
        );
    }
}

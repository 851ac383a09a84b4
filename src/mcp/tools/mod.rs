//! The tools, one file each (as mini-redis keeps a command per file): a tool's file holds its
//! arguments (whose field docs are its input schema's descriptions), its result when no other
//! tool returns it, its handler on [`McpServer`](crate::mcp::McpServer) and its entry in the
//! table (a `ToolEntry`, `super::connection`'s). This file lists them (`TOOLS`, the one place
//! the tools' order is written) and what is read from the list: a tool by name, the turn
//! tools, `tools/list` ([`tool_list`]) and docs/tools.md's table ([`tool_table`]). What the
//! handlers share is in `common.rs`.
//!
//! A handler parses its arguments (field-named errors), resolves the caller's paths, turns them
//! into typed requests on [`crate::actors::Bridge`], and shapes its answers. Nothing here
//! builds a codex invocation, runs a process or reads the store: the actors do. A prompt is
//! checked here, once, into a [`Prompt`](crate::security::prompt::Prompt) that is carried to codex;
//! the checks of the rest of what reaches codex (model, sandbox policy) run where the
//! invocation is built. The model id is also checked here, first, so a bad one is refused
//! before anything is queued or spawned, on either backend.

pub mod apply_session;
pub mod close_session;
pub mod codex;
pub(crate) mod common;
pub mod compact_session;
pub mod diff_session;
pub mod fork_session;
pub mod get_session;
pub mod list_sessions;
pub mod ping;
pub mod query;
pub mod rename_session;
pub mod review;
pub mod rewind_session;
pub mod search;
pub mod steer;
pub mod stop;
pub mod structured;
pub mod wait;

use std::sync::Arc;

use rmcp::model::Tool;

use crate::mcp::connection::ToolEntry;
use crate::mcp::schemas::annotations;
pub use list_sessions::{DEFAULT_PAGE, MAX_PAGE};
pub use query::MAX_CONTEXT_BYTES;

/// Every tool, in the order `tools/list` shows them: the one place the list is written (each
/// tool's name is written in its own file).
const TOOLS: &[ToolEntry] = &[
    codex::TOOL,
    query::TOOL,
    search::TOOL,
    structured::TOOL,
    review::TOOL,
    list_sessions::TOOL,
    get_session::TOOL,
    close_session::TOOL,
    diff_session::TOOL,
    apply_session::TOOL,
    fork_session::TOOL,
    rename_session::TOOL,
    rewind_session::TOOL,
    compact_session::TOOL,
    steer::TOOL,
    wait::TOOL,
    stop::TOOL,
    ping::TOOL,
];

/// The tool called `name`, if there is one.
pub(super) fn tool_named(name: &str) -> Option<&'static ToolEntry> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The `isError` result of tool `name`'s error `e`, shaped as its entry says: a turn's result
/// with the error ([`Traits::turn_errors`](crate::mcp::connection::Traits)), else the text
/// only. The one place a tool's error becomes its answer.
pub(super) fn error_of(name: &str, e: &crate::error::Error) -> rmcp::model::CallToolResult {
    if tool_named(name).is_some_and(|t| t.is.turn_errors) {
        crate::mcp::answer::error_result(e, None)
    } else {
        crate::mcp::answer::plain_error(e)
    }
}

/// Whether a 2026-07-28 call of `name` carries a person's question in its answer (MRTR): its
/// entry says so (a turn tool that runs as a task, and `wait`).
pub(super) fn asks_in_its_answer(name: &str) -> bool {
    tool_named(name).is_some_and(|t| t.is.asks)
}

/// Every tool, with its schemas and annotations. Without `allow_danger`, `danger-full-access`
/// is not offered as a sandbox.
pub fn tool_list(allow_danger: bool) -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|t| {
            let mut input = (*(t.input)()).clone();
            if !allow_danger
                && let Some(e) = input
                    .get_mut("properties")
                    .and_then(|p| p.get_mut("sandbox"))
                    .and_then(|s| s.get_mut("enum"))
                    .and_then(|e| e.as_array_mut())
            {
                e.retain(|v| v != "danger-full-access");
            }
            let [read_only, destructive, idempotent, open_world] = t.hints;
            Tool::new(t.name, t.description, Arc::new(input))
                .with_title(t.title)
                .with_raw_output_schema((t.output)())
                .with_annotations(annotations(
                    t.title,
                    read_only,
                    destructive,
                    idempotent,
                    open_world,
                ))
        })
        .collect()
}

/// docs/tools.md's tool table, generated from the real schemas (a test keeps docs/tools.md in sync).
pub fn tool_table(allow_danger: bool) -> String {
    let mut out = String::from("| tool | arguments (`*` required) | read-only |\n|---|---|---|\n");
    for t in tool_list(allow_danger) {
        let required: Vec<&str> = t
            .input_schema
            .get("required")
            .and_then(|r| r.as_array())
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let args: Vec<String> = t
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|p| {
                p.keys()
                    .map(|k| {
                        if required.contains(&k.as_str()) {
                            format!("`{k}`*")
                        } else {
                            format!("`{k}`")
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ro = t
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            t.name,
            if args.is_empty() {
                "—".to_owned()
            } else {
                args.join(", ")
            },
            if ro { "yes" } else { "no" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::model::{ListToolsResult, Tool};
    use serde_json::json;

    use super::*;
    use crate::error::Error;
    use crate::mcp::STANDARD_FORMATS;
    use crate::mcp::answer::{error_result, plain_error};
    use crate::mcp::results;

    #[test]
    fn the_readme_tool_table_matches_the_real_schemas() {
        let readme = include_str!("../../../docs/tools.md");
        let start = readme
            .find("<!-- tools:start -->\n")
            .expect("docs/tools.md has the tools table markers")
            + 21;
        let end = readme.find("<!-- tools:end -->").expect("end marker");
        assert_eq!(
            &readme[start..end],
            tool_table(false),
            "docs/tools.md's tool table is out of date; paste the output of mcp::tool_table(false)"
        );
    }

    /// The committed `tools/list` answer: every tool's name, title, description, input and
    /// output schemas and annotations, so that any change to them is a visible diff in review.
    const TOOLS_LIST_SNAPSHOT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/snapshots/tools_list.json"
    );

    /// `tools/list` as a host receives it (the default settings), pretty-printed.
    fn tools_list_answer() -> String {
        let answer = ListToolsResult::with_all_items(tool_list(false));
        let mut text = serde_json::to_string_pretty(&answer).expect("tools/list serializes");
        text.push('\n');
        text
    }

    #[test]
    fn the_tools_list_answer_matches_the_committed_snapshot() {
        let now = tools_list_answer();
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(TOOLS_LIST_SNAPSHOT, &now).expect("write the snapshot");
            return;
        }
        let committed = std::fs::read_to_string(TOOLS_LIST_SNAPSHOT).unwrap_or_default();
        if committed != now {
            let first = committed
                .lines()
                .zip(now.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| committed.lines().count().min(now.lines().count()));
            let line = |t: &str| t.lines().nth(first).unwrap_or("(end of file)").to_owned();
            panic!(
                "the tools/list answer differs from tests/snapshots/tools_list.json from line {}:\n\
                 committed: {}\n\
                 now:       {}\n\
                 If the change is meant, rerun with UPDATE_SNAPSHOTS=1 and commit the file.",
                first + 1,
                line(&committed),
                line(&now)
            );
        }
    }

    /// Most characters of a parameter's description Claude Code shows in its tool view before
    /// it cuts the rest (measured: `background`'s was cut after 200, "… [+18 chars]").
    const SHOWN_DESCRIPTION_CHARS: usize = 200;
    /// Most characters of a parameter description's first sentence: what matters is there, so
    /// that a host which shows only the start of a description still shows it.
    const PARAMETER_FIRST_SENTENCE_CHARS: usize = 60;
    /// Most characters of a tool description's first sentence.
    const TOOL_FIRST_SENTENCE_CHARS: usize = 80;

    /// The first sentence of `text`: up to the first full stop followed by a space.
    fn first_sentence(text: &str) -> &str {
        text.find(". ").map_or(text, |i| &text[..=i])
    }

    #[test]
    fn descriptions_say_what_matters_first_and_are_not_cut() {
        let short = |what: String, text: &str, max: usize| {
            let first = first_sentence(text);
            assert!(
                !first.ends_with("e.g.") && !first.ends_with("i.e."),
                "{what}: an abbreviation ends its first sentence: {text}"
            );
            assert!(
                first.chars().count() <= max,
                "{what}: its first sentence is over {max} characters, what matters may be \
                 cut: {first}"
            );
            assert!(!text.contains('\n'), "{what}: a line break: {text:?}");
        };
        for t in tool_list(true) {
            let text = t.description.as_deref().unwrap_or_default();
            short(format!("tool {}", t.name), text, TOOL_FIRST_SENTENCE_CHARS);
            let props = t.input_schema.get("properties").and_then(|p| p.as_object());
            for (name, p) in props.into_iter().flatten() {
                let what = format!("{}.{name}", t.name);
                let text = p["description"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{what} has no description"));
                short(what.clone(), text, PARAMETER_FIRST_SENTENCE_CHARS);
                assert!(
                    text.chars().count() <= SHOWN_DESCRIPTION_CHARS,
                    "{what}: Claude Code cuts a description after {SHOWN_DESCRIPTION_CHARS} \
                     characters: {text}"
                );
            }
        }
        assert_eq!(first_sentence("One. Two. Three"), "One.");
        assert_eq!(first_sentence("No stop"), "No stop");
    }

    /// Every `format` string anywhere in `v`, with its JSON path.
    fn formats(v: &serde_json::Value, path: String, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(o) => {
                for (k, x) in o {
                    if k == "format"
                        && let Some(f) = x.as_str()
                    {
                        out.push((path.clone(), f.to_owned()));
                    }
                    formats(x, format!("{path}/{k}"), out);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    formats(x, format!("{path}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_schema_uses_standard_json_schema_formats_only() {
        let mut seen = 0;
        for danger in [false, true] {
            for t in tool_list(danger) {
                let mut schemas = vec![("inputSchema", t.input_schema.clone())];
                schemas.extend(t.output_schema.clone().map(|o| ("outputSchema", o)));
                for (which, s) in schemas {
                    seen += 1;
                    let mut found = vec![];
                    formats(
                        &serde_json::Value::Object((*s).clone()),
                        String::new(),
                        &mut found,
                    );
                    for (path, f) in found {
                        assert!(
                            STANDARD_FORMATS.contains(&f.as_str()),
                            "{} {which} at {path}: format `{f}` is not a JSON Schema format",
                            t.name
                        );
                    }
                }
            }
        }
        assert_eq!(
            seen, 72,
            "18 tools, an input and an output schema each, both settings"
        );
    }

    #[test]
    fn unsigned_integers_are_bounded_by_minimum_zero() {
        let tools = tool_list(false);
        let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap().clone();
        let limit = &by_name("listSessions").input_schema["properties"]["limit"];
        assert_eq!(limit["minimum"], 0, "{limit}");
        assert!(limit.get("format").is_none(), "{limit}");
        let ping = by_name("ping").output_schema.unwrap();
        let v = &ping["properties"]["schemaVersion"];
        assert_eq!((&v["type"], &v["minimum"]), (&json!("integer"), &json!(0)));
        let turn = by_name("codex").output_schema.unwrap();
        let d = &turn["properties"]["durationMs"];
        assert_eq!((&d["type"], &d["minimum"]), (&json!("integer"), &json!(0)));
        // a signed integer has no lower bound
        let exit = serde_json::to_string(&turn["$defs"]["CommandReport"]).unwrap();
        assert!(!exit.contains("minimum"), "{exit}");
    }

    /// `v` against the tool's `outputSchema`, as a host's validator checks it.
    fn check_output(tool: &Tool, v: &serde_json::Value) -> Result<(), String> {
        let schema = serde_json::Value::Object((*tool.output_schema.clone().unwrap()).clone());
        let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
        let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    #[test]
    fn turn_tool_errors_match_the_turn_output_schema_and_others_carry_none() {
        let invalid = Error::invalid("limit", "invalid type: string \"2\", expected u32");
        let timed_out = Error::TimedOut {
            after: Duration::from_secs(3),
            partial: None,
        };
        let partial = results::TurnResult {
            response: "half an answer".into(),
            session_id: Some("s".into()),
            ..Default::default()
        };
        let tools = tool_list(false);
        for t in &tools {
            // `wait` and `stop` answer a background turn's result, errors included
            if tool_named(&t.name).is_some_and(|e| e.is.turn_errors) {
                for (e, r) in [
                    (&invalid, error_result(&invalid, None)),
                    (&timed_out, error_result(&timed_out, Some(partial.clone()))),
                ] {
                    let v = r
                        .structured_content
                        .clone()
                        .expect("a turn error is structured");
                    check_output(t, &v).unwrap_or_else(|e| panic!("{}: {e}: {v}", t.name));
                    assert_eq!(v["error"]["message"], e.to_string());
                }
            } else {
                // a turn result does not fit: these tools' errors carry no structured copy
                let as_turn = error_result(&invalid, None).structured_content.unwrap();
                assert!(check_output(t, &as_turn).is_err(), "{}", t.name);
                let r = plain_error(&invalid);
                assert!(r.structured_content.is_none());
                assert_eq!(r.is_error, Some(true));
            }
        }
        let r = plain_error(&invalid);
        assert_eq!(
            r.content[0].as_text().unwrap().text,
            "invalid argument `limit`: invalid type: string \"2\", expected u32"
        );
    }
}

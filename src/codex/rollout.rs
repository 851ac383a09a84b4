//! What codex recorded about a turn: the `turn_context` records of a thread's rollout file
//! (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl`). `--json` output says
//! nothing about the sandbox level or approval mode in force; the rollout does, so the bridge
//! reads it after a turn and fails closed on a mismatch. Ephemeral turns write no rollout.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::security::ids::ThreadId;

/// The security-relevant part of one `turn_context` record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TurnContext {
    /// `never`, `on-request`, … (`never` is what the bridge's pin must give).
    pub approval_policy: String,
    /// `user` or `auto_review`, …
    pub approvals_reviewer: String,
    /// `read-only`, `workspace-write` or `danger-full-access`.
    pub sandbox: String,
    pub model: Option<String>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    payload: Option<Payload>,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(default)]
    approval_policy: Option<String>,
    #[serde(default)]
    approvals_reviewer: Option<String>,
    #[serde(default)]
    sandbox_policy: Option<SandboxPolicy>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
struct SandboxPolicy {
    #[serde(rename = "type")]
    kind: String,
}

/// Parse one rollout line; `None` unless it is a `turn_context` record.
pub fn parse_turn_context(line: &str) -> Option<TurnContext> {
    let l: Line = serde_json::from_str(line).ok()?;
    if l.kind != "turn_context" {
        return None;
    }
    let p = l.payload?;
    Some(TurnContext {
        approval_policy: p.approval_policy.unwrap_or_default(),
        approvals_reviewer: p.approvals_reviewer.unwrap_or_default(),
        sandbox: p.sandbox_policy.map(|s| s.kind).unwrap_or_default(),
        model: p.model,
    })
}

/// The rollout file of `thread` under `codex_home`, newest date directory first.
pub fn find_rollout(codex_home: &Path, thread: &ThreadId) -> Option<PathBuf> {
    let suffix = format!("-{thread}.jsonl");
    let mut dirs = vec![codex_home.join("sessions")];
    let mut found = None;
    // sessions/YYYY/MM/DD: three levels; sort descending so the newest day is searched first
    for _ in 0..3 {
        let mut next = vec![];
        for d in &dirs {
            let Ok(rd) = std::fs::read_dir(d) else {
                continue;
            };
            let mut subs: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            subs.sort_unstable_by(|a, b| b.cmp(a));
            next.extend(subs);
        }
        dirs = next;
    }
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        if let Some(p) = rd.flatten().map(|e| e.path()).find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix))
        }) {
            found = Some(p);
            break;
        }
    }
    found
}

/// The last `turn_context` recorded for `thread`, if codex wrote a rollout for it.
pub fn last_turn_context(codex_home: &Path, thread: &ThreadId) -> Option<TurnContext> {
    turn_context_in(&find_rollout(codex_home, thread)?)
}

/// [`last_turn_context`], read from `known` (the rollout codex reported for the thread, as a
/// warm app-server does) when it is one of `codex_home`'s rollouts of `thread`, without
/// walking the sessions directory; else found as there.
pub fn turn_context_of(
    codex_home: &Path,
    thread: &ThreadId,
    known: Option<&Path>,
) -> Option<TurnContext> {
    let suffix = format!("-{thread}.jsonl");
    let sessions = codex_home.join("sessions");
    let usable = known.filter(|p| {
        p.starts_with(&sessions)
            && p.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::RootDir
                )
            })
            && p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix))
    });
    match usable {
        Some(p) => turn_context_in(p).or_else(|| last_turn_context(codex_home, thread)),
        None => last_turn_context(codex_home, thread),
    }
}

/// How much of a rollout's end is read first for its last `turn_context` (a turn's records
/// follow it; the whole file is read only when they fill more than this).
const TURN_CONTEXT_TAIL: u64 = 1024 * 1024;

/// The last `turn_context` in the rollout at `path`: from its last [`TURN_CONTEXT_TAIL`]
/// bytes (the line cut at the tail's start skipped), else from the whole file.
pub fn turn_context_in(path: &Path) -> Option<TurnContext> {
    use std::io::{Read, Seek, SeekFrom};
    let last = |lines: &mut dyn Iterator<Item = String>| {
        lines
            .filter(|l| l.contains("\"turn_context\""))
            .filter_map(|l| parse_turn_context(&l))
            .last()
    };
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    if len > TURN_CONTEXT_TAIL {
        file.seek(SeekFrom::Start(len - TURN_CONTEXT_TAIL)).ok()?;
        let mut tail = Vec::new();
        file.by_ref()
            .take(TURN_CONTEXT_TAIL)
            .read_to_end(&mut tail)
            .ok()?;
        let text = String::from_utf8_lossy(&tail);
        if let Some(found) = last(&mut text.lines().skip(1).map(str::to_owned)) {
            return Some(found);
        }
        file.seek(SeekFrom::Start(0)).ok()?;
    }
    last(&mut BufReader::new(file).lines().map_while(Result::ok))
}

/// A model's tool call as codex recorded it (`response_item` records): which tool, and whether
/// it asked for a terminal (`exec_command`'s `tty`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    /// `function_call.name` (`exec_command`, `shell`, …), or the record's type for calls
    /// without one (`local_shell_call`).
    pub name: String,
    /// `tty` of the call's arguments: `None` when absent; `Some(true)` also when the arguments
    /// are not a JSON object, so a call that cannot be read counts as interactive.
    pub tty: Option<bool>,
}

/// Every call recorded with `call_id` in `text` (a rollout, or its tail). More than one means
/// someone wrote another record under the same id: the caller treats that as unknown.
pub fn model_calls(text: &str, call_id: &str) -> Vec<ModelCall> {
    let needle = format!("\"call_id\":{}", serde_json::Value::from(call_id));
    text.lines()
        .filter(|l| l.contains(&needle) && l.contains("\"response_item\""))
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            if v["type"] != "response_item" || v["payload"]["call_id"] != call_id {
                return None;
            }
            let p = &v["payload"];
            let kind = p["type"].as_str().unwrap_or_default();
            if kind.ends_with("_output") {
                return None;
            }
            let name = p["name"].as_str().unwrap_or(kind).to_owned();
            let tty = match &p["arguments"] {
                serde_json::Value::Null => None,
                serde_json::Value::String(a) => {
                    match serde_json::from_str::<serde_json::Value>(a) {
                        Ok(serde_json::Value::Object(m)) => match m.get("tty") {
                            None | Some(serde_json::Value::Null) => None,
                            Some(t) => Some(t.as_bool().unwrap_or(true)),
                        },
                        _ => Some(true),
                    }
                }
                _ => Some(true),
            };
            Some(ModelCall { name, tty })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_calls_are_read_by_call_id_and_their_outputs_skipped() {
        let text = concat!(
            r#"{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"sh\",\"tty\":true}","call_id":"call_2"}}"#,
            "\n",
            r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"call_2","output":"x"}}"#,
            "\n",
            r#"{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\",\"tty\":false}","call_id":"call_3"}}"#,
            "\n",
            r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"[1]","call_id":"call_4"}}"#,
            "\n",
            r#"{"type":"event_msg","payload":{"call_id":"call_3"}}"#,
        );
        assert_eq!(
            model_calls(text, "call_2"),
            [ModelCall {
                name: "exec_command".into(),
                tty: Some(true)
            }]
        );
        assert_eq!(
            model_calls(text, "call_3"),
            [ModelCall {
                name: "exec_command".into(),
                tty: Some(false)
            }]
        );
        assert_eq!(model_calls(text, "call_4")[0].tty, Some(true));
        assert!(model_calls(text, "call_9").is_empty());
        assert!(model_calls(text, "call_").is_empty());
    }

    #[test]
    fn the_last_turn_context_is_found_in_a_long_rollout_and_a_reported_path_must_be_the_threads() {
        let ctx = |policy: &str| {
            format!(
                r#"{{"type":"turn_context","payload":{{"approval_policy":"{policy}","approvals_reviewer":"user","sandbox_policy":{{"type":"read-only"}}}}}}"#
            )
        };
        let filler = format!(
            "{}\n",
            r#"{"type":"response_item","payload":{"type":"message","content":"x"}}"#
        )
        .repeat((2 * TURN_CONTEXT_TAIL as usize) / 60);
        let home = tempfile::tempdir().unwrap();
        let day = home.path().join("sessions/2026/12/04");
        std::fs::create_dir_all(&day).unwrap();
        let thread = ThreadId::parse("01a22759-e393-7f71-bea4-35a12106bc11").unwrap();
        let file = day.join(format!("rollout-2026-12-04T00-00-00-{thread}.jsonl"));
        // the last record in the tail: the last one wins
        std::fs::write(
            &file,
            format!("{}\n{filler}{}\n", ctx("untrusted"), ctx("never")),
        )
        .unwrap();
        assert_eq!(turn_context_in(&file).unwrap().approval_policy, "never");
        // only before the tail (a turn whose records fill more than it): the whole file is read
        std::fs::write(&file, format!("{}\n{filler}", ctx("on-request"))).unwrap();
        assert_eq!(
            turn_context_in(&file).unwrap().approval_policy,
            "on-request"
        );
        // a reported path is used only when it is one of this CODEX_HOME's rollouts of the
        // thread; any other is ignored and the rollout is found as usual
        let elsewhere = home.path().join("other.jsonl");
        std::fs::write(&elsewhere, format!("{}\n", ctx("untrusted"))).unwrap();
        for known in [Some(file.as_path()), Some(elsewhere.as_path()), None] {
            let got = turn_context_of(home.path(), &thread, known).unwrap();
            assert_eq!(got.approval_policy, "on-request", "{known:?}");
        }
    }

    #[test]
    fn turn_context_records_are_read_and_others_skipped() {
        let line = r#"{"timestamp":"t","type":"turn_context","payload":{"approval_policy":"never","approvals_reviewer":"user","sandbox_policy":{"type":"read-only"},"model":"gpt-5.5"}}"#;
        assert_eq!(
            parse_turn_context(line),
            Some(TurnContext {
                approval_policy: "never".into(),
                approvals_reviewer: "user".into(),
                sandbox: "read-only".into(),
                model: Some("gpt-5.5".into()),
            })
        );
        assert_eq!(
            parse_turn_context(r#"{"type":"response_item","payload":{}}"#),
            None
        );
        assert_eq!(parse_turn_context("garbage"), None);
    }

    #[test]
    fn the_last_turn_context_of_a_thread_is_found_by_its_id() {
        let home = tempfile::tempdir().unwrap();
        let id = ThreadId::parse("01a227a2-1763-79a2-a450-356d1b8916e4").unwrap();
        let day = home.path().join("sessions/2026/11/29");
        std::fs::create_dir_all(&day).unwrap();
        let ctx = |a: &str| {
            format!(
                r#"{{"type":"turn_context","payload":{{"approval_policy":"{a}","approvals_reviewer":"user","sandbox_policy":{{"type":"read-only"}}}}}}"#
            )
        };
        std::fs::write(
            day.join(format!("rollout-2026-11-29T14-07-43-{id}.jsonl")),
            format!(
                "{}\n{{\"type\":\"x\"}}\n{}\n",
                ctx("never"),
                ctx("on-request")
            ),
        )
        .unwrap();
        assert_eq!(
            last_turn_context(home.path(), &id).unwrap().approval_policy,
            "on-request"
        );
        let other = ThreadId::parse("01a227a2-1763-79a2-a450-356d1b8916e5").unwrap();
        assert!(last_turn_context(home.path(), &other).is_none());
    }
}

//! `diffSession`: a session's changes in its own worktree against its base, as a unified diff
//! (tracked, untracked and deleted files; a binary file named, never dumped), a page of files
//! at a time within a byte budget, redacted like every answer. Its arguments
//! ([`DiffSessionParams`]), its result ([`DiffResult`]), its table entry (`TOOL`) and its
//! handler; the paging is [`page`], pure.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::results::{ChangedFile, WorktreeView};
use crate::mcp::schemas::schema;
use crate::security::ids::SessionId;

/// Most files on one page, and the default.
pub const MAX_DIFF_FILES: u32 = 200;
const DEFAULT_DIFF_FILES: u32 = 50;

/// Most bytes of diff text on one page: a page ends before the file that would pass it (a
/// page always holds at least one file; one file larger than this is cut, and named in
/// `cut`).
pub const DIFF_PAGE_BYTES: usize = 256 * 1024;

/// The `diffSession` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "diffSession",
    title: "Diff session",
    description: "Show a worktree session's changes against its base as a unified diff. \
                  Tracked, new and deleted files (of a session started with `codex` and \
                  worktree: true); binary files named, not shown. Large changes come a page \
                  of files at a time: pass nextOffset as offset. Its digest binds \
                  applySession to these changes.",
    hints: [true, false, true, false],
    input: schema::<DiffSessionParams>,
    output: schema::<DiffResult>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.diff_session(args)),
};

/// `diffSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiffSessionParams {
    /// The session whose worktree's changes to show.
    pub session_id: String,
    /// The first file to show: a previous page's `nextOffset`. Its index in `files`; default
    /// 0.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Most files on this page: 1 to 200, default 50. A page also ends before 256 KiB of
    /// diff text.
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `diffSession`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffResult {
    pub session_id: String,
    /// The worktree, with every file changed (+/-), not only this page's.
    pub worktree: WorktreeView,
    /// The unified diff of this page's files (redacted).
    pub diff: String,
    /// The index of this page's first file in `worktree.files`, and how many it shows.
    pub offset: u64,
    pub shown: u64,
    /// Pass as `offset` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// Files of this page whose diff was cut at the page's byte budget.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<String>,
    /// SHA-256 (hex) of all the changes (every page), as an apply would land them: pass it to
    /// `applySession` as `digest` to apply only what was read.
    pub digest: String,
}

/// One page of a diff: from file `offset`, at most `limit` files and about `budget` bytes.
#[derive(Debug, PartialEq, Eq)]
struct Page {
    text: String,
    shown: usize,
    next: Option<usize>,
    cut: Vec<String>,
}

/// Cut `parts` (one per file of `files`) into the page starting at `offset`: whole files
/// until `limit` files or `budget` bytes; the first file alone is cut (at a character
/// boundary) when it is larger than the budget.
fn page(
    files: &[ChangedFile],
    parts: &[String],
    offset: usize,
    limit: usize,
    budget: usize,
) -> Page {
    let mut text = String::new();
    let mut cut = Vec::new();
    let mut at = offset;
    while at < parts.len() && at - offset < limit {
        let part = &parts[at];
        if text.len() + part.len() > budget {
            if at > offset {
                break;
            }
            let mut end = budget.min(part.len());
            while !part.is_char_boundary(end) {
                end -= 1;
            }
            text.push_str(&part[..end]);
            text.push_str("\n[cut: this file's diff is larger than one page]\n");
            cut.push(files[at].path.clone());
            at += 1;
            break;
        }
        text.push_str(part);
        at += 1;
    }
    Page {
        text,
        shown: at.saturating_sub(offset),
        next: (at < parts.len()).then_some(at),
        cut,
    }
}

impl McpServer {
    async fn diff_session(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: DiffSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let limit = p.limit.unwrap_or(DEFAULT_DIFF_FILES);
            if !(1..=MAX_DIFF_FILES).contains(&limit) {
                return Err(Error::invalid(
                    "limit",
                    format!("must be between 1 and {MAX_DIFF_FILES}"),
                ));
            }
            let d = self.bridge.session_diff(&id, &self.client).await?;
            let offset = p.offset.unwrap_or(0);
            if offset > 0 && offset >= d.files.len() as u64 {
                return Err(Error::invalid(
                    "offset",
                    format!(
                        "is past the last file: session {id} changed {} file(s)",
                        d.files.len()
                    ),
                ));
            }
            let pg = page(
                &d.files,
                &d.parts,
                offset as usize,
                limit as usize,
                DIFF_PAGE_BYTES,
            );
            let diff = self.client.secrets.redact(&pg.text).into_owned();
            let text = if d.files.is_empty() {
                format!(
                    "Session {id} changed nothing against {}.",
                    d.worktree.base_commit
                )
            } else {
                diff.clone()
            };
            Ok(ok_result(
                text,
                DiffResult {
                    session_id: id.to_string(),
                    worktree: d.worktree,
                    diff,
                    offset,
                    shown: pg.shown as u64,
                    next_offset: pg.next.map(|n| n as u64),
                    cut: pg.cut,
                    digest: d.digest,
                },
            ))
        };
        run.await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(p: &str) -> ChangedFile {
        ChangedFile {
            path: p.into(),
            status: "modified".into(),
            added: Some(1),
            removed: Some(0),
            binary: false,
        }
    }

    #[test]
    fn a_page_holds_whole_files_within_its_limits_and_cuts_only_a_lone_large_one() {
        let files: Vec<ChangedFile> = ["a", "b", "c"].map(file).into();
        let parts: Vec<String> = vec!["a".repeat(10), "b".repeat(10), "c".repeat(30)];
        let p = page(&files, &parts, 0, 50, 25);
        assert_eq!((p.shown, p.next), (2, Some(2)));
        assert_eq!(p.text, format!("{}{}", parts[0], parts[1]));
        assert!(p.cut.is_empty());
        let p = page(&files, &parts, 2, 50, 25);
        assert_eq!(
            (p.shown, p.next, p.cut.clone()),
            (1, None, vec!["c".to_owned()])
        );
        assert!(p.text.starts_with(&"c".repeat(25)));
        let p = page(&files, &parts, 0, 1, 1000);
        assert_eq!((p.shown, p.next), (1, Some(1)));
    }

    #[test]
    fn a_wrong_limit_names_its_field() {
        let args = serde_json::json!({"sessionId": "s", "limit": "many"});
        let err = parse_args::<DiffSessionParams>(args.as_object().unwrap().clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`limit`"), "{err}");
    }
}

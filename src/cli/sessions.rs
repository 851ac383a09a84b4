//! `sessions list|show|close|export`: through the owner's socket while a server owns the
//! store, else on the store directly; the same output either way.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::config::{Settings, store_dir};
use crate::hub::{StoreAnswer, StoreRequest};
use crate::security::ids::SessionId;
use crate::security::redact::redact;
use crate::store::{SessionRecord, Store};

/// `sessions` and its subcommands.
#[derive(Args)]
pub struct SessionsArgs {
    /// Where sessions are stored (default: $XDG_DATA_HOME/codex-mcp-bridge).
    // its own id: a global's value is also recorded in the parent's matches, where `store` is
    // the server's setting
    #[arg(
        id = "sessions_store",
        long = "store",
        env = "CODEX_BRIDGE_STORE",
        value_name = "DIR",
        global = true
    )]
    pub store: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: SessionsCommand,
}

#[derive(Subcommand)]
pub enum SessionsCommand {
    /// Every stored session, newest first.
    List,
    /// One session's record.
    Show {
        /// The session id.
        id: String,
    },
    /// Forget a session: its record leaves the store (Codex's thread files stay in CODEX_HOME).
    /// A session's own worktree is removed with its branch (by the running server only).
    Close {
        /// The session id.
        id: String,
        /// Remove the session's own worktree even though it holds changes not applied.
        #[arg(long)]
        drop_changes: bool,
    },
    /// One session's full record, as JSON.
    Export {
        /// The session id.
        id: String,
    },
}

/// A failed subcommand: the message for stderr (the exit code is non-zero).
#[derive(Debug)]
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn failed(e: impl std::fmt::Display) -> Failed {
    Failed(redact(&e.to_string()).into_owned())
}

/// How long `sessions` looks for the store's owner or the store's lock (a server may be
/// starting, or exiting, at that moment).
const FIND_STORE: std::time::Duration = std::time::Duration::from_secs(5);

/// What `sessions` reached.
enum Reached {
    /// The process that owns the store (a running server) answered.
    Owner(StoreAnswer),
    /// No process owns the store: opened directly.
    Store(Store),
}

/// Ask the store's owner over its socket, or, when no process owns the store, open it
/// directly; `dir` exists.
fn reach(dir: &Path, request: StoreRequest) -> Result<Reached, Failed> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failed(format!("cannot start the runtime: {e}")))?;
    let deadline = std::time::Instant::now() + FIND_STORE;
    loop {
        if let Some(answer) = rt
            .block_on(crate::hub::ask_owner(dir, request.clone()))
            .map_err(failed)?
        {
            return Ok(Reached::Owner(answer));
        }
        match Store::try_open(dir, std::time::Duration::from_millis(200)) {
            Ok(Some(store)) => return Ok(Reached::Store(store)),
            Ok(None) if std::time::Instant::now() < deadline => {}
            Ok(None) => {
                return Err(Failed(format!(
                    "the store at {} is locked by a process that does not answer on its socket \
                     {} there (a codex-mcp-bridge of another version, or another `sessions` \
                     command at this moment); try again, or stop that process",
                    dir.display(),
                    crate::hub::SOCKET_NAME
                )));
            }
            Err(e) => return Err(failed(e)),
        }
    }
}

/// The records of every stored session, newest first.
fn list_all(dir: &Path) -> Result<Vec<SessionRecord>, Failed> {
    match reach(dir, StoreRequest::List)? {
        Reached::Owner(StoreAnswer::Sessions { sessions }) => Ok(sessions),
        Reached::Owner(other) => Err(unexpected(other)),
        Reached::Store(store) => {
            let mut all = vec![];
            let mut cursor: Option<String> = None;
            loop {
                let page = store.list(cursor.as_deref(), 500).map_err(failed)?;
                all.extend(page.sessions);
                match page.next {
                    Some(c) => cursor = Some(c),
                    None => return Ok(all),
                }
            }
        }
    }
}

/// One session's record.
fn get(dir: &Path, id: &SessionId) -> Result<Option<SessionRecord>, Failed> {
    match reach(
        dir,
        StoreRequest::Get {
            session_id: id.clone(),
        },
    )? {
        Reached::Owner(StoreAnswer::Session { session }) => Ok(session.map(|s| *s)),
        Reached::Owner(other) => Err(unexpected(other)),
        Reached::Store(store) => store.get(id).map_err(failed),
    }
}

/// Close a session; its record, when there was one.
fn close(dir: &Path, id: &SessionId, drop_changes: bool) -> Result<Option<SessionRecord>, Failed> {
    match reach(
        dir,
        StoreRequest::Close {
            session_id: id.clone(),
            drop_changes,
        },
    )? {
        Reached::Owner(StoreAnswer::Session { session }) => Ok(session.map(|s| *s)),
        Reached::Owner(other) => Err(unexpected(other)),
        Reached::Store(store) => {
            // only a running server removes a worktree (with the git rules it runs under): the
            // record is not forgotten while it would leave one behind
            if let Some(wt) = store.get(id).map_err(failed)?.and_then(|r| r.worktree) {
                return Err(Failed(
                    redact(&format!(
                        "session {id} has a worktree of its own ({}, branch {}): close it while \
                     the server runs (it removes the worktree and its branch)",
                        wt.path.display(),
                        wt.branch
                    ))
                    .into_owned(),
                ));
            }
            let removed = store.remove(id).map_err(failed)?;
            store.flush_blocking().map_err(failed)?;
            Ok(removed)
        }
    }
}

fn unexpected(answer: StoreAnswer) -> Failed {
    match answer {
        StoreAnswer::Failed { message } => Failed(redact(&message).into_owned()),
        _ => Failed(
            "the codex-mcp-bridge process that owns the store gave an answer that does not fit \
             the request"
                .into(),
        ),
    }
}

/// Run a `sessions` subcommand, writing its output to `out`. While a server owns the store,
/// the subcommands go through it (over the store's socket); otherwise they open the store
/// directly. The output is the same either way.
pub fn sessions(
    args: &SessionsArgs,
    settings: &Settings,
    vars: &[(String, String)],
    out: &mut dyn Write,
) -> Result<(), Failed> {
    let dir = store_dir(settings, vars).map_err(failed)?;
    // a store that does not exist is not created
    let exists = dir.exists();
    let id = |raw: &str| SessionId::parse("ID", raw).map_err(failed);
    let missing = |id: &SessionId| {
        Failed(if exists {
            format!("no session `{id}` in the store at {}", dir.display())
        } else {
            format!(
                "no session `{id}`: there is no store at {} yet",
                dir.display()
            )
        })
    };
    let found = |id: &SessionId| -> Result<SessionRecord, Failed> {
        let rec = if exists { get(&dir, id)? } else { None };
        rec.ok_or_else(|| missing(id))
    };
    let text = match &args.command {
        SessionsCommand::List => {
            let all = if exists { list_all(&dir)? } else { vec![] };
            if args.json {
                json_text(&json!({
                    "store": dir,
                    "sessions": all,
                }))
            } else {
                list_table(&all, &dir, exists)
            }
        }
        SessionsCommand::Show { id: raw } => {
            let rec = found(&id(raw)?)?;
            let program = crate::config::codex_program(settings, vars);
            let hand_off = hand_off(&rec, &program);
            if args.json {
                let mut v = json!(rec);
                if let (Some(h), Some(o)) = (hand_off, v.as_object_mut()) {
                    match h {
                        Ok(h) => o.insert("handOff".into(), Value::String(h)),
                        Err(e) => o.insert("handOffUnavailable".into(), e.to_string().into()),
                    };
                }
                json_text(&v)
            } else {
                show_text(&rec, hand_off)
            }
        }
        SessionsCommand::Export { id: raw } => json_text(&json!(found(&id(raw)?)?)),
        SessionsCommand::Close {
            id: raw,
            drop_changes,
        } => {
            let id = id(raw)?;
            if !exists {
                return Err(missing(&id));
            }
            close(&dir, &id, *drop_changes)?.ok_or_else(|| missing(&id))?;
            if args.json {
                json_text(&json!({ "sessionId": id, "closed": true, "store": dir }))
            } else {
                format!("Session {id} closed.\n")
            }
        }
    };
    out.write_all(text.as_bytes()).map_err(failed)
}

/// Pretty JSON with every string redacted (redacting the serialized text could break it).
fn json_text(v: &Value) -> String {
    fn scrub(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(redact(s).into_owned()),
            Value::Array(a) => Value::Array(a.iter().map(scrub).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), scrub(v))).collect())
            }
            other => other.clone(),
        }
    }
    let mut s = serde_json::to_string_pretty(&scrub(v)).unwrap_or_default();
    s.push('\n');
    s
}

fn list_table(all: &[SessionRecord], dir: &Path, exists: bool) -> String {
    if all.is_empty() {
        return if exists {
            format!("No sessions in the store at {}.\n", dir.display())
        } else {
            format!("No sessions: there is no store at {} yet.\n", dir.display())
        };
    }
    let mut rows = vec![vec![
        "SESSION".to_owned(),
        "NAME".to_owned(),
        "LAST USED (UTC)".to_owned(),
        "TURNS".to_owned(),
        "STATUS".to_owned(),
        "MODEL".to_owned(),
        "THREAD".to_owned(),
        "WORKING DIRECTORY".to_owned(),
    ]];
    for r in all {
        rows.push(vec![
            r.session_id.to_string(),
            r.name
                .as_ref()
                .map_or_else(|| "-".into(), |n| n.as_str().to_owned()),
            utc(r.last_used_ms),
            r.turn_count.to_string(),
            status(r),
            r.model.clone().unwrap_or_else(|| "-".into()),
            r.thread_id.map_or_else(|| "-".into(), |t| t.to_string()),
            r.working_directory.display().to_string(),
        ]);
    }
    let mut text = table(&rows);
    text.push_str(&format!(
        "{} session(s) in the store at {}\n",
        all.len(),
        dir.display()
    ));
    redact(&text).into_owned()
}

fn status(r: &SessionRecord) -> String {
    r.last_status
        .and_then(|s| serde_json::to_value(s).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "-".into())
}

/// The command a person runs to continue the session's thread in codex's own terminal app
/// with `program`, or why there is none for it; none before a turn started a thread.
fn hand_off(
    r: &SessionRecord,
    program: &Path,
) -> Option<Result<String, crate::codex::argv::HandOffUnavailable>> {
    let thread = r.thread_id.as_ref()?;
    let home = r.codex_home.as_deref().map(Path::new);
    Some(crate::codex::argv::hand_off(
        program,
        home,
        &r.working_directory,
        thread,
    ))
}

fn show_text(
    r: &SessionRecord,
    hand_off: Option<Result<String, crate::codex::argv::HandOffUnavailable>>,
) -> String {
    let usage = |u: &crate::codex::events::Usage| {
        format!(
            "input {} (cached {}, cache write {}), output {} (reasoning {})",
            u.input_tokens,
            u.cached_input_tokens,
            u.cache_write_input_tokens,
            u.output_tokens,
            u.reasoning_output_tokens
        )
    };
    let dash = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let rows = vec![
        vec!["session".into(), r.session_id.to_string()],
        vec![
            "name".into(),
            dash(&r.name.as_ref().map(|n| n.as_str().to_owned())),
        ],
        vec!["thread".into(), dash(&r.thread_id.map(|t| t.to_string()))],
        vec![
            "working directory".into(),
            r.working_directory.display().to_string(),
        ],
        vec!["model".into(), dash(&r.model)],
        vec!["codex home".into(), dash(&r.codex_home)],
        vec!["created (UTC)".into(), utc(r.created_ms)],
        vec!["last used (UTC)".into(), utc(r.last_used_ms)],
        vec!["turns".into(), r.turn_count.to_string()],
        vec!["last status".into(), status(r)],
        vec!["last error".into(), dash(&r.last_error)],
        vec!["usage".into(), usage(&r.usage)],
        vec!["thread usage".into(), usage(&r.thread_usage)],
        vec![
            "continue in codex".into(),
            match hand_off {
                Some(Ok(h)) => h,
                Some(Err(e)) => format!("- (no command: {e})"),
                None => "-".into(),
            },
        ],
    ];
    redact(&table(&rows)).into_owned()
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS` in UTC.
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_the_epoch_and_leap_days() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14 22:13:20");
    }

    #[test]
    fn tables_align_columns() {
        let t = table(&[
            vec!["A".into(), "BB".into(), "C".into()],
            vec!["aaa".into(), "b".into(), "c".into()],
        ]);
        assert_eq!(t, "A    BB  C\naaa  b   c\n");
    }
}

//! A question of codex's on its way to the person, screened: the turn's working directory given
//! to a file-change or command question (what resolves outside it marked so); declined without
//! asking when it cannot be shown as it is or is an escalation that may not be put to a person;
//! a file change asked with its answer held back until every path is checked again with the
//! server's other processes frozen ([`bound_to_shown`]).

use std::time::{Duration, Instant};

use crate::approval::from_codex::CodexQuestion;
use crate::approval::unasked;
use crate::approval::{Asked, Asker};
use crate::approval::{Decision, DecisionRecord, Question};
use crate::codex::process::freeze;
use crate::codex::rollout::{self, ModelCall};

/// How long codex may take to record the model's call in its rollout after asking about it
/// (it writes the call before it runs the tool; measured within milliseconds).
const CALL_RECORD_WAIT: Duration = Duration::from_secs(3);
/// The most of a rollout's tail read for the model's call (the call is among the last records).
const ROLLOUT_TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// How long an accepted file change's freeze waits for codex to report the change done.
const APPLY_WAIT: Duration = Duration::from_secs(2);

/// Why an accepted file change is declined when the freeze around its write is not whole.
const UNFROZEN: &str = "declined: the server's other processes could not all be stopped while codex writes (a process kept starting others, or a stop did not land)";
/// The reason a file change a person accepted is declined: a path leads elsewhere now.
const MOVED: &str =
    "declined: a file's path resolves elsewhere than when it was shown (a directory was swapped)";

/// What an accepted file change needs to be applied as it was shown: the asking app-server
/// (kept running while everything else of the server is frozen) and the `fileChange` items
/// codex reports done.
pub struct Writes {
    pub app_server: i32,
    pub applied: tokio::sync::broadcast::Sender<String>,
}

/// A question on its way to the person, screened first: the turn's working directory given to
/// a file-change or command question (a path or a command directory that resolves outside it
/// marked so); declined without asking, with its record, when it cannot be shown as it is
/// (`Question::unreadable`), or when it is an escalation whose model call asked for a terminal
/// or cannot be read from codex's rollout ([`unasked::in_turn`]). A file change is asked
/// with its answer held back ([`bound_to_shown`]).
pub fn screened(
    ask: Asker,
    CodexQuestion { request, mut asked }: CodexQuestion,
    cwd: std::path::PathBuf,
    (rollout, writes): (Option<std::path::PathBuf>, Writes),
    secrets: crate::security::redact::ClientSecrets,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = DecisionRecord> + Send>> {
    Box::pin(async move {
        asked.question.set_workdir(&cwd);
        let shown = mark_outside(&mut asked.question, &cwd);
        // an escalation names its model call (the item); one that names none is not asked
        let calls = match (
            unasked::needs_model_call(&asked.question),
            rollout,
            &request.head,
        ) {
            (true, Some(path), Ok(head)) => match head.item_id.as_deref() {
                Some(item) => recorded_calls(&path, item).await,
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        let refused = unasked::in_turn(&asked.question, &calls);
        match refused {
            Some(reason) => {
                let record = DecisionRecord::unasked(&asked.question, &secrets, reason);
                tracing::info!(method = %request.method, reason, "question declined without asking");
                asked.decline();
                record
            }
            None if matches!(asked.question, Question::FileChange { .. }) => {
                let item = request.head.as_ref().ok().and_then(|h| h.item_id.clone());
                bound_to_shown(ask, (asked, item), (shown, &cwd), writes).await
            }
            None => ask(asked).await,
        }
    })
}

/// Mark what in `question` resolves outside `cwd` (each file's path or where it moves to, a
/// command's directory), and return what each file's path and move target resolved to, in
/// order ([`resolutions`]).
fn mark_outside(question: &mut Question, cwd: &std::path::Path) -> Vec<Option<std::path::PathBuf>> {
    let outside = |r: &Option<std::path::PathBuf>| {
        r.as_deref()
            .is_none_or(|r| !crate::security::paths::is_within(r, cwd))
    };
    let shown = resolutions(question, cwd);
    let mut at = shown.iter();
    for f in question.files_mut() {
        let path = at.next().is_none_or(outside);
        let to = f.move_to.is_some() && at.next().is_none_or(outside);
        f.resolves_outside = path || to;
    }
    let dir_outside = match &*question {
        Question::Command { cwd: Some(dir), .. } => outside(&resolve(dir, cwd)),
        _ => false,
    };
    question.set_cwd_resolves_outside(dir_outside);
    shown
}

/// What each file of a file-change question resolves to now ([`resolve`]): its path, then where
/// it moves to when it moves. Empty for other questions, or when codex did not say which files.
fn resolutions(question: &Question, cwd: &std::path::Path) -> Vec<Option<std::path::PathBuf>> {
    let Question::FileChange {
        files: Some(files), ..
    } = question
    else {
        return Vec::new();
    };
    files
        .iter()
        .flat_map(|f| std::iter::once(&f.path).chain(f.move_to.as_ref()))
        .map(|p| resolve(p, cwd))
        .collect()
}

/// Ask a file-change question with its answer held back ([`Asked::interpose`]): a decline
/// reaches codex as it is; an accept only if every path still resolves where it did when the
/// question was shown (`shown`), checked with every other process of this server frozen
/// ([`Frozen`](freeze::Frozen)), which stays so until codex reports the change done (at
/// most [`APPLY_WAIT`]). A path that resolves elsewhere now (a directory swapped for a
/// symbolic link, or back) makes it a decline, and the record says why.
async fn bound_to_shown(
    ask: Asker,
    (asked, item): (Asked, Option<String>),
    (shown, cwd): (Vec<Option<std::path::PathBuf>>, &std::path::Path),
    writes: Writes,
) -> DecisionRecord {
    let (copy, mut held) = asked.interpose();
    let mut record = ask(copy).await;
    let answer = match held.answer().await {
        Some(a) if a.0 == Decision::AcceptOnce => a,
        Some(a) => {
            held.forward(a);
            return record;
        }
        None => {
            held.decline();
            record.decision = Decision::Decline;
            return record;
        }
    };
    let _window = freeze::WINDOW.write().await;
    let mut applied = writes.applied.subscribe();
    let pid = writes.app_server;
    let frozen = tokio::task::spawn_blocking(move || freeze::Frozen::others(pid))
        .await
        .ok();
    tracing::debug!(
        stopped = frozen.as_ref().map_or(0, |f| f.stopped().len()),
        "froze the server's other processes for an accepted file change"
    );
    if !frozen.as_ref().is_some_and(|f| f.complete()) {
        tracing::warn!(asked = %record.asked, "an accepted file change was declined: the server's other processes could not all be stopped while codex writes");
        held.decline();
        record.decision = Decision::Decline;
        record.reason = Some(UNFROZEN);
        return record;
    }
    let now = resolutions(&held.asked().question, cwd);
    if now != shown || now.iter().any(Option::is_none) {
        tracing::warn!(asked = %record.asked, "an accepted file change was declined: a path resolves elsewhere than when it was shown");
        held.decline();
        record.decision = Decision::Decline;
        record.reason = Some(MOVED);
        return record;
    }
    let sent = held.forward(answer);
    if sent != record.decision {
        record.decision = sent;
        record.reason = Some("the answer came after codex's deadline");
    }
    if sent == Decision::AcceptOnce {
        let done = async {
            loop {
                match applied.recv().await {
                    Ok(id) if Some(&id) == item.as_ref() => return,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        };
        let _ = tokio::time::timeout(APPLY_WAIT, done).await;
    }
    if let Some(f) = frozen {
        f.thaw();
    }
    record
}

/// What `path` (relative to `cwd`, or absolute) resolves to through the filesystem, as the
/// kernel would walk it: its deepest existing ancestor canonicalized (symbolic links followed,
/// `..` after a link taken from the link's target), the rest appended; a dangling symbolic link
/// on the way is followed to where it points (a write through it lands there). `None` when it
/// cannot be told: a `..` or `.` after a part that does not exist, or more than 40 links.
fn resolve(path: &str, cwd: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::path::Component;
    let mut full = cwd.join(path);
    for _ in 0..40 {
        let mut base = full.clone();
        let mut rest: Vec<std::ffi::OsString> = Vec::new();
        let dangling = loop {
            if let Ok(real) = std::fs::canonicalize(&base) {
                return Some(rest.iter().rev().fold(real, |p, c| p.join(c)));
            }
            if let Ok(target) = std::fs::read_link(&base) {
                break base.parent()?.join(target);
            }
            match base.components().next_back() {
                Some(Component::Normal(name)) => rest.push(name.to_owned()),
                _ => return None,
            }
            base = base.parent()?.to_path_buf();
        };
        full = rest.iter().rev().fold(dangling, |p, c| p.join(c));
    }
    None
}

/// Whether `path` resolves outside `cwd` (canonical) through the filesystem ([`resolve`]). A
/// path that cannot be resolved counts as outside.
#[cfg(test)]
fn resolves_outside(path: &str, cwd: &std::path::Path) -> bool {
    resolve(path, cwd).is_none_or(|r| !crate::security::paths::is_within(&r, cwd))
}

/// The model's calls recorded under `call_id` in the rollout at `path` (its last
/// [`ROLLOUT_TAIL_BYTES`]), waiting up to [`CALL_RECORD_WAIT`] for codex to write one.
async fn recorded_calls(path: &std::path::Path, call_id: &str) -> Vec<ModelCall> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    if call_id.is_empty() {
        return Vec::new();
    }
    let until = Instant::now() + CALL_RECORD_WAIT;
    loop {
        let mut text = String::new();
        if let Ok(mut f) = tokio::fs::File::open(path).await {
            let len = f.metadata().await.map(|m| m.len()).unwrap_or(0);
            let from = len.saturating_sub(ROLLOUT_TAIL_BYTES);
            if f.seek(std::io::SeekFrom::Start(from)).await.is_ok() {
                let mut bytes = Vec::new();
                let _ = (&mut f)
                    .take(ROLLOUT_TAIL_BYTES)
                    .read_to_end(&mut bytes)
                    .await;
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
        }
        let calls = rollout::model_calls(&text, call_id);
        if !calls.is_empty() || Instant::now() >= until {
            return calls;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_through_a_symbolic_link_out_of_the_working_directory_resolves_outside() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let work = root.join("work");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::os::unix::fs::symlink(&root, work.join("link")).unwrap();
        let p = |s: &str| work.join(s).display().to_string();
        assert!(!resolves_outside(&p("sub/new.txt"), &work));
        assert!(!resolves_outside(&p("not/yet/there.txt"), &work));
        assert!(!resolves_outside("relative/inside.txt", &work));
        assert!(resolves_outside(&p("link/escaped.sh"), &work));
        assert!(resolves_outside(&p("link/deeper/new.sh"), &work));
        assert!(resolves_outside(
            &root.join("x").display().to_string(),
            &work
        ));
        assert!(resolves_outside(&p("../x"), &work));
        // `..` after a link is taken from the link's target, as the kernel walks it
        std::fs::create_dir_all(root.join("other/deep")).unwrap();
        std::os::unix::fs::symlink(root.join("other/deep"), work.join("deep")).unwrap();
        assert!(resolves_outside(&p("deep/../x.sh"), &work));
        // a dangling link is followed to where a write through it lands
        std::os::unix::fs::symlink(root.join("gone/x.sh"), work.join("dangling.sh")).unwrap();
        assert_eq!(
            resolve(&p("dangling.sh"), &work),
            Some(root.join("gone/x.sh"))
        );
        // `..` after a part that does not exist cannot be told
        assert_eq!(resolve(&p("nothing/../x"), &work), None);
    }

    /// What a question shows resolves again to something else once a directory it names is
    /// swapped for a symbolic link: a missing one, or an existing one moved away.
    #[test]
    fn a_swapped_directory_changes_what_a_file_changes_paths_resolve_to() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let work = root.join("work");
        std::fs::create_dir_all(work.join("kept")).unwrap();
        let outside = root.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let file = |path: &str| crate::approval::FileSummary {
            path: work.join(path).display().to_string(),
            kind: "add".into(),
            move_to: None,
            added: 1,
            removed: 0,
            diff: "x\n".into(),
            resolves_outside: false,
        };
        let mut q = Question::FileChange {
            reason: None,
            grant_root: None,
            files: Some(vec![file("dir/evil.sh"), file("kept/evil.sh")]),
            workdir: None,
        };
        let shown = mark_outside(&mut q, &work);
        assert_eq!(
            shown,
            vec![
                Some(work.join("dir/evil.sh")),
                Some(work.join("kept/evil.sh"))
            ]
        );
        assert!(q.files_mut().iter().all(|f| !f.resolves_outside));
        assert_eq!(resolutions(&q, &work), shown);
        std::os::unix::fs::symlink(&outside, work.join("dir")).unwrap();
        assert_ne!(resolutions(&q, &work), shown);
        std::fs::remove_file(work.join("dir")).unwrap();
        std::fs::rename(work.join("kept"), work.join("x")).unwrap();
        std::os::unix::fs::symlink(&outside, work.join("kept")).unwrap();
        let now = resolutions(&q, &work);
        assert_eq!(now[1], Some(outside.join("evil.sh")));
    }

    #[test]
    fn a_command_directory_outside_the_working_directory_is_marked() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let work = root.join("work");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::os::unix::fs::symlink(&root, work.join("up")).unwrap();
        let shown = |dir: std::path::PathBuf| {
            let mut q = Question::Command {
                command: "touch x".into(),
                cwd: Some(dir.display().to_string()),
                reason: None,
                network_host: None,
                workdir: None,
                cwd_resolves_outside: false,
            };
            q.set_workdir(&work);
            mark_outside(&mut q, &work);
            q.lines()
                .into_iter()
                .find(|(l, _)| *l == "Working directory")
                .unwrap()
                .1
        };
        let mark = format!(" — OUTSIDE the working directory {}", work.display());
        assert_eq!(
            shown(work.join("sub")),
            work.join("sub").display().to_string()
        );
        assert_eq!(shown(work.clone()), work.display().to_string());
        for out in [root.clone(), work.join("../.."), work.join("up")] {
            assert_eq!(shown(out.clone()), format!("{}{mark}", out.display()));
        }
    }
}

//! Parallel sessions on one repository, each in a git worktree of its own (issue 44), against
//! the real codex of the version under test, on the backend under test: four `codex` calls
//! with `worktree: true` run at once on one repository, each making codex (told by the mock
//! Responses API) edit files with a shell command. The person's checkout stays untouched;
//! each session's `diffSession` shows its own edit and new file; `getSession` and
//! `listSessions` show the worktree; the first `applySession` lands, a conflicting one is
//! refused naming the file and lands nothing, a non-conflicting one lands; `closeSession`
//! refuses to drop changes not applied unless told to, and removes every worktree and
//! branch (`git worktree list` shows only the checkout). On the way: the refusals name their
//! field, another session may not work in a session's worktree, a start that fails after its
//! worktree was made leaves nothing behind, a session goes on in its worktree after a restart
//! (a background turn),
//! and a worktree removed by hand is said to be gone, and after a restart is no longer pointed
//! at by the store (nor its branch kept); a fork works in a worktree of its own that holds
//! its parent's changes.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::mcp::{Protocol, connect_with, server_env, text};
use crate::support::{MockApi, Reply, TestEnv};

const MODEL: &str = "gpt-5.5";

/// Plain git in `dir` (the test's own view of the repository), its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The structured content of a tool result.
fn value(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

/// What session `i`'s codex does: sessions 0 to 2 rewrite `a.txt`'s second line (each
/// differently, so they conflict) and add a file of their own; session 3 edits `b.txt` only.
fn command(i: usize) -> String {
    if i < 3 {
        format!("printf 'one\\nsession{i}\\nthree\\n' > a.txt && echo new{i} > new{i}.txt")
    } else {
        "echo bee3 > b.txt && echo new3 > new3.txt".into()
    }
}

#[tokio::test]
async fn four_worktree_sessions_on_one_repository_edit_apply_and_close_without_colliding() {
    let env = TestEnv::new();
    let repo = env.work().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(repo.join("b.txt"), "bee\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    // a root outside any repository (the suite's own tree lies in the project's checkout)
    let outside = tempfile::tempdir().unwrap();
    let plain = outside.path().canonicalize().unwrap();
    let mock = MockApi::start().await;
    let mut vars = server_env(&env, &mock);
    for (k, v) in vars.iter_mut() {
        if k == "CODEX_BRIDGE_ROOTS" {
            v.push_str(&format!(":{}", plain.display()));
        }
    }
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;

    // refusals name their field: not a repository; `base` without `worktree`
    let r = s
        .call(
            "codex",
            json!({"prompt": "x", "model": MODEL, "workingDirectory": plain, "worktree": true}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("`worktree`"), "{}", text(&r));
    assert!(
        text(&r).contains("not inside a git repository"),
        "{}",
        text(&r)
    );
    let r = s
        .call(
            "codex",
            json!({"prompt": "x", "model": MODEL, "workingDirectory": repo, "base": "main"}),
        )
        .await;
    assert!(text(&r).contains("`base`"), "{}", text(&r));

    for i in 0..4 {
        let marker = format!("worktree-edit-{i}");
        mock.push_for_user_text(&marker, Reply::exec_command(&command(i)));
        mock.push_for_user_text(&marker, Reply::message(format!("edited {i}")));
    }
    let turn = |i: usize| {
        s.call(
            "codex",
            json!({"prompt": format!("worktree-edit-{i}"), "model": MODEL,
                   "workingDirectory": repo, "sandbox": "workspace-write", "worktree": true}),
        )
    };
    let (r0, r1, r2, r3) = tokio::join!(turn(0), turn(1), turn(2), turn(3));
    let mut ids = Vec::new();
    for r in [r0, r1, r2, r3] {
        assert!(r.is_error != Some(true), "{}", text(&r));
        ids.push(value(&r)["sessionId"].as_str().unwrap().to_owned());
    }

    // the person's checkout is untouched
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");

    // each diff shows its own edit and new file
    for (i, id) in ids.iter().enumerate() {
        let r = s.call("diffSession", json!({"sessionId": id})).await;
        assert!(r.is_error != Some(true), "{}", text(&r));
        let diff = value(&r)["diff"].as_str().unwrap().to_owned();
        assert!(diff.contains(&format!("+new{i}")), "{i}: {diff}");
        assert!(diff.contains(&format!("b/new{i}.txt")), "{i}: {diff}");
        if i < 3 {
            assert!(diff.contains(&format!("+session{i}")), "{i}: {diff}");
        } else {
            assert!(diff.contains("+bee3") && !diff.contains("a.txt"), "{diff}");
        }
    }

    // getSession and listSessions show the worktree and its files
    let r = s.call("getSession", json!({"sessionId": ids[2]})).await;
    let wt = value(&r)["session"]["worktree"].clone();
    assert_eq!(wt["branch"], format!("codex-bridge/{}", ids[2]), "{wt}");
    assert_eq!(wt["baseCommit"], git(&repo, &["rev-parse", "HEAD"]).trim());
    let files = wt["files"].as_array().unwrap();
    assert!(
        files
            .iter()
            .any(|f| f["path"] == "a.txt" && f["added"] == 1 && f["removed"] == 1),
        "{wt}"
    );
    let r = s.call("listSessions", json!({})).await;
    let listed = value(&r)["sessions"].as_array().unwrap().clone();
    assert_eq!(
        listed
            .iter()
            .filter(|v| v["worktree"]["files"].is_array())
            .count(),
        4,
        "{listed:?}"
    );
    let path_of = |v: &Value| {
        v["session"]["worktree"]["path"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let wt0 = path_of(&value(
        &s.call("getSession", json!({"sessionId": ids[0]})).await,
    ));
    let wt2 = wt["path"].as_str().unwrap().to_owned();

    // a worktree is its session's alone; `worktree` is for a new session only
    let r = s
        .call(
            "codex",
            json!({"prompt": "x", "model": MODEL, "workingDirectory": wt0}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("`workingDirectory`"), "{}", text(&r));
    let r = s
        .call(
            "codex",
            json!({"prompt": "x", "model": MODEL, "sessionId": ids[0], "worktree": true}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("`worktree`"), "{}", text(&r));
    // a start that fails after its worktree was made leaves no worktree, branch or record
    let r = s
        .call(
            "codex",
            json!({"prompt": "x", "model": MODEL, "sessionId": "failed-start",
                   "workingDirectory": repo, "worktree": true, "files": ["missing.txt"]}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("`files[0]`"), "{}", text(&r));
    let list = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 5, "{list}");
    assert!(!list.contains("failed-start"), "{list}");
    assert!(!git(&repo, &["branch", "--list"]).contains("failed-start"));
    let r = s
        .call("getSession", json!({"sessionId": "failed-start"}))
        .await;
    assert_eq!(value(&r)["found"], false, "{}", text(&r));

    // after a restart a session goes on in its worktree
    crate::suite::mcp::kill_and_forget(s).await;
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    mock.push_for_user_text(
        "worktree-more",
        Reply::exec_command("echo more > more2.txt")
            .with_delay(std::time::Duration::from_millis(1500)),
    );
    mock.push_for_user_text("worktree-more", Reply::message("more"));
    // (in the background, waited for)
    let r = s
        .call(
            "codex",
            json!({"prompt": "worktree-more", "model": MODEL, "sessionId": ids[2],
                   "sandbox": "workspace-write", "background": true}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    // its changes are not applied while it runs (the background answer may come before the
    // turn starts: wait until codex asks the model, which answers 1.5 s later)
    mock.wait_for_in_flight(|n| n >= 1, std::time::Duration::from_secs(30))
        .await;
    let a = s.call("applySession", json!({"sessionId": ids[2]})).await;
    assert_eq!(a.is_error, Some(true), "{}", text(&a));
    assert!(text(&a).contains("running a turn"), "{}", text(&a));
    let mut polls = 0;
    let r = loop {
        polls += 1;
        let r = s
            .call("wait", json!({"sessionId": ids[2], "waitSeconds": 20}))
            .await;
        if value(&r)["status"] != "running" {
            break r;
        }
        assert!(polls < 10, "never ended: {}", text(&r));
    };
    assert_eq!(value(&r)["status"], "completed", "{}", text(&r));
    assert_eq!(value(&r)["resumed"], true, "{}", text(&r));
    assert!(Path::new(&wt2).join("more2.txt").is_file());
    assert!(!repo.join("more2.txt").exists());

    // the first apply lands; a conflicting one is refused naming the file, landing nothing;
    // one that touches other files lands
    let r = s.call("applySession", json!({"sessionId": ids[0]})).await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert_eq!(value(&r)["applied"], true);
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "one\nsession0\nthree\n"
    );
    let r = s.call("applySession", json!({"sessionId": ids[1]})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(value(&r)["conflicts"], json!(["a.txt"]), "{}", text(&r));
    assert!(
        !repo.join("new1.txt").exists(),
        "part of a refused apply landed"
    );
    let r = s.call("applySession", json!({"sessionId": ids[3]})).await;
    assert_eq!(value(&r)["applied"], true, "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(repo.join("b.txt")).unwrap(),
        "bee3\n"
    );
    // never committed
    assert_eq!(git(&repo, &["log", "--oneline"]).lines().count(), 1);

    // a fork gets a worktree of its own holding its parent's changes, and works there
    let r = s.call("forkSession", json!({"sessionId": ids[3]})).await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let fork = value(&r)["sessionId"].as_str().unwrap().to_owned();
    let fork_wt = value(&r)["session"]["worktree"]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let wt3 = path_of(&value(
        &s.call("getSession", json!({"sessionId": ids[3]})).await,
    ));
    assert_ne!(fork_wt, wt3);
    assert_eq!(
        std::fs::read_to_string(Path::new(&fork_wt).join("b.txt")).unwrap(),
        "bee3\n"
    );
    mock.push_for_user_text("worktree-fork", Reply::exec_command("echo f > fork.txt"));
    mock.push_for_user_text("worktree-fork", Reply::message("forked"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "worktree-fork", "model": MODEL, "sessionId": fork,
                   "sandbox": "workspace-write"}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    assert!(Path::new(&fork_wt).join("fork.txt").is_file());
    assert!(!Path::new(&wt3).join("fork.txt").exists());
    let r = s.call("diffSession", json!({"sessionId": fork})).await;
    let diff = value(&r)["diff"].as_str().unwrap().to_owned();
    assert!(
        diff.contains("+bee3") && diff.contains("b/fork.txt"),
        "{diff}"
    );

    // a worktree holding changes not applied is kept unless told to drop them
    let r = s.call("closeSession", json!({"sessionId": ids[1]})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("`dropChanges`"), "{}", text(&r));
    let wt1 = value(&s.call("getSession", json!({"sessionId": ids[1]})).await)["session"]
        ["worktree"]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(Path::new(&wt1).is_dir());
    // a worktree removed by hand is said to be gone, and its session closes
    std::fs::remove_dir_all(&wt2).unwrap();
    let r = s.call("getSession", json!({"sessionId": ids[2]})).await;
    assert_eq!(
        value(&r)["session"]["worktree"]["gone"],
        true,
        "{}",
        text(&r)
    );
    // after a restart the store no longer points at it, nor git at its branch
    crate::suite::mcp::kill_and_forget(s).await;
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let r = s.call("getSession", json!({"sessionId": ids[2]})).await;
    let v = value(&r)["session"].clone();
    assert!(v["worktree"].is_null(), "{v}");
    assert!(
        v["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("removed by hand"),
        "{v}"
    );
    assert!(!git(&repo, &["worktree", "list"]).contains(&wt2));
    let branch = format!("codex-bridge/{}", ids[2]);
    assert_eq!(git(&repo, &["branch", "--list", &branch]), "");
    // applied sessions (and one whose worktree is gone) close without it; the other with it
    for (id, drop) in [
        (&ids[0], false),
        (&ids[3], false),
        (&ids[2], false),
        (&ids[1], true),
        (&fork, true),
    ] {
        let r = s
            .call(
                "closeSession",
                json!({"sessionId": id, "dropChanges": drop}),
            )
            .await;
        assert!(r.is_error != Some(true), "{id}: {}", text(&r));
        assert_eq!(value(&r)["closed"], true, "{}", text(&r));
    }
    let list = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    assert_eq!(git(&repo, &["branch", "--list", "codex-bridge/*"]), "");
    assert!(!Path::new(&wt1).exists());
}

/// Every program the hostile repository below configures: hooks, filters (one only through
/// `includeIf` on the worktree's branch), fsmonitor, the diff drivers and external diff.
const HOSTILE_PROGRAMS: &[&str] = &[
    "post-checkout",
    "reference-transaction",
    "post-index-change",
    "filter-clean",
    "filter-smudge",
    "branch-clean",
    "branch-smudge",
    "fsmonitor",
    "diff-external",
    "diff-command",
    "textconv",
];

/// A repository whose configuration names a program for each of [`HOSTILE_PROGRAMS`]; each
/// appends to `marks/<name>` the name of the first process above it that is not git (who ran
/// the git that ran it) and passes its input through, as a filter must.
fn hostile_repository(repo: &Path, marks: &Path) {
    std::fs::create_dir_all(marks).unwrap();
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(repo.join("c.br"), "branch\n").unwrap();
    std::fs::write(
        repo.join(".gitattributes"),
        "*.txt filter=evil diff=evil\n*.br filter=br\n",
    )
    .unwrap();
    // committed before any program is configured
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "base"]);
    let bin = repo.join(".git").join("evil");
    std::fs::create_dir_all(&bin).unwrap();
    for p in HOSTILE_PROGRAMS {
        let script = bin.join(p);
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n\
                 p=$PPID\n\
                 while [ \"$(cat /proc/$p/comm 2>/dev/null)\" = git ]; do\n\
                 \x20 p=$(sed 's/.*) [^ ]* //; s/ .*//' /proc/$p/stat)\n\
                 done\n\
                 echo \"$(cat /proc/$p/comm 2>/dev/null)\" >> '{}/{p}'\n\
                 cat\n",
                marks.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for h in [
        "post-checkout",
        "reference-transaction",
        "post-index-change",
    ] {
        std::os::unix::fs::symlink(bin.join(h), repo.join(".git").join("hooks").join(h)).unwrap();
    }
    let e = |p: &str| bin.join(p).display().to_string();
    std::fs::write(
        repo.join(".git").join("branch.cfg"),
        format!(
            "[filter \"br\"]\n\tclean = {}\n\tsmudge = {}\n",
            e("branch-clean"),
            e("branch-smudge")
        ),
    )
    .unwrap();
    let mut config = std::fs::read_to_string(repo.join(".git").join("config")).unwrap();
    config.push_str(&format!(
        "[filter \"evil\"]\n\tclean = {}\n\tsmudge = {}\n\trequired = true\n\
         [core]\n\tfsmonitor = {}\n\
         [diff]\n\texternal = {}\n\
         [diff \"evil\"]\n\tcommand = {}\n\ttextconv = {}\n\
         [includeIf \"onbranch:codex-bridge/**\"]\n\tpath = branch.cfg\n",
        e("filter-clean"),
        e("filter-smudge"),
        e("fsmonitor"),
        e("diff-external"),
        e("diff-command"),
        e("textconv"),
    ));
    std::fs::write(repo.join(".git").join("config"), config).unwrap();
}

/// Who ran each program of the hostile repository: `(program, the process above its git)`.
fn programs_run(marks: &Path) -> Vec<(String, String)> {
    let mut ran = Vec::new();
    for p in HOSTILE_PROGRAMS {
        if let Ok(who) = std::fs::read_to_string(marks.join(p)) {
            ran.extend(who.lines().map(|w| (p.to_string(), w.to_owned())));
        }
    }
    ran
}

/// The server's own git runs none of a repository's programs while it makes a session's
/// worktree, shows its changes, applies them and removes it, against the real codex (whose
/// own git may run the repository's filters during a turn: those runs name codex, not this
/// server, as the process above their git). The negative control: plain `git worktree add` of
/// the same repository runs its hook, its filter and the filter `includeIf` adds on the
/// worktree's branch.
#[tokio::test]
async fn a_hostile_repository_runs_none_of_its_programs_through_the_worktree_tools() {
    let env = TestEnv::new();
    let repo = env.work().join("hostile");
    std::fs::create_dir(&repo).unwrap();
    let marks = env.root().join("marks");
    hostile_repository(&repo, &marks);
    // the control: git the ordinary way runs them
    let control = env.root().join("control-wt");
    let control_s = control.display().to_string();
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "codex-bridge/control",
            &control_s,
        ],
    );
    let ran = programs_run(&marks);
    for p in ["post-checkout", "filter-smudge", "branch-smudge"] {
        assert!(
            ran.iter().any(|(q, _)| q == p),
            "plain git ran no {p}: {ran:?}"
        );
    }
    git(&repo, &["worktree", "remove", "--force", &control_s]);
    git(&repo, &["branch", "-D", "codex-bridge/control"]);
    std::fs::remove_dir_all(&marks).unwrap();
    std::fs::create_dir_all(&marks).unwrap();

    let mock = MockApi::start().await;
    let s = connect_with(&server_env(&env, &mock), env.root(), Protocol::Legacy).await;
    mock.push_for_user_text(
        "hostile-edit",
        Reply::exec_command("printf 'one\\nTWO\\nthree\\n' > a.txt && echo new > new.txt"),
    );
    mock.push_for_user_text("hostile-edit", Reply::message("edited"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "hostile-edit", "model": MODEL, "sessionId": "hostile",
                   "workingDirectory": repo, "sandbox": "workspace-write", "worktree": true}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let r = s.call("diffSession", json!({"sessionId": "hostile"})).await;
    let diff = value(&r)["diff"].as_str().unwrap_or_default().to_owned();
    assert!(
        diff.contains("+TWO") && diff.contains("+new"),
        "{}",
        text(&r)
    );
    let r = s.call("getSession", json!({"sessionId": "hostile"})).await;
    assert!(
        value(&r)["session"]["worktree"]["files"].is_array(),
        "{}",
        text(&r)
    );
    let r = s
        .call("applySession", json!({"sessionId": "hostile"}))
        .await;
    assert_eq!(value(&r)["applied"], true, "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    let r = s
        .call("closeSession", json!({"sessionId": "hostile"}))
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let list = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");

    let ours: Vec<_> = programs_run(&marks)
        .into_iter()
        .filter(|(_, who)| who.starts_with("codex-mcp-brid"))
        .collect();
    assert_eq!(
        ours,
        Vec::<(String, String)>::new(),
        "the server's git ran them"
    );
}

/// The worktree tools keep to the session's host and to what a person read: `applySession`
/// with `diffSession`'s digest lands only those changes (a stale digest is refused naming
/// `digest`, landing nothing); a client of another `CODEX_HOME` is told the session does not
/// exist by `diffSession` and `applySession`, exactly as for an unknown one, and may not drop
/// its changes; a server started with its own `--worktrees` still refuses a session's
/// worktree as a `workingDirectory`; a close while the session's turn runs is refused without
/// `dropChanges`; and a worktree that could not be removed is said, with its path and branch.
#[tokio::test]
async fn worktree_tools_keep_to_the_sessions_host_and_apply_only_what_was_read() {
    let env = TestEnv::new();
    let repo = env.work().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let mock = MockApi::start().await;
    let vars = server_env(&env, &mock);
    let s = connect_with(&vars, env.root(), Protocol::Legacy).await;
    mock.push_for_user_text("wt-bound", Reply::exec_command("echo x > x.txt"));
    mock.push_for_user_text("wt-bound", Reply::message("made x"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "wt-bound", "model": MODEL, "workingDirectory": repo,
                   "sandbox": "workspace-write", "worktree": true}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    let id = value(&r)["sessionId"].as_str().unwrap().to_owned();
    let r = s.call("getSession", json!({"sessionId": id})).await;
    let wt = value(&r)["session"]["worktree"]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let branch = format!("codex-bridge/{id}");

    // the digest binds the apply to the changes read: one made since is refused, nothing lands
    let r = s.call("diffSession", json!({"sessionId": id})).await;
    let read = value(&r)["digest"].as_str().unwrap().to_owned();
    assert_eq!(read.len(), 64, "{}", text(&r));
    std::fs::write(Path::new(&wt).join("y.txt"), "sneaked in\n").unwrap();
    let r = s
        .call("applySession", json!({"sessionId": id, "digest": read}))
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("`digest`"), "{}", text(&r));
    assert!(!repo.join("x.txt").exists() && !repo.join("y.txt").exists());
    let r = s.call("diffSession", json!({"sessionId": id})).await;
    let now = value(&r)["digest"].as_str().unwrap().to_owned();
    assert_ne!(now, read);

    // another CODEX_HOME's client: no such session for the diff and the apply, no drop
    let other = crate::support::mcp::connect_other_home(&env, &mock).await;
    for tool in ["diffSession", "applySession"] {
        let unknown = text(&s.call(tool, json!({"sessionId": "no-such-session"})).await)
            .replace("no-such-session", &id);
        let r = other.call(tool, json!({"sessionId": id})).await;
        assert_eq!(r.is_error, Some(true), "{tool}: {}", text(&r));
        assert_eq!(text(&r), unknown, "{tool}");
    }
    let r = other
        .call(
            "closeSession",
            json!({"sessionId": id, "dropChanges": true}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("`sessionId`"), "{}", text(&r));
    assert!(Path::new(&wt).is_dir());
    assert!(!repo.join("x.txt").exists());

    // a server with its own worktrees directory still keeps out of the session's worktree
    let mut elsewhere = vars.clone();
    elsewhere.push((
        "CODEX_BRIDGE_WORKTREES".into(),
        env.root().join("elsewhere-worktrees").display().to_string(),
    ));
    let relay = connect_with(&elsewhere, env.root(), Protocol::Legacy).await;
    mock.push_for_user_text("wt-intruder", Reply::message("in"));
    let r = relay
        .call(
            "codex",
            json!({"prompt": "wt-intruder", "model": MODEL, "workingDirectory": wt}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("`workingDirectory`") && text(&r).contains("own worktree"),
        "{}",
        text(&r)
    );

    // the digest of what is there now lands it
    let r = s
        .call("applySession", json!({"sessionId": id, "digest": now}))
        .await;
    assert_eq!(value(&r)["applied"], true, "{}", text(&r));
    assert!(repo.join("x.txt").is_file() && repo.join("y.txt").is_file());

    // a close while the session's turn runs would lose what it writes: refused without
    // dropChanges (every change so far is applied)
    mock.push_for_user_text(
        "wt-busy",
        Reply::exec_command("echo z > z.txt").with_delay(std::time::Duration::from_millis(1500)),
    );
    mock.push_for_user_text("wt-busy", Reply::message("made z"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "wt-busy", "model": MODEL, "sessionId": id,
                   "sandbox": "workspace-write", "background": true}),
        )
        .await;
    assert!(r.is_error != Some(true), "{}", text(&r));
    mock.wait_for_in_flight(|n| n >= 1, std::time::Duration::from_secs(30))
        .await;
    let r = s.call("closeSession", json!({"sessionId": id})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("`dropChanges`") && text(&r).contains("still making changes"),
        "{}",
        text(&r)
    );
    let mut polls = 0;
    let r = loop {
        polls += 1;
        let r = s
            .call("wait", json!({"sessionId": id, "waitSeconds": 20}))
            .await;
        if value(&r)["status"] != "running" {
            break r;
        }
        assert!(polls < 10, "never ended: {}", text(&r));
    };
    assert_eq!(value(&r)["status"], "completed", "{}", text(&r));
    assert!(Path::new(&wt).join("z.txt").is_file());

    // a worktree that cannot be removed (its checkout moved away) is said, path and branch
    let away = env.work().join("repo-away");
    std::fs::rename(&repo, &away).unwrap();
    let r = s
        .call(
            "closeSession",
            json!({"sessionId": id, "dropChanges": true}),
        )
        .await;
    std::fs::rename(&away, &repo).unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains(&wt) && text(&r).contains(&branch),
        "{}",
        text(&r)
    );
    git(&repo, &["worktree", "remove", "--force", &wt]);
    git(&repo, &["branch", "-D", &branch]);
}

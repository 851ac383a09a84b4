//! The conversation controls of long-running hosts, against the real codex on the backend
//! under test: a session's name (in its record, codex's record of its thread, every listing,
//! and after a restart) and the hand-off command (exact: codex's own record of the thread is
//! in the CODEX_HOME it names, for the directory it names). Codex keeps a thread's name in
//! `session_index.jsonl` of its CODEX_HOME (`id`, `thread_name`), on 0.145.0 and 0.171.0.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::mcp::{Protocol, Server, connect_with, server_env, structured, text};
use crate::support::{MockApi, Reply, TestEnv};

fn ok(r: &rmcp::model::CallToolResult) -> Value {
    assert_ne!(r.is_error, Some(true), "{}", text(r));
    structured(r)
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
            {
                found.push(p);
            }
        }
    }
    found
}

/// The shell's words of `cmd` (single-quoted words, as the hand-off writes them).
fn words(cmd: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    let mut chars = cmd.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if !quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ' ' if !quoted => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

async fn serve(env: &TestEnv, mock: &MockApi) -> Server {
    connect_with(&server_env(env, mock), env.root(), Protocol::Legacy).await
}

#[tokio::test]
async fn a_name_reaches_codex_survives_a_restart_and_the_hand_off_names_codexs_own_record() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock).await;
    // a session without a thread yet is refused as unknown; one with a turn can be named
    let r = s
        .call("renameSession", json!({"sessionId": "nobody", "name": "x"}))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("sessionId"), "{}", text(&r));
    mock.push(Reply::message("one"));
    let one = ok(&s
        .call(
            "codex",
            json!({"prompt": "first", "sessionId": "named", "workingDirectory": env.work()}),
        )
        .await);
    let thread = one["threadId"].as_str().unwrap().to_owned();
    // what a person cannot read as it is never becomes a name: refused, naming the field
    for bad in ["", "two\nlines", "bidi \u{202e}gnp.exe", &"x".repeat(81)] {
        let r = s
            .call("renameSession", json!({"sessionId": "named", "name": bad}))
            .await;
        assert_eq!(r.is_error, Some(true), "{bad:?}");
        assert!(text(&r).contains("name"), "{bad:?}: {}", text(&r));
    }
    let name = "Parser refactor, take 2";
    let r = ok(&s
        .call("renameSession", json!({"sessionId": "named", "name": name}))
        .await);
    assert_eq!(r["session"]["name"], name, "{r}");
    // codex's own record of the thread carries it (codex's app lists it by it)
    let index = std::fs::read_to_string(env.codex_home().join("session_index.jsonl"))
        .expect("codex's index of named threads");
    assert!(
        index
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|e| e["id"] == thread.as_str() && e["thread_name"] == name),
        "codex's index does not name thread {thread}: {index}"
    );
    // getSession: the name and the hand-off command
    let got = ok(&s.call("getSession", json!({"sessionId": "named"})).await);
    assert_eq!(got["session"]["name"], name, "{got}");
    let hand_off = got["session"]["handOff"]
        .as_str()
        .expect("a hand-off")
        .to_owned();
    let w = words(&hand_off);
    let home = w[0].strip_prefix("CODEX_HOME=").expect("CODEX_HOME first");
    assert_eq!(
        Path::new(home).canonicalize().unwrap(),
        env.codex_home().canonicalize().unwrap()
    );
    assert_eq!(Path::new(&w[1]), crate::support::codex_bin::codex_bin());
    assert_eq!(&w[2..4], ["resume", "-C"]);
    let cwd = env.work().canonicalize().unwrap();
    assert_eq!(Path::new(&w[4]), cwd);
    assert_eq!(w[5], thread);
    assert_eq!(w.len(), 6, "{hand_off}");
    // exact: codex's record of that thread is in that CODEX_HOME, for that directory
    let rollouts = files_holding(&Path::new(home).join("sessions"), &thread);
    let rollout = rollouts
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("codex's rollout of the thread in the hand-off's CODEX_HOME");
    let meta: Value = std::fs::read_to_string(rollout)
        .unwrap()
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap();
    assert_eq!(meta["payload"]["id"], thread, "{meta}");
    assert_eq!(
        meta["payload"]["cwd"],
        json!(cwd.display().to_string()),
        "{meta}"
    );
    // the session goes on after the rename, on its thread
    mock.push(Reply::message("two"));
    let two = ok(&s
        .call("codex", json!({"prompt": "second", "sessionId": "named"}))
        .await);
    assert_eq!(two["threadId"], thread.as_str(), "{two}");
    assert_eq!(two["resumed"], true, "{two}");
    // a restart keeps the name: listed by it
    drop(s);
    let s = serve(&env, &mock).await;
    let list = ok(&s.call("listSessions", json!({})).await);
    let listed = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["sessionId"] == "named")
        .cloned()
        .expect("listed");
    assert_eq!(listed["name"], name, "{list}");
    assert_eq!(listed["handOff"], hand_off.as_str(), "{list}");
    // the `sessions` command line shows both
    let out = crate::support::process::run_with_timeout(
        env.command(crate::support::mcp::server_bin())
            .args(["sessions", "show", "named"])
            .env("CODEX_BRIDGE_STORE", env.root().join("store"))
            .env("CODEX_BIN", crate::support::codex_bin::codex_bin()),
        std::time::Duration::from_secs(60),
    )
    .await;
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains(name), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("continue in codex") && l.ends_with(hand_off.as_str())),
        "{shown}"
    );
}

/// A person continues the conversation in codex's own app (here the thread resumed by codex
/// itself with the session's CODEX_HOME, as that app writes it): the server's next turn goes on
/// from codex's record, so the model receives the person's turn too, on either backend (on the
/// app-server the warm process that had the thread loaded reads it again). While codex's own
/// app holds the thread open (a process of this user resuming it), a turn is refused naming
/// the session, and it runs once that app closed.
#[tokio::test]
async fn a_conversation_continued_in_codexs_own_app_goes_on_from_codexs_record() {
    use codex_mcp_bridge::codex::argv::build_turn;
    use codex_mcp_bridge::security::ids::ThreadId;
    use std::os::unix::process::CommandExt;

    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock).await;
    mock.push_for_user_text("server one", Reply::message("answer one"));
    let one = ok(&s
        .call(
            "codex",
            json!({"prompt": "server one", "sessionId": "handed", "workingDirectory": env.work()}),
        )
        .await);
    let thread = one["threadId"].as_str().unwrap().to_owned();
    // two turns in a row through the server never count as written elsewhere
    mock.push_for_user_text("server two", Reply::message("answer two"));
    ok(&s
        .call(
            "codex",
            json!({"prompt": "server two", "sessionId": "handed"}),
        )
        .await);

    // the person's turn in codex's own record of the thread, while the server may still hold
    // it loaded (its warm process between turns)
    let person = || {
        let mut req = crate::support::bridge::turn(&env, "person three");
        req.resume = Some(ThreadId::parse(&thread).unwrap());
        build_turn(&crate::support::bridge::common(&env, &mock), req).unwrap()
    };
    mock.push_for_user_text("person three", Reply::message("answer three"));
    let mut by_hand = crate::support::bridge::run_spec(person()).await;
    if by_hand.output.message.is_none() {
        // codex 0.171.0 refuses to open a thread another process holds ("already has an
        // active writer"): `handOff: true` makes the server let go of it first
        assert!(
            format!("{:?}", by_hand.ending).contains("active writer"),
            "{:?}",
            by_hand.ending
        );
        let got = ok(&s
            .call(
                "getSession",
                json!({"sessionId": "handed", "handOff": true}),
            )
            .await);
        assert!(got["session"]["handOff"].as_str().is_some(), "{got}");
        by_hand = crate::support::bridge::run_spec(person()).await;
    }
    assert_eq!(
        by_hand.output.message.as_deref(),
        Some("answer three"),
        "{:?}",
        by_hand.ending
    );

    // codex's own app holds the thread open: refused, naming the session
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("codex");
    std::fs::write(&app, "#!/bin/sh\nsleep 60\n").unwrap();
    std::fs::set_permissions(&app, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut held = std::process::Command::new(&app)
        .args(["resume", "-C", &env.work().display().to_string(), &thread])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let r = s
        .call(
            "codex",
            json!({"prompt": "server four", "sessionId": "handed"}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("sessionId") && text(&r).contains("codex's own app"),
        "{}",
        text(&r)
    );
    // the app and its `sleep`
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(held.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    held.wait().unwrap();

    // once it closed, the server goes on from codex's record: the person's turn included
    mock.push_for_user_text("server four", Reply::message("answer four"));
    let four = ok(&s
        .call(
            "codex",
            json!({"prompt": "server four", "sessionId": "handed"}),
        )
        .await);
    assert_eq!(four["threadId"], thread.as_str(), "{four}");
    let last = mock.responses_requests().last().unwrap().clone();
    for said in ["server one", "server two", "person three", "server four"] {
        assert!(
            last.user_text_contains(said),
            "the model did not receive `{said}`: {:?}",
            last.user_texts()
        );
    }
}

/// A rewound session's next turn no longer carries the dropped turns in what the model
/// receives (codex's own `thread/rollback` on 0.145.0, `thread/revert` on 0.171.0, on a
/// short-lived app-server on either backend); the session's record says how many were dropped,
/// and the answer that files codex changed are not undone. Refusals name the field.
#[tokio::test]
async fn a_rewound_session_goes_on_from_before_the_dropped_turns() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock).await;
    let r = s
        .call("rewindSession", json!({"sessionId": "nobody", "turns": 1}))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("sessionId"), "{}", text(&r));
    for (i, said) in ["r one", "r two", "r three"].into_iter().enumerate() {
        mock.push_for_user_text(said, Reply::message(format!("answer {i}")));
        let mut args = json!({"prompt": said, "sessionId": "rew"});
        if i == 0 {
            args["workingDirectory"] = json!(env.work());
        }
        ok(&s.call("codex", args).await);
    }
    for (turns, why) in [(0, "between 1"), (4, "3 turn(s)")] {
        let r = s
            .call("rewindSession", json!({"sessionId": "rew", "turns": turns}))
            .await;
        assert_eq!(r.is_error, Some(true), "{turns}");
        assert!(
            text(&r).contains("turns") && text(&r).contains(why),
            "{turns}: {}",
            text(&r)
        );
    }
    let r = ok(&s
        .call("rewindSession", json!({"sessionId": "rew", "turns": 2}))
        .await);
    assert_eq!(r["dropped"], 2, "{r}");
    assert!(r["note"].as_str().unwrap().contains("not undone"), "{r}");
    assert_eq!(r["session"]["turnCount"], 1, "{r}");
    assert_eq!(r["session"]["droppedTurns"], 2, "{r}");
    mock.push_for_user_text("r four", Reply::message("answer four"));
    let four = ok(&s
        .call("codex", json!({"prompt": "r four", "sessionId": "rew"}))
        .await);
    assert_eq!(four["resumed"], true, "{four}");
    let last = mock.responses_requests().last().unwrap().clone();
    assert!(
        last.user_text_contains("r one") && last.user_text_contains("r four"),
        "{:?}",
        last.user_texts()
    );
    for dropped in ["r two", "r three"] {
        assert!(
            !last.user_text_contains(dropped),
            "the model still received `{dropped}`: {:?}",
            last.user_texts()
        );
    }
    // while a turn runs: refused, naming the session
    mock.push_for_user_text(
        "r slow",
        Reply::message("slow answer").with_delay(std::time::Duration::from_millis(1500)),
    );
    let (slow, refused) = tokio::join!(
        s.call("codex", json!({"prompt": "r slow", "sessionId": "rew"})),
        async {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            s.call("rewindSession", json!({"sessionId": "rew", "turns": 1}))
                .await
        }
    );
    ok(&slow);
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(
        text(&refused).contains("sessionId") && text(&refused).contains("running a turn"),
        "{}",
        text(&refused)
    );
}

/// A compaction reaches codex (`thread/compact/start` on a short-lived app-server, on either
/// backend and codex version): codex sends the model its compaction request, the session
/// records it (with codex's token counts when it reports them), and the session goes on: its
/// next turn runs on the same thread and the model receives the summary in place of the turns.
#[tokio::test]
async fn a_compacted_session_goes_on_from_codexs_summary() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock).await;
    let r = s
        .call("compactSession", json!({"sessionId": "nobody"}))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("sessionId"), "{}", text(&r));
    for (i, said) in ["c one", "c two"].into_iter().enumerate() {
        mock.push_for_user_text(said, Reply::message(format!("answer {i}")));
        let mut args = json!({"prompt": said, "sessionId": "cmp"});
        if i == 0 {
            args["workingDirectory"] = json!(env.work());
        }
        ok(&s.call("codex", args).await);
    }
    let before = mock.responses_requests().len();
    mock.push(Reply::message("SUMMARY OF THE CONVERSATION"));
    let r = ok(&s.call("compactSession", json!({"sessionId": "cmp"})).await);
    assert_eq!(r["session"]["compactions"], 1, "{r}");
    // progress: said as it starts (the heartbeat follows while codex works)
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let said: Vec<String> = s
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|n| n.message.clone())
        .collect();
    assert!(
        said.iter().any(|m| m.contains("compact session cmp")),
        "{said:?}"
    );
    // codex's counts: the context before (the mock's usage of the last request) and after
    // (codex's own count of the compacted context)
    let counts = &r["session"]["lastCompaction"];
    assert!(counts["tokensBefore"].as_u64().unwrap() > 0, "{r}");
    assert!(counts["tokensAfter"].as_u64().unwrap() > 0, "{r}");
    assert!(
        mock.responses_requests().len() > before,
        "codex sent the model no compaction request"
    );
    mock.push_for_user_text("c three", Reply::message("answer three"));
    let three = ok(&s
        .call("codex", json!({"prompt": "c three", "sessionId": "cmp"}))
        .await);
    assert_eq!(three["resumed"], true, "{three}");
    assert_eq!(three["response"], "answer three", "{three}");
    let last = mock.responses_requests().last().unwrap().clone();
    assert!(
        last.user_text_contains("c three")
            && last.user_text_contains("SUMMARY OF THE CONVERSATION"),
        "the model did not receive codex's summary: {:?}",
        last.user_texts()
    );
}

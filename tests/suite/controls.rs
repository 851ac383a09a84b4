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

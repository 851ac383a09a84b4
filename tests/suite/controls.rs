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

/// Codex's own terminal app holding `thread`, as a person starts it with `handOff`: the real
/// codex binary run as `codex resume -C <cwd> <thread>` in a terminal (`script` gives it one),
/// with an empty CODEX_HOME of its own (it waits at its first screen and never touches the
/// session's thread), once the server's rule sees it.
fn codex_app_resuming(cwd: &Path, thread: &str) -> CodexApp {
    use codex_mcp_bridge::codex::argv::quoted;
    use std::os::unix::process::CommandExt;
    let home = tempfile::tempdir().unwrap();
    let codex = crate::support::codex_bin::codex_bin();
    let line = format!(
        "{} resume -C {} {thread}",
        quoted(&codex.display().to_string()),
        quoted(&cwd.display().to_string())
    );
    let held = std::process::Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .env("CODEX_HOME", home.path())
        .env("SHELL", "/bin/sh")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("run `script` (util-linux) to give codex a terminal");
    let t = codex_mcp_bridge::security::ids::ThreadId::parse(thread).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let pid = loop {
        if let Some((pid, _)) = codex_mcp_bridge::codex::process::app_holding(&t) {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
            assert_eq!(exe, codex, "the holder seen is not codex's binary");
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "codex's own app resuming {thread} was never seen"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    CodexApp {
        script: held,
        pid,
        thread: t,
        _home: home,
    }
}

/// Codex's own app run by [`codex_app_resuming`].
struct CodexApp {
    /// `script`, in a process group of its own.
    script: std::process::Child,
    /// Codex (in the terminal's session, not `script`'s group).
    pid: i32,
    thread: codex_mcp_bridge::security::ids::ThreadId,
    _home: tempfile::TempDir,
}

impl CodexApp {
    /// Kill codex and `script`, and wait until the app is seen no more.
    fn close(mut self) {
        use nix::sys::signal::{Signal, kill, killpg};
        use nix::unistd::Pid;
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        let _ = killpg(Pid::from_raw(self.script.id() as i32), Signal::SIGKILL);
        self.script.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while codex_mcp_bridge::codex::process::app_holding(&self.thread).is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "codex's app outlived its kill"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
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
/// app holds the thread open (codex's binary resuming it, outside any sandbox), a turn is
/// refused naming the session, and it runs once that app closed.
#[tokio::test]
async fn a_conversation_continued_in_codexs_own_app_goes_on_from_codexs_record() {
    use codex_mcp_bridge::codex::argv::build_turn;
    use codex_mcp_bridge::security::ids::ThreadId;

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
    if by_hand.message.is_none() {
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
        by_hand.message.as_deref(),
        Some("answer three"),
        "{:?}",
        by_hand.ending
    );

    // codex's own app holds the thread open: refused, naming the session
    let app = codex_app_resuming(env.work(), &thread);
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
    app.close();

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

/// The words of each process's command line whose words include `needle`, with its
/// `/proc/PID/status` lines `NoNewPrivs`, `Seccomp` and `NSpid`.
fn processes_naming(needle: &str) -> Vec<(i32, Vec<String>, String)> {
    let mut found = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv: Vec<String> = String::from_utf8_lossy(&raw)
            .split('\0')
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        if argv.iter().any(|a| a == needle) {
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            let status = status
                .lines()
                .filter(|l| {
                    ["NoNewPrivs:", "Seccomp:", "NSpid:"]
                        .iter()
                        .any(|k| l.starts_with(k))
                })
                .collect::<Vec<_>>()
                .join(" ");
            found.push((pid, argv, status));
        }
    }
    found
}

/// Runs session `a`'s turn (in `sandbox`), whose command is `spoof`, and while that command
/// runs (a process naming `thread`, under way), session `b`'s turn `b_prompt`: both answers.
async fn spoof_during(
    s: &Server,
    mock: &MockApi,
    env: &TestEnv,
    (a, sandbox, spoof): (&str, &str, &str),
    (thread, b_prompt): (&str, &str),
) -> (Value, Value) {
    let a_prompt = format!("{a} spoof");
    mock.push_for_user_text(&a_prompt, Reply::exec_command(spoof));
    mock.push_for_user_text(&a_prompt, Reply::message("a done"));
    mock.push_for_user_text(b_prompt, Reply::message("b answered"));
    let a_turn = s.call(
        "codex",
        json!({"prompt": a_prompt, "sessionId": a, "workingDirectory": env.work(),
               "sandbox": sandbox, "model": "gpt-5.5"}),
    );
    let b_turn = async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let seen = loop {
            let found = processes_naming(thread);
            if let Some(p) = found
                .iter()
                .find(|(_, argv, _)| argv.iter().any(|w| w == "resume"))
            {
                break p.clone();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "session {a}'s command never started: {:?}",
                mock.responses_requests()
                    .iter()
                    .flat_map(|r| r.function_call_outputs())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        eprintln!("the sandboxed spoof ({sandbox}): {seen:?}");
        // codex's sandbox: what keeps the spoof from counting even when its binary is named
        // `codex`
        assert!(
            seen.2.contains("NoNewPrivs:\t1"),
            "codex's sandbox did not set no_new_privs: {seen:?}"
        );
        let r = s
            .call("codex", json!({"prompt": b_prompt, "sessionId": "b"}))
            .await;
        let alive = processes_naming(thread)
            .iter()
            .any(|(pid, ..)| *pid == seen.0);
        assert!(
            alive,
            "the spoof ended before B's turn: the test proves nothing"
        );
        r
    };
    let (a_turn, b_turn) = tokio::join!(a_turn, b_turn);
    (ok(&a_turn), ok(&b_turn))
}

/// The issue's spoof: session A's model reads session B's thread id (it lies in
/// `CODEX_HOME/sessions`, which a read-only turn may read) and runs a command whose words are
/// `resume <B's thread>` inside its sandbox: `bash -c 'sleep …; true' resume <thread>`, and
/// (in a workspace-write turn) the same from a copy of bash named `codex`, so that its
/// executable's name is codex's too. Neither is codex's own app: B's next turns run. Codex's
/// sandbox sets `no_new_privs` on every command it runs (the command's own `/proc/PID/status`
/// says `NoNewPrivs: 1`, measured here), which no process can clear.
#[tokio::test]
async fn a_sandboxed_command_naming_anothers_thread_does_not_hold_it() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock).await;
    mock.push_for_user_text("b one", Reply::message("b answer one"));
    let b = ok(&s
        .call(
            "codex",
            json!({"prompt": "b one", "sessionId": "b", "workingDirectory": env.work()}),
        )
        .await);
    let thread = b["threadId"].as_str().unwrap().to_owned();
    drop(s);
    let status = "grep -E '^(NoNewPrivs|Seccomp|NSpid):' /proc/self/status";
    let spoofs = [
        (
            "read-only",
            format!("{status}; bash -c 'sleep 8; true' resume {thread}"),
        ),
        (
            "workspace-write",
            format!("{status}; cp /bin/bash ./codex && ./codex -c 'sleep 8; true' resume {thread}"),
        ),
    ];
    for (i, (sandbox, spoof)) in spoofs.iter().enumerate() {
        // a new server: B's next turn looks for codex's app (no mark of its thread yet)
        let s = serve(&env, &mock).await;
        let b_prompt = format!("b turn {i}");
        let (a, b) = spoof_during(
            &s,
            &mock,
            &env,
            (&format!("a{i}"), sandbox, spoof),
            (&thread, &b_prompt),
        )
        .await;
        assert_eq!(a["response"], "a done", "{a}");
        assert_eq!(b["response"], "b answered", "{b}");
        assert_eq!(b["threadId"], thread.as_str(), "{b}");
    }
    let outputs: Vec<String> = mock
        .responses_requests()
        .iter()
        .flat_map(|r| r.function_call_outputs())
        .map(|(_, o)| o)
        .collect();
    eprintln!("inside codex's sandbox: {outputs:?}");
}

/// The shells a person may paste `handOff` into, each as `(name, program, args)`: the line is
/// the last argument, or stdin when `args` ends in `-i` (bash and zsh read it interactively,
/// history expansion on, as a pasted line is read).
const SHELLS: &[(&str, &str, &[&str])] = &[
    ("sh (dash)", "dash", &["-c"]),
    ("bash", "bash", &["--norc", "--noprofile", "-c"]),
    (
        "bash, interactive",
        "bash",
        &["--norc", "--noprofile", "-i"],
    ),
    ("zsh", "zsh", &["-f", "-c"]),
    ("zsh, interactive", "zsh", &["-f", "-i"]),
    ("fish", "fish", &["--no-config", "-c"]),
];

/// Where `program` lies on `PATH`; a test failure naming it when it is missing.
fn shell_on_path(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{program}` is not installed: the hand-off test runs the command in sh (dash), \
                 bash, zsh and fish (apt-get install dash bash zsh fish)"
            )
        })
}

/// Runs `line` in `shell` (see [`SHELLS`]) in `cwd`, with `OUT` naming where the argv printer
/// writes; its exit status and what it printed.
fn run_in_shell(shell: &(&str, &str, &[&str]), line: &str, cwd: &Path, out: &Path) -> String {
    use std::io::Write;
    let (_, program, args) = shell;
    let interactive = args.last() == Some(&"-i");
    let mut cmd = std::process::Command::new(shell_on_path(program));
    cmd.args(*args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", cwd)
        .env("HISTFILE", "/dev/null")
        .env("OUT", out)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if !interactive {
        cmd.arg(line);
    }
    let mut child = cmd.spawn().unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        if interactive {
            writeln!(stdin, "{line}").unwrap();
            writeln!(stdin, "exit").unwrap();
        }
    }
    let o = child.wait_with_output().unwrap();
    format!(
        "{}; stdout {:?}; stderr {:?}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// What the argv printer received, and the CODEX_HOME it saw; none when it did not run.
fn printed(out: &Path) -> Option<(Vec<String>, String)> {
    let argv = std::fs::read(out).ok()?;
    let home = std::fs::read_to_string(out.with_extension("home")).ok()?;
    let argv = String::from_utf8_lossy(&argv)
        .split_terminator('\0')
        .map(str::to_owned)
        .collect();
    Some((argv, home))
}

/// The hand-off's quoting before issue 43: single quotes, each `'` as `'\''` (POSIX only).
fn old_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `handOff` runs exactly as shown in sh (dash), bash, zsh and fish, interactive bash and zsh
/// too (history expansion): for working directories with hostile names (the issue's two,
/// command substitutions, a backtick, `!`, `*`, spaces, non-ASCII), the program it names
/// (replaced by one that prints its argv) receives exactly `resume -C <directory> <thread>`,
/// with the session's CODEX_HOME, and nothing else runs. A name holding a character a
/// terminal does not show as it is (U+202E, U+200B) gets no `handOff`, but
/// `handOffUnavailable` saying why. The control: the quoting before the fix breaks fish on
/// the issue's names (it runs `touch INJECTED`, or fish refuses the line), while the POSIX
/// shells run it exactly.
#[tokio::test]
async fn the_hand_off_runs_exactly_as_shown_in_every_shell() {
    let shells: Vec<_> = SHELLS.iter().map(|s| shell_on_path(s.1)).collect();
    assert_eq!(shells.len(), SHELLS.len());
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = serve(&env, &mock).await;
    let shown = [
        r"x\';touch INJECTED;#",
        r"ends in \",
        "$(touch INJECTED)",
        "`touch INJECTED`",
        "bang!! !$ !-1",
        "star * ? [a] {b,c} ~",
        "two  spaces ; & | > < #",
        "quote ' and \" and \\' and $HOME %self",
        "café проект 日本語",
    ];
    // (a newline never gets this far: the server refuses such a working directory)
    let not_shown = [
        ("bidi \u{202e}gnp.exe", "U+202E"),
        ("zero\u{200b}width", "U+200B"),
    ];
    // the argv printer, in place of codex
    let bin = tempfile::tempdir().unwrap();
    let printer = bin.path().join("print-argv");
    std::fs::write(
        &printer,
        "#!/bin/sh\nfor a in \"$0\" \"$@\"; do printf '%s\\0' \"$a\"; done > \"$OUT\"\n\
         printf '%s' \"$CODEX_HOME\" > \"${OUT%.argv}.home\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &printer,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let codex = crate::support::codex_bin::codex_bin();
    let home = env.codex_home().display().to_string();

    let mut failures = vec![];
    for (i, name) in shown
        .iter()
        .chain(not_shown.iter().map(|n| &n.0))
        .enumerate()
    {
        let dir = env.work().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let id = format!("shell-{i}");
        mock.push_for_user_text(&format!("turn {i}"), Reply::message("ok"));
        let r = ok(&s
            .call(
                "codex",
                json!({"prompt": format!("turn {i}"), "sessionId": id, "workingDirectory": dir}),
            )
            .await);
        let thread = r["threadId"].as_str().unwrap().to_owned();
        let got = ok(&s.call("getSession", json!({"sessionId": id})).await);
        let session = &got["session"];
        let cwd = session["workingDirectory"].as_str().unwrap().to_owned();
        if let Some((_, why)) = not_shown.iter().find(|n| n.0 == *name) {
            assert!(session.get("handOff").is_none(), "{name:?}: {got}");
            let reason = session["handOffUnavailable"].as_str().unwrap_or_default();
            assert!(
                reason.contains("working directory") && reason.contains(why),
                "{name:?}: {got}"
            );
            // the `sessions` command line says the same
            let out = crate::support::process::run_with_timeout(
                env.command(crate::support::mcp::server_bin())
                    .args(["sessions", "show", &id, "--json"])
                    .env("CODEX_BRIDGE_STORE", env.root().join("store"))
                    .env("CODEX_BIN", &codex),
                std::time::Duration::from_secs(60),
            )
            .await;
            let shown: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            assert!(
                shown.get("handOff").is_none() && shown["handOffUnavailable"] == reason,
                "{name:?}: {shown}"
            );
            continue;
        }
        assert!(session.get("handOffUnavailable").is_none(), "{got}");
        let line = session["handOff"].as_str().expect("a hand-off").to_owned();
        // what a person reads is what runs: nothing in the line hides
        assert!(
            line.chars()
                .all(|c| codex_mcp_bridge::security::shown::plain(c) && c != '\n'),
            "{line:?}"
        );
        let program = codex_mcp_bridge::codex::argv::quoted(&codex.display().to_string());
        assert_eq!(line.matches(&program).count(), 1, "{line}");
        let line = line.replacen(&program, &printer.display().to_string(), 1);
        let want = vec![
            printer.display().to_string(),
            "resume".to_owned(),
            "-C".to_owned(),
            cwd.clone(),
            thread.clone(),
        ];
        for shell in SHELLS {
            let scratch = tempfile::tempdir().unwrap();
            let out = scratch.path().join("run.argv");
            let ran = run_in_shell(shell, &line, scratch.path(), &out);
            let got = printed(&out);
            let injected = scratch.path().join("INJECTED").exists();
            if got.as_ref() != Some(&(want.clone(), home.clone())) || injected {
                failures.push(format!(
                    "{}: {name:?}: `{line}` gave {got:?} (injected: {injected}); {ran}",
                    shell.0
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // the control: the old quoting of the issue's names, in the same shells
    for name in [r"x\';touch INJECTED;#", r"ends in \"] {
        let line = format!(
            "CODEX_HOME={} {} resume -C {} {}",
            old_quoted(&home),
            old_quoted(&printer.display().to_string()),
            old_quoted(&format!("/w/{name}")),
            "019a0000-0000-7000-8000-000000000001"
        );
        for shell in SHELLS {
            let scratch = tempfile::tempdir().unwrap();
            let out = scratch.path().join("run.argv");
            let ran = run_in_shell(shell, &line, scratch.path(), &out);
            let exact = printed(&out).is_some_and(|(argv, _)| argv[3] == format!("/w/{name}"))
                && !scratch.path().join("INJECTED").exists();
            assert_eq!(
                exact,
                shell.1 != "fish",
                "{}: the old quoting of {name:?}: `{line}`: {ran}",
                shell.0
            );
        }
    }
}

//! A person decides on what they have read, whole (issue 35): the built server, the real codex
//! of the version under test against the mock, and rmcp's real client naming itself as Claude
//! Code (a host that shows three rows of a form's message), on the three ways a question
//! reaches a client: `elicitation/create` on 2025-11-25, the call's `input_required` answer and
//! its retry on 2026-07-28 (MRTR), and a task's `input_required` on 2026-07-28.
//!
//! - No form message exceeds three rows of 72 columns; a 4-line command, a 380-character
//!   command and a 30-line file change go to the question's page (URL-mode elicitation).
//! - The decision is the page's: approving there writes; denying, or accepting in the host
//!   without deciding on the page, writes nothing; a forged, foreign or repeated decision
//!   decides nothing.
//! - A host that cannot open a page is not asked what it cannot show: the question is
//!   declined unasked, with a reason that tells the model what can be asked.
//! - Nothing that decides a question reaches a file: while it is open, no file of the store
//!   (sled's, the owner daemon's log at trace level) holds its URL, page id, token, cookie or
//!   code, on any of the three ways.

use std::path::PathBuf;

use rmcp::model::{CallToolResult, ClientCapabilities};
use serde_json::{Value, json};

use crate::support::mcp::{
    Answer, OnPage, Person, Protocol, Server, connect_person, server_env, structured, text,
};
use crate::support::page;
use crate::support::{MockApi, Reply, TestEnv};

/// A model with the classic tool shape (`exec_command`, freeform `apply_patch`).
const MODEL: &str = "gpt-5.5";
/// Claude Code's client name.
const CLAUDE_CODE: &str = "claude-code";

/// How the question reaches the client.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// `elicitation/create` on a 2025-11-25 connection.
    Legacy,
    /// The call's `input_required` answer and the client's retry (2026-07-28, no tasks).
    Rounds,
    /// A task's `input_required` and `tasks/update` (2026-07-28, the tasks extension).
    Task,
}

const WAYS: [Way; 3] = [Way::Legacy, Way::Rounds, Way::Task];

/// Capabilities: elicitation (form, and URL mode when `url`), and tasks on [`Way::Task`].
fn capabilities(way: Way, url: bool) -> ClientCapabilities {
    let mut caps = match way {
        Way::Task => {
            serde_json::to_value(ClientCapabilities::builder().enable_tasks().build()).unwrap()
        }
        _ => json!({}),
    };
    caps["elicitation"] = if url {
        json!({"form": {}, "url": {}})
    } else {
        json!({"form": {}})
    };
    serde_json::from_value(caps).unwrap()
}

/// The bridge on the app-server backend under `approvals = ask` (a person has `timeout_ms`),
/// and a client reached `way` behind which `person` answers.
async fn serve(
    env: &TestEnv,
    mock: &MockApi,
    person: Person,
    way: Way,
    url: bool,
    timeout_ms: u64,
) -> Server {
    let mut vars = server_env(env, mock);
    // questions reach a person on the app-server backend only (`codex exec` declines them)
    for (k, v) in [
        ("CODEX_BRIDGE_BACKEND", "app-server".to_owned()),
        ("CODEX_BRIDGE_APPROVALS", "ask".to_owned()),
        ("CODEX_BRIDGE_APPROVAL_TIMEOUT_MS", timeout_ms.to_string()),
    ] {
        vars.retain(|(key, _)| key != k);
        vars.push((k.into(), v));
    }
    // a person who reads the store's files while the question is open (`Person::scan`): the
    // owner daemon owns the store, as for Claude Code, and logs everything to its `owner.log`
    // there, rmcp's messages included
    if let Some(store) = person.scan.lock().unwrap().clone() {
        vars.retain(|(k, _)| {
            k != "CODEX_BRIDGE_OWNER" && k != "RUST_LOG" && k != "CODEX_BRIDGE_STORE"
        });
        vars.push(("CODEX_BRIDGE_STORE".into(), store.display().to_string()));
        vars.push((
            "RUST_LOG".into(),
            "debug,codex_mcp_bridge=trace,rmcp=trace".into(),
        ));
    }
    let protocol = match way {
        Way::Legacy => Protocol::Legacy,
        _ => Protocol::Modern,
    };
    connect_person(&vars, env.root(), protocol, capabilities(way, url), person).await
}

/// One turn of session `session` whose model makes the `first` call, then says done.
async fn turn(mock: &MockApi, env: &TestEnv, s: &Server, way: Way, first: Reply) -> Value {
    mock.push_all([first, Reply::message("done")]);
    let args = json!({"prompt": "please", "sessionId": format!("{way:?}"), "model": MODEL,
                      "workingDirectory": env.work()});
    let r: CallToolResult = match way {
        Way::Rounds => s.call_rounds("codex", args).await,
        _ => s.call("codex", args).await,
    };
    assert!(r.is_error != Some(true), "{}", text(&r));
    structured(&r)
}

fn escalation(cmd: &str) -> Reply {
    Reply::function_call(
        "exec_command",
        json!({"cmd": cmd, "sandbox_permissions": "require_escalated",
               "justification": "I need to write outside the sandbox"}),
    )
}

/// A freeform `apply_patch` call of the model.
fn patch(body: &str) -> Reply {
    Reply::items(vec![json!({"type": "custom_tool_call", "id": "ctc_p1",
        "call_id": "call_p1", "name": "apply_patch", "status": "completed",
        "input": format!("*** Begin Patch\n{body}*** End Patch\n")})])
}

fn outside(env: &TestEnv, name: &str) -> PathBuf {
    env.root().canonicalize().unwrap().join(name)
}

/// The one decision the result lists.
fn the_decision(v: &Value) -> &Value {
    match v["approvals"].as_array().map(Vec::as_slice) {
        Some([one]) => one,
        _ => panic!("expected one decision: {v}"),
    }
}

/// Whether Claude Code at 80 columns shows `message` whole: at most three lines of at most 72
/// columns, or one line that wraps onto at most three rows (a character outside ASCII
/// counted as two columns).
fn within_three_rows(message: &str) -> bool {
    let width = |s: &str| {
        s.chars()
            .map(|c| if c.is_ascii() { 1 } else { 2 })
            .sum::<usize>()
    };
    let lines: Vec<&str> = message.split('\n').collect();
    match lines.as_slice() {
        [one] => width(one) <= 3 * 72 - 40,
        many => many.len() <= 3 && many.iter().all(|l| width(l) <= 72),
    }
}

/// A command of four lines that writes `target` on its last.
fn four_lines(target: &std::path::Path) -> String {
    format!(
        "echo one\necho two\necho three\necho pwned > '{}'",
        target.display()
    )
}

#[tokio::test]
async fn a_command_a_small_host_cannot_show_whole_is_approved_on_its_page_on_every_way() {
    for way in WAYS {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        let person = Person::answering(Answer::Accept(true))
            .on_host(CLAUDE_CODE)
            .on_page(OnPage::Approve);
        let store = env.root().join("store");
        *person.scan.lock().unwrap() = Some(store.clone());
        let s = serve(&env, &mock, person.clone(), way, true, 30_000).await;
        let target = outside(&env, "approved.txt");
        let v = turn(&mock, &env, &s, way, escalation(&four_lines(&target))).await;
        let urls = person.urls.lock().unwrap().clone();
        assert_eq!(urls.len(), 1, "{way:?}: one page: {v}");
        assert!(urls[0].starts_with("http://127.0.0.1:"), "{urls:?}");
        assert_eq!(person.asked(), 0, "{way:?}: no form: {v}");
        let pages = person.pages.lock().unwrap().clone();
        assert!(
            pages[0].contains("echo three") && pages[0].contains("approved.txt"),
            "{way:?}: the page shows the whole command: {}",
            pages[0]
        );
        let d = the_decision(&v);
        assert_eq!(
            (&d["decision"], &d["byPerson"]),
            (&json!("acceptOnce"), &json!(true)),
            "{way:?}: {v}"
        );
        assert!(
            target.exists(),
            "{way:?}: approved on the page, so written: {v}"
        );
        // nothing that decides the question was in a file while it was open (the log was
        // there, and said that a page opened)
        let leaks = person.leaks.lock().unwrap().clone();
        assert!(leaks.is_empty(), "{way:?}: {leaks:#?}");
        let log = std::fs::read_to_string(store.join("owner.log")).unwrap_or_default();
        assert!(log.contains("a question's page is open"), "{way:?}: {log}");
        // the turn ended: its page, read again, says so
        let said = page_once_the_turn_ended(&urls[0]).await;
        assert!(
            said.contains("You approved this request on this page")
                && said.contains("turn has ended since"),
            "{way:?}: {said}"
        );
    }
}

/// What the page at `url` says (its outcome once ended) when it says the turn ended, or after
/// 5 s.
async fn page_once_the_turn_ended(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    let mut said = String::new();
    for _ in 0..100 {
        let r =
            crate::support::http1::request(addr, "GET", path, &[("Host", &addr.to_string())], b"")
                .await;
        said = r.body;
        if said.contains("turn has ended since") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    said
}

#[tokio::test]
async fn accepting_in_the_host_without_deciding_on_the_page_writes_nothing() {
    for way in [Way::Rounds, Way::Task] {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        let person = Person::answering(Answer::Accept(true))
            .on_host(CLAUDE_CODE)
            .on_page(OnPage::Skip);
        let s = serve(&env, &mock, person.clone(), way, true, 3_000).await;
        let target = outside(&env, "skipped.txt");
        let long = format!(
            "echo {} ; echo pwned > '{}'",
            "x".repeat(380),
            target.display()
        );
        let v = turn(&mock, &env, &s, way, escalation(&long)).await;
        // "I'm done" with the page undecided: the host is asked again, the same page and code
        // (its dialog, which closed, is the only place the code is shown)
        let urls = person.urls.lock().unwrap().clone();
        let messages = person.url_messages.lock().unwrap().clone();
        assert!(urls.len() >= 2, "{way:?}: {urls:?} {v}");
        assert!(urls.iter().all(|u| *u == urls[0]), "{urls:?}");
        let code = page::code_of(&messages[0]).expect("the code");
        assert!(messages[1].starts_with("Undecided: "), "{messages:?}");
        assert_eq!(page::code_of(&messages[1]).as_deref(), Some(code.as_str()));
        let d = the_decision(&v);
        assert_eq!(
            (&d["decision"], &d["byPerson"]),
            (&json!("decline"), &json!(false)),
            "{way:?}: {v}"
        );
        assert!(
            d["reason"]
                .as_str()
                .unwrap()
                .contains("not decided on the question's page"),
            "{v}"
        );
        assert!(
            !target.exists(),
            "{way:?}: nothing decided, nothing written"
        );
    }
}

#[tokio::test]
async fn a_30_line_file_change_is_read_whole_on_its_page_and_denying_there_writes_nothing() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true))
        .on_host(CLAUDE_CODE)
        .on_page(OnPage::Deny);
    let s = serve(&env, &mock, person.clone(), Way::Legacy, true, 30_000).await;
    let lines: String = (0..30)
        .map(|i| format!("+line {i} of the notes\n"))
        .collect();
    let v = turn(
        &mock,
        &env,
        &s,
        Way::Legacy,
        patch(&format!("*** Add File: notes.txt\n{lines}")),
    )
    .await;
    let pages = person.pages.lock().unwrap().clone();
    assert_eq!(pages.len(), 1, "{v}");
    for i in 0..30 {
        assert!(
            pages[0].contains(&format!("line {i} of the notes")),
            "line {i} missing from the page: {}",
            pages[0]
        );
    }
    let d = the_decision(&v);
    assert_eq!(
        (&d["decision"], &d["byPerson"]),
        (&json!("decline"), &json!(true)),
        "{v}"
    );
    assert!(!env.work().join("notes.txt").exists(), "denied: {v}");
}

#[tokio::test]
async fn a_host_that_cannot_open_a_page_is_asked_only_what_it_shows_whole() {
    for way in WAYS {
        let env = TestEnv::new();
        let mock = MockApi::start().await;
        let person = Person::answering(Answer::Accept(true)).on_host(CLAUDE_CODE);
        let s = serve(&env, &mock, person.clone(), way, false, 30_000).await;
        let target = outside(&env, "unseen.txt");
        let v = turn(&mock, &env, &s, way, escalation(&four_lines(&target))).await;
        let d = the_decision(&v);
        assert_eq!(
            (&d["decision"], &d["byPerson"]),
            (&json!("decline"), &json!(false)),
            "{way:?}: {v}"
        );
        let reason = d["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("not asked: the question does not fit")
                && reason.contains("shorter command"),
            "{reason}"
        );
        assert_eq!(person.asked(), 0, "{way:?}: nobody was shown a cut form");
        assert!(!target.exists(), "{way:?}");
        // every form such a host is sent fits its three rows
        for seen in person.seen.lock().unwrap().iter() {
            assert!(within_three_rows(seen), "{seen}");
        }
    }
}

/// A forged decision: its name, its headers and its body.
type Forged<'a> = (&'a str, Vec<(&'a str, &'a str)>, String);

/// The page of the one question of a running turn, once it is out.
async fn the_url(person: &Person) -> String {
    for _ in 0..600 {
        if let Some(u) = person.urls.lock().unwrap().first() {
            return u.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no page in time")
}

#[tokio::test]
async fn a_forged_foreign_or_repeated_decision_on_the_page_decides_nothing() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    // the person never answers in the host: only the page could decide
    let person = Person::answering(Answer::Silent).on_host(CLAUDE_CODE);
    let s = serve(&env, &mock, person.clone(), Way::Legacy, true, 6_000).await;
    let target = outside(&env, "forged.txt");
    let running = turn(
        &mock,
        &env,
        &s,
        Way::Legacy,
        escalation(&four_lines(&target)),
    );
    let attack = async {
        let url = the_url(&person).await;
        let (host, _) = page::split(&url);
        let own = format!("http://{host}");
        let opened = page::request("GET", &url, &[], "").await;
        assert_eq!(opened.status, 200, "{}", opened.body);
        let cookie = opened
            .header("set-cookie")
            .and_then(|c| c.split(';').next())
            .unwrap()
            .to_owned();
        let token = page::token_of(&opened.body).unwrap();
        let approve = format!("token={token}&decision=approve");
        let cases: Vec<Forged> = vec![
            (
                "no token",
                vec![("Origin", &own), ("Cookie", &cookie)],
                "decision=approve".into(),
            ),
            (
                "a wrong token",
                vec![("Origin", &own), ("Cookie", &cookie)],
                format!("token={}&decision=approve", "A".repeat(token.len())),
            ),
            (
                "a foreign Origin",
                vec![("Origin", "http://evil.example"), ("Cookie", &cookie)],
                approve.clone(),
            ),
            ("no Origin", vec![("Cookie", &cookie)], approve.clone()),
            ("no cookie", vec![("Origin", &own)], approve.clone()),
            // everything a browser sends, but not the code only the host shows (a process that
            // read the page's address from a browser's command line has all of this)
            (
                "no code",
                vec![("Origin", &own), ("Cookie", &cookie)],
                approve.clone(),
            ),
            (
                "a wrong code",
                vec![("Origin", &own), ("Cookie", &cookie)],
                format!("{approve}&code=000000"),
            ),
        ];
        for (name, head, body) in cases {
            let r = page::request("POST", &url, &head, &body).await;
            if name.ends_with("code") {
                // back to the question, which says how many tries are left
                assert_eq!(r.status, 303, "{name}: {}", r.body);
            } else {
                assert!(r.status >= 400, "{name}: {} {}", r.status, r.body);
            }
        }
        // a second browser (another GET without the cookie) gets no page and no token
        let again = page::request("GET", &url, &[], "").await;
        assert!(again.status >= 400, "{}", again.body);
        assert!(page::token_of(&again.body).is_none());
    };
    let (v, ()) = tokio::join!(running, attack);
    let d = the_decision(&v);
    assert_eq!(d["decision"], "decline", "{v}");
    assert!(!target.exists(), "nothing the person decided ran: {v}");
}

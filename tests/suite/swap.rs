//! What was accepted is what runs (issue 35): a file change is bound to its paths as the
//! person saw them. The built server, the real codex of the version under test against the
//! mock, and rmcp's real client, which says it is Codex's terminal app (a host that shows a
//! form whole) and behind which a person accepts.
//!
//! Session A (read-only, approvals asked) asks to add `<wd>/dir/evil.sh`. While the form is
//! open, `dir` is swapped for a symbolic link to a directory outside the roots: by a second
//! session's sandboxed `ln -s` (a directory that did not exist), or by the test (an existing
//! directory moved away first). The person accepts what they saw; nothing is written outside,
//! and the record says the change was declined and why. The control: the same flow without the
//! swap writes the file inside. A lower-level control shows why the rule matters: codex itself
//! writes through the link when it is told the change is accepted.

use std::path::{Path, PathBuf};

use codex_mcp_bridge::approval::Decision;
use codex_mcp_bridge::codex::app_server::client::{Client, DEFAULT_MAX_LINE_BYTES};
use codex_mcp_bridge::codex::app_server::protocol::{self, Approvals, TurnParams};
use rmcp::model::{CallToolResult, ClientCapabilities};
use serde_json::{Value, json};

use crate::support::app_server::{STEP, read_turn, spawn_raw};
use crate::support::mcp::{
    Answer, Person, Protocol, Server, backend_under_test, connect_person, server_env, structured,
    text,
};
use crate::support::{MockApi, Reply, TestEnv};

/// A model with the classic tool shape (`exec_command`, freeform `apply_patch`).
const MODEL: &str = "gpt-5.5";

/// How `dir` changes while the form is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Swap {
    /// Not at all (the control; `dir` exists).
    None,
    /// `dir` did not exist; another session's sandboxed `ln -s OUTSIDE dir` makes it a link.
    NewByAnotherSession,
    /// `dir` existed; `mv dir x; ln -s OUTSIDE dir`.
    Existing,
}

/// The bridge under `approvals = ask` on the backend under test, and a client that says it is
/// Codex's terminal app, behind which a person accepts.
async fn serve(env: &TestEnv, mock: &MockApi, person: Person) -> Server {
    let mut vars = server_env(env, mock);
    for (k, v) in [
        ("CODEX_BRIDGE_APPROVALS", "ask"),
        ("CODEX_BRIDGE_APPROVAL_TIMEOUT_MS", "30000"),
    ] {
        vars.retain(|(key, _)| key != k);
        vars.push((k.into(), v.into()));
    }
    let person = person.on_host(crate::support::mcp::WHOLE_FORM_HOST);
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    connect_person(&vars, env.root(), Protocol::Legacy, caps, person).await
}

fn ok(r: &CallToolResult) -> Value {
    assert!(r.is_error != Some(true), "{}", text(r));
    structured(r)
}

/// A freeform `apply_patch` call of the model.
fn patch(call_id: &str, body: &str) -> Reply {
    Reply::items(vec![
        json!({"type": "custom_tool_call", "id": format!("ctc_{call_id}"),
        "call_id": call_id, "name": "apply_patch", "status": "completed",
        "input": format!("*** Begin Patch\n{body}*** End Patch\n")}),
    ])
}

/// A call of the `codex` tool for `session` in the test's working directory.
fn call(env: &TestEnv, session: &str, sandbox: &str) -> Value {
    json!({"prompt": format!("please, {session}"), "sessionId": session, "model": MODEL,
           "workingDirectory": env.work(), "sandbox": sandbox})
}

/// While session A's form is open: `dir` swapped as `swap` says.
async fn do_swap(env: &TestEnv, mock: &MockApi, s: &Server, swap: Swap, target: &Path) {
    let work = env.work().canonicalize().unwrap();
    match swap {
        Swap::None => {}
        Swap::NewByAnotherSession => {
            let ln = format!(
                "ln -s '{}' '{}'",
                target.display(),
                work.join("dir").display()
            );
            mock.push_all([
                Reply::function_call("exec_command", json!({"cmd": ln})),
                Reply::message("linked"),
            ]);
            let b = ok(&s.call("codex", call(env, "b", "workspace-write")).await);
            assert!(
                std::fs::symlink_metadata(work.join("dir")).is_ok_and(|m| m.is_symlink()),
                "session B's sandboxed ln -s did not make the link: {b}"
            );
        }
        Swap::Existing => {
            std::fs::rename(work.join("dir"), work.join("x")).unwrap();
            std::os::unix::fs::symlink(target, work.join("dir")).unwrap();
        }
    }
}

/// Session A asks to add `<wd>/dir/evil.sh`; `swap` happens while the form is open; the
/// person accepts. Returns the call's result and where the link points.
async fn asked_then_swapped(swap: Swap) -> (TestEnv, TestEnv, Value, Person) {
    let env = TestEnv::new();
    let far = TestEnv::new(); // outside the roots
    let target = far.root().canonicalize().unwrap().join("outside");
    std::fs::create_dir_all(&target).unwrap();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let s = serve(&env, &mock, person.clone()).await;
    let work = env.work().canonicalize().unwrap();
    // (codex cannot create a missing parent directory for an accepted change under a
    // read-only sandbox: "Failed to create parent directories"; the control's exists)
    if swap != Swap::NewByAnotherSession {
        std::fs::create_dir_all(work.join("dir")).unwrap();
    }
    let (shown_tx, shown) = tokio::sync::oneshot::channel();
    let (go, go_rx) = tokio::sync::oneshot::channel();
    *person.hold.lock().unwrap() = Some((shown_tx, go_rx));
    let evil = work.join("dir/evil.sh");
    mock.push(patch(
        "call_swap",
        &format!("*** Add File: {}\n+echo pwned\n", evil.display()),
    ));
    if on_exec() {
        // `codex exec` asks nothing: no form opens, and the model goes on at once
        mock.push(Reply::message("done"));
        let v = ok(&s.call("codex", call(&env, "a", "read-only")).await);
        return (env, far, v, person);
    }
    let a = s.call("codex", call(&env, "a", "read-only"));
    let person_side = async {
        let form = tokio::time::timeout(STEP, shown).await.unwrap().unwrap();
        assert!(form.contains(&evil.display().to_string()), "{form}");
        assert!(!form.contains("OUTSIDE"), "{form}");
        do_swap(&env, &mock, &s, swap, &target).await;
        mock.push(Reply::message("done"));
        let _ = go.send(());
    };
    let (a, ()) = tokio::join!(a, person_side);
    let v = ok(&a);
    drop(s);
    (env, far, v, person)
}

/// The one decision the result lists.
fn the_decision(v: &Value) -> &Value {
    match v["approvals"].as_array().map(Vec::as_slice) {
        Some([one]) => one,
        _ => panic!("expected one decision: {v}"),
    }
}

fn on_exec() -> bool {
    backend_under_test().as_deref() == Some("exec")
}

/// Every file under `dir`, for a message.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    walk(dir).into_iter().filter(|p| p.is_file()).collect()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// The swap of `swap` is caught: nothing written outside (nor where the directory went), and
/// the record says declined, by the person's accept, for the swap.
async fn a_swap_is_declined(swap: Swap) {
    let (env, far, v, person) = asked_then_swapped(swap).await;
    let outside = far.root().canonicalize().unwrap().join("outside");
    assert!(
        files_under(&outside).is_empty(),
        "written outside: {:?} {v}",
        files_under(&outside)
    );
    assert!(!env.work().join("x/evil.sh").exists(), "{v}");
    if on_exec() {
        // `codex exec` asks nothing: the change is declined by codex itself
        assert_eq!(person.asked(), 0, "{v}");
        return;
    }
    assert_eq!(person.asked(), 1, "{v}");
    let d = the_decision(&v);
    assert_eq!(
        (&d["decision"], &d["byPerson"]),
        (&json!("decline"), &json!(true)),
        "{v}"
    );
    assert!(
        d["reason"]
            .as_str()
            .is_some_and(|r| r.contains("resolves elsewhere than when it was shown")),
        "{v}"
    );
}

#[tokio::test]
async fn a_directory_made_a_link_by_another_session_while_the_form_is_open_is_declined() {
    a_swap_is_declined(Swap::NewByAnotherSession).await;
}

#[tokio::test]
async fn an_existing_directory_swapped_for_a_link_while_the_form_is_open_is_declined() {
    a_swap_is_declined(Swap::Existing).await;
}

/// The control: the same flow without a swap writes the file inside.
#[tokio::test]
async fn without_a_swap_the_accepted_file_is_written_inside() {
    let (env, _far, v, person) = asked_then_swapped(Swap::None).await;
    let evil = env.work().join("dir/evil.sh");
    if on_exec() {
        assert_eq!(person.asked(), 0, "{v}");
        assert!(!evil.exists(), "{v}");
        return;
    }
    assert_eq!(the_decision(&v)["decision"], "acceptOnce", "{v}");
    assert_eq!(
        std::fs::read_to_string(&evil).ok().as_deref(),
        Some("echo pwned\n"),
        "{v} {:?}",
        walk(env.work())
    );
}

/// Negative control: codex itself (the crate's client, no bridge rule in between) writes
/// through a directory swapped for a link after it asked: its approval is bound to the path's
/// text, not to where it leads. This is what the bridge's check stands against.
#[tokio::test]
async fn codex_writes_through_a_directory_swapped_after_it_asked() {
    let env = TestEnv::new();
    let far = TestEnv::new();
    let outside = far.root().canonicalize().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mock = MockApi::start().await;
    let work = env.work().canonicalize().unwrap();
    mock.push_all([
        patch(
            "call_raw",
            &format!(
                "*** Add File: {}\n+echo pwned\n",
                work.join("dir/evil.sh").display()
            ),
        ),
        Reply::message("done"),
    ]);
    let (mut child, stdin, stdout) = spawn_raw(&env, &mock);
    let (client, mut events, mut asked) =
        Client::with_answerer(stdout, stdin, DEFAULT_MAX_LINE_BYTES, STEP);
    tokio::time::timeout(STEP, client.handshake("0.0.0-test"))
        .await
        .unwrap()
        .unwrap();
    let opened = client
        .open_thread(
            &protocol::thread_start(
                &work,
                Some(&codex_mcp_bridge::security::ids::ModelId::parse("model", MODEL).unwrap()),
                false,
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let turn = client
        .start_turn_with(
            &TurnParams {
                thread: &opened.thread,
                prompt: &crate::support::bridge::prompt_of("add the script"),
                sandbox: None,
                cwd: &work,
                model: None,
                effort: None,
            },
            Approvals::OnRequest,
        )
        .await
        .unwrap();
    let link = work.join("dir");
    let accepting = tokio::spawn(async move {
        let a = asked.recv().await.expect("codex asks about the change");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        a.asked.answer(Decision::AcceptOnce, None)
    });
    let log = read_turn(&mut events, Some(turn.as_str())).await;
    assert_eq!(accepting.await.unwrap(), Decision::AcceptOnce);
    let _ = child.kill().await;
    drop(client);
    let written = far.root().canonicalize().unwrap().join("outside/evil.sh");
    assert!(
        written.exists(),
        "codex no longer writes through the link: {log:#?}"
    );
}

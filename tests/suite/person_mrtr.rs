//! A person in the loop on protocol 2026-07-28 (issue 26): that protocol forbids requests from
//! the server, so codex's question during a plain `codex` call is the call's answer, an
//! `InputRequiredResult` (multi round-trip requests), and the client's retry with
//! `inputResponses` and `requestState` answers it. The built server on the app-server backend,
//! the real codex of the version under test against the mock, and rmcp's real client on
//! 2026-07-28 (which drives the rounds through its handler, the person, or is driven one
//! request at a time).
//!
//! - An escalated `echo > FILE` outside the read-only sandbox is written after the person
//!   accepts, not after a decline, an unchecked accept or no retry within the timeout; a late
//!   retry gets the turn's result (one turn), never a new turn.
//! - A tampered `requestState`, another connection's retry, or a retry with other arguments is
//!   refused and changes nothing (the question stays open for its own client); a replayed state
//!   is refused.
//! - Two questions in one turn take two rounds and one turn; an answer under another key is a
//!   decline.
//! - A host's roots come as a `roots/list` input request once and choose the working directory;
//!   Claude Code 2.1.332's message shapes (raw lines) get both features.
//! - A background turn's question is the answer of the `wait` waiting on it; its retry decides.
//! - Progress follows the request waiting on the turn; cancelling a retry stops the turn; a
//!   relay passes its client's rounds through to the owner.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    ElicitRequestParams, InputRequest, InputRequiredResult, InputResponses,
};
use serde_json::{Value, json};

use crate::support::mcp::{
    Answer, Person, Protocol, Server, connect_person, server_env, structured, text,
};
use crate::support::{MockApi, Reply, TestEnv};

const MODEL: &str = "gpt-5.5";
const REASON: &str = "I need to write this file outside the sandbox";
const ASK: (&str, &str) = ("CODEX_BRIDGE_APPROVALS", "ask");

/// The bridge on the app-server backend under `approvals = ask` with an approval timeout of
/// `timeout_ms`, and a 2026-07-28 client declaring form elicitation behind which `person`
/// answers.
async fn serve(env: &TestEnv, mock: &MockApi, timeout_ms: u64, person: Person) -> Server {
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let vars = vars(env, mock, timeout_ms);
    connect_person(&vars, env.root(), Protocol::Modern, caps, person).await
}

fn outside(env: &TestEnv, name: &str) -> PathBuf {
    let p = env.root().canonicalize().unwrap().join(name);
    assert!(!p.starts_with(env.work().canonicalize().unwrap()));
    p
}

fn escalation(target: &Path) -> Reply {
    Reply::function_call(
        "exec_command",
        json!({"cmd": format!("echo pwned > '{}'", target.display()),
               "sandbox_permissions": "require_escalated",
               "justification": REASON}),
    )
}

fn args(env: &TestEnv, session: &str) -> Value {
    json!({"prompt": "please write", "sessionId": session, "model": MODEL,
           "workingDirectory": env.work()})
}

fn params(args: &Value) -> CallToolRequestParams {
    CallToolRequestParams::new("codex").with_arguments(args.as_object().cloned().unwrap())
}

fn ok(r: &CallToolResult) -> Value {
    assert!(r.is_error != Some(true), "{}", text(r));
    structured(r)
}

fn decisions(v: &Value) -> Vec<Value> {
    v["approvals"].as_array().cloned().unwrap_or_default()
}

/// The one form of an `input_required` answer: its key and form.
fn the_question(ir: &InputRequiredResult) -> (String, ElicitRequestParams) {
    let requests = ir.input_requests.clone().expect("input requests");
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, req) = requests.into_iter().next().unwrap();
    let InputRequest::Elicitation(e) = req else {
        panic!("not an elicitation: {req:?}")
    };
    (key, e.params)
}

fn input_required(r: CallToolResponse) -> InputRequiredResult {
    match r {
        CallToolResponse::InputRequired(ir) => ir,
        other => panic!("expected input_required: {other:?}"),
    }
}

fn complete(r: CallToolResponse) -> CallToolResult {
    match r {
        CallToolResponse::Complete(r) => r,
        other => panic!("expected a result: {other:?}"),
    }
}

/// The retry of `args` with `person`'s answer to the question of `ir` under `state`.
fn retry(
    args: &Value,
    person: &Person,
    ir: &InputRequiredResult,
    state: &str,
) -> CallToolRequestParams {
    let (key, form) = the_question(ir);
    let answer = person.answer(&form).expect("an answer");
    let mut responses = InputResponses::new();
    responses.insert(key, serde_json::to_value(answer).unwrap());
    params(args)
        .with_input_responses(responses)
        .with_request_state(state.to_owned())
}

/// A refusal of a retry: an `isError` result naming `requestState` (or `field`).
fn refused(r: CallToolResponse, field: &str, says: &str) {
    let r = complete(r);
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.starts_with(&format!("invalid argument `{field}`")) && t.contains(says),
        "{t}"
    );
    assert_eq!(structured(&r)["error"]["kind"], "invalid_argument", "{t}");
}

/// Each user message of the model's last request: one turn's prompt appears once.
fn prompts(mock: &MockApi) -> usize {
    let last = mock
        .responses_requests()
        .last()
        .cloned()
        .expect("a model request");
    last.user_texts()
        .iter()
        .filter(|t| t.contains("please write"))
        .count()
}

#[tokio::test]
async fn over_mrtr_an_escalation_is_written_only_after_the_person_accepts() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let s = serve(&env, &mock, 20_000, person.clone()).await;

    // accepted through rmcp's client, which answers the round through its handler
    let target = outside(&env, "accepted.txt");
    mock.push_all([escalation(&target), Reply::message("done")]);
    let v = ok(&s.call_rounds("codex", args(&env, "m")).await);
    assert!(
        target.exists(),
        "the accepted escalation wrote nothing: {v}"
    );
    let d = decisions(&v);
    assert_eq!(d.len(), 1, "{v}");
    assert_eq!(
        (&d[0]["decision"], &d[0]["byPerson"]),
        (&json!("acceptOnce"), &json!(true))
    );
    assert_eq!(
        person.via_rounds(),
        1,
        "the question did not come as an input_required round"
    );
    let seen = person.seen.lock().unwrap().clone();
    assert!(
        seen[0].contains(&format!("echo pwned > '{}'", target.display()))
            && seen[0].contains(REASON),
        "{}",
        seen[0]
    );
    assert_eq!(v["response"], "done", "{v}");
    assert_eq!(prompts(&mock), 1, "one turn");

    // declined: nothing written, the turn goes on to its end
    *person.answer.lock().unwrap() = Answer::Decline;
    let target = outside(&env, "declined.txt");
    mock.push_all([escalation(&target), Reply::message("done")]);
    let v = ok(&s.call_rounds("codex", args(&env, "m")).await);
    assert!(!target.exists(), "a declined escalation was written");
    let d = decisions(&v);
    assert_eq!(
        (&d[0]["decision"], &d[0]["byPerson"]),
        (&json!("decline"), &json!(true))
    );

    // accepted without the box checked: a decline
    *person.answer.lock().unwrap() = Answer::Accept(false);
    let target = outside(&env, "unchecked.txt");
    mock.push_all([escalation(&target), Reply::message("done")]);
    let v = ok(&s.call_rounds("codex", args(&env, "m")).await);
    assert!(!target.exists(), "an unchecked accept was written");
    assert_eq!(decisions(&v)[0]["decision"], "decline", "{v}");
    assert_eq!(person.via_rounds(), 3);
}

#[tokio::test]
async fn over_mrtr_no_retry_in_time_is_a_decline_and_a_late_retry_gets_the_same_turns_result() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let s = serve(&env, &mock, 3_000, person.clone()).await;
    let target = outside(&env, "late.txt");
    mock.push_all([escalation(&target), Reply::message("done without it")]);
    let a = args(&env, "late");
    let ir = input_required(s.call_once(params(&a)).await);
    let state = ir.request_state.clone().expect("a requestState");
    let (_, form) = the_question(&ir);
    let ElicitRequestParams::FormElicitationParams { message, .. } = &form else {
        panic!("a form: {form:?}")
    };
    assert!(message.contains("echo pwned >"), "{message}");

    // no retry within the approval timeout: codex is declined and the turn ends
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while mock.responses_count() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        mock.responses_count(),
        2,
        "the turn did not go on after the timeout"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!target.exists(), "an unanswered escalation was written");

    // the late retry (an accept) gets that turn's result, with the decline, and runs nothing
    let r = complete(s.call_once(retry(&a, &person, &ir, &state)).await);
    let v = ok(&r);
    assert_eq!(v["response"], "done without it", "{v}");
    let d = decisions(&v);
    assert_eq!(d.len(), 1, "{v}");
    assert_eq!(
        (&d[0]["decision"], &d[0]["byPerson"], &d[0]["reason"]),
        (
            &json!("decline"),
            &json!(false),
            &json!("no answer in time")
        ),
        "{v}"
    );
    assert!(!target.exists(), "a late accept was written");
    assert_eq!(mock.responses_count(), 2, "a late retry started a new turn");

    // the call is over: its state is refused now, and no turn starts
    refused(
        s.call_once(retry(&a, &person, &ir, &state)).await,
        "requestState",
        "the question was lost",
    );
    assert_eq!(mock.responses_count(), 2, "a replay started a new turn");
    assert!(!target.exists());
}

#[tokio::test]
async fn a_tampered_foreign_or_different_retry_is_refused_and_changes_nothing() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let s = serve(&env, &mock, 30_000, person.clone()).await;
    // a second host on the same store (a relay to this server)
    let b = serve(&env, &mock, 30_000, Person::default()).await;

    let target = outside(&env, "guarded.txt");
    mock.push_all([escalation(&target), Reply::message("done")]);
    let a = args(&env, "guarded");
    let ir = input_required(s.call_once(params(&a)).await);
    let state = ir.request_state.clone().expect("a requestState");

    // altered: another handle, another round, garbage
    let mut flipped: Vec<char> = state.chars().collect();
    let at = flipped.len() - 5;
    flipped[at] = if flipped[at] == 'a' { 'b' } else { 'a' };
    let flipped: String = flipped.into_iter().collect();
    let next_round = format!("{}2", state.strip_suffix('1').expect("round 1"));
    for bad in [flipped.as_str(), next_round.as_str(), "{\"approved\":true}"] {
        refused(
            s.call_once(retry(&a, &person, &ir, bad)).await,
            "requestState",
            "is not a state this server handed out",
        );
    }
    // another connection's retry with the real state
    refused(
        b.call_once(retry(&a, &person, &ir, &state)).await,
        "requestState",
        "another client",
    );
    // the same state on a call with other arguments
    let mut changed = a.clone();
    changed["prompt"] = json!("please write, and more");
    refused(
        s.call_once(retry(&changed, &person, &ir, &state)).await,
        "requestState",
        "other arguments",
    );
    // inputResponses without requestState
    let mut no_state = retry(&a, &person, &ir, &state);
    no_state.request_state = None;
    refused(
        s.call_once(no_state).await,
        "inputResponses",
        "without requestState",
    );
    assert!(!target.exists(), "a refused retry ran the command");
    assert_eq!(
        mock.responses_count(),
        1,
        "a refused retry moved the turn on"
    );

    // the question is still open for its own client: its accept runs it
    let v = ok(&complete(
        s.call_once(retry(&a, &person, &ir, &state)).await,
    ));
    assert!(
        target.exists(),
        "the accept after the refusals wrote nothing: {v}"
    );
    assert_eq!(decisions(&v)[0]["decision"], "acceptOnce", "{v}");
}

#[tokio::test]
async fn two_questions_in_one_turn_take_two_rounds_and_one_turn() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let s = serve(&env, &mock, 30_000, person.clone()).await;
    let (first, second) = (outside(&env, "first.txt"), outside(&env, "second.txt"));
    mock.push_all([
        escalation(&first),
        escalation(&second),
        Reply::message("both"),
    ]);
    let a = args(&env, "two");

    let one = input_required(s.call_once(params(&a)).await);
    let state1 = one.request_state.clone().unwrap();
    let two = input_required(s.call_once(retry(&a, &person, &one, &state1)).await);
    let state2 = two.request_state.clone().unwrap();
    assert_ne!(state1, state2);
    assert!(first.exists(), "the first accept wrote nothing");
    let (key1, _) = the_question(&one);
    let (key2, form2) = the_question(&two);
    assert_ne!(key1, key2);
    let ElicitRequestParams::FormElicitationParams { message, .. } = &form2 else {
        panic!()
    };
    assert!(message.contains("second.txt"), "{message}");

    // the first round's state again: answered already
    refused(
        s.call_once(retry(&a, &person, &one, &state1)).await,
        "requestState",
        "answered already",
    );
    assert!(!second.exists(), "a replayed answer ran the second command");

    // an accept under another key than the question's: a malformed answer, a decline
    let mut foreign = retry(&a, &person, &two, &state2);
    let mut responses = foreign.input_responses.take().unwrap();
    let accept = responses.remove(&key2).unwrap();
    responses.insert("approval-9".into(), accept);
    foreign.input_responses = Some(responses);
    let v = ok(&complete(s.call_once(foreign).await));
    assert!(
        !second.exists(),
        "an answer to no open question was taken as an accept"
    );
    let d = decisions(&v);
    assert_eq!(d.len(), 2, "{v}");
    assert_eq!(
        (&d[0]["decision"], &d[1]["decision"]),
        (&json!("acceptOnce"), &json!("decline"))
    );
    assert_eq!(
        d[1]["reason"], "the answer was not an elicitation result",
        "{v}"
    );
    assert_eq!(v["response"], "both", "{v}");
    assert_eq!(
        mock.responses_count(),
        3,
        "one turn: the prompt and two tool outputs"
    );
    assert_eq!(prompts(&mock), 1, "one turn");
}

/// The bridge as [`serve`] sets it up, as variables.
fn vars(env: &TestEnv, mock: &MockApi, timeout_ms: u64) -> Vec<(String, String)> {
    let mut vars = server_env(env, mock);
    let timeout = timeout_ms.to_string();
    for (k, v) in [
        ("CODEX_BRIDGE_BACKEND", "app-server"),
        ASK,
        ("CODEX_BRIDGE_APPROVAL_TIMEOUT_MS", timeout.as_str()),
    ] {
        vars.retain(|(key, _)| key != k);
        vars.push((k.into(), v.into()));
    }
    vars
}

#[tokio::test]
#[allow(deprecated)]
async fn over_mrtr_the_hosts_first_allowed_root_becomes_the_working_directory_once() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let project = env.work().canonicalize().unwrap();
    let roots = crate::support::mcp::ClientRoots::default();
    // "/" lies outside the allowed roots: skipped; the project is the first inside them
    *roots.uris.lock().unwrap() = vec![
        "file:///".to_owned(),
        url::Url::from_directory_path(&project).unwrap().to_string(),
    ];
    let caps = ClientCapabilities::builder()
        .enable_roots()
        .enable_roots_list_changed()
        .build();
    let s = crate::support::mcp::connect_modern_with_roots(
        &vars(&env, &mock, 20_000),
        env.root(),
        caps,
        roots.clone(),
        Person::default(),
    )
    .await;
    let dir_of = |id: &'static str| {
        let s = &s;
        async move {
            let r = s
                .call_rounds(
                    "codex",
                    json!({"prompt": format!("where {id}"), "sessionId": id}),
                )
                .await;
            assert_eq!(r.is_error, Some(false), "{}", text(&r));
            let got = s.call("getSession", json!({"sessionId": id})).await;
            structured(&got)["session"]["workingDirectory"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    mock.push(Reply::message("here"));
    assert_eq!(dir_of("r1").await, project.display().to_string());
    assert_eq!(roots.asked(), 1, "roots/list came as an input request once");
    // kept for the client: the next call does not ask again
    mock.push(Reply::message("here too"));
    assert_eq!(dir_of("r2").await, project.display().to_string());
    assert_eq!(roots.asked(), 1, "asked again");
    // a call that names its directory is never asked
    mock.push(Reply::message("there"));
    let r = s
        .call(
            "codex",
            json!({"prompt": "named", "sessionId": "r3", "workingDirectory": env.root()}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(roots.asked(), 1);
}

/// A 2026-07-28 client's request as Claude Code 2.1.332 sends it: the protocol, the client and
/// its capabilities in `_meta` of every request.
fn claude_code(id: Value, method: &str, mut params: Value) -> Vec<u8> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.332"},
        "io.modelcontextprotocol/clientCapabilities": {
            "roots": {"listChanged": true},
            "elicitation": {"form": {}, "url": {}}
        }
    });
    let mut line = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
    .unwrap();
    line.push(b'\n');
    line
}

#[tokio::test]
async fn claude_codes_message_shapes_get_the_hosts_root_and_the_persons_approval() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let project = env.work().canonicalize().unwrap();
    let target = outside(&env, "claude-code.txt");
    mock.push_all([escalation(&target), Reply::message("written")]);

    let mut cmd = tokio::process::Command::new(crate::support::mcp::server_bin());
    cmd.env_clear()
        .envs(vars(&env, &mock, 30_000))
        .current_dir(env.root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn the server");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // the answer to request `id` (skipping notifications), bounded
    let mut answer = async |id: Value| -> Value {
        tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                let line = lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("the server answered");
                let v: Value = serde_json::from_str(&line).unwrap();
                if v["id"] == id {
                    return v;
                }
            }
        })
        .await
        .expect("an answer in time")
    };

    let probe = json!("server-discover-probe-1");
    stdin
        .write_all(&claude_code(probe.clone(), "server/discover", json!({})))
        .await
        .unwrap();
    let discovered = answer(probe).await;
    assert!(
        discovered["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "{discovered}"
    );
    assert!(
        discovered["result"]["instructions"]
            .as_str()
            .is_some_and(|i| i.contains("codex-mcp-bridge")),
        "{discovered}"
    );

    // no working directory: the call's first answer asks the host's roots
    let call = json!({"name": "codex",
                      "arguments": {"prompt": "please write", "sessionId": "cc", "model": MODEL}});
    stdin
        .write_all(&claude_code(json!(2), "tools/call", call.clone()))
        .await
        .unwrap();
    let first = answer(json!(2)).await;
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    assert_eq!(
        r["inputRequests"]["roots"]["method"], "roots/list",
        "{first}"
    );
    let mut retry = call.clone();
    retry["inputResponses"] = json!({"roots": {"roots": [
        {"uri": url::Url::from_directory_path(&project).unwrap().to_string(), "name": "project"}
    ]}});
    retry["requestState"] = r["requestState"].clone();
    stdin
        .write_all(&claude_code(json!(3), "tools/call", retry))
        .await
        .unwrap();

    // the turn runs in the project and asks the person: the command does not fit the three
    // rows Claude Code shows of a form, so its page comes as the next answer (URL mode)
    let second = answer(json!(3)).await;
    let r = &second["result"];
    assert_eq!(r["resultType"], "input_required", "{second}");
    let (key, request) = r["inputRequests"]
        .as_object()
        .and_then(|m| m.iter().next())
        .expect("an input request");
    assert_eq!(request["method"], "elicitation/create", "{second}");
    assert_eq!(request["params"]["mode"], "url", "{second}");
    let url = request["params"]["url"].as_str().unwrap();
    let message = request["params"]["message"].as_str().unwrap();
    let code = crate::support::page::code_of(message).expect("the message shows the code");
    let (status, page) = crate::support::page::decide(url, &code, "approve").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("echo pwned &gt;"), "{page}");
    // "I'm done, continue": an accept without content
    let mut retry = call.clone();
    retry["inputResponses"] = json!({ key.clone(): {"action": "accept"} });
    retry["requestState"] = r["requestState"].clone();
    stdin
        .write_all(&claude_code(json!(4), "tools/call", retry))
        .await
        .unwrap();
    let done = answer(json!(4)).await;
    let v = &done["result"]["structuredContent"];
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(v["response"], "written", "{done}");
    assert_eq!(v["approvals"][0]["decision"], "acceptOnce", "{done}");
    assert!(
        target.exists(),
        "the accepted escalation wrote nothing: {done}"
    );

    stdin
        .write_all(&claude_code(
            json!(5),
            "tools/call",
            json!({"name": "getSession", "arguments": {"sessionId": "cc"}}),
        ))
        .await
        .unwrap();
    let got = answer(json!(5)).await;
    assert_eq!(
        got["result"]["structuredContent"]["session"]["workingDirectory"],
        json!(project.display().to_string()),
        "{got}"
    );
    assert_eq!(mock.responses_count(), 2, "one turn");
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
}

/// A background turn's question is the answer of the `wait` waiting on it (issue 45: `wait`'s
/// description is true for a 2026-07-28 client too): the `wait`'s retry decides it, and the
/// same `wait` then returns the turn's result. An accept writes the file, a decline does not.
#[tokio::test]
async fn over_mrtr_a_background_turns_question_is_the_answer_of_its_wait() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let s = serve(&env, &mock, 20_000, person.clone()).await;
    for (n, (answer, name, written)) in [
        (Answer::Accept(true), "waited.txt", true),
        (Answer::Decline, "declined-in-wait.txt", false),
    ]
    .into_iter()
    .enumerate()
    {
        *person.answer.lock().unwrap() = answer;
        let target = outside(&env, name);
        mock.push_all([escalation(&target), Reply::message("done")]);
        let mut a = args(&env, "bg");
        a["background"] = json!(true);
        let r = s.call_rounds("codex", a).await;
        assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
        let w = s
            .call_rounds("wait", json!({"sessionId": "bg", "waitSeconds": 30}))
            .await;
        let v = ok(&w);
        assert_eq!(v["status"], "completed", "{v}");
        assert_eq!(target.exists(), written, "{name}: {v}");
        let d = decisions(&v);
        assert_eq!(
            (&d[0]["decision"], &d[0]["byPerson"]),
            (
                &json!(if written { "acceptOnce" } else { "decline" }),
                &json!(true)
            ),
            "{v}"
        );
        assert_eq!(person.via_rounds(), n + 1, "asked as the wait's answer");
    }
}

#[tokio::test]
async fn over_mrtr_progress_goes_to_the_request_that_waits_on_the_turn() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let mut vars = vars(&env, &mock, 20_000);
    vars.push(("CODEX_BRIDGE_HEARTBEAT_MS".into(), "500".into()));
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let s = connect_person(&vars, env.root(), Protocol::Modern, caps, person.clone()).await;
    let target = outside(&env, "progress.txt");
    mock.push_all([
        escalation(&target),
        Reply::message("done").with_delay(Duration::from_millis(2500)),
    ]);
    let v = ok(&s.call_rounds("codex", args(&env, "pr")).await);
    assert!(target.exists(), "{v}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let p = s.progress.lock().unwrap().clone();
    let first = p.first().expect("progress").progress_token.clone();
    let after: Vec<_> = p
        .iter()
        .skip_while(|n| {
            !n.message
                .as_deref()
                .is_some_and(|m| m.starts_with("a person allowed it once"))
        })
        .collect();
    assert!(!after.is_empty(), "no progress after the answer: {p:?}");
    assert!(
        after.iter().all(|n| n.progress_token != first),
        "progress after the answer went to the first request's token: {p:?}"
    );
    assert!(
        after
            .iter()
            .any(|n| n.message.as_deref().is_some_and(|m| m.contains("elapsed"))),
        "a heartbeat on the retry while the mock delays: {p:?}"
    );
}

#[tokio::test]
async fn over_mrtr_cancelling_the_retry_stops_the_turn_and_the_session_resumes() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let s = serve(&env, &mock, 20_000, person.clone()).await;
    let target = outside(&env, "cancel.txt");
    mock.push_all([escalation(&target), Reply::hang()]);
    let call = s.client.call_tool(params(&args(&env, "cx")));
    let reached = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::select! {
            r = call => panic!("the hanging call returned: {r:?}"),
            _ = async {
                // the accept went through (the retry waits on the turn), and the turn hangs
                while !target.exists() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30)).await;
            } => {}
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "the turn did not reach its hanging model call"
    );
    assert_eq!(person.via_rounds(), 1);
    // dropping the retry's future sent notifications/cancelled for it
    mock.wait_for_in_flight(|n| n == 0, Duration::from_secs(10))
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let ping = s.call("ping", json!({})).await;
        if structured(&ping)["activeTurns"] == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the turn still runs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    mock.push(Reply::message("again"));
    let r = s
        .call_rounds("codex", json!({"prompt": "again", "sessionId": "cx"}))
        .await;
    assert_eq!(structured(&r)["resumed"], true, "{}", text(&r));
}

#[tokio::test]
async fn a_relay_passes_the_rounds_of_its_own_client_through_to_the_owner() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let owners = Person::answering(Answer::Accept(true));
    let _owner = serve(&env, &mock, 20_000, owners.clone()).await;
    // a second host on the same store: a relay to the first process
    let relayed = Person::answering(Answer::Accept(true));
    let b = serve(&env, &mock, 20_000, relayed.clone()).await;
    let target = outside(&env, "relayed.txt");
    mock.push_all([escalation(&target), Reply::message("done")]);
    let v = ok(&b.call_rounds("codex", args(&env, "rel")).await);
    assert!(target.exists(), "the relayed accept wrote nothing: {v}");
    assert_eq!(decisions(&v)[0]["decision"], "acceptOnce", "{v}");
    assert_eq!((relayed.via_rounds(), owners.asked()), (1, 0));
}

#[tokio::test]
async fn a_takeover_between_rounds_loses_the_question_clearly_and_keeps_the_session() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let owner = serve(&env, &mock, 20_000, Person::default()).await;
    let person = Person::answering(Answer::Accept(true));
    let b = serve(&env, &mock, 20_000, person.clone()).await;
    // a first turn, so that the session has a thread
    mock.push(Reply::message("first"));
    let first = ok(&b.call_rounds("codex", args(&env, "kept")).await);
    let target = outside(&env, "taken-over.txt");
    mock.push_all([escalation(&target), Reply::message("done")]);
    let a = args(&env, "kept");
    let ir = input_required(b.call_once(params(&a)).await);
    let state = ir.request_state.clone().unwrap();

    // the owner dies between the rounds: the relay's process takes the store over
    let pid = owner.pid;
    owner.kill();
    crate::support::process::wait_exit(pid).await;
    drop(owner);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match b
            .client
            .call_tool_once(retry(&a, &person, &ir, &state))
            .await
        {
            Ok(r) => break r,
            // the relay's own answer while it moves over
            Err(e) if std::time::Instant::now() < deadline => {
                tracing::info!(error = %e, "retrying after the takeover");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("no answer after the takeover: {e}"),
        }
    };
    refused(
        answer,
        "requestState",
        "the question was lost: retry the call",
    );
    assert!(!target.exists(), "the lost question's command ran");

    // the session is intact: it resumes on the new owner
    mock.push(Reply::message("after"));
    let v = ok(&b
        .call_rounds("codex", json!({"prompt": "after", "sessionId": "kept"}))
        .await);
    assert_eq!(v["resumed"], true, "{v}");
    assert_eq!(v["threadId"], first["threadId"], "{v}");
}

/// A process's resident set and its peak, in MiB (`/proc/PID/status`).
fn rss_mib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in {status}"))
    };
    (kib("VmRSS:") / 1024, kib("VmHWM:") / 1024)
}

/// MiB of junk in each call of
/// [`junk_calls_keep_nothing_and_leave_room_for_another_clients_question`]: 2 by default (a
/// debug build moves 15 MiB lines slowly: 64 of them take a minute), or
/// `CODEX_BRIDGE_TEST_JUNK_MIB` (up to 15: a relay passes lines of 16 MiB).
fn junk_mib() -> u64 {
    std::env::var("CODEX_BRIDGE_TEST_JUNK_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

#[tokio::test]
#[allow(deprecated)]
async fn junk_calls_keep_nothing_and_leave_room_for_another_clients_question() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let person = Person::answering(Answer::Accept(true));
    let owner = serve(&env, &mock, 20_000, person.clone()).await;
    // eight more connections, relays to the owner, each declaring roots: a call without
    // `workingDirectory` asks them first
    let caps = ClientCapabilities::builder().enable_roots().build();
    let vars = vars(&env, &mock, 20_000);
    let relays = futures::future::join_all((0..8).map(|_| {
        crate::support::mcp::connect_modern_with_roots(
            &vars,
            env.root(),
            caps.clone(),
            crate::support::mcp::ClientRoots::default(),
            Person::default(),
        )
    }))
    .await;
    let mib = junk_mib();
    let junk = "j".repeat((mib as usize) << 20);
    // one call at a time, each connection in turn; the first round grows each connection's
    // line buffers (the owner keeps them, whatever it keeps of the calls): RSS is read after it
    let mut answers = Vec::new();
    let mut before = 0;
    let started = std::time::Instant::now();
    for n in 0..8 {
        for r in &relays {
            let a = json!({"prompt": format!("junk {n}"), "junk": &junk});
            answers.push(r.call_once(params(&a)).await);
        }
        if n == 0 {
            before = rss_mib(owner.pid).0;
        }
    }
    let took = started.elapsed();
    let (after, peak) = rss_mib(owner.pid);
    eprintln!(
        "owner RSS: {before} MiB after the first 8 calls, {after} MiB after 56 more of {mib} MiB \
         (peak {peak} MiB, {took:?})"
    );
    // kept, the 56 calls' arguments would take 56 times their size
    assert!(
        after <= before + 8 * mib,
        "the owner grew from {before} to {after} MiB: the calls' arguments are kept"
    );
    // each refused before it asked, naming the field
    for answer in answers {
        let r = complete(answer);
        let t = text(&r);
        assert!(t.starts_with("invalid argument `junk`"), "{t}");
    }

    // another client's question is still asked, and its accept runs
    let target = outside(&env, "after-junk.txt");
    mock.push_all([escalation(&target), Reply::message("done")]);
    let v = ok(&owner.call_rounds("codex", args(&env, "after-junk")).await);
    assert!(target.exists(), "the question was not asked: {v}");
    assert_eq!(person.via_rounds(), 1, "{v}");
}

//! A person in the loop (groundwork of issue 16), against real parts: the real `codex
//! app-server` of the version under test with the mock Responses API, the crate's client with an
//! answerer, and rmcp's real client asked through `elicitation/create`.
//!
//! - An escalation (`echo > FILE` outside the read-only sandbox, `require_escalated`) under
//!   approval policy `on-request` (what `approvals = ask` sends) reaches the answerer as a typed
//!   question; the one-time accept writes the file; a decline, no answer before the deadline, a
//!   dropped answerer and a client without the elicitation capability do not.
//! - Codex offers persistent decisions (`acceptWithExecpolicyAmendment`); no answer the crate
//!   can build carries one.
//! - `thread/fork` continues the history in a new thread while the original keeps its own;
//!   `turn/steer` reaches the model within the running turn, which completes once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codex_mcp_bridge::approval::Asked;
use codex_mcp_bridge::approval::ask::{self, APPROVE_FIELD};
use codex_mcp_bridge::approval::from_codex::CodexQuestion as Handed;
use codex_mcp_bridge::approval::{Decision, Question};
use codex_mcp_bridge::codex::app_server::client::{
    Client, ClientError, DEFAULT_MAX_LINE_BYTES, Event,
};
use codex_mcp_bridge::codex::app_server::protocol::{
    self, Approvals, Item, ItemStatus, Notification, ThreadId, ThreadOpened, TurnParams, TurnStatus,
};
use codex_mcp_bridge::plan::values::SandboxLevel;
use codex_mcp_bridge::security::redact::ClientSecrets;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::support::app_server::{STEP, TurnLog, read_turn, spawn_raw};
use crate::support::{MockApi, Reply, TestEnv};

/// A model with the classic tool shape (`exec_command`).
const MODEL: &str = "gpt-5.5";

/// An app-server whose client hands approvals to the test.
struct Asking {
    child: Child,
    client: Client<ChildStdin>,
    events: UnboundedReceiver<Event>,
    asked: UnboundedReceiver<Handed>,
    dir: PathBuf,
}

impl Asking {
    async fn start(env: &TestEnv, mock: &MockApi, deadline: Duration) -> Self {
        let (child, stdin, stdout) = spawn_raw(env, mock);
        let (client, events, asked) =
            Client::with_answerer(stdout, stdin, DEFAULT_MAX_LINE_BYTES, deadline);
        tokio::time::timeout(STEP, client.handshake("0.0.0-test"))
            .await
            .expect("initialize in time")
            .expect("initialize");
        Asking {
            child,
            client,
            events,
            asked,
            dir: env.work().canonicalize().expect("canonical work dir"),
        }
    }

    async fn open(&self, msg: impl protocol::Request<Response = ThreadOpened>) -> ThreadOpened {
        tokio::time::timeout(STEP, self.client.open_thread(&msg))
            .await
            .expect("thread opened in time")
            .expect("thread opened")
    }

    async fn new_thread(&self) -> ThreadOpened {
        self.open(
            protocol::thread_start(
                &self.dir,
                Some(&codex_mcp_bridge::security::ids::ModelId::parse("model", MODEL).unwrap()),
                false,
            )
            .unwrap(),
        )
        .await
    }

    /// Start a read-only turn with `approvals`; returns its id.
    async fn start_turn(
        &self,
        thread: &ThreadId,
        prompt: &str,
        approvals: Approvals,
    ) -> protocol::TurnRef {
        let msg = protocol::turn_start_with(
            &TurnParams {
                thread,
                prompt: &crate::support::bridge::prompt_of(prompt),
                sandbox: None,
                cwd: &self.dir,
                model: None,
                effort: None,
            },
            approvals,
        )
        .unwrap();
        let result = tokio::time::timeout(STEP, self.client.request(&msg))
            .await
            .expect("turn/start answered in time")
            .expect("turn/start");
        result.id
    }

    async fn next_asked(&mut self) -> Handed {
        tokio::time::timeout(STEP, self.asked.recv())
            .await
            .expect("codex asked in time")
            .expect("the asked stream is open")
    }

    async fn close(mut self) {
        tokio::time::timeout(STEP, self.client.close())
            .await
            .expect("stdout ends after stdin EOF");
        let status = tokio::time::timeout(STEP, self.child.wait())
            .await
            .expect("app-server exits after stdin EOF")
            .expect("wait");
        assert!(status.success(), "app-server exit status {status}");
    }
}

/// Scripts an escalated write of `target` (outside the read-only sandbox), then a message.
pub(super) fn script_escalation(mock: &MockApi, target: &Path) {
    mock.push_all([
        Reply::function_call(
            "exec_command",
            json!({"cmd": format!("echo pwned > '{}'", target.display()),
                   "sandbox_permissions": "require_escalated",
                   "justification": "I need to write this file outside the sandbox"}),
        ),
        Reply::message("done"),
    ]);
}

fn the_command(log: &TurnLog) -> &Item {
    match &log.commands[..] {
        [item] => item,
        other => panic!("expected one command, got {other:?}: {log:#?}"),
    }
}

/// An escalation asked under `on-request`: the typed question, then `decide` answers it
/// (`None`: hold it past the deadline; `Some(None)`: drop it). Returns the turn's log.
async fn escalate(
    app: &mut Asking,
    mock: &MockApi,
    target: &Path,
    decide: impl FnOnce(Asked) -> Option<Asked>,
) -> TurnLog {
    script_escalation(mock, target);
    let opened = app.new_thread().await;
    let turn = app
        .start_turn(&opened.thread, "please write", Approvals::OnRequest)
        .await;
    let handed = app.next_asked().await;
    assert_eq!(
        handed.request.method,
        "item/commandExecution/requestApproval"
    );
    let head = handed.request.head.as_ref().unwrap();
    assert_eq!(head.turn_id.as_deref(), Some(turn.as_str()));
    match &handed.asked.question {
        Question::Command {
            command,
            cwd,
            reason,
            ..
        } => {
            assert!(
                command.contains(&format!("echo pwned > '{}'", target.display())),
                "{command}"
            );
            assert_eq!(cwd.as_deref().map(Path::new), Some(app.dir.as_path()));
            assert_eq!(
                reason.as_deref(),
                Some("I need to write this file outside the sandbox")
            );
        }
        other => panic!("{other:?}"),
    }
    // codex offers decisions that persist; none of the crate's answers is one of them
    let offered = handed.request.params["availableDecisions"].to_string();
    assert!(
        offered.contains("acceptWithExecpolicyAmendment"),
        "{offered}"
    );
    for d in [Decision::AcceptOnce, Decision::Decline] {
        let a = codex_mcp_bridge::approval::from_codex::AnswerLine::new(
            &handed.request,
            &handed.asked.question,
            d,
            None,
        );
        assert!(!a.line().contains("Execpolicy") && !a.line().contains("ForSession"));
    }
    let held = decide(handed.asked);
    let log = read_turn(&mut app.events, Some(turn.as_str())).await;
    drop(held);
    assert_eq!(log.status, Some(TurnStatus::Completed), "{log:#?}");
    assert!(log.declined.is_empty(), "{log:#?}");
    log
}

fn outside(env: &TestEnv, name: &str) -> PathBuf {
    let p = env.root().canonicalize().unwrap().join(name);
    assert!(!p.starts_with(env.work().canonicalize().unwrap()));
    p
}

#[tokio::test]
async fn an_escalation_accepted_once_is_written_and_a_declined_one_is_not() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut app = Asking::start(&env, &mock, STEP).await;

    let target = outside(&env, "accepted.txt");
    let log = escalate(&mut app, &mock, &target, |a| {
        assert_eq!(a.answer(Decision::AcceptOnce, None), Decision::AcceptOnce);
        None
    })
    .await;
    assert!(
        matches!(
            the_command(&log),
            Item::CommandExecution {
                status: ItemStatus::Completed,
                exit_code: Some(0),
                ..
            }
        ),
        "{log:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(&target)
            .expect("written after the accept")
            .trim(),
        "pwned"
    );

    let target = outside(&env, "declined.txt");
    let log = escalate(&mut app, &mock, &target, |a| {
        a.decline();
        None
    })
    .await;
    assert!(
        matches!(
            the_command(&log),
            Item::CommandExecution {
                status: ItemStatus::Declined,
                ..
            }
        ),
        "{log:#?}"
    );
    assert!(!target.exists(), "the declined command ran");

    let target = outside(&env, "dropped.txt");
    let log = escalate(&mut app, &mock, &target, |a| {
        drop(a);
        None
    })
    .await;
    assert!(
        matches!(
            the_command(&log),
            Item::CommandExecution {
                status: ItemStatus::Declined,
                ..
            }
        ),
        "{log:#?}"
    );
    assert!(
        !target.exists(),
        "the command ran after its answerer was dropped"
    );
    app.close().await;
}

#[tokio::test]
async fn an_escalation_nobody_answers_in_time_is_declined() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut app = Asking::start(&env, &mock, Duration::from_secs(2)).await;
    let target = outside(&env, "late.txt");
    let log = escalate(&mut app, &mock, &target, Some).await;
    assert!(
        matches!(
            the_command(&log),
            Item::CommandExecution {
                status: ItemStatus::Declined,
                ..
            }
        ),
        "{log:#?}"
    );
    assert!(!target.exists(), "the command ran without an answer");
    app.close().await;
}

#[tokio::test]
async fn a_fork_continues_the_history_while_the_original_keeps_its_own() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut app = Asking::start(&env, &mock, STEP).await;
    let original = app.new_thread().await;
    mock.push(Reply::message("answer one"));
    let t = app
        .start_turn(&original.thread, "prompt one", Approvals::Never)
        .await;
    let log = read_turn(&mut app.events, Some(t.as_str())).await;
    assert_eq!(
        log.messages,
        ["answer one"],
        "{:?}",
        mock.responses_requests()
            .iter()
            .map(|r| (r.model(), r.user_texts(), r.message_texts("assistant")))
            .collect::<Vec<_>>()
    );

    let fork = app
        .open(
            protocol::thread_fork(
                &original.thread,
                &app.dir,
                Some(&codex_mcp_bridge::security::ids::ModelId::parse("model", MODEL).unwrap()),
            )
            .unwrap(),
        )
        .await;
    assert_ne!(fork.thread, original.thread);
    assert!(fork.path.is_some(), "a fork is stored");
    assert_eq!(
        fork.policy.check(SandboxLevel::ReadOnly, &app.dir),
        Ok(()),
        "{:?}",
        fork.policy
    );

    let before = mock.responses_requests().len();
    mock.push_for_user_text(
        "prompt two in the fork",
        Reply::message("answer two (fork)"),
    );
    let t = app
        .start_turn(&fork.thread, "prompt two in the fork", Approvals::Never)
        .await;
    let log = read_turn(&mut app.events, Some(t.as_str())).await;
    let reqs = mock.responses_requests();
    assert_eq!(
        log.messages,
        ["answer two (fork)"],
        "{:?}",
        reqs[before..]
            .iter()
            .map(|r| (r.model(), r.user_texts()))
            .collect::<Vec<_>>()
    );
    let req = mock.responses_requests().last().unwrap().clone();
    assert!(
        req.user_text_contains("prompt one") && req.user_text_contains("prompt two in the fork"),
        "{:?}",
        req.user_texts()
    );
    assert!(
        req.message_texts("assistant")
            .iter()
            .any(|t| t.contains("answer one")),
        "{}",
        serde_json::to_string(&req.input()).unwrap()
    );

    mock.push_for_user_text("prompt three", Reply::message("answer three"));
    let t = app
        .start_turn(&original.thread, "prompt three", Approvals::Never)
        .await;
    read_turn(&mut app.events, Some(t.as_str())).await;
    let req = mock.responses_requests().last().unwrap().clone();
    assert!(
        req.user_text_contains("prompt one") && req.user_text_contains("prompt three"),
        "{:?}",
        req.user_texts()
    );
    assert!(
        !req.user_text_contains("prompt two in the fork"),
        "the original saw the fork's turn: {:?}",
        req.user_texts()
    );
    app.close().await;
}

#[tokio::test]
async fn a_steer_reaches_the_model_within_the_running_turn_which_completes_once() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut app = Asking::start(&env, &mock, STEP).await;
    let opened = app.new_thread().await;
    // the turn runs a 3 s command; the steer comes while it runs
    mock.push_all([
        Reply::exec_command("sleep 3; echo slept"),
        Reply::message("steered answer"),
    ]);
    let turn = app
        .start_turn(&opened.thread, "a long task", Approvals::Never)
        .await;
    mock.wait_for_responses(1, STEP).await;
    let steer = protocol::turn_steer(
        &opened.thread,
        &turn,
        &crate::support::bridge::prompt_of("STEER: also say hello"),
    )
    .unwrap();
    let result = tokio::time::timeout(STEP, app.client.request(&steer))
        .await
        .expect("steer answered in time")
        .expect("steer accepted");
    assert_eq!(result.turn_id, turn);
    let log = read_turn(&mut app.events, Some(turn.as_str())).await;
    assert_eq!(log.status, Some(TurnStatus::Completed), "{log:#?}");
    assert_eq!(log.messages, ["steered answer"], "{log:#?}");
    let reqs = mock.responses_requests();
    assert_eq!(reqs.len(), 2, "one turn, two model calls");
    assert!(
        reqs[1].user_text_contains("STEER: also say hello"),
        "{:?}",
        reqs[1].user_texts()
    );
    // no second completion of the turn; a steer with no turn running is refused
    let err = tokio::time::timeout(STEP, app.client.request(&steer))
        .await
        .expect("answered in time")
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Refused {
                method: "turn/steer",
                ..
            }
        ),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok(e) = app.events.try_recv() {
        if let Event::Notification(Notification::TurnCompleted { turn_id, .. }) = e {
            assert_ne!(turn_id, turn.as_str(), "the turn completed twice");
        }
    }
    assert_eq!(mock.responses_requests().len(), 2);
    app.close().await;
}

// ---------------------------------------------------------------------------------------------
// Elicitation through rmcp's real client

/// An MCP server with nothing but the defaults: the test asks on its peer.
struct Bare;
impl ServerHandler for Bare {}

/// rmcp's client, answering `elicitation/create` with a scripted result.
#[derive(Clone)]
struct Person {
    config: ClientConfig,
    reply: Arc<dyn Fn() -> ElicitResult + Send + Sync>,
    delay: Duration,
    asked: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Person {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.seen.lock().unwrap().push(message.clone());
        }
        tokio::time::sleep(self.delay).await;
        Ok((self.reply)())
    }
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

/// A bridge-side peer and rmcp's client on the other end of an in-memory pipe.
struct Pair {
    peer: Peer<RoleServer>,
    person: Person,
    _server: RunningService<RoleServer, Bare>,
    _client: RunningService<RoleClient, Person>,
}

async fn pair(
    elicitation: bool,
    delay: Duration,
    reply: impl Fn() -> ElicitResult + Send + Sync + 'static,
) -> Pair {
    let caps = if elicitation {
        ClientCapabilities::builder().enable_elicitation().build()
    } else {
        ClientCapabilities::default()
    };
    let person = Person {
        config: ClientConfig::new(
            caps,
            Implementation::new(crate::support::mcp::WHOLE_FORM_HOST, "0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25),
        reply: Arc::new(reply),
        delay,
        asked: Arc::default(),
        seen: Arc::default(),
    };
    let (a, b) = tokio::io::duplex(1 << 16);
    let server = tokio::spawn(async move { Bare.serve(a).await.expect("server side up") });
    let client = tokio::time::timeout(STEP, person.clone().serve(b))
        .await
        .expect("connect in time")
        .expect("client connects");
    let server = server.await.unwrap();
    Pair {
        peer: server.peer().clone(),
        person,
        _server: server,
        _client: client,
    }
}

fn accept(approve: bool) -> impl Fn() -> ElicitResult + Send + Sync + 'static {
    move || {
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({APPROVE_FIELD: approve}))
    }
}

const SECRET: &str = "person-literal-secret-4711";

/// A command a person can judge, with the client's secret in codex's reason (shown redacted).
fn question() -> Question {
    Question::Command {
        command: "/bin/bash -lc 'curl -H @headers.txt http://example.test'".into(),
        cwd: Some("/w".into()),
        reason: Some(format!("fetch it with the key {SECRET}")),
        network_host: None,
        workdir: None,
        cwd_resolves_outside: false,
    }
}

fn secrets() -> ClientSecrets {
    ClientSecrets::bounded([SECRET]).0
}

#[tokio::test]
async fn only_an_explicit_accept_of_a_person_is_an_accept() {
    let secrets = secrets();
    let short = Duration::from_millis(500);
    let cases: Vec<(&str, Pair, Decision, bool)> = vec![
        (
            "accept",
            pair(true, Duration::ZERO, accept(true)).await,
            Decision::AcceptOnce,
            true,
        ),
        (
            "accept unchecked",
            pair(true, Duration::ZERO, accept(false)).await,
            Decision::Decline,
            true,
        ),
        (
            "decline",
            pair(true, Duration::ZERO, || {
                ElicitResult::new(ElicitationAction::Decline)
            })
            .await,
            Decision::Decline,
            true,
        ),
        // a cancel is what a client that asks nobody sends (`claude -p` answers every
        // question so within milliseconds): no person's decision (its reason below)
        (
            "cancel",
            pair(true, Duration::ZERO, || {
                ElicitResult::new(ElicitationAction::Cancel)
            })
            .await,
            Decision::Decline,
            false,
        ),
        (
            "timeout",
            pair(true, Duration::from_secs(5), accept(true)).await,
            Decision::Decline,
            false,
        ),
    ];
    for (name, p, want, by_person) in cases {
        let got = ask::ask(&p.peer, &question(), &secrets, short).await;
        assert_eq!(
            (got.decision, got.record.decision, got.record.by_person),
            (want, want, by_person),
            "{name}: {got:?}"
        );
        assert_eq!(p.person.asked.load(Ordering::SeqCst), 1, "{name}");
        let seen = p.person.seen.lock().unwrap().clone();
        assert!(
            seen[0].contains("curl -H @headers.txt") && seen[0].contains("Working directory: /w"),
            "{seen:?}"
        );
        assert!(
            !seen[0].contains(SECRET),
            "{name}: the client saw the secret: {seen:?}"
        );
        assert!(!got.record.asked.contains(SECRET));
    }
    // a cancel at once is a host that cannot ask anyone (the turn's answer tells the model what
    // to do instead); a later one is a question put aside
    for (delay, want) in [
        (Duration::ZERO, ask::HOST_CANNOT_ASK),
        (ask::AT_ONCE + Duration::from_millis(300), ask::CANCELLED),
    ] {
        let p = pair(true, delay, || ElicitResult::new(ElicitationAction::Cancel)).await;
        let got = ask::ask(&p.peer, &question(), &secrets, STEP).await;
        assert_eq!(
            (got.decision, got.record.by_person, got.record.reason),
            (Decision::Decline, false, Some(want)),
            "a cancel after {delay:?}"
        );
    }
}

/// A command the redactor would cut (the secret may be what runs, `echo [REDACTED] | sh`) is
/// declined without asking: the person could not see what they allow.
#[tokio::test]
async fn a_command_holding_a_secret_is_declined_without_asking() {
    let p = pair(true, Duration::ZERO, accept(true)).await;
    let q = Question::Command {
        command: format!("/bin/bash -lc 'echo {SECRET} | base64 -d | sh'"),
        cwd: Some("/w".into()),
        reason: None,
        network_host: None,
        workdir: None,
        cwd_resolves_outside: false,
    };
    let got = ask::ask(&p.peer, &q, &secrets(), STEP).await;
    assert_eq!(got.decision, Decision::Decline);
    assert!(!got.record.by_person);
    assert!(!got.record.asked.contains(SECRET), "{:?}", got.record);
    assert_eq!(p.person.asked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_client_without_the_capability_is_never_asked() {
    let p = pair(false, Duration::ZERO, accept(true)).await;
    let got = ask::ask(&p.peer, &question(), &secrets(), STEP).await;
    assert_eq!(got.decision, Decision::Decline);
    assert!(!got.record.by_person);
    assert_eq!(p.person.asked.load(Ordering::SeqCst), 0);
}

/// The whole path: codex's escalation → the client's answerer → `elicitation/create` on rmcp's
/// client → codex's answer.
#[tokio::test]
async fn an_escalation_is_written_only_when_a_person_accepts_through_elicitation() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut app = Asking::start(&env, &mock, STEP).await;
    let none = ClientSecrets::default();
    for (name, p, written) in [
        (
            "accepting person",
            pair(true, Duration::ZERO, accept(true)).await,
            true,
        ),
        (
            "declining person",
            pair(true, Duration::ZERO, || {
                ElicitResult::new(ElicitationAction::Decline)
            })
            .await,
            false,
        ),
        (
            "client without elicitation",
            pair(false, Duration::ZERO, accept(true)).await,
            false,
        ),
    ] {
        let target = outside(&env, &format!("{}.txt", name.replace(' ', "-")));
        script_escalation(&mock, &target);
        let opened = app.new_thread().await;
        let turn = app
            .start_turn(&opened.thread, "please write", Approvals::OnRequest)
            .await;
        let asked = app.next_asked().await.asked;
        let record = ask::answer(&p.peer, asked, &none, Duration::from_secs(30)).await;
        let log = read_turn(&mut app.events, Some(turn.as_str())).await;
        assert_eq!(log.status, Some(TurnStatus::Completed), "{name}: {log:#?}");
        assert_eq!(target.exists(), written, "{name}: {record:?} {log:#?}");
        assert_eq!(
            record.decision,
            if written {
                Decision::AcceptOnce
            } else {
                Decision::Decline
            },
            "{name}"
        );
        assert!(record.asked.contains("echo pwned"), "{record:?}");
    }
    app.close().await;
}

//! The session actor with a fake driver in codex's place: its queue (order,
//! `max_queued_turns`), cancel of a running and of a waiting call, close during a turn, fork,
//! and the two races between a close and a turn. No codex binary is run.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Semaphore;

use super::driver::*;
use super::message::{Probe, TurnRun};
use super::*;
use std::path::PathBuf;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::actors::Bridge;
use crate::actors::client::ClientContext;
use crate::actors::shared::Shared;
use crate::calls::{ThreadOp, WorkDir};
use crate::codex::events::{Event, FailureKind};
use crate::codex::process::{Ending, TurnControl, TurnOutcome};
use crate::config::{Backend, Config, Settings};
use crate::security::ids::SessionId;
use crate::security::paths::Kind;
use crate::security::prompt::Prompt;
use crate::store::TurnStatus;

/// A driver that runs no process. A turn whose prompt starts with `hold` runs until the test
/// releases it (one permit of `release` per turn) or its call is cancelled; any other turn
/// completes at once. A fork waits for a permit of `release_fork`. Every turn reports a thread
/// (the one it resumes, else a new one), as codex does.
struct Fake {
    /// The prompts of the turns the driver ran, in the order they started.
    runs: Mutex<Vec<String>>,
    release: Semaphore,
    release_fork: Semaphore,
    forks: AtomicUsize,
    threads: AtomicUsize,
}

impl Default for Fake {
    fn default() -> Self {
        Fake {
            runs: Mutex::new(Vec::new()),
            release: Semaphore::new(0),
            release_fork: Semaphore::new(0),
            forks: AtomicUsize::new(0),
            threads: AtomicUsize::new(0),
        }
    }
}

impl Fake {
    fn runs(&self) -> Vec<String> {
        self.runs.lock().unwrap().clone()
    }

    fn new_thread(&self) -> ThreadId {
        let n = self.threads.fetch_add(1, Ordering::SeqCst) + 1;
        ThreadId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).unwrap()
    }
}

/// A session's fake backend: the fake's turns, holding no process.
struct FakeBackend(Arc<Fake>);

impl SessionBackend for FakeBackend {
    fn run<'a>(
        &'a mut self,
        env: &'a TurnEnv<'a>,
        _control: &'a mut TurnControl,
        plan: TurnPlan,
    ) -> futures::future::BoxFuture<'a, TurnRun> {
        let fake = self.0.clone();
        Box::pin(async move { fake.run(env, plan).await })
    }

    fn holds_process(&self) -> bool {
        false
    }

    fn close(&mut self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn credentials(&self) -> crate::actors::credentials::Credentials {
        crate::actors::credentials::Credentials::NONE
    }
}

/// The fake as the registry's driver: its backends share it.
struct FakeDriver(Arc<Fake>);

impl Driver for FakeDriver {
    fn backend(
        &self,
        _shared: Arc<Shared>,
        _session: SessionId,
        _closer: crate::actors::pool::warm::Closer,
    ) -> Box<dyn SessionBackend> {
        Box::new(FakeBackend(self.0.clone()))
    }

    fn fork<'a>(
        &'a self,
        fork: ForkSpec,
        shared: &'a Arc<Shared>,
    ) -> futures::future::BoxFuture<'a, Result<ThreadId>> {
        self.0.fork(fork, shared)
    }

    fn thread_op<'a>(
        &'a self,
        op: OpSpec,
        _shared: &'a Arc<Shared>,
    ) -> futures::future::BoxFuture<'a, Result<ThreadOp>> {
        Box::pin(async move { Ok(op.op) })
    }
}

impl Fake {
    /// One turn of `plan` (see [`Fake`]).
    async fn run(&self, env: &TurnEnv<'_>, plan: TurnPlan) -> TurnRun {
        {
            // the plan as the actor made it: its prompt, the thread it resumes, the backend
            // chosen. A warm turn whose prompt says `fallback` runs as the real driver runs one
            // no app-server could take: with `codex exec`
            let prompt = plan.turn.prompt().to_string();
            let resumes = plan.resume;
            let on = if !plan.on_app_server() {
                Backend::Exec
            } else if prompt.contains("fallback") {
                env.sink.runs_with_exec();
                Backend::Exec
            } else {
                Backend::AppServer
            };
            self.runs.lock().unwrap().push(prompt.clone());
            let thread = resumes.unwrap_or_else(|| self.new_thread());
            let mut on_event = env.sink.events();
            on_event(&Event::ThreadStarted { thread_id: thread });
            on_event(&Event::TurnStarted);
            let ending = if prompt.starts_with("hold") {
                tokio::select! {
                    _ = env.cancel.cancelled() => Ending::Cancelled,
                    p = self.release.acquire() => {
                        p.unwrap().forget();
                        Ending::Completed
                    }
                }
            } else {
                Ending::Completed
            };
            let mut output = TurnOutcome {
                thread_id: Some(thread),
                message: Some(format!("done: {prompt}")),
                // an exec turn's process exit is known; a warm turn has none
                exec: (on == Backend::Exec).then(Default::default),
                ..TurnOutcome::ended(ending)
            };
            // what codex recorded of the turn: as asked (`recorded`), or with the approval
            // policy widened (`widened`), as a config layer that beat the pins would leave it
            output.recorded = ["recorded", "widened"]
                .into_iter()
                .find(|p| prompt.starts_with(p))
                .map(|p| crate::codex::rollout::TurnContext {
                    approval_policy: if p == "widened" {
                        "on-request"
                    } else {
                        "never"
                    }
                    .into(),
                    approvals_reviewer: "user".into(),
                    sandbox: "read-only".into(),
                    model: None,
                });
            Ok(output)
        }
    }

    fn fork<'a>(
        &'a self,
        _fork: ForkSpec,
        _shared: &'a Arc<Shared>,
    ) -> futures::future::BoxFuture<'a, Result<ThreadId>> {
        Box::pin(async move {
            self.forks.fetch_add(1, Ordering::SeqCst);
            self.release_fork.acquire().await.unwrap().forget();
            Ok(self.new_thread())
        })
    }
}

/// A bridge over a store in a temporary directory whose sessions run on `fake`.
struct Setup {
    bridge: Bridge,
    fake: Arc<Fake>,
    dir: tempfile::TempDir,
}

async fn setup(max_queued_turns: usize, idle: Duration) -> Setup {
    setup_on(Backend::Exec, max_queued_turns, idle).await
}

async fn setup_on(backend: Backend, max_queued_turns: usize, idle: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("work")).unwrap();
    let settings = Settings {
        roots: Some(root.to_string_lossy().into_owned()),
        store: Some(root.join("store")),
        codex_bin: Some(PathBuf::from("/nonexistent/codex")),
        max_queued_turns: Some(max_queued_turns),
        backend: Some(backend),
        ..Default::default()
    };
    let vars = vec![("HOME".to_owned(), root.to_string_lossy().into_owned())];
    let config = Config::from_settings(&settings, &root, &vars).unwrap();
    let store = crate::store::Store::open(&config.store_dir).unwrap();
    let own = ClientContext::new(config.clone(), &vars);
    let fake = Arc::new(Fake::default());
    let shared = Shared::new(
        Arc::new(config),
        own.common.clone(),
        own.codex_home.clone(),
        store,
    )
    .with_idle_timeout(idle)
    .with_queue_timeout(Duration::from_secs(120));
    let bridge = Bridge::start_with(shared, TurnDriver(Arc::new(FakeDriver(fake.clone()))))
        .await
        .unwrap();
    Setup { bridge, fake, dir }
}

impl Setup {
    fn call(&self, session: &str, prompt: &str) -> TurnCall {
        let root = std::fs::canonicalize(self.dir.path()).unwrap();
        let work = crate::confine::resolve(
            "workingDirectory",
            &root.join("work").to_string_lossy(),
            &root,
            std::slice::from_ref(&root),
            Kind::Dir,
        )
        .unwrap();
        TurnCall {
            session_id: Some(sid(session)),
            reset: false,
            prompt: Some(Prompt::parse("prompt", prompt.into()).unwrap()),
            files: vec![],
            sandbox: None,
            model: None,
            reasoning_effort: None,
            cwd: WorkDir::Given(work),
            timeout: Duration::from_secs(60),
            wait_if_busy: true,
            cancel: CancellationToken::new(),
            progress: None,
            client: None,
            asker: None,
            host: None,
            worktree: None,
        }
    }

    /// Start a turn in a task of its own.
    fn spawn_turn(&self, call: TurnCall) -> JoinHandle<Result<Answer>> {
        let b = self.bridge.clone();
        tokio::spawn(async move { b.turn(call).await })
    }

    /// Wait (generously: the machine may be loaded) until the driver ran `n` turns.
    async fn wait_runs(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.fake.runs().len() < n {
            assert!(
                Instant::now() < deadline,
                "the driver ran {:?}, not {n} turns",
                self.fake.runs()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Wait until session `id`'s live actor reports a state that passes `ok` (`what` names it
    /// for the failure): the actor answers in the order of its mailbox, so what was sent to it
    /// before has been handled.
    async fn wait_state(&self, id: &str, what: &str, ok: impl Fn(&Probe) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = None;
        loop {
            let actor = self.bridge.live_actor(&sid(id));
            if let Some(actor) = actor {
                let (tx, rx) = oneshot::channel();
                if actor.cast(SessionMessage::Probe { reply: tx }).is_ok()
                    && let Ok(p) = rx.await
                {
                    if ok(&p) {
                        return;
                    }
                    last = Some(p);
                }
            }
            assert!(
                Instant::now() < deadline,
                "session {id} never came to {what}: {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Wait until `n` calls wait behind session `id`'s running turn.
    async fn wait_queued(&self, id: &str, n: usize) {
        self.wait_state(id, &format!("{n} queued calls"), |p| p.queued == n)
            .await;
    }

    /// Wait until the session's actor is no longer live (it stopped when idle).
    async fn wait_not_live(&self, id: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.bridge.is_live(&sid(id)) {
            assert!(Instant::now() < deadline, "session {id} stays live");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

fn sid(s: &str) -> SessionId {
    SessionId::parse("sessionId", s).unwrap()
}

async fn answer<T>(task: JoinHandle<T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("answered in time")
        .unwrap()
}

#[tokio::test]
async fn waiting_calls_run_one_at_a_time_in_arrival_order() {
    let s = setup(16, Duration::from_secs(60)).await;
    let first = s.spawn_turn(s.call("q", "hold first"));
    s.wait_runs(1).await;
    let mut waiting = Vec::new();
    for (n, p) in ["second", "third", "fourth"].into_iter().enumerate() {
        waiting.push(s.spawn_turn(s.call("q", p)));
        s.wait_queued("q", n + 1).await;
    }
    assert_eq!(s.fake.runs(), ["hold first"], "the others wait");
    s.fake.release.add_permits(1);
    let r = answer(first).await.unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    for w in waiting {
        let r = answer(w).await.unwrap();
        assert!(r.resumed, "each later turn continues the session's thread");
    }
    assert_eq!(s.fake.runs(), ["hold first", "second", "third", "fourth"]);
    let rec = s.bridge.get(&sid("q")).unwrap().unwrap();
    assert_eq!(rec.turn_count, 4);
    s.bridge.shutdown().await;
}

#[tokio::test]
async fn a_call_past_max_queued_turns_is_refused_as_busy_and_the_others_go_on() {
    let s = setup(2, Duration::from_secs(60)).await;
    let first = s.spawn_turn(s.call("full", "hold first"));
    s.wait_runs(1).await;
    let a = s.spawn_turn(s.call("full", "a"));
    let b = s.spawn_turn(s.call("full", "b"));
    s.wait_queued("full", 2).await;
    let refused = answer(s.spawn_turn(s.call("full", "c"))).await.unwrap_err();
    assert!(
        matches!(&refused, Error::Busy(m) if m.contains("max_queued_turns = 2")),
        "{refused}"
    );
    // a caller that asked not to wait is refused at once too
    let mut no_wait = s.call("full", "d");
    no_wait.wait_if_busy = false;
    let refused = answer(s.spawn_turn(no_wait)).await.unwrap_err();
    assert!(matches!(refused, Error::Busy(_)), "{refused}");
    s.fake.release.add_permits(1);
    answer(first).await.unwrap();
    answer(a).await.unwrap();
    answer(b).await.unwrap();
    assert_eq!(s.fake.runs(), ["hold first", "a", "b"]);
    s.bridge.shutdown().await;
}

#[tokio::test]
async fn cancelling_the_running_call_ends_its_turn_and_the_next_one_starts() {
    let s = setup(16, Duration::from_secs(60)).await;
    let c = s.call("cr", "hold running");
    let token = c.cancel.clone();
    let running = s.spawn_turn(c);
    s.wait_runs(1).await;
    let next = s.spawn_turn(s.call("cr", "next"));
    s.wait_queued("cr", 1).await;
    token.cancel();
    let r = answer(running).await.unwrap();
    assert!(
        matches!(r.error, Some(Error::Cancelled { .. })),
        "{:?}",
        r.error
    );
    let n = answer(next).await.unwrap();
    assert!(n.error.is_none(), "{:?}", n.error);
    assert_eq!(s.fake.runs(), ["hold running", "next"]);
    let rec = s.bridge.get(&sid("cr")).unwrap().unwrap();
    assert_eq!(rec.last_status, Some(TurnStatus::Completed));
    s.bridge.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_waiting_call_is_answered_and_never_runs() {
    let s = setup(16, Duration::from_secs(60)).await;
    let first = s.spawn_turn(s.call("cw", "hold first"));
    s.wait_runs(1).await;
    let c = s.call("cw", "given up");
    let token = c.cancel.clone();
    let given_up = s.spawn_turn(c);
    s.wait_queued("cw", 1).await;
    token.cancel();
    // the next call to queue answers the waiters whose callers gave up
    let third = s.spawn_turn(s.call("cw", "third"));
    let err = answer(given_up).await.unwrap_err();
    assert!(matches!(err, Error::Cancelled { .. }), "{err}");
    s.fake.release.add_permits(1);
    answer(first).await.unwrap();
    answer(third).await.unwrap();
    assert_eq!(s.fake.runs(), ["hold first", "third"]);
    s.bridge.shutdown().await;
}

/// Race (a): a close during a turn answers that turn as cancelled (not "the session's actor
/// failed"), answers the waiting calls the same way, and succeeds.
#[tokio::test]
async fn a_close_during_a_turn_answers_the_turn_as_cancelled_and_succeeds() {
    let s = setup(16, Duration::from_secs(60)).await;
    let running = s.spawn_turn(s.call("c", "hold running"));
    s.wait_runs(1).await;
    let waiting = s.spawn_turn(s.call("c", "waiting"));
    s.wait_queued("c", 1).await;
    let closed = tokio::time::timeout(
        Duration::from_secs(30),
        s.bridge.close(&sid("c"), false, None),
    )
    .await
    .expect("the close is answered")
    .unwrap();
    assert!(closed.is_some(), "the close found the session");
    let err = answer(running).await.unwrap_err();
    assert!(
        matches!(err, Error::Cancelled { .. }),
        "the running turn is answered as cancelled by the close: {err}"
    );
    let err = answer(waiting).await.unwrap_err();
    assert!(matches!(err, Error::Cancelled { .. }), "{err}");
    assert!(s.bridge.get(&sid("c")).unwrap().is_none());
    assert_eq!(
        s.fake.runs(),
        ["hold running"],
        "the waiting call never ran"
    );
    s.bridge.shutdown().await;
}

/// A close by another host ends none of its turns: refused naming `sessionId` while its turn
/// runs or its call is queued, and the turn goes on to its result; the host's own close ends
/// them, and so does the operator's (`sessions close`, no host).
#[tokio::test]
async fn a_close_by_another_host_ends_none_of_its_turns() {
    let s = setup(16, Duration::from_secs(60)).await;
    let of = |host: &str, prompt: &str| TurnCall {
        host: Some(host.to_owned()),
        ..s.call("h", prompt)
    };
    let client = Arc::new(s.bridge.own_context().for_connection());
    let close_by = |host: &str| {
        let (b, client, host) = (s.bridge.clone(), client.clone(), host.to_owned());
        async move {
            tokio::time::timeout(
                Duration::from_secs(30),
                b.close_session(&sid("h"), (false, false), client, Some(host)),
            )
            .await
            .expect("the close is answered")
        }
    };
    let running = s.spawn_turn(of("a", "hold a's turn"));
    s.wait_runs(1).await;
    let err = close_by("b").await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { field, .. } if field == "sessionId"),
        "{err}"
    );
    assert!(err.to_string().contains("another host"), "{err}");
    // a's queued call keeps b's close refused even once a's own turn is not the one running
    let queued = s.spawn_turn(of("a", "queued of a"));
    s.wait_queued("h", 1).await;
    assert!(close_by("b").await.is_err(), "b ended a's queued call");
    s.fake.release.add_permits(1);
    answer(running)
        .await
        .expect("a's turn went on to its result");
    answer(queued).await.unwrap();
    assert_eq!(s.fake.runs(), ["hold a's turn", "queued of a"]);
    // its own host's close ends its turn
    let running = s.spawn_turn(of("a", "hold again"));
    s.wait_runs(3).await;
    assert!(
        close_by("a").await.unwrap().is_some(),
        "a closed its session"
    );
    let err = answer(running).await.unwrap_err();
    assert!(matches!(err, Error::Cancelled { .. }), "{err}");
    // and the operator's ends any host's
    let running = s.spawn_turn(of("a", "hold once more"));
    s.wait_runs(4).await;
    let closed = s.bridge.close(&sid("h"), false, None).await.unwrap();
    assert!(closed.is_some());
    assert!(matches!(
        answer(running).await.unwrap_err(),
        Error::Cancelled { .. }
    ));
    s.bridge.shutdown().await;
}

/// Race (b): a turn sent right after a close of a stored session (no live actor) never brings
/// the closed session back: it is refused, or it starts a new session under that id (no
/// thread of the closed one, not resumed).
#[tokio::test]
async fn a_turn_racing_the_close_of_a_stored_session_never_revives_it() {
    for round in 0..5 {
        let s = setup(16, Duration::from_millis(200)).await;
        let id = format!("stored-{round}");
        let first = answer(s.spawn_turn(s.call(&id, "first"))).await.unwrap();
        let old_thread = first.thread_id.unwrap();
        s.wait_not_live(&id).await;
        // the close is sent first, the turn right behind it
        let session = sid(&id);
        let (closed, turned) = tokio::join!(
            s.bridge.close(&session, false, None),
            s.bridge.turn(s.call(&id, "after the close"))
        );
        assert!(closed.unwrap().is_some(), "the close found the session");
        match turned {
            Err(e) => assert!(
                matches!(&e, Error::InvalidArgument { field, .. } if field == "sessionId"),
                "refused, naming the session: {e}"
            ),
            Ok(r) => assert!(
                r.created && !r.resumed && r.thread_id != Some(old_thread),
                "a turn after the close starts a new session, never the closed one's thread"
            ),
        }
        // whatever actor the race left stops once idle: nothing of it writes after that
        s.wait_not_live(&id).await;
        if let Some(rec) = s.bridge.get(&sid(&id)).unwrap() {
            assert_ne!(
                rec.thread_id,
                Some(old_thread),
                "the closed session's record came back"
            );
            assert_eq!(rec.turn_count, 1, "the closed session's record came back");
        }
        s.bridge.shutdown().await;
    }
}

/// A fork makes a new session with a thread of its own; a turn sent meanwhile waits for it
/// and then continues the original.
#[tokio::test]
async fn a_fork_makes_a_new_session_and_turns_wait_for_it() {
    let s = setup(16, Duration::from_secs(60)).await;
    let first = answer(s.spawn_turn(s.call("f", "first"))).await.unwrap();
    let parent_thread = first.thread_id.unwrap();
    let b = s.bridge.clone();
    let own = b.own_context().clone();
    let fork = tokio::spawn(async move { b.fork(&sid("f"), own, Duration::from_secs(30)).await });
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.fake.forks.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the fork never reached the driver"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let during = s.spawn_turn(s.call("f", "during the fork"));
    s.wait_queued("f", 1).await;
    assert_eq!(
        s.fake.runs(),
        ["first"],
        "a turn waits while the thread is forked"
    );
    // a second fork is refused while one runs
    let own = s.bridge.own_context().clone();
    let err = s
        .bridge
        .fork(&sid("f"), own, Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err}");
    s.fake.release_fork.add_permits(1);
    let forked = answer(fork).await.unwrap();
    assert_ne!(forked.session_id, "f");
    let rec = s
        .bridge
        .get(&sid(&forked.session_id))
        .unwrap()
        .expect("the fork's record is written before its id is returned");
    let fork_thread = rec.thread_id.unwrap();
    assert_ne!(fork_thread, parent_thread);
    assert_eq!(forked.thread_id, Some(fork_thread));
    let r = answer(during).await.unwrap();
    assert!(r.resumed);
    assert_eq!(r.thread_id, Some(parent_thread));
    s.bridge.shutdown().await;
}

#[tokio::test]
async fn a_turn_codex_recorded_under_another_policy_fails_closed_and_its_answer_is_withheld() {
    let s = setup(16, Duration::from_secs(60)).await;
    // the control: recorded as asked (read-only, never, user), the answer comes back
    let r = answer(s.spawn_turn(s.call("p", "recorded as asked")))
        .await
        .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.response, "done: recorded as asked");
    // recorded with `on-request` for a turn whose caller cannot be asked
    let r = answer(s.spawn_turn(s.call("p", "widened approvals")))
        .await
        .unwrap();
    let Some(Error::Codex { kind, message }) = &r.error else {
        panic!("a widened policy must fail the turn: {:?}", r.error);
    };
    assert_eq!(*kind, FailureKind::PolicyMismatch);
    assert!(message.contains("approval `on-request`"), "{message}");
    let a = r;
    assert_eq!(
        a.response, "",
        "the answer of a turn under another policy is withheld"
    );
    assert!(a.error.is_some());
    let rec = s.bridge.get(&sid("p")).unwrap().unwrap();
    assert_eq!(rec.last_status, Some(TurnStatus::Failed));
    s.bridge.shutdown().await;
}

/// An asker that is never called (the fake asks no question): the call has a person behind it.
fn a_person() -> crate::approval::Asker {
    Arc::new(|_| Box::pin(std::future::pending()))
}

#[tokio::test]
async fn a_turn_handed_from_the_app_server_to_exec_is_held_to_never_though_a_person_could_be_asked()
{
    let s = setup_on(Backend::AppServer, 16, Duration::from_secs(60)).await;
    // the control: on the app-server, with a person to ask, `on-request` is what was asked
    let mut call = s.call("p", "widened on the app-server");
    call.asker = Some(a_person());
    let r = answer(s.spawn_turn(call)).await.unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.response, "done: widened on the app-server");
    // planned on the app-server, run with `codex exec` (no app-server could take it): no
    // person was reachable there, so `on-request` is not what was asked
    let mut call = s.call("p", "widened, run by the fallback");
    call.asker = Some(a_person());
    let r = answer(s.spawn_turn(call)).await.unwrap();
    let Some(Error::Codex { kind, message }) = &r.error else {
        panic!(
            "a fallback turn recorded with `on-request` must fail closed: {:?}",
            r.error
        );
    };
    assert_eq!(*kind, FailureKind::PolicyMismatch);
    assert!(message.contains("approval `on-request`"), "{message}");
    assert_eq!(r.response, "");
    assert_eq!(
        s.fake.runs(),
        ["widened on the app-server", "widened, run by the fallback"]
    );
    s.bridge.shutdown().await;
}

#[tokio::test]
async fn a_steer_of_a_turn_handed_to_exec_is_refused_at_once_naming_exec() {
    let s = setup_on(Backend::AppServer, 16, Duration::from_secs(60)).await;
    let me = s.bridge.own_context().clone();
    let steer = |text: &str| {
        let b = s.bridge.clone();
        let me = me.clone();
        let text = Prompt::parse("prompt", text.into()).unwrap();
        async move {
            tokio::time::timeout(Duration::from_secs(5), b.steer(&sid("p"), text, me))
                .await
                .expect("a steer is answered at once")
        }
    };
    // the control: a turn on the app-server takes the steer into its inbox (the fake reads
    // none, so it is not answered here: it only must not be refused)
    let held = s.spawn_turn(s.call("p", "hold on the app-server"));
    s.wait_runs(1).await;
    s.wait_state("p", "a turn that takes a steer", |p| p.steerable)
        .await;
    let pending = tokio::time::timeout(Duration::from_millis(300), steer("more")).await;
    assert!(pending.is_err(), "a warm turn's steer waits for codex");
    s.fake.release.add_permits(1);
    answer(held).await.unwrap();
    // planned on the app-server, run with `codex exec`: refused at once as any exec turn
    let held = s.spawn_turn(s.call("p", "hold, run by the fallback"));
    s.wait_runs(2).await;
    // the fake told the actor before it ran the turn: a probe now comes after that
    s.wait_state("p", "a turn run by codex exec", |p| {
        p.running && !p.steerable
    })
    .await;
    let e = steer("more").await.unwrap_err().to_string();
    assert!(e.contains("sessionId") && e.contains("codex exec"), "{e}");
    s.fake.release.add_permits(1);
    answer(held).await.unwrap();
    s.bridge.shutdown().await;
}

mod expiry;

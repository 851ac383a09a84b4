//! Sessions as actors, against the real codex and the mock: resume, concurrency limits, busy
//! sessions, panics, idle stops, and the sandbox level never being stored.

use std::time::{Duration, Instant};

use codex_mcp_bridge::actors::session::PANIC_PROMPT;
use codex_mcp_bridge::error::Error;
use codex_mcp_bridge::plan::values::SandboxLevel;
use codex_mcp_bridge::security::ids::SessionId;
use codex_mcp_bridge::store::TurnStatus;

use crate::support::bridge::{BridgeOpts, call, own_codex, start_bridge, started_here};
use crate::support::{MockApi, Reply, TestEnv};

fn sid(s: &str) -> SessionId {
    SessionId::parse("sessionId", s).unwrap()
}

#[tokio::test]
async fn a_session_resumes_its_codex_thread_and_counts_its_turns() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let first = bridge
        .turn(call(&env, Some("s1"), "remember the word PELICAN"))
        .await
        .unwrap();
    assert!(first.created && !first.resumed);
    assert!(first.error.is_none(), "{:?}", first.error);
    let second = bridge
        .turn(call(&env, Some("s1"), "what was the word?"))
        .await
        .unwrap();
    assert!(second.resumed && !second.created);
    assert_eq!(second.thread_id, first.thread_id);
    let reqs = mock.responses_requests();
    assert!(
        reqs[1].body_contains("PELICAN"),
        "the second request carries the first turn's history"
    );
    let rec = bridge.get(&sid("s1")).unwrap().unwrap();
    assert_eq!(rec.turn_count, 2);
    assert_eq!(rec.thread_id, first.thread_id);
    assert_eq!(rec.last_status, Some(TurnStatus::Completed));
    // a call without a session id gets a fresh one
    let fresh = bridge.turn(call(&env, None, "hi")).await.unwrap();
    assert_ne!(fresh.session_id, Some(sid("s1")));
    assert!(fresh.created);
    bridge.shutdown().await;
}

#[tokio::test]
async fn the_sandbox_level_is_never_stored_and_a_resumed_turn_without_one_is_read_only() {
    let env = TestEnv::with_git();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let mut c = call(&env, Some("lvl"), "write");
    c.sandbox = Some(SandboxLevel::WorkspaceWrite);
    let first = bridge.turn(c).await.unwrap();
    assert_eq!(first.recorded.as_ref().unwrap().sandbox, "workspace-write");
    let raw = serde_json::to_string(&bridge.get(&sid("lvl")).unwrap().unwrap()).unwrap();
    assert!(
        !raw.contains("workspace") && !raw.to_lowercase().contains("sandbox"),
        "{raw}"
    );
    let second = bridge.turn(call(&env, Some("lvl"), "again")).await.unwrap();
    assert!(second.resumed);
    assert_eq!(second.sandbox, Some(SandboxLevel::ReadOnly));
    assert_eq!(second.recorded.as_ref().unwrap().sandbox, "read-only");
    bridge.shutdown().await;
}

#[tokio::test]
async fn sixteen_sessions_never_run_more_than_four_codex_turns_at_once() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.set_default(Reply::message("slow answer").with_delay(Duration::from_millis(400)));
    let bridge = start_bridge(
        &env,
        &mock,
        BridgeOpts {
            max_concurrent: 4,
            ..Default::default()
        },
    )
    .await;
    let mut handles = vec![];
    for i in 0..16 {
        let b = bridge.clone();
        let c = call(&env, Some(&format!("par{i}")), &format!("task {i}"));
        handles.push(tokio::spawn(async move { b.turn(c).await }));
    }
    // observe from outside: the bridge's counts while turns run
    let mut max_active = 0;
    let mut saw_queue = false;
    let deadline = Instant::now() + Duration::from_secs(150);
    while !handles.iter().all(|h| h.is_finished()) {
        assert!(
            Instant::now() < deadline,
            "turns did not finish: {:?}",
            bridge.counts()
        );
        let c = bridge.counts();
        max_active = max_active.max(c.active_turns);
        saw_queue |= c.queued_turns > 0;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for h in handles {
        let a = h.await.unwrap().unwrap();
        assert!(a.error.is_none(), "{:?}", a.error);
    }
    assert_eq!(mock.responses_count(), 16);
    assert!(
        mock.peak_concurrency() <= 4,
        "peak {}",
        mock.peak_concurrency()
    );
    assert!(mock.peak_concurrency() >= 2, "turns did run in parallel");
    assert!(
        max_active <= 4 && saw_queue,
        "active {max_active}, queued seen {saw_queue}"
    );
    assert_eq!(bridge.counts().active_turns, 0);
    bridge.shutdown().await;
}

#[tokio::test]
async fn calls_on_one_session_run_one_after_another_in_order() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.set_default(Reply::message("ok").with_delay(Duration::from_millis(200)));
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    // the first call creates the session; then four at once
    bridge.turn(call(&env, Some("one"), "start")).await.unwrap();
    let mut handles = vec![];
    for i in 0..4 {
        let b = bridge.clone();
        let c = call(&env, Some("one"), &format!("step {i}"));
        handles.push(tokio::spawn(async move { b.turn(c).await }));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    for h in handles {
        let r = h.await.unwrap().unwrap();
        assert!(r.resumed);
    }
    let reqs = mock.responses_requests();
    assert_eq!(reqs.len(), 5);
    assert_eq!(
        mock.peak_concurrency(),
        1,
        "one session never runs two turns at once"
    );
    let order: Vec<String> = reqs[1..]
        .iter()
        .map(|r| r.last_user_text().unwrap_or_default())
        .collect();
    for (i, text) in order.iter().enumerate() {
        assert!(text.contains(&format!("step {i}")), "{order:?}");
    }
    assert_eq!(bridge.get(&sid("one")).unwrap().unwrap().turn_count, 5);
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_busy_session_refuses_a_call_that_asks_not_to_wait() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::message("slow").with_delay(Duration::from_millis(1500)));
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let b = bridge.clone();
    let c = call(&env, Some("busy"), "long");
    let first = tokio::spawn(async move { b.turn(c).await });
    mock.wait_for_responses(1, Duration::from_secs(30)).await;
    let mut second = call(&env, Some("busy"), "now");
    second.wait_if_busy = false;
    let err = bridge.turn(second).await.unwrap_err();
    assert!(
        matches!(err, Error::Busy(_)) && err.to_string().contains("busy"),
        "{err}"
    );
    let first = first.await.unwrap().unwrap();
    assert!(first.error.is_none(), "{:?}", first.error);
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_panicking_session_actor_frees_its_slot_and_the_next_turn_works() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(
        &env,
        &mock,
        BridgeOpts {
            fault_injection: true,
            ..Default::default()
        },
    )
    .await;
    bridge.turn(call(&env, Some("p"), "first")).await.unwrap();
    let err = bridge
        .turn(call(&env, Some("p"), PANIC_PROMPT))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SessionFailed(_)), "{err}");
    // the registry survived and forgot the dead actor
    let deadline = Instant::now() + Duration::from_secs(5);
    while bridge.is_live(&sid("p")) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!bridge.is_live(&sid("p")));
    assert_eq!(bridge.counts().active_turns, 0);
    let next = bridge
        .turn(call(&env, Some("p"), "after the panic"))
        .await
        .unwrap();
    assert!(next.resumed, "rehydrated from the stored record");
    assert!(next.error.is_none(), "{:?}", next.error);
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_panic_during_a_running_turn_kills_its_processes_and_frees_its_slot() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::hang());
    let bridge = start_bridge(
        &env,
        &mock,
        BridgeOpts {
            fault_injection: true,
            max_concurrent: 1,
            ..Default::default()
        },
    )
    .await;
    let b = bridge.clone();
    let c = call(&env, Some("q"), "hang");
    let running = tokio::spawn(async move { b.turn(c).await });
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30))
        .await;
    assert_eq!(bridge.counts().active_turns, 1);
    // the fault hook panics the actor while its turn runs
    let err = bridge
        .turn(call(&env, Some("q"), PANIC_PROMPT))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SessionFailed(_)), "{err}");
    let err = running.await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::SessionFailed(_)),
        "the caller of the turn in flight gets a clear error: {err}"
    );
    mock.wait_for_in_flight(|n| n == 0, Duration::from_secs(5))
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while bridge.counts().active_turns > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(bridge.counts().active_turns, 0, "the slot is free");
    let next = bridge.turn(call(&env, Some("q"), "after")).await.unwrap();
    assert!(next.error.is_none(), "{:?}", next.error);
    bridge.shutdown().await;
}

#[tokio::test]
async fn closing_a_busy_session_cancels_its_turn_and_forgets_it() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::hang());
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let b = bridge.clone();
    let c = call(&env, Some("c"), "hang");
    let running = tokio::spawn(async move { b.turn(c).await });
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30))
        .await;
    let closed = bridge.close(&sid("c"), false, None).await.unwrap();
    assert!(closed.is_some());
    assert!(running.await.unwrap().is_err());
    mock.wait_for_in_flight(|n| n == 0, Duration::from_secs(5))
        .await;
    assert!(bridge.get(&sid("c")).unwrap().is_none());
    bridge.shutdown().await;
}

/// A close during a turn answers that turn as cancelled (a clear ending, not "the session's
/// actor failed"), kills its codex, and succeeds.
#[tokio::test]
async fn a_close_during_a_turn_answers_the_turn_as_cancelled() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::hang());
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let b = bridge.clone();
    let c = call(&env, Some("closing"), "hang");
    let running = tokio::spawn(async move { b.turn(c).await });
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(60))
        .await;
    let closed = tokio::time::timeout(
        Duration::from_secs(30),
        bridge.close(&sid("closing"), false, None),
    )
    .await
    .expect("the close is answered")
    .unwrap();
    assert!(closed.is_some());
    let err = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the turn is answered")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(err, Error::Cancelled { .. }),
        "the turn is answered as cancelled by the close: {err}"
    );
    mock.wait_for_in_flight(|n| n == 0, Duration::from_secs(10))
        .await;
    assert!(bridge.get(&sid("closing")).unwrap().is_none());
    bridge.shutdown().await;
}

/// A turn sent right behind the close of a stored session (no live actor) never brings the
/// closed session back: it is refused naming the session, or starts a new one under that id.
#[tokio::test]
async fn a_turn_racing_the_close_of_a_stored_session_never_revives_it() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(
        &env,
        &mock,
        BridgeOpts {
            idle: Duration::from_millis(200),
            ..Default::default()
        },
    )
    .await;
    let first = bridge.turn(call(&env, Some("raced"), "one")).await.unwrap();
    let old = first.thread_id.expect("a thread");
    let deadline = Instant::now() + Duration::from_secs(10);
    while bridge.is_live(&sid("raced")) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !bridge.is_live(&sid("raced")),
        "the session is stored, not live"
    );
    let id = sid("raced");
    let (closed, turned) = tokio::join!(
        bridge.close(&id, false, None),
        bridge.turn(call(&env, Some("raced"), "two"))
    );
    assert!(closed.unwrap().is_some(), "the close found the session");
    match turned {
        Err(e) => assert!(
            matches!(&e, Error::InvalidArgument { field, .. } if field == "sessionId"),
            "{e}"
        ),
        Ok(r) => assert!(
            r.created && !r.resumed && r.thread_id != Some(old),
            "a turn after the close starts a new session, never the closed one's thread"
        ),
    }
    if let Some(rec) = bridge.get(&id).unwrap() {
        assert_ne!(
            rec.thread_id,
            Some(old),
            "the closed session's record came back"
        );
    }
    bridge.shutdown().await;
}

#[tokio::test]
async fn idle_session_actors_stop_and_come_back_from_the_store() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(
        &env,
        &mock,
        BridgeOpts {
            idle: Duration::from_millis(200),
            ..Default::default()
        },
    )
    .await;
    let first = bridge.turn(call(&env, Some("idle"), "one")).await.unwrap();
    assert!(bridge.is_live(&sid("idle")));
    let deadline = Instant::now() + Duration::from_secs(5);
    while bridge.is_live(&sid("idle")) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!bridge.is_live(&sid("idle")), "idle actor stopped");
    let second = bridge.turn(call(&env, Some("idle"), "two")).await.unwrap();
    assert!(second.resumed);
    assert_eq!(second.thread_id, first.thread_id);
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_session_is_bound_to_its_working_directory() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    bridge.turn(call(&env, Some("bound"), "one")).await.unwrap();
    let other = env.root().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let mut c = call(&env, Some("bound"), "two");
    c.cwd = codex_mcp_bridge::actors::WorkDir::Given(crate::support::bridge::confine_dir(&other));
    let err = bridge.turn(c).await.unwrap_err().to_string();
    assert!(
        err.contains("workingDirectory") && err.contains("bound"),
        "{err}"
    );
    bridge.shutdown().await;
}

#[tokio::test]
async fn reset_starts_a_new_thread_under_the_same_session_id() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let first = bridge.turn(call(&env, Some("r"), "one")).await.unwrap();
    let mut c = call(&env, Some("r"), "two");
    c.reset = true;
    let second = bridge.turn(c).await.unwrap();
    assert!(!second.resumed);
    assert_ne!(second.thread_id, first.thread_id);
    assert_eq!(second.session_id, Some(sid("r")));
    bridge.shutdown().await;
}

#[tokio::test]
async fn sessions_past_their_time_to_live_are_forgotten_but_not_live_ones() {
    use codex_mcp_bridge::store::SessionRecord;
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    bridge.turn(call(&env, Some("fresh"), "hi")).await.unwrap();
    let store = &bridge.shared().store();
    let work = env.work().canonicalize().unwrap();
    store
        .put(&SessionRecord::new(sid("ancient"), work.clone(), 1_000))
        .unwrap();
    // a live actor whose stored record looks old is kept
    let mut live = store.get(&sid("fresh")).unwrap().unwrap();
    live.last_used_ms = 2_000;
    store.put(&live).unwrap();
    let n = bridge
        .expire(Duration::from_secs(30 * 86_400))
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(bridge.get(&sid("ancient")).unwrap().is_none());
    assert!(
        bridge.get(&sid("fresh")).unwrap().is_some(),
        "a live session is never expired"
    );
    bridge.shutdown().await;
}

/// A turn whose codex invocation cannot be built (here: danger-full-access on a server that
/// forbids it) fails without touching the session's record: it is not left `Running`.
#[tokio::test]
async fn a_turn_that_cannot_be_built_leaves_its_session_as_it_was() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    bridge
        .turn(call(&env, Some("built"), "hello"))
        .await
        .unwrap();
    let mut bad = call(&env, Some("built"), "again");
    bad.sandbox = Some(SandboxLevel::DangerFullAccess);
    let err = bridge.turn(bad).await.err().unwrap();
    assert!(err.to_string().contains("`sandbox`"), "{err}");
    let rec = bridge.get(&sid("built")).unwrap().unwrap();
    assert_eq!(rec.last_status, Some(TurnStatus::Completed));
    assert_eq!(rec.turn_count, 1);
    bridge.shutdown().await;
}

/// A `query` that hangs, through the bridge, with `bridge`'s own client context.
fn hanging_query(
    bridge: &codex_mcp_bridge::actors::Bridge,
) -> tokio::task::JoinHandle<Result<codex_mcp_bridge::actors::Answer, Error>> {
    use codex_mcp_bridge::actors::{OneShot, OneShotCall};
    let b = bridge.clone();
    tokio::spawn(async move {
        let client = b.own_context().clone();
        b.one_shot(OneShotCall {
            request: OneShot::Query {
                prompt: crate::support::bridge::prompt_of("hang"),
                context: None,
                model: None,
                reasoning_effort: None,
            },
            timeout: Duration::from_secs(120),
            cancel: tokio_util::sync::CancellationToken::new(),
            progress: None,
            client,
        })
        .await
    })
}

/// A session-less turn is owned by an actor: shutdown kills its codex and answers its caller.
#[tokio::test]
async fn shutdown_kills_a_running_one_shot_turn() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::hang());
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let call = hanging_query(&bridge);
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(60))
        .await;
    let codex = own_codex(&mock);
    assert!(!codex.is_empty());
    bridge.shutdown().await;
    assert!(
        !codex.iter().any(|p| crate::support::process::alive(*p)),
        "codex outlived the shutdown"
    );
    let answer = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call is answered")
        .unwrap();
    let failed = answer.map(|a| a.error.is_some()).unwrap_or(true);
    assert!(failed, "a stopped turn does not succeed");
}

/// While a session-less turn runs, its process is on record for the takeover sweep, which kills
/// it (as after a crash of the server that started it); a finished one leaves no record.
#[tokio::test]
async fn the_takeover_sweep_kills_a_one_shot_turn_left_running() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::hang());
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let call = hanging_query(&bridge);
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(60))
        .await;
    let store = &bridge.shared().store();
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.inflight().unwrap().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let inflight = store.inflight().unwrap();
    assert_eq!(inflight.len(), 1, "{inflight:?}");
    let pid = inflight[0].1.pid;
    assert!(own_codex(&mock).contains(&pid));
    codex_mcp_bridge::actors::recover_interrupted(store)
        .await
        .unwrap();
    assert!(
        !crate::support::process::alive(pid),
        "the sweep killed codex"
    );
    let _ = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call is answered");
    assert!(store.inflight().unwrap().is_empty());
    bridge.shutdown().await;
}

/// A prompt near the largest codex takes goes through a real session turn whole (moved, not
/// copied, on its way to codex's stdin); one byte over the bridge's own limit is refused naming
/// the field. Codex refuses more than 1 MiB characters itself ("Input exceeds the maximum
/// length of 1048576 characters"), below the bridge's 4 MiB limit, so that is the size that
/// can round-trip.
#[tokio::test]
async fn a_prompt_near_the_limit_reaches_the_model_whole() {
    use codex_mcp_bridge::codex::argv::MAX_PROMPT_BYTES;
    const CODEX_MAX_CHARS: usize = 1 << 20;
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let tail = "END-OF-PROMPT-7731";
    let prompt = format!(
        "{}{tail}",
        "lorem ipsum ".repeat((CODEX_MAX_CHARS - 4096) / 12)
    );
    assert!(prompt.len() > CODEX_MAX_CHARS - 4096 && prompt.len() < CODEX_MAX_CHARS);
    let r = bridge.turn(call(&env, Some("big"), &prompt)).await.unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let req = mock.responses_requests().pop().unwrap();
    assert!(
        req.user_text_contains(&prompt),
        "the model sees the whole prompt"
    );
    // one byte more is refused where every prompt is checked, before any call is made
    let over = "x".repeat(MAX_PROMPT_BYTES + 1);
    let err = codex_mcp_bridge::security::prompt::Prompt::parse("prompt", over).unwrap_err();
    assert!(err.to_string().contains("`prompt`"), "{err}");
    bridge.shutdown().await;
}

/// A queued call that cannot start (its invocation cannot be built) is answered at once, and
/// the calls queued behind it still run.
#[tokio::test]
async fn a_queued_call_that_cannot_start_does_not_stall_the_queue_behind_it() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.set_default(Reply::message("ok").with_delay(Duration::from_millis(500)));
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    bridge.turn(call(&env, Some("q"), "start")).await.unwrap();
    let first = {
        let (b, c) = (bridge.clone(), call(&env, Some("q"), "slow"));
        tokio::spawn(async move { b.turn(c).await })
    };
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(60))
        .await;
    let bad = {
        let mut c = call(&env, Some("q"), "bad");
        c.sandbox = Some(SandboxLevel::DangerFullAccess);
        let b = bridge.clone();
        tokio::spawn(async move { b.turn(c).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let good = {
        let (b, c) = (bridge.clone(), call(&env, Some("q"), "good"));
        tokio::spawn(async move { b.turn(c).await })
    };
    first.await.unwrap().unwrap();
    assert!(bad.await.unwrap().is_err());
    let r = tokio::time::timeout(Duration::from_secs(30), good)
        .await
        .expect("the call behind the refused one runs")
        .unwrap()
        .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    bridge.shutdown().await;
}

/// A stand-in for codex whose short commands (`--version`, `delete`) hang. The real codex
/// answers both at once, so it cannot show a probe left running. It rewrites its own command
/// line to the one codex would have (`PROGRAM ARGS…`, without the interpreter's name) so that
/// the takeover sweep recognises it as the process it recorded.
fn hanging_codex(env: &TestEnv) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = env.root().join("hanging-codex");
    std::fs::write(
        &path,
        r#"#!/usr/bin/perl
open(my $st, '<', '/proc/self/stat') or die; my $stat = <$st>; close $st;
my @f = split / /, substr($stat, rindex($stat, ')') + 2);
my ($start, $end) = ($f[45], $f[46]);
my $line = join("\0", $0, @ARGV) . "\0";
die "command line too long" if length($line) > $end - $start;
$line .= "\0" x ($end - $start - length($line));
open(my $mem, '+<:raw', '/proc/self/mem') or die "mem: $!";
sysseek($mem, $start, 0) or die; syswrite($mem, $line) or die; close $mem;
sleep 600;
"#,
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Waits (up to 20 s) for the process on record in `inflight` that shows the command line
/// `program` gives it (the stand-in rewrites its own after perl started; a warm session's
/// app-server may be on record beside it); its pid.
async fn the_one_inflight(
    store: &codex_mcp_bridge::store::Store,
    program: &std::path::Path,
) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let find = || {
        store.inflight().unwrap().into_iter().find_map(|(_, t)| {
            std::fs::read(format!("/proc/{}/cmdline", t.pid))
                .is_ok_and(|c| c.starts_with(program.as_os_str().as_encoded_bytes()))
                .then_some(t.pid)
        })
    };
    while find().is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = find();
    assert!(
        pid.is_some(),
        "the stand-in never showed on record with its command line: {:?}",
        store.inflight().unwrap()
    );
    pid.unwrap()
}

/// Whether `pid` is gone within 5 s (a SIGKILL takes effect when the process is next
/// scheduled, which a loaded machine delays).
async fn gone_soon(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while crate::support::process::alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    !crate::support::process::alive(pid)
}

/// `ping`'s `codex --version` is on record while it runs, so the takeover sweep kills one left
/// running after a crash; the probe answers "no version", and leaves no record.
#[tokio::test]
async fn the_takeover_sweep_kills_a_version_probe_left_running() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let mut client = (**bridge.own_context()).clone();
    let fake = hanging_codex(&env);
    client.common.program = fake.clone();
    let b = bridge.clone();
    let probe = tokio::spawn(async move { b.codex_version(&client).await });
    let store = &bridge.shared().store();
    let pid = the_one_inflight(store, &fake).await;
    assert!(started_here(fake.to_str().unwrap()).contains(&pid));
    codex_mcp_bridge::actors::recover_interrupted(store)
        .await
        .unwrap();
    assert!(gone_soon(pid).await, "the sweep killed the probe");
    let version = tokio::time::timeout(Duration::from_secs(10), probe)
        .await
        .expect("the probe answers")
        .unwrap();
    assert_eq!(version, None);
    assert!(store.inflight().unwrap().is_empty());
    bridge.shutdown().await;
}

/// `closeSession`'s `codex delete` is owned by an actor and on record while it runs: the
/// takeover sweep kills one left running, the close is still answered, and no record remains.
#[tokio::test]
async fn the_takeover_sweep_kills_a_thread_deletion_left_running() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let r = bridge.turn(call(&env, Some("del"), "hi")).await.unwrap();
    assert!(r.thread_id.is_some());
    let mut client = (**bridge.own_context()).clone();
    let fake = hanging_codex(&env);
    client.common.program = fake.clone();
    let b = bridge.clone();
    let close = tokio::spawn(async move {
        b.close(&sid("del"), true, Some(std::sync::Arc::new(client)))
            .await
    });
    let store = &bridge.shared().store();
    let pid = the_one_inflight(store, &fake).await;
    assert!(started_here(fake.to_str().unwrap()).contains(&pid));
    codex_mcp_bridge::actors::recover_interrupted(store)
        .await
        .unwrap();
    assert!(gone_soon(pid).await, "the sweep killed the delete");
    let closed = tokio::time::timeout(Duration::from_secs(10), close)
        .await
        .expect("the close is answered")
        .unwrap()
        .unwrap();
    assert!(closed.is_some(), "the session was forgotten");
    assert!(bridge.get(&sid("del")).unwrap().is_none());
    assert!(store.inflight().unwrap().is_empty());
    bridge.shutdown().await;
}

/// Starts a session turn that hangs (the mock holds it) and waits until the model has it.
async fn hanging_turn(
    env: &TestEnv,
    mock: &MockApi,
    bridge: &codex_mcp_bridge::actors::Bridge,
    session: &str,
    in_flight: usize,
) -> tokio::task::JoinHandle<Result<codex_mcp_bridge::actors::Answer, Error>> {
    let (b, c) = (bridge.clone(), call(env, Some(session), "hang"));
    let turn = tokio::spawn(async move { b.turn(c).await });
    mock.wait_for_in_flight(|n| n == in_flight, Duration::from_secs(60))
        .await;
    turn
}

/// Issue 35: a turn the server stopped under because its client closed the connection is
/// recorded at the next start (the takeover sweep) as cut off by the client; one left in
/// flight by a server that only died (nothing marked it, as after a SIGKILL) as the server's.
#[tokio::test]
async fn the_takeover_sweep_tells_a_turn_its_client_closed_from_one_a_crash_left() {
    use codex_mcp_bridge::actors::{CLIENT_CLOSED, SERVER_STOPPED};
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    mock.push(Reply::hang());
    mock.push(Reply::hang());
    let bridge = start_bridge(&env, &mock, BridgeOpts::default()).await;
    let store = bridge.shared().store().clone();
    let cut = hanging_turn(&env, &mock, &bridge, "cut", 1).await;
    bridge.client_closed().await;
    let crashed = hanging_turn(&env, &mock, &bridge, "crashed", 2).await;
    let inflight = store.inflight().unwrap();
    let marked = |s: &str| {
        inflight
            .iter()
            .any(|(i, t)| i == &sid(s) && t.client_closed)
    };
    assert!(marked("cut") && !marked("crashed"), "{inflight:?}");
    // a stop leaves a running turn's record in flight, as a crash does
    bridge.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(10), cut).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), crashed).await;
    codex_mcp_bridge::actors::recover_interrupted(&store)
        .await
        .unwrap();
    for (session, why) in [("cut", CLIENT_CLOSED), ("crashed", SERVER_STOPPED)] {
        let rec = store.get(&sid(session)).unwrap().unwrap();
        assert_eq!(rec.last_status, Some(TurnStatus::Interrupted), "{rec:?}");
        assert_eq!(rec.last_error.as_deref(), Some(why), "{rec:?}");
    }
    assert!(store.inflight().unwrap().is_empty());
}

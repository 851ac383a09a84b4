//! The expiry sweep (`session_ttl`) against the session actors: it never forgets a session a
//! turn brings back, and it tells the home of each session it forgets.

use super::*;

/// Race: the expiry sweep and a turn that brings the same expired session back, sent at once.
/// The registry runs both (the sweep as its own message), so they never interleave: either the
/// turn brought the session back and the sweep left it (its record stored, with both turns),
/// or the sweep forgot it first and the turn is refused or starts a new session under the id.
#[tokio::test]
async fn the_expiry_sweep_never_forgets_a_session_a_turn_brings_back() {
    let (mut resumed, mut forgotten) = (0, 0);
    for round in 0..8 {
        let s = setup(16, Duration::from_millis(200)).await;
        let id = format!("expiring-{round}");
        let first = answer(s.spawn_turn(s.call(&id, "first"))).await.unwrap();
        let thread = first.thread_id.unwrap();
        s.wait_not_live(&id).await;
        // the stored record aged past any time-to-live
        let store = s.bridge.shared().store();
        let mut rec = store.get(&sid(&id)).unwrap().unwrap();
        rec.last_used_ms = 1;
        store.put(&rec).unwrap();
        // the sweep first on even rounds, the turn first on odd ones
        let sweep = s.bridge.expire(Duration::from_secs(60));
        let turn = s.bridge.turn(s.call(&id, "again"));
        let (expired, turned) = if round % 2 == 0 {
            tokio::join!(sweep, turn)
        } else {
            let (t, e) = tokio::join!(turn, sweep);
            (e, t)
        };
        let expired = expired.unwrap();
        match turned {
            Ok(r) if r.resumed => {
                resumed += 1;
                assert_eq!(expired, 0, "the sweep forgot a session a turn brought back");
                s.wait_not_live(&id).await;
                let rec = s
                    .bridge
                    .get(&sid(&id))
                    .unwrap()
                    .expect("a session a turn brought back stays stored");
                assert_eq!(rec.thread_id, Some(thread));
                assert_eq!(rec.turn_count, 2, "both turns are on its record");
            }
            Ok(r) => {
                forgotten += 1;
                assert_eq!(
                    expired, 1,
                    "a turn started a new session though none expired"
                );
                assert!(r.created && r.thread_id != Some(thread));
            }
            Err(e) => {
                forgotten += 1;
                assert_eq!(expired, 1, "a turn was refused though nothing expired: {e}");
                assert!(
                    matches!(&e, Error::InvalidArgument { field, .. } if field == "sessionId"),
                    "refused, naming the session: {e}"
                );
            }
        }
        s.bridge.shutdown().await;
    }
    assert_eq!(resumed + forgotten, 8);
}

/// A session the expiry sweep forgets leaves its home's session list: that home is told (a
/// host's `@` menu drops it at once), and a sweep that forgets nothing tells no one.
#[tokio::test]
async fn the_expiry_sweep_tells_the_home_of_each_session_it_forgets() {
    let s = setup(16, Duration::from_millis(200)).await;
    let first = answer(s.spawn_turn(s.call("aging", "first")))
        .await
        .unwrap();
    assert!(first.error.is_none(), "{:?}", first.error);
    s.wait_not_live("aging").await;
    let store = s.bridge.shared().store();
    let mut rec = store.get(&sid("aging")).unwrap().unwrap();
    let home = rec
        .codex_home
        .clone()
        .expect("a session's record names its home");
    let mut changes = s.bridge.session_list_changes();
    // the control: nothing aged, nothing forgotten, nobody told
    assert_eq!(s.bridge.expire(Duration::from_secs(60)).await.unwrap(), 0);
    assert!(
        changes.try_recv().is_err(),
        "a sweep that forgot nothing told a home"
    );
    rec.last_used_ms = 1;
    store.put(&rec).unwrap();
    assert_eq!(s.bridge.expire(Duration::from_secs(60)).await.unwrap(), 1);
    let told = tokio::time::timeout(Duration::from_secs(5), changes.recv())
        .await
        .expect("the forgotten session's home is told")
        .unwrap();
    assert_eq!(told, std::path::PathBuf::from(home));
    s.bridge.shutdown().await;
}

//! The MCP resources (issue 45), through rmcp's real client, the built server, the real codex
//! and the mock: each session of the client's own `CODEX_HOME` is listed and read as
//! `codex-session://<sessionId>` (its record and last answer); a client of another
//! `CODEX_HOME` on the same store lists none of them and is refused a read or a subscription
//! exactly as for a session that does not exist (negative control: its `listSessions` does
//! show the session, so the rule, not the store, hides it); a subscribed session sends
//! `notifications/resources/updated` when its turn ends, an unsubscribed one does not.
//! The list: a session made or closed sends `notifications/resources/list_changed` to the
//! clients of its own home only; a 2026-07-28 client hears the same on `subscriptions/listen`,
//! and the ends of turns of the sessions it names there, never of another home's.

#![allow(deprecated)] // resources/subscribe: the 2025-11-25 protocol's, which hosts speak

use std::time::Duration;

use rmcp::model::{ReadResourceRequestParams, SubscribeRequestParams, UnsubscribeRequestParams};
use serde_json::{Value, json};

use crate::support::mcp::{Protocol, Server, connect, connect_other_home, structured, text};
use crate::support::{MockApi, Reply, TestEnv};
use rmcp::model::{ServerNotification, SubscriptionFilter};

/// A turn of session `id` (new when `None`); its session id.
async fn turn(s: &Server, env: &TestEnv, mock: &MockApi, id: Option<&str>, says: &str) -> String {
    mock.push(Reply::message(says));
    let mut args = json!({"prompt": "work", "workingDirectory": env.work()});
    if let Some(id) = id {
        args["sessionId"] = json!(id);
    }
    let r = s.call("codex", args).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    structured(&r)["sessionId"].as_str().unwrap().to_owned()
}

async fn uris(s: &Server) -> Vec<String> {
    let l = s.client.list_resources(None).await.expect("resources/list");
    l.resources.into_iter().map(|r| r.uri).collect()
}

async fn read(s: &Server, uri: &str) -> Result<Value, String> {
    let r = s
        .client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .map_err(|e| e.to_string())?;
    let rmcp::model::ResourceContents::TextResourceContents {
        text, mime_type, ..
    } = &r.contents[0]
    else {
        panic!("text contents: {r:?}")
    };
    assert_eq!(mime_type.as_deref(), Some("application/json"));
    Ok(serde_json::from_str(text).expect("JSON"))
}

#[tokio::test]
async fn sessions_are_resources_of_their_own_home_only() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = connect(&env, &mock, Protocol::Legacy).await;
    let id = turn(&s, &env, &mock, None, "the answer").await;
    let uri = format!("codex-session://{id}");

    let t = s
        .client
        .list_resource_templates(None)
        .await
        .expect("templates");
    assert_eq!(
        t.resource_templates[0].uri_template,
        "codex-session://{sessionId}"
    );
    assert_eq!(uris(&s).await, std::slice::from_ref(&uri));
    let v = read(&s, &uri).await.unwrap();
    assert_eq!(v["sessionId"], id.as_str(), "{v}");
    assert_eq!(v["turnCount"], 1, "{v}");
    assert_eq!(v["lastResponse"], "the answer", "{v}");

    let o = connect_other_home(&env, &mock).await;
    // negative control: the store shows the session to this client's tools
    let l = structured(&o.call("listSessions", json!({})).await);
    assert_eq!(l["sessions"][0]["sessionId"], id.as_str(), "{l}");
    assert!(uris(&o).await.is_empty(), "another home's session listed");
    let refused = read(&o, &uri)
        .await
        .expect_err("another home's session read");
    let missing = read(&o, "codex-session://no-such-session")
        .await
        .expect_err("a missing session read");
    assert!(refused.contains("`uri`"), "{refused}");
    assert_eq!(
        refused.replace(&id, "X"),
        missing.replace("no-such-session", "X"),
        "another home's session is refused as one that does not exist"
    );
    let e = o
        .client
        .subscribe(SubscribeRequestParams::new(uri.clone()))
        .await
        .expect_err("another home's subscription");
    assert!(e.to_string().contains("`uri`"), "{e}");
    for bad in ["file:///etc/passwd", "codex-session://../x"] {
        let e = read(&s, bad).await.expect_err(bad);
        assert!(e.contains("`uri`"), "{bad}: {e}");
    }
}

#[tokio::test]
async fn a_subscribed_session_tells_when_its_turn_ends() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = connect(&env, &mock, Protocol::Legacy).await;
    let watched = turn(&s, &env, &mock, None, "one").await;
    let other = turn(&s, &env, &mock, None, "two").await;
    let uri = format!("codex-session://{watched}");
    s.client
        .subscribe(SubscribeRequestParams::new(uri.clone()))
        .await
        .expect("resources/subscribe");
    turn(&s, &env, &mock, Some(&other), "not watched").await;
    turn(&s, &env, &mock, Some(&watched), "watched").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while s.updated.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(*s.updated.lock().unwrap(), std::slice::from_ref(&uri));
    assert_eq!(read(&s, &uri).await.unwrap()["lastResponse"], "watched");
    s.client
        .unsubscribe(UnsubscribeRequestParams::new(uri.clone()))
        .await
        .expect("resources/unsubscribe");
    turn(&s, &env, &mock, Some(&watched), "no longer watched").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        s.updated.lock().unwrap().len(),
        1,
        "told after unsubscribing"
    );
}

/// `s`'s count of `notifications/resources/list_changed` once it reaches `at_least` (or 10 s).
async fn listed(s: &Server, at_least: usize) -> usize {
    let count = || s.listed.load(std::sync::atomic::Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while count() < at_least && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    count()
}

/// The next notice on a `subscriptions/listen` stream, bounded.
async fn next_notice(sub: &mut rmcp::service::Subscription) -> Option<ServerNotification> {
    tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .ok()
        .and_then(|n| n.expect("the stream"))
}

#[tokio::test]
async fn the_session_list_changes_are_told_to_their_own_home_only() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let s = connect(&env, &mock, Protocol::Legacy).await;
    let o = connect_other_home(&env, &mock).await;
    let m = connect(&env, &mock, Protocol::Modern).await;
    let mut filter = SubscriptionFilter::new();
    filter.resources_list_changed = Some(true);
    let mut listen = m.client.listen(filter.clone()).await.expect("listen");
    assert_eq!(listen.acknowledged().resources_list_changed, Some(true));

    let id = turn(&s, &env, &mock, None, "made").await;
    // made as its turn starts, and its entry changed as its turn ended
    assert_eq!(listed(&s, 2).await, 2, "the maker's list");
    assert!(
        matches!(
            next_notice(&mut listen).await,
            Some(ServerNotification::ResourceListChangedNotification(_))
        ),
        "a 2026-07-28 client of the same home hears it"
    );
    // a turn of an existing session changes its entry (turn count, status): told once
    turn(&s, &env, &mock, Some(&id), "again").await;
    assert_eq!(listed(&s, 3).await, 3, "a turn's end");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.listed.load(std::sync::atomic::Ordering::SeqCst), 3);
    // a session whose first turn fails is made all the same (its record is listed): told
    mock.push(Reply::http_error(400, "no such model"));
    let failed = s
        .call(
            "codex",
            json!({"prompt": "work", "workingDirectory": env.work()}),
        )
        .await;
    assert_eq!(failed.is_error, Some(true), "{}", text(&failed));
    assert_eq!(listed(&s, 5).await, 5, "a session whose turn failed");
    let closed = s.call("closeSession", json!({"sessionId": id})).await;
    assert_ne!(closed.is_error, Some(true), "{}", text(&closed));
    assert_eq!(listed(&s, 6).await, 6, "the close is told");

    // another home hears its own sessions and none of these (negative control: it hears)
    assert_eq!(o.listed.load(std::sync::atomic::Ordering::SeqCst), 0);
    mock.push(Reply::message("theirs"));
    let args = json!({"prompt": "work", "workingDirectory": env.work()});
    let theirs = o.call("codex", args).await;
    assert_ne!(theirs.is_error, Some(true), "{}", text(&theirs));
    let theirs = structured(&theirs)["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(listed(&o, 2).await, 2, "the other home's own session");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.listed.load(std::sync::atomic::Ordering::SeqCst), 6);

    // `subscriptions/listen` naming sessions: its own is heard when its turn ends, another
    // home's never
    let mine = turn(&s, &env, &mock, None, "mine").await;
    filter.resources_list_changed = None;
    filter.resource_subscriptions = Some(vec![
        format!("codex-session://{theirs}"),
        format!("codex-session://{mine}"),
        "file:///etc/passwd".into(),
    ]);
    let mut named = m.client.listen(filter).await.expect("listen");
    assert_eq!(
        named
            .acknowledged()
            .resource_subscriptions
            .as_ref()
            .map(Vec::len),
        Some(2),
        "a session URI is accepted, another URI not: {:?}",
        named.acknowledged()
    );
    mock.push(Reply::message("theirs again"));
    let args = json!({"prompt": "w", "workingDirectory": env.work(), "sessionId": theirs});
    assert_ne!(o.call("codex", args).await.is_error, Some(true));
    turn(&s, &env, &mock, Some(&mine), "mine again").await;
    match next_notice(&mut named).await {
        Some(ServerNotification::ResourceUpdatedNotification(n)) => {
            assert_eq!(n.params.uri, format!("codex-session://{mine}"))
        }
        other => panic!("the own session's update first, another home's never: {other:?}"),
    }
}

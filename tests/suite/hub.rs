//! Many hosts, one store: several server processes (the built binary, each with its own real
//! MCP client) on one store. The first owns it; the others relay to it over the store's socket
//! and take it over when it dies.

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::support::mcp::{
    Protocol, Server, connect, connect_with, connect_with_capabilities, server_env, structured,
    text,
};
use crate::support::process::{alive, wait_exit};
use crate::support::{MockApi, Reply, TestEnv};

fn descendants(pid: u32) -> Vec<i32> {
    codex_mcp_bridge::codex::process::descendants(pid as i32)
}

/// Waits until the store's socket exists (the owner listens).
async fn wait_for_socket(env: &TestEnv) {
    let sock = env.root().join("store").join("bridge.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(sock.exists(), "the owner listens on the store's socket");
}

/// The owner, then `n` more processes on the same store.
async fn owner_and(env: &TestEnv, mock: &MockApi, protocols: &[Protocol]) -> (Server, Vec<Server>) {
    let owner = connect(env, mock, Protocol::Legacy).await;
    wait_for_socket(env).await;
    let mut others = vec![];
    for p in protocols {
        others.push(connect(env, mock, *p).await);
    }
    (owner, others)
}

#[tokio::test]
async fn three_processes_share_one_store_and_its_sessions() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let (s1, others) = owner_and(&env, &mock, &[Protocol::Legacy, Protocol::Modern]).await;
    let (s2, s3) = (&others[0], &others[1]);
    let work = env.work().display().to_string();

    // concurrent turns from all three clients, each in its own session
    let (a, b, c) = tokio::join!(
        s1.call(
            "codex",
            json!({"prompt": "one", "sessionId": "from-1", "workingDirectory": work})
        ),
        s2.call(
            "codex",
            json!({"prompt": "two", "sessionId": "from-2", "workingDirectory": work})
        ),
        s3.call(
            "codex",
            json!({"prompt": "three", "sessionId": "from-3", "workingDirectory": work})
        ),
    );
    for (r, id) in [(&a, "from-1"), (&b, "from-2"), (&c, "from-3")] {
        assert_ne!(r.is_error, Some(true), "{id}: {}", text(r));
        assert_eq!(structured(r)["sessionId"], id);
    }
    // every codex ran under the owner
    assert!(descendants(s2.pid).is_empty() && descendants(s3.pid).is_empty());

    // a session made through one client continues through another
    let first = s2
        .call(
            "codex",
            json!({"prompt": "remember HERON", "sessionId": "shared", "workingDirectory": work}),
        )
        .await;
    let thread = structured(&first)["threadId"].clone();
    let next = s3
        .call(
            "codex",
            json!({"prompt": "which bird?", "sessionId": "shared"}),
        )
        .await;
    assert_eq!(structured(&next)["resumed"], true, "{}", text(&next));
    assert_eq!(structured(&next)["threadId"], thread);
    assert!(
        mock.responses_requests()
            .last()
            .unwrap()
            .body_contains("HERON"),
        "codex resumed the thread the other client started"
    );
    let listed = s1.call("listSessions", json!({})).await;
    assert_eq!(structured(&listed)["sessions"].as_array().unwrap().len(), 4);

    // a client with another CODEX_HOME cannot continue it: codex would not find the thread
    let other_home = env.root().join("other_codex_home");
    std::fs::create_dir_all(&other_home).unwrap();
    let mut vars = server_env(&env, &mock);
    for (k, v) in vars.iter_mut() {
        if k == "CODEX_HOME" {
            *v = other_home.display().to_string();
        }
    }
    let s4 = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let requests = mock.responses_count();
    let refused = s4
        .call("codex", json!({"prompt": "hi", "sessionId": "shared"}))
        .await;
    assert_eq!(refused.is_error, Some(true));
    let msg = text(&refused);
    assert!(
        msg.contains("sessionId") && msg.contains("CODEX_HOME"),
        "{msg}"
    );
    assert_eq!(
        requests,
        mock.responses_count(),
        "no codex ran for the refused call"
    );
    drop((s1, others, s4));
}

#[tokio::test]
async fn a_connection_runs_codex_with_its_own_credentials_only() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let key = |name: &str| format!("sk-{name}-0123456789abcdefghijklmnop");
    let with_key = |k: &str| {
        let mut vars = server_env(&env, &mock);
        vars.retain(|(n, _)| n != "OPENAI_API_KEY");
        vars.push(("OPENAI_API_KEY".into(), k.to_owned()));
        vars
    };
    let (owner_key, guest_key) = (key("owner"), key("guest"));
    let owner = connect_with(&with_key(&owner_key), env.root(), Protocol::Legacy).await;
    wait_for_socket(&env).await;
    // the guest's operator allows only work/ (the owner's allows the whole test root)
    let mut guest_vars = with_key(&guest_key);
    guest_vars.retain(|(n, _)| n != "CODEX_BRIDGE_ROOTS");
    guest_vars.push((
        "CODEX_BRIDGE_ROOTS".into(),
        env.work().display().to_string(),
    ));
    let guest = connect_with(&guest_vars, env.root(), Protocol::Legacy).await;
    let work = env.work().display().to_string();

    // each connection has its own settings: the guest's roots bind the guest's calls
    let outside = env.root().join("home").display().to_string();
    let refused = guest
        .call("codex", json!({"prompt": "x", "workingDirectory": outside}))
        .await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(
        text(&refused).contains("workingDirectory"),
        "{}",
        text(&refused)
    );
    let allowed = owner
        .call("codex", json!({"prompt": "x", "workingDirectory": outside}))
        .await;
    assert_ne!(allowed.is_error, Some(true), "{}", text(&allowed));

    let before = mock.responses_count();
    let r = guest
        .call(
            "codex",
            json!({"prompt": "guest turn", "workingDirectory": work}),
        )
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let guest_requests = mock.responses_requests()[before..].to_vec();
    assert!(!guest_requests.is_empty());
    for req in &guest_requests {
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {guest_key}").as_str()),
            "the guest's turn authenticates with the guest's key"
        );
        let all = format!("{:?} {}", req.headers, req.raw_body);
        assert!(
            !all.contains(&owner_key),
            "the owner's key reached the guest's codex"
        );
    }

    let before = mock.responses_count();
    let r = owner
        .call("query", json!({"prompt": "owner question"}))
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    for req in &mock.responses_requests()[before..] {
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {owner_key}").as_str())
        );
        let all = format!("{:?} {}", req.headers, req.raw_body);
        assert!(
            !all.contains(&guest_key),
            "the guest's key reached the owner's codex"
        );
    }
}

/// Whether `s`'s answer to `tool` with `prompt` (the model echoes `echo`) contains `needle`,
/// in its text and in its structured response alike.
async fn answer_shows(
    s: &Server,
    mock: &MockApi,
    tool: &str,
    prompt: &str,
    echo: &str,
    needle: &str,
) -> bool {
    mock.push_for_user_text(prompt, Reply::message(echo));
    let mut args = json!({"prompt": prompt});
    if tool == "codex" {
        // the test's work directory, next to its store
        args["workingDirectory"] = json!(s.store.parent().unwrap().join("work"));
    }
    let r = s.call(tool, args).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let response = structured(&r)["response"].as_str().unwrap().to_owned();
    assert_eq!(
        text(&r).contains(needle),
        response.contains(needle),
        "{}",
        text(&r)
    );
    assert!(
        response.contains("[REDACTED]") || response.contains(needle),
        "{response}"
    );
    response.contains(needle)
}

/// A client gets the same redaction whichever process serves it: its own host's secret-named
/// variables are redacted from what the owner answers it, and from nothing else.
#[tokio::test]
async fn a_relayed_client_gets_its_own_hosts_secrets_redacted_and_no_one_elses() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    // not shaped like any known secret: only the literal value can find it
    const SERVICE: &str = "zebra-lantern-mosaic-4417";
    // an ordinary 9-byte word registered as a "key"
    const WORD: &str = "landscape";
    let with = |extra: &[(&str, &str)]| {
        let mut vars = server_env(&env, &mock);
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        vars
    };
    let secrets = [("MY_SERVICE_TOKEN", SERVICE), ("A_WORD_KEY", WORD)];
    let echo = format!("the service says {SERVICE} over the {WORD}");

    // in process: a host with these variables that owns its own store
    let own_store = env.root().join("store-alone").display().to_string();
    let mut alone_vars = with(&secrets);
    alone_vars.retain(|(k, _)| k != "CODEX_BRIDGE_STORE");
    alone_vars.push(("CODEX_BRIDGE_STORE".into(), own_store));
    let alone = connect_with(&alone_vars, env.root(), Protocol::Legacy).await;
    assert!(!answer_shows(&alone, &mock, "codex", "P-ALONE", &echo, SERVICE).await);
    assert!(!answer_shows(&alone, &mock, "query", "P-ALONE-W", &echo, WORD).await);

    // the same host relayed to an owner that has none of them
    let owner = connect_with(&with(&[]), env.root(), Protocol::Legacy).await;
    wait_for_socket(&env).await;
    let relayed = connect_with(&with(&secrets), env.root(), Protocol::Modern).await;
    let other = connect_with(&with(&[]), env.root(), Protocol::Legacy).await;
    for (tool, p) in [("codex", "P-RELAY-CODEX"), ("query", "P-RELAY-QUERY")] {
        assert!(
            !answer_shows(&relayed, &mock, tool, p, &echo, SERVICE).await,
            "{tool}: the relayed host's secret came back in clear"
        );
        assert!(!answer_shows(&relayed, &mock, tool, &format!("{p}-W"), &echo, WORD).await);
    }
    // ...and its word vanishes from no one else's answers
    assert!(answer_shows(&other, &mock, "query", "P-OTHER", &echo, WORD).await);
    assert!(answer_shows(&owner, &mock, "codex", "P-OWNER", &echo, WORD).await);

    // its progress too: a command that prints the value, reported while it runs
    mock.push_for_user_text(
        "P-PROGRESS",
        Reply::exec_command(&format!("echo {SERVICE}")),
    );
    mock.push_for_user_text(
        "P-PROGRESS",
        Reply::message("done").with_delay(Duration::from_millis(1500)),
    );
    let r = relayed
        .call(
            "codex",
            json!({"prompt": "P-PROGRESS", "model": "gpt-5.5", "workingDirectory": env.work()}),
        )
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let messages: Vec<String> = relayed
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|n| n.message.clone())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("running: ") && m.contains("echo [REDACTED]")),
        "{messages:?}"
    );
    assert!(
        !messages.iter().any(|m| m.contains(SERVICE)),
        "{messages:?}"
    );
    assert!(!format!("{r:?}").contains(SERVICE), "{}", text(&r));

    // and an error that quotes the client's own argument (the last pass over every result)
    let r = relayed
        .call("codex", json!({"prompt": "x", SERVICE: 1}))
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("unknown field `[REDACTED]`"),
        "{}",
        text(&r)
    );
    assert!(!format!("{r:?}").contains(SERVICE), "{}", text(&r));
}

#[tokio::test]
async fn when_the_owner_is_killed_mid_turn_the_others_carry_on() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let (s1, others) = owner_and(&env, &mock, &[Protocol::Legacy]).await;
    let s2 = &others[0];
    // the third client declares the tasks extension
    let s3 = &connect_with_capabilities(
        &server_env(&env, &mock),
        env.root(),
        Protocol::Modern,
        rmcp::model::ClientCapabilities::builder()
            .enable_tasks()
            .build(),
    )
    .await;
    let work = env.work().display().to_string();
    let r = s2
        .call(
            "codex",
            json!({"prompt": "first", "sessionId": "survivor", "workingDirectory": work}),
        )
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let thread = structured(&r)["threadId"].clone();

    // a turn through s2 that hangs at the model while the owner is killed
    mock.push_for_user_text("HANG-HERE", Reply::hang());
    let params = CallToolRequestParams::new("codex").with_arguments(
        json!({"prompt": "HANG-HERE", "sessionId": "survivor"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let peer = s2.client.peer().clone();
    let in_flight = tokio::spawn(async move { peer.call_tool(params).await });
    mock.wait_for_in_flight(|n| n == 1, Duration::from_secs(30))
        .await;
    // and a task through s3 that hangs too
    mock.push_for_user_text("TASK-HANG", Reply::hang());
    let task = match s3
        .client
        .call_tool_once(
            CallToolRequestParams::new("codex").with_arguments(
                json!({"prompt": "TASK-HANG", "workingDirectory": work})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        )
        .await
        .unwrap()
    {
        rmcp::model::CallToolResponse::Task(t) => t.task.task_id,
        other => panic!("expected a task: {other:?}"),
    };
    mock.wait_for_in_flight(|n| n == 2, Duration::from_secs(30))
        .await;
    let codex = descendants(s1.pid);
    assert!(
        codex.len() >= 2,
        "both codex run under the owner: {codex:?}"
    );
    let owner_pid = s1.pid;
    s1.kill();
    wait_exit(owner_pid).await;
    drop(s1);

    // the call in flight fails with a clear error, soon
    let lost = tokio::time::timeout(Duration::from_secs(20), in_flight)
        .await
        .expect("the lost call is answered")
        .unwrap();
    let err = format!("{lost:?}");
    assert!(
        err.contains("exited during this call") && err.contains("retry"),
        "{err}"
    );
    // no codex of the dead owner is left
    let deadline = Instant::now() + Duration::from_secs(5);
    while codex.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left: Vec<_> = codex.iter().filter(|p| alive(**p)).collect();
    assert!(left.is_empty(), "orphaned: {left:?}");

    // the task lived in the dead owner's memory: a clear error, not a hang
    let err = s3
        .client
        .get_task(rmcp::model::GetTaskParams::new(task))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown task"), "{err}");

    // the next calls of both remaining clients work, and the session resumes
    let again = s2
        .call(
            "codex",
            json!({"prompt": "after the crash", "sessionId": "survivor"}),
        )
        .await;
    assert_ne!(again.is_error, Some(true), "{}", text(&again));
    assert_eq!(structured(&again)["resumed"], true);
    assert_eq!(structured(&again)["threadId"], thread);
    let fresh = s3
        .call(
            "codex",
            json!({"prompt": "a new one", "workingDirectory": work}),
        )
        .await;
    assert_ne!(fresh.is_error, Some(true), "{}", text(&fresh));
    let got = s3
        .call("getSession", json!({"sessionId": "survivor"}))
        .await;
    assert_eq!(
        structured(&got)["session"]["turnCount"],
        2,
        "{}",
        text(&got)
    );
    // exactly one of them took the store over; nothing runs any more under either
    let deadline = Instant::now() + Duration::from_secs(3);
    while (!descendants(s2.pid).is_empty() || !descendants(s3.pid).is_empty())
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(descendants(s2.pid).is_empty() && descendants(s3.pid).is_empty());
}

#[tokio::test]
async fn the_socket_is_private_to_the_user_who_owns_the_store() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let _owner = connect(&env, &mock, Protocol::Legacy).await;
    wait_for_socket(&env).await;
    let sock = env.root().join("store").join("bridge.sock");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let dir_mode = std::fs::metadata(env.root().join("store"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700, "store directory mode {dir_mode:o}");
}

/// The owner drops a peer of another user even when the socket's mode would let it in (root
/// passes file modes): the owner runs as `nobody` here, the test connects as root.
#[tokio::test]
async fn a_peer_of_another_user_is_dropped() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test needs root, to run the owner as another user (CI runs as root)");
    }
    const NOBODY: u32 = 65534;
    let dir = tempfile::Builder::new()
        .prefix("codex-mcp-bridge-uid-")
        .tempdir()
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::os::unix::fs::chown(&store, Some(NOBODY), Some(NOBODY)).unwrap();
    let root_dir = dir.path().display().to_string();
    let mut owner = tokio::process::Command::new(crate::support::mcp::server_bin())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &root_dir)
        .env("CODEX_BRIDGE_ROOTS", &root_dir)
        .env("CODEX_BRIDGE_STORE", &store)
        .current_dir(dir.path())
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the owner as nobody");
    let sock = store.join("bridge.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(sock.exists(), "the owner listens");

    let hello = codex_mcp_bridge::hub::Hello {
        version: codex_mcp_bridge::hub::HELLO_VERSION,
        settings: codex_mcp_bridge::config::Settings {
            roots: Some(root_dir.clone()),
            store: Some(store.clone()),
            ..Default::default()
        },
        vars: vec![("HOME".into(), root_dir.clone())],
        secrets: vec![],
        start_dir: dir.path().to_path_buf(),
        pid: std::process::id(),
    };
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut stream = tokio::net::UnixStream::connect(&sock)
        .await
        .expect("root may open the socket file");
    let mut line = serde_json::to_string(&hello).unwrap();
    line.push('\n');
    let _ = stream.write_all(line.as_bytes()).await;
    let mut answer = String::new();
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::BufReader::new(stream).read_line(&mut answer),
    )
    .await
    .expect("the owner answers or hangs up");
    assert!(
        read.is_err() || answer.is_empty(),
        "a peer of another user was let in: {answer}"
    );
    let _ = owner.start_kill();
    let _ = owner.wait().await;
}

#[tokio::test]
async fn a_relayed_clients_roots_choose_its_default_working_directory() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let owner = connect(&env, &mock, Protocol::Legacy).await;
    wait_for_socket(&env).await;
    let dir = env.work().canonicalize().unwrap().join("project");
    std::fs::create_dir_all(&dir).unwrap();
    let roots = crate::support::mcp::ClientRoots::default();
    *roots.uris.lock().unwrap() = vec![url::Url::from_file_path(&dir).unwrap().to_string()];
    let relayed = crate::support::mcp::connect_with_roots(&env, &mock, roots.clone()).await;
    let r = relayed
        .call("codex", json!({"prompt": "where?", "sessionId": "relayed"}))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert!(roots.asked() >= 1, "the owner asked the relayed client");
    let got = owner
        .call("getSession", json!({"sessionId": "relayed"}))
        .await;
    assert_eq!(
        structured(&got)["session"]["workingDirectory"],
        dir.display().to_string()
    );
    // roots are per connection: the owner's own client declares none, so its default stays
    // the first allowed root
    let r = owner
        .call("codex", json!({"prompt": "and here?", "sessionId": "own"}))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let got = owner.call("getSession", json!({"sessionId": "own"})).await;
    assert_eq!(
        structured(&got)["session"]["workingDirectory"],
        env.root().canonicalize().unwrap().display().to_string()
    );
    drop((owner, relayed));
}

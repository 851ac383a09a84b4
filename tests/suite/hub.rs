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

    // the task ran in the dead owner: the new one reads it back from the store as
    // interrupted, not a hang and not lost
    let t = s3
        .client
        .get_task(rmcp::model::GetTaskParams::new(task))
        .await
        .expect("the task is still known")
        .task;
    let rmcp::model::TaskPayload::Failed { error } = &t.payload else {
        panic!("expected the task interrupted, got {t:?}")
    };
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("interrupted")),
        "{error:?}"
    );

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
    // exactly one of them took the store over; nothing runs any more under either (but a warm
    // session's app-server, with the app-server backend, and the start-up probes of a spare
    // the last turn started, which run for a while on a loaded machine)
    let busy = |pid: u32| {
        descendants(pid).into_iter().any(|p| {
            !crate::support::process::is_app_server(p)
                && !crate::support::process::is_start_up_probe(p)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut quiet = false;
    while Instant::now() < deadline {
        if !busy(s2.pid) && !busy(s3.pid) {
            quiet = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(quiet, "processes still run under the remaining servers");
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
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&store, Some(NOBODY), Some(NOBODY)).unwrap();
    let root_dir = dir.path().display().to_string();
    let bin = crate::support::work_dir::for_others(crate::support::mcp::server_bin());
    let mut owner = tokio::process::Command::new(bin)
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

const NOBODY: u32 = 65534;

fn need_root() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test needs root, to act as another user (CI runs as root)");
    }
}

/// A listener on `<dir>/bridge.sock` run by a forked child that is `nobody` when it listens
/// (the kernel records the listener's credentials at `listen`): a stand-in for another user's
/// process on the socket. It counts every byte any connection sends it, until stopped.
struct ForeignListener {
    pid: libc::pid_t,
    stop: std::os::fd::OwnedFd,
    report: std::fs::File,
}

impl ForeignListener {
    /// `create_dir`: nobody creates `dir` itself (mode 0700); otherwise `dir` exists and the
    /// socket is bound while still root (so the socket file is root's) and listened on as
    /// nobody.
    fn start(dir: &std::path::Path, create_dir: bool) -> Self {
        use std::os::fd::{FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        let cdir = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        let sock = dir.join("bridge.sock");
        let path = sock.as_os_str().as_bytes();
        // SAFETY: sockaddr_un is plain data.
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        assert!(path.len() < addr.sun_path.len(), "socket path too long");
        for (d, s) in addr.sun_path.iter_mut().zip(path) {
            *d = *s as libc::c_char;
        }
        let pipe = || {
            let mut fds = [0; 2];
            // SAFETY: fds has room for two descriptors.
            assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
            fds
        };
        let (ready, stop, report) = (pipe(), pipe(), pipe());
        // SAFETY: the child runs only async-signal-safe system calls on memory prepared before
        // the fork, and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            unsafe {
                let fail = |code: i32| -> ! { libc::_exit(code) };
                libc::close(ready[0]);
                libc::close(stop[1]);
                libc::close(report[0]);
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if fd < 0 {
                    fail(11)
                }
                let bind = |fd| {
                    libc::bind(
                        fd,
                        &addr as *const libc::sockaddr_un as *const libc::sockaddr,
                        std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
                    )
                };
                if !create_dir && bind(fd) != 0 {
                    fail(12)
                }
                if libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
                    fail(13)
                }
                if create_dir && (libc::mkdir(cdir.as_ptr(), 0o700) != 0 || bind(fd) != 0) {
                    fail(14)
                }
                if libc::listen(fd, 16) != 0 {
                    fail(15)
                }
                libc::write(ready[1], b"r".as_ptr().cast(), 1);
                let mut fds = [libc::pollfd {
                    fd: -1,
                    events: libc::POLLIN,
                    revents: 0,
                }; 10];
                fds[0].fd = stop[0];
                fds[1].fd = fd;
                let mut total: u64 = 0;
                let mut buf = [0u8; 65536];
                loop {
                    if libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 30_000) <= 0 {
                        break;
                    }
                    if fds[0].revents != 0 {
                        break;
                    }
                    if fds[1].revents != 0 {
                        let c = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                        if let Some(slot) = fds[2..].iter_mut().find(|p| p.fd < 0) {
                            slot.fd = c;
                        }
                    }
                    for p in fds[2..].iter_mut().filter(|p| p.fd >= 0 && p.revents != 0) {
                        let n = libc::read(p.fd, buf.as_mut_ptr().cast(), buf.len());
                        if n > 0 {
                            total += n as u64;
                        } else {
                            libc::close(p.fd);
                            p.fd = -1;
                        }
                    }
                }
                libc::write(report[1], (&total as *const u64).cast(), 8);
                libc::_exit(0)
            }
        }
        // SAFETY: the parent owns these ends.
        unsafe {
            libc::close(ready[1]);
            libc::close(stop[0]);
            libc::close(report[1]);
            let mut r = [0u8; 1];
            let n = libc::read(ready[0], r.as_mut_ptr().cast(), 1);
            libc::close(ready[0]);
            if n != 1 {
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                panic!("the foreign listener did not start (exit status {status:#x})");
            }
            ForeignListener {
                pid,
                stop: OwnedFd::from_raw_fd(stop[1]),
                report: std::fs::File::from_raw_fd(report[0]),
            }
        }
    }

    /// Stop it: the number of bytes it received.
    fn received(self) -> u64 {
        use std::io::Read;
        let ForeignListener {
            pid,
            stop,
            mut report,
        } = self;
        drop(stop);
        let mut b = [0u8; 8];
        report.read_exact(&mut b).expect("the listener reports");
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        u64::from_ne_bytes(b)
    }
}

/// Start the server for `vars` and wait for it to exit (it must refuse to start).
async fn refused_start(env: &TestEnv, vars: &[(String, String)]) -> String {
    let mut cmd = tokio::process::Command::new(crate::support::mcp::server_bin());
    cmd.env_clear()
        .envs(vars.iter().cloned())
        .current_dir(env.root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let out = crate::support::process::run_with_timeout(&mut cmd, Duration::from_secs(60)).await;
    assert!(
        !out.status.success(),
        "the server started: {}",
        crate::support::process::describe_output(&out)
    );
    assert!(out.stdout.is_empty(), "nothing on stdout");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn with_store(env: &TestEnv, mock: &MockApi, store: &std::path::Path) -> Vec<(String, String)> {
    let mut vars = server_env(env, mock);
    vars.retain(|(k, _)| k != "CODEX_BRIDGE_STORE");
    vars.push(("CODEX_BRIDGE_STORE".into(), store.display().to_string()));
    vars
}

/// Another user makes the store directory in a shared sticky directory first and listens on
/// its socket: the server refuses that store, and the listener receives nothing (no hello, so
/// no API key).
#[tokio::test]
async fn a_store_another_user_made_and_listens_in_gets_nothing() {
    need_root();
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    use std::os::unix::fs::PermissionsExt;
    let shared = env.root().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // nobody must reach the shared directory
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = shared.join("store");
    let listener = ForeignListener::start(&store, true);
    let err = refused_start(&env, &with_store(&env, &mock, &store)).await;
    let got = listener.received();
    assert_eq!(got, 0, "another user's listener received {got} bytes");
    assert!(
        err.contains(&store.display().to_string()) && err.contains("another user"),
        "{err}"
    );
}

/// The store directory is the user's own, but the process on its socket is another user's
/// (root bound it, nobody listens): the relay checks its peer before it sends anything.
#[tokio::test]
async fn a_relay_sends_nothing_to_a_listener_of_another_user() {
    need_root();
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    use std::os::unix::fs::PermissionsExt;
    let store = env.root().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
    let listener = ForeignListener::start(&store, false);
    let err = refused_start(&env, &with_store(&env, &mock, &store)).await;
    let got = listener.received();
    assert_eq!(got, 0, "another user's listener received {got} bytes");
    assert!(
        err.contains(&store.display().to_string())
            && err.contains("runs as another user")
            && err.contains("Nothing was sent"),
        "{err}"
    );
}

/// A store directory with group or other permissions, or of another user, is refused at start
/// with a message naming it, and `doctor` reports it; a new one is made private.
#[tokio::test]
async fn a_store_directory_others_can_reach_is_refused_and_doctor_says_so() {
    need_root();
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    use std::os::unix::fs::PermissionsExt;
    let store = env.root().join("store");
    std::fs::create_dir(&store).unwrap();
    let doctor = |vars: Vec<(String, String)>| {
        let mut cmd = tokio::process::Command::new(crate::support::mcp::server_bin());
        cmd.arg("doctor")
            .env_clear()
            .envs(vars)
            .current_dir(env.root())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        cmd
    };
    for (mode, owner, why) in [
        (0o750, 0, "has mode 750"),
        (0o702, 0, "has mode 702"),
        (0o700, NOBODY, "owned by another user"),
    ] {
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(mode)).unwrap();
        std::os::unix::fs::chown(&store, Some(owner), Some(owner)).unwrap();
        let vars = with_store(&env, &mock, &store);
        let err = refused_start(&env, &vars).await;
        assert!(
            err.contains(&store.display().to_string()) && err.contains(why),
            "{why}: {err}"
        );
        let out =
            crate::support::process::run_with_timeout(&mut doctor(vars), Duration::from_secs(60))
                .await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "doctor passed: {text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("FAIL") && l.contains("store"))
            .unwrap_or_else(|| panic!("doctor does not report the store: {text}"));
        assert!(line.contains(why), "{line}");
        assert!(
            std::fs::read_dir(&store).unwrap().next().is_none(),
            "nothing was written into it"
        );
    }

    // a store the server creates is private from the start
    let fresh = env.root().join("fresh").join("store");
    let _s = connect_with(
        &with_store(&env, &mock, &fresh),
        env.root(),
        Protocol::Legacy,
    )
    .await;
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700, "new store directory mode {mode:o}");
}

/// An answer as long as codex's line cap allows still reaches a client through a relay: the
/// owner carries it once in full (the text block is cut, with a marker), so the result fits
/// what a relay passes on.
#[tokio::test]
async fn an_answer_at_the_codex_line_cap_reaches_a_relayed_client() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let (_owner, others) = owner_and(&env, &mock, &[Protocol::Legacy]).await;
    let relay = &others[0];
    // codex's line is `{"type":"item.completed","item":{"id":…,"type":"agent_message","text":…}}`
    let answer = "w".repeat(8 * 1024 * 1024 - 128);
    mock.push(Reply::message(&answer));
    let r = relay
        .call(
            "codex",
            json!({"prompt": "a long one", "workingDirectory": env.work()}),
        )
        .await;
    assert_ne!(
        r.is_error,
        Some(true),
        "{}",
        &text(&r)[..text(&r).len().min(2000)]
    );
    let response = structured(&r)["response"].as_str().unwrap().to_owned();
    assert_eq!(response.len(), answer.len(), "the whole answer");
    assert!(response == answer);
    let t = text(&r);
    assert!(
        t.ends_with("the whole answer is in structuredContent.response]"),
        "{}",
        &t[t.len().saturating_sub(300)..]
    );
}

/// The pid of the process listening on the store's socket (its owner), if any.
async fn owner_pid(store: &std::path::Path) -> Option<i32> {
    let stream = tokio::net::UnixStream::connect(store.join("bridge.sock"))
        .await
        .ok()?;
    stream.peer_cred().ok()?.pid()
}

#[derive(Default, Debug)]
struct Chaos {
    answered: usize,
    documented_errors: usize,
    unanswered: Vec<String>,
    other_errors: Vec<String>,
    wrong_thread: Vec<String>,
    restarts: usize,
}

/// Failover under load: three server processes on one store, each with a client running
/// `codex` turns back to back in its own session (two speak 2025-11-25, one 2026-07-28); the
/// owner is SIGKILLed again and again, and its host restarts it a second later. Every call is
/// answered (its result, or the documented "owner exited ... retry" error), every client keeps
/// its protocol, every session its thread, and no codex process is left.
#[tokio::test]
async fn failover_under_load_answers_every_call_and_keeps_protocols_and_threads() {
    failover_under_load(false).await;
}

/// The same with the owner daemon (the default `--owner daemon`): what is killed is the
/// daemon, none of the hosts' servers, which start the next one; once the hosts leave, the
/// last daemon exits too.
#[tokio::test]
async fn failover_of_the_owner_daemon_under_load_answers_every_call() {
    failover_under_load(true).await;
}

async fn failover_under_load(daemon: bool) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    const KILLS: usize = 5;
    const CALL_LIMIT: Duration = Duration::from_secs(60);
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut vars = server_env(&env, &mock);
    if daemon {
        vars.retain(|(k, _)| k != "CODEX_BRIDGE_OWNER");
    }
    let store = env.root().join("store");
    let stats = Arc::new(Mutex::new(Chaos::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let killed: Arc<Mutex<Vec<u32>>> = Arc::default();
    let codex_seen: Arc<Mutex<Vec<i32>>> = Arc::default();

    let protocols = [Protocol::Legacy, Protocol::Legacy, Protocol::Modern];
    let mut started = vec![connect_with(&vars, env.root(), protocols[0]).await];
    wait_for_socket(&env).await;
    for p in &protocols[1..] {
        started.push(connect_with(&vars, env.root(), *p).await);
    }
    let mut tasks = vec![];
    for (h, (mut server, protocol)) in started.into_iter().zip(protocols).enumerate() {
        let (vars, root, work) = (
            vars.clone(),
            env.root().to_path_buf(),
            env.work().display().to_string(),
        );
        let (stats, stop, killed, codex_seen) = (
            stats.clone(),
            stop.clone(),
            killed.clone(),
            codex_seen.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let session = format!("chaos-{h}");
            let mut thread: Option<serde_json::Value> = None;
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                codex_seen.lock().unwrap().extend(descendants(server.pid));
                let params = CallToolRequestParams::new("codex").with_arguments(
                    json!({"prompt": format!("turn {n} of {h}"), "sessionId": session,
                           "workingDirectory": work})
                    .as_object()
                    .cloned()
                    .unwrap(),
                );
                let call = server.client.peer().call_tool(params);
                let outcome = tokio::time::timeout(CALL_LIMIT, call).await;
                let mine_killed = killed.lock().unwrap().contains(&server.pid);
                match outcome {
                    Err(_) => stats
                        .lock()
                        .unwrap()
                        .unanswered
                        .push(format!("host {h} call {n}")),
                    Ok(Ok(r)) if r.is_error == Some(true) => stats
                        .lock()
                        .unwrap()
                        .other_errors
                        .push(format!("host {h} call {n}: {}", text(&r))),
                    Ok(Ok(r)) => {
                        let got = structured(&r)["threadId"].clone();
                        let mut s = stats.lock().unwrap();
                        s.answered += 1;
                        match &thread {
                            None => thread = Some(got),
                            Some(t) if *t != got => s
                                .wrong_thread
                                .push(format!("host {h} call {n}: {got} after {t}")),
                            Some(_) => {}
                        }
                    }
                    Ok(Err(_)) if mine_killed => {
                        // this host's own server was killed: its host restarts it
                        stats.lock().unwrap().restarts += 1;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        let mut tries = 0;
                        server = loop {
                            tries += 1;
                            match crate::support::mcp::try_connect_with_capabilities(
                                &vars,
                                &root,
                                protocol,
                                Default::default(),
                            )
                            .await
                            {
                                Ok(s) => break s,
                                Err(e) if tries < 3 => {
                                    stats.lock().unwrap().documented_errors += 1;
                                    eprintln!("host {h}: restart failed ({e}); again");
                                }
                                Err(e) => panic!("host {h} cannot restart its server: {e}"),
                            }
                        };
                    }
                    Ok(Err(e)) => {
                        let msg = e.to_string();
                        let mut s = stats.lock().unwrap();
                        if msg.contains("exited during this call") && msg.contains("retry") {
                            s.documented_errors += 1;
                        } else {
                            s.other_errors
                                .push(format!("host {h} ({protocol:?}) call {n}: {msg}"));
                        }
                    }
                }
            }
            server
        }));
    }

    // the owner is killed again and again, while turns run
    let started = Instant::now();
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        let pid = loop {
            if let Some(pid) = owner_pid(&store).await {
                break pid;
            }
            assert!(Instant::now() < deadline, "no owner on the store");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        codex_seen.lock().unwrap().extend(descendants(pid as u32));
        killed.lock().unwrap().push(pid as u32);
        // SAFETY: signals only.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        wait_exit(pid as u32).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::SeqCst);
    let mut servers = vec![];
    for t in tasks {
        servers.push(
            tokio::time::timeout(CALL_LIMIT * 2, t)
                .await
                .expect("every host ends")
                .unwrap(),
        );
    }
    {
        let s = stats.lock().unwrap();
        eprintln!("chaos: {s:?} in {:?}", started.elapsed());
        assert!(s.unanswered.is_empty(), "unanswered: {:?}", s.unanswered);
        assert!(s.other_errors.is_empty(), "errors: {:?}", s.other_errors);
        assert!(s.wrong_thread.is_empty(), "threads: {:?}", s.wrong_thread);
        assert!(
            s.answered >= 10,
            "too few calls answered to mean anything: {s:?}"
        );
    }
    // every client still speaks what it negotiated: one more call each, after the last takeover
    for server in &servers {
        let r = server.call("listSessions", json!({})).await;
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
    }
    let last_owner = owner_pid(&store).await;
    if let Some(o) = last_owner {
        codex_seen.lock().unwrap().extend(descendants(o as u32));
    }
    let pids: Vec<u32> = servers.iter().map(|s| s.pid).collect();
    drop(servers);
    for pid in pids {
        wait_exit(pid).await;
    }
    if daemon {
        // nobody is connected and nothing runs: the last daemon goes too
        let o = last_owner.expect("a daemon owned the store");
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(o) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!alive(o), "the owner daemon stayed");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let seen = codex_seen.lock().unwrap().clone();
    while seen.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: Vec<_> = seen.iter().filter(|p| alive(**p)).collect();
    assert!(left.is_empty(), "codex processes left: {left:?}");
}

/// A store directory deeper than a socket address can name is still shared (the socket is
/// reached through `/proc/self/fd`), with the same checks.
#[tokio::test]
async fn a_store_deeper_than_a_socket_address_is_still_shared() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let store = env
        .root()
        .join("d".repeat(60))
        .join("e".repeat(60))
        .join("store");
    let vars = with_store(&env, &mock, &store);
    let owner = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let sock = store.join("bridge.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        sock.as_os_str().len() > 108 && sock.exists(),
        "{}",
        sock.display()
    );
    // the store is held: this one can only be a relay
    let relay = connect_with(&vars, env.root(), Protocol::Legacy).await;
    let r = relay.call("ping", json!({})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    drop(owner);
}

/// The socket is never reached through a symbolic link: a `bridge.sock` that is a link (here
/// to a listener elsewhere) is refused, and nothing reaches what it points to.
#[tokio::test]
async fn a_symlinked_socket_is_not_followed() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    use std::os::unix::fs::PermissionsExt;
    let store = env.root().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
    let elsewhere = env.root().join("elsewhere.sock");
    let listener = tokio::net::UnixListener::bind(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, store.join("bridge.sock")).unwrap();
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = received.clone();
    let accept = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        while let Ok((mut s, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    counter.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
    });
    let err = refused_start(&env, &with_store(&env, &mock, &store)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    accept.abort();
    assert_eq!(received.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(
        err.contains(&store.display().to_string()) && err.contains("not a socket"),
        "{err}"
    );
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

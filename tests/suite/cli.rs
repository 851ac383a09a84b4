//! The command line, driven through the built binary: help, `doctor`, `sessions`, the config
//! file's precedence, the README's host snippets and `server.json`.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use clap::{Args, CommandFactory};
use codex_mcp_bridge::config::{
    Config, NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION, Settings,
};
use codex_mcp_bridge::security::ids::SessionId;
use codex_mcp_bridge::store::{SessionRecord, Store, TurnStatus};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::support::mcp::{Protocol, connect_with, server_env, structured, text};
use crate::support::{MockApi, TestEnv, codex_bin, describe_output, repo_root, run_with_timeout};

const BIN: &str = env!("CARGO_BIN_EXE_codex-mcp-bridge");

/// The binary in `env`'s work directory with a clean environment: PATH, HOME, CODEX_HOME, an
/// API key, and XDG dirs inside the test root (so no real config file or store is read).
fn bridge(env: &TestEnv) -> Command {
    let mut cmd = env.command(BIN);
    cmd.env("XDG_CONFIG_HOME", env.root().join("config"))
        .env("XDG_DATA_HOME", env.root().join("data"));
    cmd
}

async fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null());
    run_with_timeout(cmd, Duration::from_secs(60)).await
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every `(--flag, ENV)` of the operator settings, from their clap definition.
fn settings_flags_and_envs() -> Vec<(String, String)> {
    Settings::augment_args(clap::Command::new("x"))
        .get_arguments()
        .map(|a| {
            (
                format!("--{}", a.get_long().expect("a flag")),
                a.get_env()
                    .and_then(|e| e.to_str())
                    .expect("an environment variable")
                    .to_owned(),
            )
        })
        .collect()
}

/// Every environment variable any part of the command line reads.
fn every_cli_env() -> Vec<String> {
    fn walk(cmd: &clap::Command, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            if let Some(e) = a.get_env().and_then(|e| e.to_str()) {
                out.push(e.to_owned());
            }
        }
        for s in cmd.get_subcommands() {
            walk(s, out);
        }
    }
    let mut out = vec![];
    walk(&codex_mcp_bridge::cli::Cli::command(), &mut out);
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn help_lists_every_setting_with_its_flag_and_environment_variable() {
    let env = TestEnv::new();
    let expected = settings_flags_and_envs();
    assert!(expected.len() >= 14, "{expected:?}");
    for args in [&["--help"][..], &["serve", "--help"], &["doctor", "--help"]] {
        let out = run(bridge(&env).args(args)).await;
        assert!(out.status.success(), "{args:?}: {}", describe_output(&out));
        let help = stdout(&out);
        for (flag, var) in &expected {
            assert!(
                help.contains(&format!("{flag} ")),
                "{args:?} lacks {flag}:\n{help}"
            );
            assert!(
                help.contains(&format!("[env: {var}]")),
                "{args:?} lacks {var}:\n{help}"
            );
        }
        for global in [
            "--config",
            "CODEX_BRIDGE_CONFIG",
            "--log-format",
            "CODEX_BRIDGE_LOG_FORMAT",
        ] {
            assert!(help.contains(global), "{args:?} lacks {global}");
        }
    }
    // environment values never show in help (a -c override may carry a secret)
    let out = run(bridge(&env).arg("--help").env(
        "CODEX_BRIDGE_CODEX_CONFIG",
        "model_providers.x.token=\"hidden-value\"",
    ))
    .await;
    assert!(!stdout(&out).contains("hidden-value"), "{}", stdout(&out));

    let out = run(bridge(&env).arg("--version")).await;
    assert!(out.status.success());
    assert_eq!(
        stdout(&out).trim(),
        format!("codex-mcp-bridge {}", env!("CARGO_PKG_VERSION"))
    );

    // a setting before a subcommand would be silently ignored: it is refused instead
    let out = run(bridge(&env).args(["--store", "/x", "sessions", "list"])).await;
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    assert!(
        stderr(&out).contains("would be ignored"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn doctor_passes_with_the_pinned_codex_and_fails_with_a_fix_when_codex_bin_points_nowhere() {
    let codex = codex_bin();
    let env = TestEnv::new();
    let store = env.root().join("store");
    let out = run(bridge(&env)
        .arg("doctor")
        .env("CODEX_BIN", &codex)
        .env("CODEX_BRIDGE_STORE", &store)
        .env("CODEX_BRIDGE_ROOTS", env.work()))
    .await;
    let text = stdout(&out);
    assert!(out.status.success(), "{}", describe_output(&out));
    let version = crate::support::codex_version();
    for needle in [
        version.as_str(),
        "credentials",
        "OPENAI_API_KEY is set",
        "sandbox",
        "settings",
        "store",
        "nested MCP",
        "config file",
    ] {
        assert!(text.contains(needle), "lacks {needle}:\n{text}");
    }
    assert!(!text.contains("FAIL"), "{text}");
    assert!(
        !text.contains(crate::support::TEST_API_KEY),
        "never a secret:\n{text}"
    );
    assert!(!store.exists(), "doctor does not create the store");

    // an existing store shows its schema version; one held by a running server is fine
    drop(Store::open(&store).unwrap());
    wait_unlocked(&store);
    let out = run(bridge(&env)
        .arg("doctor")
        .env("CODEX_BIN", &codex)
        .env("CODEX_BRIDGE_STORE", &store)
        .env("CODEX_BRIDGE_ROOTS", env.work()))
    .await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(stdout(&out).contains("schema version"), "{}", stdout(&out));
    let held = Store::open(&store).unwrap();
    let out = run(bridge(&env)
        .arg("doctor")
        .env("CODEX_BIN", &codex)
        .env("CODEX_BRIDGE_STORE", &store)
        .env("CODEX_BRIDGE_ROOTS", env.work()))
    .await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(
        stdout(&out).contains("in use by a running codex-mcp-bridge server"),
        "{}",
        stdout(&out)
    );
    drop(held);
    wait_unlocked(&store);

    // codex missing: a blocking failure that names the setting and says how to fix it
    let nowhere = env.root().join("no/such/codex");
    let out = run(bridge(&env)
        .arg("doctor")
        .env("CODEX_BIN", &nowhere)
        .env("CODEX_BRIDGE_STORE", &store)
        .env("CODEX_BRIDGE_ROOTS", env.work()))
    .await;
    assert!(!out.status.success(), "{}", describe_output(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("FAIL") && l.contains("codex binary"))
        .unwrap_or_else(|| panic!("no failing codex line:\n{text}"));
    assert!(
        line.contains(&nowhere.display().to_string())
            && line.contains("CODEX_BIN")
            && line.contains("fix:")
            && line.contains(&format!("@openai/codex@{NEWEST_TESTED_CODEX_VERSION}")),
        "{line}"
    );

    // invalid settings block use too, naming the setting
    let out = run(bridge(&env)
        .arg("doctor")
        .env("CODEX_BIN", &codex)
        .env("CODEX_BRIDGE_STORE", &store)
        .env("CODEX_BRIDGE_ROOTS", env.root().join("missing-root")))
    .await;
    assert!(!out.status.success(), "{}", describe_output(&out));
    assert!(
        stdout(&out)
            .lines()
            .any(|l| l.starts_with("FAIL") && l.contains("CODEX_BRIDGE_ROOTS")),
        "{}",
        stdout(&out)
    );
}

/// A stand-in codex in `dir` whose `--version` answers `codex-cli <version>`.
pub(super) fn fake_codex_answering(dir: &Path, version: &str) -> std::path::PathBuf {
    let path = dir.join(format!("codex-{version}"));
    std::fs::write(&path, format!("#!/bin/sh\necho 'codex-cli {version}'\n")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn doctor_classifies_an_older_an_in_range_and_a_newer_codex() {
    let env = TestEnv::new();
    let store = env.root().join("store");
    let cases = [
        (
            "0.144.9",
            "FAIL",
            "older than the oldest supported, 0.145.0",
        ),
        (
            "0.145.0",
            "ok",
            "supported: this bridge is tested with codex 0.145.0 to 0.171.0",
        ),
        ("0.160.2", "ok", "supported"),
        ("0.171.0", "ok", "supported"),
        ("0.172.0", "warn", "newer than the newest tested, 0.171.0"),
        (
            "1.0.0-alpha.1",
            "warn",
            "newer than the newest tested, 0.171.0",
        ),
    ];
    assert_eq!(
        (OLDEST_SUPPORTED_CODEX_VERSION, NEWEST_TESTED_CODEX_VERSION),
        ("0.145.0", "0.171.0"),
        "the cases above name the range's ends"
    );
    for (version, verdict, needle) in cases {
        let fake = fake_codex_answering(env.root(), version);
        let out = run(bridge(&env)
            .arg("doctor")
            .env("CODEX_BIN", &fake)
            .env("CODEX_BRIDGE_STORE", &store)
            .env("CODEX_BRIDGE_ROOTS", env.work()))
        .await;
        let text = stdout(&out);
        let line = text
            .lines()
            .find(|l| l.contains("codex version"))
            .unwrap_or_else(|| panic!("no codex version line:\n{text}"));
        assert!(
            line.starts_with(&format!("{verdict:<5} ")) && line.contains(needle),
            "{version}: {line}"
        );
        assert!(line.contains(&format!("codex-cli {version}")), "{line}");
        // only an older codex blocks use
        assert_eq!(
            out.status.success(),
            verdict != "FAIL",
            "{}",
            describe_output(&out)
        );
        if verdict != "ok" {
            assert!(
                line.contains(&format!(
                    "npm install -g @openai/codex@{NEWEST_TESTED_CODEX_VERSION}"
                )),
                "{line}"
            );
        }
    }
}

/// The suite records the behaviour of the supported range's two ends, each pinned for npm.
#[test]
fn the_recorded_codex_versions_are_the_supported_range_and_each_is_pinned() {
    use crate::support::Codex;
    assert_eq!(
        Codex::ALL.first().unwrap().number(),
        OLDEST_SUPPORTED_CODEX_VERSION
    );
    assert_eq!(
        Codex::ALL.last().unwrap().number(),
        NEWEST_TESTED_CODEX_VERSION
    );
    for c in Codex::ALL {
        let dir = repo_root().join("scripts/codex-cli").join(c.number());
        let lock = std::fs::read_to_string(dir.join("package-lock.json")).unwrap();
        let lock: Value = serde_json::from_str(&lock).unwrap();
        let pkgs = &lock["packages"];
        assert_eq!(pkgs[""]["dependencies"]["@openai/codex"], c.number());
        assert_eq!(pkgs["node_modules/@openai/codex"]["version"], c.number());
        let platform = &pkgs["node_modules/@openai/codex-linux-x64"];
        assert_eq!(platform["version"], format!("{}-linux-x64", c.number()));
        for p in [&pkgs["node_modules/@openai/codex"], platform] {
            assert!(
                p["integrity"]
                    .as_str()
                    .is_some_and(|i| i.starts_with("sha512-")),
                "{}: {p}",
                c.number()
            );
        }
    }
}

/// Wait until no handle of this process holds the store's lock any more: sled releases it
/// when its last background job ends, which can be a moment after the `Store` is dropped (a
/// child started earlier would find the store "in use").
fn wait_unlocked(dir: &Path) {
    let file = std::fs::File::open(dir.join("db")).expect("the store's lock file");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match file.try_lock() {
            Ok(()) => {
                file.unlock().unwrap();
                return;
            }
            Err(e) if std::time::Instant::now() > deadline => {
                panic!("the store at {} stays locked: {e}", dir.display())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn id(s: &str) -> SessionId {
    SessionId::parse("sessionId", s).unwrap()
}

/// A store with three sessions (`old`, `mid`, `new` by last use); the lock is released on
/// return.
fn seeded_store(dir: &Path, work: &Path) -> Vec<SessionRecord> {
    let store = Store::open(dir).unwrap();
    let mut recs = vec![];
    for (i, name) in ["old", "mid", "new"].iter().enumerate() {
        let mut r = SessionRecord::new(
            id(name),
            work.to_path_buf(),
            1_700_000_000_000 + i as u64 * 1000,
        );
        r.thread_id = Some(
            codex_mcp_bridge::security::ids::ThreadId::parse(&format!(
                "550e8400-e29b-41d4-a716-44665544000{i}"
            ))
            .unwrap(),
        );
        r.model = Some("gpt-test".into());
        r.turn_count = i as u64 + 1;
        r.usage.input_tokens = 100 * (i as u64 + 1);
        r.last_status = Some(TurnStatus::Completed);
        store.put(&r).unwrap();
        recs.push(r);
    }
    store.flush_blocking().unwrap();
    drop(store);
    wait_unlocked(dir);
    recs
}

/// With no server running, `sessions close` does not forget a session with a worktree of its
/// own: only a running server removes a worktree (under its git rules), and a record forgotten
/// without it would leave the worktree and its branch behind for good.
#[tokio::test]
async fn sessions_close_keeps_a_worktree_session_when_no_server_runs() {
    let env = TestEnv::new();
    let dir = env.root().join("store");
    {
        let store = Store::open(&dir).unwrap();
        let mut r = SessionRecord::new(id("wt"), env.work().to_path_buf(), 1_700_000_000_000);
        r.worktree = Some(codex_mcp_bridge::store::WorktreeRecord {
            path: env.root().join("wts").join("work-wt"),
            branch: "codex-bridge/wt".into(),
            base_commit: "0123abcd".into(),
            origin: env.work().to_path_buf(),
        });
        store.put(&r).unwrap();
        store.flush_blocking().unwrap();
    }
    wait_unlocked(&dir);
    let out = run(bridge(&env)
        .args(["sessions", "close", "wt"])
        .env("CODEX_BRIDGE_STORE", &dir))
    .await;
    assert!(!out.status.success(), "{}", describe_output(&out));
    assert!(
        stderr(&out).contains("has a worktree of its own"),
        "{}",
        stderr(&out)
    );
    let store = Store::open(&dir).unwrap();
    assert!(store.get(&id("wt")).unwrap().is_some());
}

#[tokio::test]
async fn sessions_list_show_export_and_close_work_on_the_store() {
    let env = TestEnv::new();
    let dir = env.root().join("store");
    let recs = seeded_store(&dir, env.work());
    let sessions = |args: &[&str]| {
        let mut c = bridge(&env);
        c.arg("sessions").args(args).env("CODEX_BRIDGE_STORE", &dir);
        c
    };

    // list, JSON: every session, newest first, as stored
    let out = run(&mut sessions(&["list", "--json"])).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<SessionRecord> = serde_json::from_value(v["sessions"].clone()).unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|r| r.session_id.as_str())
            .collect::<Vec<_>>(),
        ["new", "mid", "old"]
    );
    assert_eq!(listed[0], recs[2]);
    assert_eq!(v["store"], dir.display().to_string());

    // list, human: a table with a header, one row per session, newest first
    let out = run(&mut sessions(&["list"])).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("SESSION") && lines[0].contains("THREAD"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("new ") && lines[3].starts_with("old "),
        "{text}"
    );
    assert!(
        lines[1].contains("550e8400-e29b-41d4-a716-446655440002"),
        "{text}"
    );
    assert!(lines[1].contains("2023-11-14 22:13:22"), "{text}");
    assert!(text.contains("3 session(s)"), "{text}");

    // show, human and JSON
    let out = run(&mut sessions(&["show", "mid"])).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let text = stdout(&out);
    for needle in [
        "mid",
        "gpt-test",
        "completed",
        "550e8400-e29b-41d4-a716-446655440001",
        "input 200",
    ] {
        assert!(text.contains(needle), "lacks {needle}:\n{text}");
    }
    let out = run(&mut sessions(&["show", "mid", "--json"])).await;
    let shown: SessionRecord = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown, recs[1]);

    // export: the full record
    let out = run(&mut sessions(&["export", "old"])).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let exported: SessionRecord = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(exported, recs[0]);

    // unknown and invalid ids fail clearly
    let out = run(&mut sessions(&["show", "nope"])).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no session `nope`"),
        "{}",
        stderr(&out)
    );
    let out = run(&mut sessions(&["export", "a.b"])).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("`ID`"), "{}", stderr(&out));

    // close (JSON, then human): the record is gone from the store
    let out = run(&mut sessions(&["close", "mid", "--json"])).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["closed"], true);
    assert_eq!(v["sessionId"], "mid");
    let out = run(&mut sessions(&["close", "old"])).await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(
        stdout(&out).contains("Session old closed."),
        "{}",
        stdout(&out)
    );
    let out = run(&mut sessions(&["close", "old"])).await;
    assert!(
        !out.status.success(),
        "closing twice says there is nothing to close"
    );
    {
        let store = Store::open(&dir).unwrap();
        assert!(store.get(&id("mid")).unwrap().is_none());
        assert!(store.get(&id("old")).unwrap().is_none());
        assert_eq!(
            store.list(None, 10).unwrap().sessions,
            vec![recs[2].clone()]
        );
    }

    // a store that does not exist is not created
    let absent = env.root().join("absent");
    let out = run(bridge(&env)
        .args(["sessions", "list", "--store"])
        .arg(&absent))
    .await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(stdout(&out).contains("no store"), "{}", stdout(&out));
    assert!(!absent.exists());
}

/// (success, stdout, stderr) of each `sessions` command.
async fn sessions_views(
    env: &TestEnv,
    store: &Path,
    views: &[&[&str]],
) -> Vec<(bool, String, String)> {
    let mut all = vec![];
    for args in views {
        let out = run(bridge(env)
            .arg("sessions")
            .args(*args)
            .env("CODEX_BRIDGE_STORE", store))
        .await;
        all.push((out.status.success(), stdout(&out), stderr(&out)));
    }
    all
}

#[tokio::test]
async fn sessions_go_through_a_running_server_and_print_what_they_print_without_one() {
    let env = TestEnv::new();
    let mock = MockApi::start().await;
    let mut vars = server_env(&env, &mock);
    for (k, v) in vars.iter_mut() {
        if k == "CODEX_BRIDGE_CODEX_CONFIG" {
            v.push_str("\nmodel=\"operator-model-x\"");
        }
    }
    let store = env.root().join("store");
    let server = connect_with(&vars, env.root(), Protocol::Legacy).await;
    for id in ["keep", "drop", "other"] {
        let r = server
            .call(
                "codex",
                json!({"prompt": format!("hi {id}"), "sessionId": id, "workingDirectory": env.work()}),
            )
            .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
    }

    // the server holds the store: `close` goes through it, and the server itself forgets it
    let out = run(bridge(&env)
        .args(["sessions", "close", "drop"])
        .env("CODEX_BRIDGE_STORE", &store))
    .await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert_eq!(stdout(&out), "Session drop closed.\n");
    let got = server
        .call("getSession", json!({"sessionId": "drop"}))
        .await;
    assert_eq!(structured(&got)["found"], false, "{}", text(&got));
    let got = server
        .call("getSession", json!({"sessionId": "keep"}))
        .await;
    assert_eq!(structured(&got)["found"], true, "{}", text(&got));

    let views: [&[&str]; 7] = [
        &["list"],
        &["list", "--json"],
        &["show", "keep"],
        &["show", "keep", "--json"],
        &["export", "other"],
        &["show", "drop"],
        &["close", "drop"],
    ];
    let through_owner = sessions_views(&env, &store, &views).await;
    let expect_ok = [true, true, true, true, true, false, false];
    for ((ok, out, err), want) in through_owner.iter().zip(expect_ok) {
        assert_eq!(*ok, want, "{out}{err}");
    }
    let (_, list, _) = &through_owner[0];
    assert!(
        list.lines().nth(1).is_some_and(|l| l.starts_with("other "))
            && list.contains("2 session(s)"),
        "{list}"
    );
    for (_, text, _) in &through_owner[..4] {
        assert!(
            text.contains("operator-model-x"),
            "the effective model: {text}"
        );
    }
    assert!(
        through_owner[5]
            .2
            .contains("no session `drop` in the store"),
        "{}",
        through_owner[5].2
    );

    // no server: the same commands open the store directly, and print the same
    let pid = server.pid;
    server.client.cancel().await.unwrap();
    crate::support::process::wait_exit(pid).await;
    wait_unlocked(&store);
    let direct = sessions_views(&env, &store, &views).await;
    assert_eq!(through_owner, direct);
    let out = run(bridge(&env)
        .args(["sessions", "close", "other"])
        .env("CODEX_BRIDGE_STORE", &store))
    .await;
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(
        Store::open(&store)
            .unwrap()
            .get(&id("other"))
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn sessions_say_clearly_when_a_process_holds_the_store_without_answering() {
    let env = TestEnv::new();
    let dir = env.root().join("store");
    seeded_store(&dir, env.work());
    let held = Store::open(&dir).unwrap();
    for args in [&["list"][..], &["close", "new"]] {
        let out = run(bridge(&env)
            .arg("sessions")
            .args(args)
            .env("CODEX_BRIDGE_STORE", &dir))
        .await;
        assert!(!out.status.success(), "{args:?}: {}", describe_output(&out));
        assert!(out.stdout.is_empty(), "{args:?}: {}", describe_output(&out));
        let err = stderr(&out);
        assert!(
            err.contains("is locked by a process that does not answer on its socket")
                && err.contains(&dir.display().to_string()),
            "{args:?}: {err}"
        );
    }
    assert!(
        held.get(&id("new")).unwrap().is_some(),
        "nothing was closed"
    );
}

/// flag > environment > config file > default, observed in `doctor`'s effective settings.
#[tokio::test]
async fn the_config_file_sits_between_the_environment_and_the_defaults() {
    let env = TestEnv::new();
    let file = env.root().join("bridge.toml");
    std::fs::write(
        &file,
        format!(
            "roots = \"{}\"\nstore = \"{}\"\nmax_concurrent = 3\nheartbeat_ms = 700\ncodex_bin = \"{}\"\n",
            env.work().display(),
            env.root().join("store").display(),
            env.root().join("no-codex").display(),
        ),
    )
    .unwrap();
    let doctor = |extra_env: &[(&str, &str)], extra_args: &[&str]| {
        let mut c = bridge(&env);
        c.arg("doctor")
            .args(extra_args)
            .env("CODEX_BRIDGE_CONFIG", &file);
        for (k, v) in extra_env {
            c.env(k, v);
        }
        c
    };
    let settings_line = |o: &Output| {
        stdout(o)
            .lines()
            .find(|l| l.contains("settings"))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{}", describe_output(o)))
    };

    // file over default (and the codex_bin from the file is the one checked)
    let out = run(&mut doctor(&[], &[])).await;
    let line = settings_line(&out);
    assert!(
        line.contains("max_concurrent=3 ") && line.contains("heartbeat_ms=700 "),
        "{line}"
    );
    assert!(
        line.contains("default_timeout_ms=600000 "),
        "default: {line}"
    );
    assert!(
        stdout(&out).contains(&format!("{} (read)", file.display())),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("no-codex"), "{}", stdout(&out));
    // environment over file
    let out = run(&mut doctor(&[("CODEX_BRIDGE_MAX_CONCURRENT", "5")], &[])).await;
    let line = settings_line(&out);
    assert!(
        line.contains("max_concurrent=5 ") && line.contains("heartbeat_ms=700 "),
        "{line}"
    );
    // flag over environment
    let out = run(&mut doctor(
        &[("CODEX_BRIDGE_MAX_CONCURRENT", "5")],
        &["--max-concurrent", "7"],
    ))
    .await;
    let line = settings_line(&out);
    assert!(line.contains("max_concurrent=7 "), "{line}");

    // an unknown key stops every command, naming the key and the file
    std::fs::write(&file, "max_concurent = 3\n").unwrap();
    for args in [&["serve"][..], &["doctor"], &["sessions", "list"], &[]] {
        let out = run(bridge(&env).args(args).env("CODEX_BRIDGE_CONFIG", &file)).await;
        assert!(!out.status.success(), "{args:?}: {}", describe_output(&out));
        let err = stderr(&out);
        assert!(
            err.contains("`max_concurent`") && err.contains(&file.display().to_string()),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // a file named explicitly must exist
    let out = run(bridge(&env)
        .arg("doctor")
        .env("CODEX_BRIDGE_CONFIG", env.root().join("missing.toml")))
    .await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("missing.toml"), "{}", stderr(&out));

    // the default location is read when present
    let default = env.root().join("config/codex-mcp-bridge/config.toml");
    std::fs::create_dir_all(default.parent().unwrap()).unwrap();
    std::fs::write(
        &default,
        format!(
            "roots = \"{}\"\nstore = \"{}\"\nmax_concurrent = 2\n",
            env.work().display(),
            env.root().join("store").display()
        ),
    )
    .unwrap();
    let out = run(bridge(&env).arg("doctor")).await;
    assert!(
        settings_line(&out).contains("max_concurrent=2 "),
        "{}",
        describe_output(&out)
    );
}

/// The text of the `## {title}` section of `file` (a path from the repository's root:
/// `README.md`, or a reference page under `docs/`).
fn doc_section(file: &str, title: &str) -> String {
    let doc = std::fs::read_to_string(repo_root().join(file)).unwrap();
    let start = doc
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("{file} has no `## {title}`"));
    let rest = &doc[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    rest[..end].to_owned()
}

/// The fenced code blocks of `text` in `lang`.
fn code_blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = vec![];
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_start() == format!("```{lang}") => current = Some(String::new()),
            Some(_) if line.trim_start() == "```" => out.push(current.take().unwrap()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    out
}

#[test]
fn the_host_snippets_in_the_readme_are_valid() {
    let bin = Path::new(BIN)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let section = doc_section("README.md", "Wire it into a host");

    let jsons = code_blocks(&section, "json");
    assert!(!jsons.is_empty(), "no json snippet");
    for block in &jsons {
        let v: Value = serde_json::from_str(block).unwrap_or_else(|e| panic!("{e}:\n{block}"));
        // Cursor's `mcpServers`, or VS Code's own format: `servers`, each with a `type`
        let (servers, vscode) = match (v["mcpServers"].as_object(), v["servers"].as_object()) {
            (Some(s), None) => (s, false),
            (None, Some(s)) => (s, true),
            _ => panic!("mcpServers or servers:\n{block}"),
        };
        for (name, s) in servers {
            // the one-line form: `npx -y codex-mcp-bridge` (README: Install)
            assert_eq!(s["command"], "npx", "{name}");
            assert_eq!(s["args"], json!(["-y", bin.as_str()]), "{name}");
            if vscode {
                assert_eq!(s["type"], "stdio", "{name}");
            }
        }
    }

    let tomls = code_blocks(&section, "toml");
    assert!(!tomls.is_empty(), "no toml snippet");
    for block in &tomls {
        let t: toml::Table = toml::from_str(block).unwrap_or_else(|e| panic!("{e}:\n{block}"));
        let servers = t["mcp_servers"].as_table().expect("mcp_servers");
        for (name, s) in servers {
            assert_eq!(s["command"].as_str(), Some("npx"), "{name}");
            assert_eq!(
                s["args"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|v| v.as_str()).collect()),
                Some(vec!["-y", bin.as_str()]),
                "{name}"
            );
            // what Codex as the host needs (suite::codex_host runs it)
            assert_eq!(
                s["default_tools_approval_mode"].as_str(),
                Some("approve"),
                "{name}"
            );
            assert!(
                s["env_vars"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|e| e.as_str() == Some("OPENAI_API_KEY"))),
                "{name}"
            );
            assert_eq!(
                s["env"]["CODEX_BRIDGE_NESTED_MCP"].as_str(),
                Some("disable"),
                "{name}"
            );
        }
    }

    let claude: Vec<&str> = section
        .lines()
        .filter(|l| l.trim_start().starts_with("claude mcp add"))
        .collect();
    assert!(!claude.is_empty(), "no `claude mcp add` line");
    for line in claude {
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = words
            .iter()
            .position(|w| *w == "--")
            .unwrap_or_else(|| panic!("no `--` in {line}"));
        assert_eq!(
            words.get(after + 1..after + 4),
            Some(&["npx", "-y", bin.as_str()][..]),
            "{line}"
        );
    }
}

#[test]
fn the_config_file_example_in_the_readme_is_valid() {
    let section = doc_section("docs/settings.md", "Operator settings");
    let blocks = code_blocks(&section, "toml");
    assert_eq!(blocks.len(), 1, "one config file example");
    let file =
        codex_mcp_bridge::config::parse_config_file(Path::new("docs/settings.md"), &blocks[0])
            .unwrap_or_else(|e| panic!("{e}:\n{}", blocks[0]));
    assert!(file.settings.roots.is_some() && file.log_format.is_some());
    for o in &file.settings.codex_config {
        codex_mcp_bridge::security::overrides::parse_operator_override(o)
            .unwrap_or_else(|e| panic!("{o}: {e}"));
    }
    // every key the file takes is listed in docs/settings.md
    for key in codex_mcp_bridge::config::CONFIG_FILE_KEYS {
        assert!(
            section.contains(&format!("`{key}`")),
            "docs/settings.md lacks the key {key}"
        );
    }
}

#[test]
fn server_json_documents_every_environment_variable_with_its_default() {
    let raw = std::fs::read_to_string(repo_root().join("server.json")).unwrap();
    let v: Value = serde_json::from_str(&raw).unwrap();

    // the registry's own rules for the fields we use
    assert!(
        v["$schema"]
            .as_str()
            .unwrap()
            .starts_with("https://static.modelcontextprotocol.io/schemas/")
    );
    let name = v["name"].as_str().unwrap();
    let parts: Vec<&str> = name.split('/').collect();
    assert!(
        parts.len() == 2
            && parts[0]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            && parts[1]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-'),
        "{name}"
    );
    let description = v["description"].as_str().unwrap();
    assert!(
        (1..=100).contains(&description.chars().count()),
        "{description}"
    );
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(v["version"], version);

    let provided = &v["_meta"]["io.modelcontextprotocol.registry/publisher-provided"];
    assert!(
        serde_json::to_vec(provided).unwrap().len() <= 4096,
        "the registry keeps at most 4 KB of publisher-provided metadata"
    );
    assert_eq!(provided["install"]["command"], "npx -y codex-mcp-bridge");

    // the packages scripts/package.sh builds (tests/packages.rs checks them against the built
    // files): npm, the crate, the bundle, at this version, over stdio, each with the same
    // environment variables
    let packages = v["packages"].as_array().expect("packages");
    let types: Vec<&str> = packages
        .iter()
        .map(|p| p["registryType"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["npm", "cargo", "mcpb"]);
    let template = |path: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(repo_root().join(path)).unwrap()).unwrap()
    };
    let npm = template("packaging/npm/codex-mcp-bridge/package.json");
    let mcpb = template("packaging/mcpb/manifest.json");
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap()).unwrap();
    let repository = manifest["package"]["repository"].as_str().unwrap();
    assert_eq!(v["repository"]["url"], repository);
    assert_eq!(
        npm["mcpName"], "@MCP_NAME@",
        "the script writes server.json's name"
    );
    let identifiers = [
        npm["name"].as_str().unwrap().to_owned(),
        manifest["package"]["name"].as_str().unwrap().to_owned(),
        format!(
            "{repository}/releases/download/v{version}/{}-{version}-linux-x64.mcpb",
            mcpb["name"].as_str().unwrap()
        ),
    ];
    for (p, identifier) in packages.iter().zip(&identifiers) {
        assert_eq!(&p["identifier"], identifier, "{p}");
        assert_eq!(p["version"], version, "{identifier}");
        assert_eq!(
            p["transport"],
            serde_json::json!({"type": "stdio"}),
            "{identifier}"
        );
        assert!(
            p.get("fileSha256").is_none(),
            "the script adds the bundle's sha256"
        );
        assert_eq!(
            p["environmentVariables"], packages[0]["environmentVariables"],
            "{identifier}"
        );
    }
    assert_eq!(packages[0]["registryBaseUrl"], "https://registry.npmjs.org");
    assert_eq!(packages[1]["registryBaseUrl"], "https://crates.io");
    // the bundle's settings are among them
    for var in mcpb["server"]["mcp_config"]["env"]
        .as_object()
        .unwrap()
        .keys()
    {
        assert!(
            packages[2]["environmentVariables"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| &e["name"] == var),
            "{var}"
        );
    }
    let vars = packages[0]["environmentVariables"].as_array().unwrap();
    let by_name = |n: &str| vars.iter().find(|e| e["name"] == n);
    for e in vars {
        let n = e["name"].as_str().expect("a name");
        assert!(
            e["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{n} has a description"
        );
        for key in ["default", "format", "placeholder", "value"] {
            assert!(
                e.get(key).is_none_or(Value::is_string),
                "{n}: {key} is a string"
            );
        }
        if let Some(f) = e.get("format") {
            assert!(
                ["string", "number", "boolean", "filepath"].contains(&f.as_str().unwrap()),
                "{n}"
            );
        }
        for key in ["isSecret", "isRequired"] {
            assert!(e.get(key).is_none_or(Value::is_boolean), "{n}: {key}");
        }
    }

    // every variable the server reads is documented...
    let mut read = every_cli_env();
    read.extend(
        [
            "CODEX_CLI_PATH",
            "RUST_LOG",
            codex_mcp_bridge::config::HTTP_TOKEN_VAR,
        ]
        .map(String::from),
    );
    for n in &read {
        assert!(by_name(n).is_some(), "server.json lacks {n}");
    }
    // ...and nothing else but what it passes to codex
    for e in vars {
        let n = e["name"].as_str().unwrap();
        assert!(
            read.iter().any(|r| r == n)
                || codex_mcp_bridge::security::env::ALLOWED_VARS.contains(&n),
            "server.json documents {n}, which the server does not read"
        );
    }

    // the defaults are the server's
    let dir = tempfile::tempdir().unwrap();
    let c = Config::from_settings(
        &Settings::default(),
        dir.path(),
        &[("HOME".into(), "/h".into())],
    )
    .unwrap();
    let default = |n: &str| {
        by_name(n)
            .and_then(|e| e["default"].as_str())
            .unwrap_or_else(|| panic!("{n} has a default"))
            .to_owned()
    };
    let expected: Vec<(&str, String)> = vec![
        ("CODEX_BIN", c.codex_bin.display().to_string()),
        ("CODEX_BRIDGE_ALLOW_DANGER", c.allow_danger.to_string()),
        ("CODEX_BRIDGE_MAX_CONCURRENT", c.max_concurrent.to_string()),
        (
            "CODEX_BRIDGE_DEFAULT_TIMEOUT_MS",
            c.default_timeout.as_millis().to_string(),
        ),
        (
            "CODEX_BRIDGE_MAX_TIMEOUT_MS",
            c.max_timeout.as_millis().to_string(),
        ),
        (
            "CODEX_BRIDGE_QUEUE_TIMEOUT_MS",
            c.queue_timeout.as_millis().to_string(),
        ),
        (
            "CODEX_BRIDGE_IDLE_TIMEOUT_MS",
            c.idle_timeout.as_millis().to_string(),
        ),
        (
            "CODEX_BRIDGE_HEARTBEAT_MS",
            c.heartbeat.as_millis().to_string(),
        ),
        (
            "CODEX_BRIDGE_MAX_LINE_BYTES",
            c.limits.max_line_bytes.to_string(),
        ),
        (
            "CODEX_BRIDGE_MAX_OUTPUT_BYTES",
            c.limits.max_output_bytes.to_string(),
        ),
        ("CODEX_BRIDGE_NESTED_MCP", "keep".into()),
        ("CODEX_BRIDGE_APPROVALS", c.approvals.to_string()),
        ("CODEX_BRIDGE_LOG_FORMAT", "text".into()),
    ];
    for (n, want) in expected {
        assert_eq!(default(n), want, "{n}");
    }
    assert_eq!(by_name("OPENAI_API_KEY").unwrap()["isSecret"], true);
}

#[test]
fn the_readme_prerequisites_match_the_toolchain_and_the_fetch_scripts() {
    let section = doc_section("README.md", "Prerequisites");
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let rust = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("Cargo.toml names its rust-version")
        .trim_matches('"');
    assert!(
        section.contains(&format!("--default-toolchain {rust}")),
        "README installs Rust {rust}: {section}"
    );
    assert!(section.contains("cargo install --locked cargo-nextest@"));
    assert!(section.contains("nodejs npm"));
    // where the tests put codex: the fetch script's own layout, for the newest tested version
    let script = std::fs::read_to_string(repo_root().join("scripts/fetch-codex.sh")).unwrap();
    let bin_rel = script
        .lines()
        .find_map(|l| l.strip_prefix("readonly BIN_REL=\""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("fetch-codex.sh names BIN_REL");
    let bin = format!(".codex-cli/{NEWEST_TESTED_CODEX_VERSION}/{bin_rel}");
    assert!(section.contains(&bin), "README names {bin}: {section}");
    assert!(section.contains("tests/ts-sdk/node_modules/") && section.contains(".test-work/"));
}

/// `doctor` says when a root holds one of the bridge's own files (the config file, the store,
/// the codex binary), where writable turns are refused; a root that holds none is fine.
#[tokio::test]
async fn doctor_warns_when_a_root_holds_the_bridges_own_files() {
    let env = TestEnv::new();
    let codex = codex_bin();
    let store = env.root().join("store");
    let config = env.work().join("bridge.toml");
    std::fs::write(&config, "max_concurrent = 2\n").unwrap();
    let doctor = |roots: &Path| {
        let mut c = bridge(&env);
        c.arg("doctor")
            .env("CODEX_BIN", &codex)
            .env("CODEX_BRIDGE_STORE", &store)
            .env("CODEX_BRIDGE_CONFIG", &config)
            .env("CODEX_BRIDGE_ROOTS", roots);
        c
    };
    let out = run(&mut doctor(env.root())).await;
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains("own files"))
        .unwrap_or_else(|| panic!("no own-files line:\n{text}"));
    let root = env.root().canonicalize().unwrap().display().to_string();
    assert!(line.starts_with("warn"), "{line}");
    for needle in [
        root.as_str(),
        "config file (CODEX_BRIDGE_CONFIG",
        "store directory (CODEX_BRIDGE_STORE",
        "bridge.toml",
        "fix:",
    ] {
        assert!(line.contains(needle), "lacks {needle}: {line}");
    }
    // a root beside them holds none
    let elsewhere = env.root().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = run(&mut doctor(&elsewhere)).await;
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok") && l.contains("own files")),
        "{text}"
    );
}

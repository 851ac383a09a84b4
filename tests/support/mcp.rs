//! A real MCP client (rmcp's, over a child process) talking to the built server binary, which
//! drives the real codex against the mock.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, GetTaskParams, Implementation,
    InputRequest, ProgressNotificationParam, ProtocolVersion, TaskPayload, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::Value;

use super::{MockApi, TestEnv, codex_bin};

/// The bridge's tools, in the order `tools/list` gives them.
pub const TOOL_NAMES: [&str; 18] = [
    "codex",
    "query",
    "search",
    "structured",
    "review",
    "listSessions",
    "getSession",
    "closeSession",
    "diffSession",
    "applySession",
    "forkSession",
    "renameSession",
    "rewindSession",
    "compactSession",
    "steer",
    "wait",
    "stop",
    "ping",
];

/// The protocol a test client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// 2025-11-25, with `initialize` (what most hosts speak).
    Legacy,
    /// 2026-07-28, `server/discover` and per-request `_meta`.
    Modern,
}

/// Collects progress notifications; answers `roots/list` with [`ClientRoots`]' URIs and
/// `elicitation/create` (or a task's elicitation input request) as [`Person`] says.
#[derive(Clone)]
pub struct Client {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// The URIs of the `notifications/resources/updated` received, in order.
    pub updated: Arc<Mutex<Vec<String>>>,
    /// How many `notifications/resources/list_changed` were received.
    pub listed: Arc<std::sync::atomic::AtomicUsize>,
    pub roots: ClientRoots,
    pub person: Person,
    config: ClientConfig,
}

/// How the person behind a test client answers a form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Accept, with the approve box checked (`true`) or not.
    Accept(bool),
    Decline,
    /// Never answers.
    Silent,
}

/// The person behind a test client: how they answer, and the messages they were shown.
#[derive(Clone)]
pub struct Person {
    pub answer: Arc<Mutex<Answer>>,
    pub seen: Arc<Mutex<Vec<String>>>,
    keys: Arc<Mutex<std::collections::HashSet<String>>>,
    tasks: Arc<std::sync::atomic::AtomicUsize>,
    rounds: Arc<std::sync::atomic::AtomicUsize>,
    /// The client name the test client gives (`clientInfo.name`): by default Codex's terminal
    /// app's, a host that shows a form's whole message ([`WHOLE_FORM_HOST`]).
    pub client_name: &'static str,
    /// What they do on a question's page (URL-mode elicitation).
    pub page: Arc<Mutex<OnPage>>,
    /// The URLs of the pages they were sent to.
    pub urls: Arc<Mutex<Vec<String>>>,
    /// The message of each URL-mode elicitation, in order (beside [`Person::urls`]).
    pub url_messages: Arc<Mutex<Vec<String>>>,
    /// The pages they read (as served).
    pub pages: Arc<Mutex<Vec<String>>>,
    /// When set, the next form is held open: its message goes to the sender, and it is answered
    /// once the receiver fires (or its sender is dropped).
    pub hold: Arc<Mutex<Option<Hold>>>,
    /// When set, a directory (the store's) whose every file is read while each page's question
    /// is open, after the page was opened and before it is decided; what of the question's
    /// URL, page id, token, cookie and code was found there goes to `leaks`.
    pub scan: Arc<Mutex<Option<std::path::PathBuf>>>,
    /// What [`Person::scan`] found (`file: what`).
    pub leaks: Arc<Mutex<Vec<String>>>,
}

/// The client name of Codex's terminal app as an MCP host, which shows a form whole.
pub const WHOLE_FORM_HOST: &str = "codex-mcp-client";

/// What the person behind a test client does with a question's page before answering the
/// URL-mode elicitation (accept = "I'm done"; a decline or silence follows [`Answer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnPage {
    /// Approve on the page, then accept.
    Approve,
    /// Deny on the page, then accept.
    Deny,
    /// Accept without opening the page.
    Skip,
}

/// A form held open by [`Person::hold`].
pub type Hold = (
    tokio::sync::oneshot::Sender<String>,
    tokio::sync::oneshot::Receiver<()>,
);

impl Default for Person {
    fn default() -> Self {
        Person {
            answer: Arc::new(Mutex::new(Answer::Silent)),
            seen: Arc::default(),
            keys: Arc::default(),
            tasks: Arc::default(),
            rounds: Arc::default(),
            client_name: WHOLE_FORM_HOST,
            page: Arc::new(Mutex::new(OnPage::Skip)),
            urls: Arc::default(),
            url_messages: Arc::default(),
            pages: Arc::default(),
            hold: Arc::default(),
            scan: Arc::default(),
            leaks: Arc::default(),
        }
    }
}

impl Person {
    /// A person who answers every form with `answer`.
    pub fn answering(answer: Answer) -> Person {
        let p = Person::default();
        *p.answer.lock().unwrap() = answer;
        p
    }

    /// The same person behind a client that names itself `name`.
    pub fn on_host(mut self, name: &'static str) -> Person {
        self.client_name = name;
        self
    }

    /// The same person, doing `on_page` with every question's page.
    pub fn on_page(self, on_page: OnPage) -> Person {
        *self.page.lock().unwrap() = on_page;
        self
    }

    /// Do with the page at `url` what this person does with pages, then answer the URL-mode
    /// elicitation as [`Answer`] says (accept: "I'm done").
    pub async fn answer_url(&self, url: &str, message: &str) -> Option<ElicitResult> {
        self.urls.lock().unwrap().push(url.to_owned());
        self.url_messages.lock().unwrap().push(message.to_owned());
        let answer = *self.answer.lock().unwrap();
        if let Answer::Accept(_) = answer {
            let on_page = *self.page.lock().unwrap();
            let decision = match on_page {
                OnPage::Approve => Some("approve"),
                OnPage::Deny => Some("deny"),
                OnPage::Skip => None,
            };
            if let Some(decision) = decision {
                let code = super::page::code_of(message).expect("the host shows the page's code");
                let opened = super::page::open(url).await;
                let scan = self.scan.lock().unwrap().clone();
                if let Some(dir) = scan {
                    // a task's status is written to the store every second, and sled writes
                    // within half a second: long enough for both, while the question is open
                    tokio::time::sleep(Duration::from_millis(2_500)).await;
                    let found = super::page::secrets_in_files(&dir, url, &opened, &code);
                    self.leaks.lock().unwrap().extend(found);
                }
                let status = super::page::post(url, &opened, &code, decision).await;
                assert_eq!(status, 200, "the page took the decision");
                self.pages.lock().unwrap().push(opened.body);
            }
        }
        match answer {
            Answer::Accept(_) => Some(ElicitResult::new(ElicitationAction::Accept)),
            Answer::Decline => Some(ElicitResult::new(ElicitationAction::Decline)),
            Answer::Silent => None,
        }
    }

    /// Whether the task input request `key` was seen already (marks it seen).
    fn answered_key(&self, key: &str) -> bool {
        let mut seen = self.keys.lock().unwrap();
        !seen.insert(key.to_owned())
    }

    /// How many forms came as a task's input request (`input_required`).
    pub fn via_task(&self) -> usize {
        self.tasks.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many forms came as an input request of a call's `input_required` answer (MRTR),
    /// which rmcp's client hands to its handler under the request's key as the id.
    pub fn via_rounds(&self) -> usize {
        self.rounds.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many forms they were shown.
    pub fn asked(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Their answer to a form (`None`: none, ever).
    pub fn answer(&self, request: &ElicitRequestParams) -> Option<ElicitResult> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.seen.lock().unwrap().push(message.clone());
        }
        match *self.answer.lock().unwrap() {
            Answer::Accept(approve) => {
                // the approval box, and "Ada" in any other field a form asks for
                let mut content = serde_json::Map::new();
                if let ElicitRequestParams::FormElicitationParams {
                    requested_schema, ..
                } = request
                    && let Ok(Value::Object(schema)) = serde_json::to_value(requested_schema)
                    && let Some(Value::Object(props)) = schema.get("properties")
                {
                    for key in props.keys() {
                        content.insert(key.clone(), Value::from("Ada"));
                    }
                }
                content.insert("approve".into(), Value::Bool(approve));
                Some(
                    ElicitResult::new(ElicitationAction::Accept)
                        .with_content(Value::Object(content)),
                )
            }
            Answer::Decline => Some(ElicitResult::new(ElicitationAction::Decline)),
            Answer::Silent => None,
        }
    }
}

/// The roots a test client lists (`file://` URIs), and how often the server asked for them.
#[derive(Clone, Default)]
pub struct ClientRoots {
    pub uris: Arc<Mutex<Vec<String>>>,
    pub asked: Arc<std::sync::atomic::AtomicUsize>,
}

impl ClientRoots {
    /// How often the server asked so far.
    pub fn asked(&self) -> usize {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl ClientHandler for Client {
    async fn on_progress(&self, p: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(p);
    }
    async fn on_resource_updated(
        &self,
        p: rmcp::model::ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(p.uri);
    }
    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.listed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        self.roots
            .asked
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let roots = self
            .roots
            .uris
            .lock()
            .unwrap()
            .iter()
            .map(rmcp::model::Root::new)
            .collect();
        Ok(rmcp::model::ListRootsResult::new(roots))
    }
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        ctx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if matches!(ctx.id, rmcp::model::NumberOrString::String(_)) {
            self.person
                .rounds
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let hold = self.person.hold.lock().unwrap().take();
        if let Some((shown, go)) = hold {
            if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
                let _ = shown.send(message.clone());
            }
            let _ = go.await;
        }
        let answer = match &request {
            ElicitRequestParams::UrlElicitationParams { url, message, .. } => {
                self.person.answer_url(url, message).await
            }
            _ => self.person.answer(&request),
        };
        match answer {
            Some(r) => Ok(r),
            None => std::future::pending().await,
        }
    }
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

/// A connected client and the server process behind it.
pub struct Server {
    pub client: RunningService<RoleClient, Client>,
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// The URIs of the `notifications/resources/updated` received, in order.
    pub updated: Arc<Mutex<Vec<String>>>,
    /// How many `notifications/resources/list_changed` were received.
    pub listed: Arc<std::sync::atomic::AtomicUsize>,
    /// The person behind the client (asked only when it declares elicitation).
    pub person: Person,
    /// What the client lists as its roots (only asked when it declares the capability).
    pub roots: ClientRoots,
    pub pid: u32,
    pub store: PathBuf,
}

/// The environment the server binary runs with for a test: the real codex, the mock as the
/// operator's provider overrides, the test's root as the allowed root, a store in the root.
pub fn server_env(env: &TestEnv, mock: &MockApi) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = env
        .codex_env()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    v.push(("CODEX_BIN".into(), codex_bin().display().to_string()));
    v.push((
        "CODEX_BRIDGE_ROOTS".into(),
        env.root().display().to_string(),
    ));
    v.push((
        "CODEX_BRIDGE_STORE".into(),
        env.root().join("store").display().to_string(),
    ));
    v.push((
        "CODEX_BRIDGE_CODEX_CONFIG".into(),
        mock.provider_overrides().join("\n"),
    ));
    v.push(("RUST_LOG".into(), "warn,codex_mcp_bridge=info".into()));
    // the suite's tests look at the server's own processes: the first server owns the store
    // (the owner daemon's tests, `suite::outlive`, set `daemon`)
    v.push(("CODEX_BRIDGE_OWNER".into(), "process".into()));
    if let Some(b) = backend_under_test() {
        v.push(("CODEX_BRIDGE_BACKEND".into(), b));
    }
    v
}

/// `vars` with at most one warm app-server (so no spare is started beside a session's own):
/// for tests that count the server's codex processes.
pub fn no_spare(mut vars: Vec<(String, String)>) -> Vec<(String, String)> {
    vars.push(("CODEX_BRIDGE_MAX_WARM".into(), "1".into()));
    vars
}

/// The backend the suite runs the bridge with: `BRIDGE_BACKEND_UNDER_TEST` (`exec` or
/// `app-server`), else the bridge's default. `.ci/run` runs the suite once per backend.
pub fn backend_under_test() -> Option<String> {
    std::env::var("BRIDGE_BACKEND_UNDER_TEST")
        .ok()
        .filter(|b| !b.is_empty())
}

/// The built server binary.
pub fn server_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_codex-mcp-bridge"))
}

/// A client of another host on the same store: its own `CODEX_HOME`.
pub async fn connect_other_home(env: &TestEnv, mock: &MockApi) -> Server {
    let home = env.root().join("other-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut other = server_env(env, mock);
    other.retain(|(k, _)| k != "CODEX_HOME");
    other.push(("CODEX_HOME".into(), home.display().to_string()));
    connect_with(&other, env.root(), Protocol::Legacy).await
}

/// Start the server with `vars` (everything else cleared) and connect a client.
pub async fn connect_with(vars: &[(String, String)], cwd: &Path, protocol: Protocol) -> Server {
    connect_with_capabilities(vars, cwd, protocol, ClientCapabilities::default()).await
}

/// Start the server for `env` and `mock` and connect a client that declares the tasks
/// extension.
pub async fn connect_tasks(env: &TestEnv, mock: &MockApi, protocol: Protocol) -> Server {
    connect_with_capabilities(
        &server_env(env, mock),
        env.root(),
        protocol,
        ClientCapabilities::builder().enable_tasks().build(),
    )
    .await
}

/// [`connect_with`], declaring `capabilities`.
pub async fn connect_with_capabilities(
    vars: &[(String, String)],
    cwd: &Path,
    protocol: Protocol,
    capabilities: ClientCapabilities,
) -> Server {
    connect_person(vars, cwd, protocol, capabilities, Person::default()).await
}

/// [`connect_with_capabilities`], with a failure to connect as an error.
pub async fn try_connect_with_capabilities(
    vars: &[(String, String)],
    cwd: &Path,
    protocol: Protocol,
    capabilities: ClientCapabilities,
) -> Result<Server, String> {
    let roots = ClientRoots::default();
    try_connect_full(vars, cwd, protocol, capabilities, roots, Person::default()).await
}

/// Start the server for `env` and `mock` and connect a client (2025-11-25) that declares the
/// roots capability and lists `roots` (deprecated in the 2026 protocol; hosts on 2025-11-25 use
/// them).
#[allow(deprecated)]
pub async fn connect_with_roots(env: &TestEnv, mock: &MockApi, roots: ClientRoots) -> Server {
    try_connect_full(
        &server_env(env, mock),
        env.root(),
        Protocol::Legacy,
        ClientCapabilities::builder()
            .enable_roots()
            .enable_roots_list_changed()
            .build(),
        roots,
        Person::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Start the server with `vars` and connect a 2026-07-28 client with `capabilities` that lists
/// `roots` when asked (through an input request: that protocol has no other way).
pub async fn connect_modern_with_roots(
    vars: &[(String, String)],
    cwd: &Path,
    capabilities: ClientCapabilities,
    roots: ClientRoots,
    person: Person,
) -> Server {
    try_connect_full(vars, cwd, Protocol::Modern, capabilities, roots, person)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Start the server with `vars` and connect a client with `capabilities` behind which
/// `person` answers forms.
pub async fn connect_person(
    vars: &[(String, String)],
    cwd: &Path,
    protocol: Protocol,
    capabilities: ClientCapabilities,
    person: Person,
) -> Server {
    try_connect_full(
        vars,
        cwd,
        protocol,
        capabilities,
        ClientRoots::default(),
        person,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn try_connect_full(
    vars: &[(String, String)],
    cwd: &Path,
    protocol: Protocol,
    capabilities: ClientCapabilities,
    roots: ClientRoots,
    person: Person,
) -> Result<Server, String> {
    let program = [server_bin().as_os_str().to_owned()];
    try_connect_program(&program, vars, cwd, protocol, capabilities, roots, person).await
}

/// Start `program` (its first word; the rest are its arguments) with `vars` (everything else
/// cleared) and connect a client (2025-11-25): a packaged server, started as its package says
/// (tests/packages.rs).
pub async fn connect_program(
    program: &[std::ffi::OsString],
    vars: &[(String, String)],
    cwd: &Path,
) -> Result<Server, String> {
    let (roots, person) = (ClientRoots::default(), Person::default());
    let caps = ClientCapabilities::default();
    try_connect_program(program, vars, cwd, Protocol::Legacy, caps, roots, person).await
}

async fn try_connect_program(
    program: &[std::ffi::OsString],
    vars: &[(String, String)],
    cwd: &Path,
    protocol: Protocol,
    capabilities: ClientCapabilities,
    roots: ClientRoots,
    person: Person,
) -> Result<Server, String> {
    let cmd = server_command(program, vars, cwd);
    connect_command(cmd, vars, protocol, capabilities, roots, person).await
}

/// `program` (its first word; the rest are its arguments) with `vars` and nothing else in its
/// environment, in `cwd`.
fn server_command(
    program: &[std::ffi::OsString],
    vars: &[(String, String)],
    cwd: &Path,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&program[0]);
    cmd.args(&program[1..])
        .env_clear()
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd);
    cmd
}

/// Start the server with `vars` as the user and group `uid` (the test runs as root) and connect
/// a plain client.
pub async fn connect_as(uid: u32, vars: &[(String, String)], cwd: &Path) -> Server {
    // the built binary may lie where `uid` cannot reach it (a checkout in a private home)
    let bin = super::work_dir::for_others(server_bin());
    let mut cmd = server_command(&[bin.into_os_string()], vars, cwd);
    cmd.uid(uid).gid(uid);
    connect_command(
        cmd,
        vars,
        Protocol::Legacy,
        ClientCapabilities::default(),
        ClientRoots::default(),
        Person::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Start the server `cmd` (with `vars` in its environment) and connect.
async fn connect_command(
    cmd: tokio::process::Command,
    vars: &[(String, String)],
    protocol: Protocol,
    capabilities: ClientCapabilities,
    roots: ClientRoots,
    person: Person,
) -> Result<Server, String> {
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn server");
    let pid = transport.id().expect("server pid");
    let progress = Arc::new(Mutex::new(vec![]));
    let updated = Arc::new(Mutex::new(vec![]));
    let listed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let base = ClientConfig::new(capabilities, Implementation::new(person.client_name, "0"));
    let client = match protocol {
        Protocol::Legacy => {
            let c = Client {
                progress: progress.clone(),
                updated: updated.clone(),
                listed: listed.clone(),
                roots: roots.clone(),
                person: person.clone(),
                config: base.with_protocol_version(ProtocolVersion::V_2025_11_25),
            };
            tokio::time::timeout(Duration::from_secs(30), c.serve(transport))
                .await
                .map_err(|_| "connect in time".to_owned())?
                .map_err(|e| format!("connect: {e}"))?
        }
        Protocol::Modern => {
            let c = Client {
                progress: progress.clone(),
                updated: updated.clone(),
                listed: listed.clone(),
                roots: roots.clone(),
                person: person.clone(),
                config: base,
            };
            tokio::time::timeout(
                Duration::from_secs(30),
                c.serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    },
                ),
            )
            .await
            .map_err(|_| "connect in time".to_owned())?
            .map_err(|e| format!("connect: {e}"))?
        }
    };
    let store = vars
        .iter()
        .find(|(k, _)| k == "CODEX_BRIDGE_STORE")
        .map(|(_, v)| PathBuf::from(v))
        .unwrap_or_default();
    Ok(Server {
        client,
        progress,
        updated,
        listed,
        person,
        roots,
        pid,
        store,
    })
}

/// Start the server for `env` and `mock` and connect.
pub async fn connect(env: &TestEnv, mock: &MockApi, protocol: Protocol) -> Server {
    connect_with(&server_env(env, mock), env.root(), protocol).await
}

impl Server {
    /// Call a tool; every call is bounded.
    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let params = CallToolRequestParams::new(tool.to_owned())
            .with_arguments(args.as_object().cloned().expect("arguments are an object"));
        tokio::time::timeout(Duration::from_secs(120), async {
            match self
                .client
                .call_tool_once(params)
                .await
                .expect("tool call answered")
            {
                CallToolResponse::Complete(r) => r,
                // a client that declares the tasks extension: poll the task to its end,
                // answering its input requests as the person does
                CallToolResponse::Task(t) => loop {
                    let got = self
                        .client
                        .get_task(GetTaskParams::new(t.task.task_id.clone()))
                        .await
                        .expect("tasks/get answered");
                    match got.task.payload {
                        TaskPayload::Working => tokio::time::sleep(Duration::from_millis(50)).await,
                        TaskPayload::InputRequired { input_requests } => {
                            let mut answers = std::collections::BTreeMap::new();
                            for (key, req) in input_requests {
                                if !self.person.answered_key(&key)
                                    && let InputRequest::Elicitation(e) = req
                                    && let Some(r) = {
                                        self.person
                                            .tasks
                                            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                        match &e.params {
                                            ElicitRequestParams::UrlElicitationParams {
                                                url,
                                                message,
                                                ..
                                            } => self.person.answer_url(url, message).await,
                                            p => self.person.answer(p),
                                        }
                                    }
                                {
                                    answers.insert(key, serde_json::to_value(r).unwrap());
                                }
                            }
                            if !answers.is_empty() {
                                self.client
                                    .update_task(UpdateTaskParams::new(
                                        t.task.task_id.clone(),
                                        answers,
                                    ))
                                    .await
                                    .expect("tasks/update answered");
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await
                        }
                        TaskPayload::Completed { result } => {
                            break serde_json::from_value(Value::Object(result))
                                .expect("a tool result");
                        }
                        other => panic!("task ended without a result: {other:?}"),
                    }
                },
                other => panic!("unexpected answer: {other:?}"),
            }
        })
        .await
        .expect("tool call in time")
    }

    /// Call a tool through rmcp's client, which answers each `input_required` round (MRTR)
    /// through its handler (the person) and retries; bounded.
    pub async fn call_rounds(&self, tool: &str, args: Value) -> CallToolResult {
        let params = CallToolRequestParams::new(tool.to_owned())
            .with_arguments(args.as_object().cloned().expect("arguments are an object"));
        tokio::time::timeout(Duration::from_secs(120), self.client.call_tool(params))
            .await
            .expect("tool call in time")
            .expect("tool call answered")
    }

    /// Send one `tools/call` (no rounds driven); bounded.
    pub async fn call_once(&self, params: CallToolRequestParams) -> CallToolResponse {
        tokio::time::timeout(Duration::from_secs(120), self.client.call_tool_once(params))
            .await
            .expect("tool call in time")
            .expect("tool call answered")
    }

    /// SIGKILL the server process.
    pub fn kill(&self) {
        // SAFETY: signals only.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
    }
}

/// The structured content of a result.
pub fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

/// The text of a result's first content block.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

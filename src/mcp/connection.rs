//! One client connection's server, below the tools: [`McpServer`] (the bridge, the task store
//! and the client's context and roots) and how it is made, a call's context ([`CallCtx`]), and
//! the shape of a tool ([`ToolEntry`], [`Handler`]) that each file of `tools/` fills in. The
//! protocol's handling of requests (`ServerHandler`, dispatch, tasks, MRTR) is `super`'s; the
//! tools are `super::tools`'s. Nothing here names either, so both can name this.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::actors::{Bridge, ClientContext};
use crate::approval::ask;
use crate::mcp::progress::ProgressTarget;
use crate::mcp::roots::ClientRoots;
use crate::mcp::task_owner::{Scope, TaskOwner};
use crate::mcp::tasks::HostKey;
use crate::mcp::tasks::Tasks;

/// The rmcp handler.
#[derive(Clone)]
pub struct McpServer {
    pub(crate) bridge: Bridge,
    /// Calls running or finished as MCP tasks (one store per process, each task visible to the
    /// connection that started it only).
    pub(crate) tasks: Tasks,
    /// The connection's client context (settings, codex environment, CODEX_HOME).
    pub(crate) client: Arc<ClientContext>,
    /// The connection's client roots (the default working directory).
    pub(crate) client_roots: Arc<ClientRoots>,
    /// Which connection this is, for the tasks it starts.
    pub(super) scope: Scope,
    /// Cancelled when the connection's input ended (its client closed it, or died): its plain
    /// calls end then ([`McpServer::until_input_ends`]); its tasks and background calls go on.
    pub(super) input_ended: CancellationToken,
    /// The sessions whose resource this connection subscribed to.
    pub(super) subscriptions: Arc<crate::mcp::subscriptions::Subscriptions>,
}

impl McpServer {
    /// A server over a running bridge, for one connection of the owning process's own client:
    /// its settings, with an identity of its own (each stdio connection, HTTP session and
    /// session-less HTTP request is a client of its own for steer).
    pub fn new(bridge: Bridge) -> Self {
        let client = Arc::new(bridge.own_context().for_connection());
        McpServer::for_client(bridge, client)
    }

    /// A server over a running bridge for one client connection with its own context.
    pub fn for_client(bridge: Bridge, client: Arc<ClientContext>) -> Self {
        McpServer {
            bridge,
            tasks: Tasks::new(),
            client,
            client_roots: Default::default(),
            scope: Scope::connection(),
            input_ended: CancellationToken::new(),
            subscriptions: Default::default(),
        }
    }

    /// The token the connection's input cancels when it ends ([`crate::mcp::framing::guard_until`]).
    pub fn input_ended(&self) -> CancellationToken {
        self.input_ended.clone()
    }

    /// `ct`'s child, cancelled too when this connection's input ends: a plain call's token. A
    /// host that died (a crash, SIGKILL) closes its server's stdin; its calls' turns end at once
    /// rather than run on unread. Cancel the returned token once the call ended (its watcher
    /// ends with it).
    pub(crate) fn until_input_ends(&self, ct: &CancellationToken) -> CancellationToken {
        let call = ct.child_token();
        if self.input_ended.is_cancelled() {
            call.cancel();
            return call;
        }
        let (ended, watch) = (self.input_ended.clone(), call.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = ended.cancelled() => watch.cancel(),
                _ = watch.cancelled() => {}
            }
        });
        call
    }

    /// A server for requests of the HTTP listener (the owning process's own settings). rmcp
    /// makes one per HTTP session and one per session-less request, so each is a client of its
    /// own.
    pub fn for_http(bridge: Bridge) -> Self {
        McpServer {
            scope: Scope::Http,
            ..McpServer::new(bridge)
        }
    }

    /// Share `tasks` (one task store per process, whatever the connection).
    pub fn with_tasks(mut self, tasks: Tasks) -> Self {
        self.tasks = tasks;
        self
    }

    /// How a host is recognised across its restarts: its client's name, its Codex home and its
    /// roots (the same user: only they reach the socket). None over HTTP.
    pub(crate) fn host_named(&self, client_name: &str) -> HostKey {
        if matches!(self.scope, Scope::Http) {
            return None;
        }
        let roots: Vec<String> = self
            .client
            .config
            .roots
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        Some(format!(
            "{client_name}\n{}\n{}",
            self.client.codex_home.display(),
            roots.join(":")
        ))
    }

    /// Whose a background turn is (its handle, who is asked its questions): its host's, as
    /// [`McpServer::host_named`]; over HTTP, the HTTP session's (the session-less requests of
    /// the 2026-07-28 protocol, which all hold the operator's token, are one).
    pub(crate) fn background_host(&self, client_name: &str, http_session: Option<&str>) -> HostKey {
        match self.scope {
            Scope::Http => Some(format!("\nhttp\n{}", http_session.unwrap_or_default())),
            Scope::Connection(_) => self.host_named(client_name),
        }
    }

    /// The host of the client that makes a call ([`McpServer::background_host`]): the one rule
    /// of who may end a turn. A turn is ended only by a client of the host that started it:
    /// `stop` finds only its host's background turns, `closeSession` is refused while the
    /// session runs (or has queued) another host's call, and a task (`tasks/cancel`) is seen only
    /// by its connection, then its host.
    pub(crate) fn caller_host(&self, ctx: &CallCtx) -> HostKey {
        self.background_host(&ctx.client_name, ctx.http_session.as_deref())
    }

    /// A task's time-to-live. rmcp counts it from creation and aborts a task still running when
    /// it expires, so it exceeds the longest call (queue wait plus the largest timeout) by
    /// [`TASK_RESULT_GRACE`]; a finished task's result is kept for one more TTL.
    pub fn task_ttl(&self) -> Duration {
        self.client.config.max_timeout + self.bridge.shared().queue_timeout() + TASK_RESULT_GRACE
    }
}

/// Who a task is started for, and where its questions and roots go.
pub(crate) struct TaskStart {
    pub(super) owner: TaskOwner,
    pub(super) host: HostKey,
    /// A background call's handle (`session:<id>`, `review:<id>`).
    pub(super) handle: Option<String>,
    pub(super) roots: Option<rmcp::Peer<RoleServer>>,
    pub(super) elicits: Option<ask::Host>,
    /// A background call's: its questions go to the client waiting on it.
    pub(super) waiters: Option<crate::approval::ask::waiters::Waiters<ask::Channel>>,
    /// The name the starter's client gives itself.
    pub(super) client_name: String,
}

/// Suggested interval between `tasks/get` polls.
pub const TASK_POLL_MS: u64 = 1_000;
/// How long a task's result stays available after the longest possible call ended.
pub const TASK_RESULT_GRACE: Duration = Duration::from_secs(300);

/// A tool's run: its arguments in, its result or the error that refused or ended it out (the
/// dispatch shapes an error as the tool's [`Traits::turn_errors`] say).
pub(super) type Handler =
    for<'a> fn(
        &'a McpServer,
        rmcp::model::JsonObject,
        &'a CallCtx,
    ) -> futures::future::BoxFuture<'a, Result<CallToolResult, crate::error::Error>>;

/// A tool's arguments checked before any state of its call is kept (a 2026-07-28 call's, a
/// background start's): the tool's own checks, without taking the arguments.
pub(super) type Precheck = fn(&rmcp::model::JsonObject) -> Result<(), crate::error::Error>;

/// What a tool is, beyond its schemas: every fact the server reads by a tool's name lives here,
/// in the tool's own entry.
#[derive(Clone, Copy)]
pub(super) struct Traits {
    /// Runs as an MCP task for clients that declare the tasks extension (the long tools).
    pub(super) task: bool,
    /// Its errors are a turn's result ([`crate::mcp::results::TurnResult`] with its `error`:
    /// a turn tool's, and `wait`'s and `stop`'s, which answer a background turn); the others'
    /// carry the text only ([`crate::mcp::answer::plain_error`]).
    pub(super) turn_errors: bool,
    /// Takes `background` (runs in the background when asked; `wait` brings its answer).
    pub(super) background: bool,
    /// Picks its working directory by the client's roots when the call names none (a
    /// 2026-07-28 client is asked its roots first).
    pub(super) roots_first: bool,
    /// Its answer may carry a person's question (a 2026-07-28 client's rounds): a task tool's,
    /// and `wait`'s (its background turn's).
    pub(super) asks: bool,
    /// Its arguments checked before any state of a call is kept.
    pub(super) precheck: Option<Precheck>,
}

impl Traits {
    /// A tool that runs no turn and answers at once (the session tools, `ping`).
    pub(super) const PLAIN: Traits = Traits {
        task: false,
        turn_errors: false,
        background: false,
        roots_first: false,
        asks: false,
        precheck: None,
    };
    /// A tool that runs a codex turn (`codex`, `query`, `search`, `structured`, `review`):
    /// its answers, errors included, are a turn's result.
    pub(super) const TURN: Traits = Traits {
        turn_errors: true,
        ..Traits::PLAIN
    };
}

/// One tool: its name, definition, traits and handler.
pub(super) struct ToolEntry {
    pub(super) name: &'static str,
    pub(super) title: &'static str,
    pub(super) description: &'static str,
    /// readOnly, destructive, idempotent, openWorld hints.
    pub(super) hints: [bool; 4],
    pub(super) input: fn() -> Arc<rmcp::model::JsonObject>,
    pub(super) output: fn() -> Arc<rmcp::model::JsonObject>,
    pub(super) is: Traits,
    pub(super) run: Handler,
}

/// One tool call's cancellation and progress target: a request's, or a task's.
pub(crate) struct CallCtx {
    pub ct: CancellationToken,
    pub progress: Option<ProgressTarget>,
    /// The client to ask for its roots, when it declares the roots capability.
    pub roots: Option<Peer<RoleServer>>,
    /// Where the person behind the call can be asked (`approvals = ask`), when they can.
    pub ask: Option<ask::Channel>,
    /// The name the caller's client gives itself (how its host is recognised, with its
    /// context).
    pub client_name: String,
    /// The HTTP session the call came in (over HTTP).
    pub http_session: Option<String>,
}

/// The name the client of a request gives itself (`clientInfo.name`), or none.
pub(crate) fn client_name(ctx: &RequestContext<RoleServer>) -> String {
    ctx.client_info().map(|i| i.name).unwrap_or_default()
}

/// The peer of a request whose client declares the roots capability.
pub(super) fn roots_peer(ctx: &RequestContext<RoleServer>) -> Option<Peer<RoleServer>> {
    ctx.client_capabilities()
        .is_some_and(|c| c.roots.is_some())
        .then(|| ctx.peer.clone())
}

impl CallCtx {
    /// The context of a plain (not task) request.
    pub(crate) fn of_request(ctx: &RequestContext<RoleServer>) -> Self {
        CallCtx {
            ct: ctx.ct.clone(),
            progress: ctx
                .meta
                .get_progress_token()
                .map(|token| ProgressTarget::Notify {
                    peer: ctx.peer.clone(),
                    token,
                }),
            roots: roots_peer(ctx),
            ask: ask::Channel::of_request(ctx),
            client_name: client_name(ctx),
            http_session: crate::mcp::task_owner::http_session(ctx),
        }
    }
}

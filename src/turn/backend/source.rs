//! Where a backend's warm app-server comes from, and what becomes of it between turns
//! ([`Source`]): a session keeps its own (counted in the pool under its id, taken from the
//! spare or started on demand); a one-shot call leases one of its client's idle ones from the
//! pool's keeper (or starts one on record under a key of its own) and gives it back when the
//! call is over; a call that never runs warm has none.

use std::sync::Arc;

use crate::actors::pool::starts::{StartFor, WarmStart, start_warm};
use crate::actors::pool::warm::{Admission, Closer, OneShotServer, Serves};
use crate::actors::shared::Shared;
use crate::codex::argv::{SpawnSpec, WarmTurn, build_one_shot_server};
use crate::codex::process::{WarmKey, WarmProcess, key_of};
use crate::error::Result;
use crate::security::ids::SessionId;
use crate::security::paths::Confined;
use crate::turn::files::scratch_dir;

use super::env::TurnEnv;

/// Where a backend's warm app-server comes from (see the module).
#[expect(
    clippy::large_enum_variant,
    reason = "one per session or call, moved with its backend, never copied"
)]
pub(crate) enum Source {
    /// None: every turn runs with `codex exec` (`review`, `structured` with images).
    Exec,
    /// A session's own, between its turns.
    Session(SessionSource),
    /// A one-shot call's lease.
    OneShot(OneShotSource),
}

/// A session's warm app-server: its process between turns (during a turn its task holds the
/// backend), and its place in the pool's count (`max_warm`), which only this writes.
pub(crate) struct SessionSource {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: SessionId,
    /// How the pool asks the session to close its idle process.
    pub(crate) closer: Closer,
    pub(crate) process: Option<WarmProcess>,
}

impl Drop for SessionSource {
    fn drop(&mut self) {
        // a warm process dropped here is killed with everything it started
        self.process = None;
        self.shared.warm.release(&self.id, &self.closer);
    }
}

/// A one-shot call's warm app-server: one of its client's idle ones that serves the same
/// kind of call, or a new one, held for the call's turns.
pub(crate) struct OneShotSource {
    pub(crate) client: crate::actors::client::ClientId,
    pub(crate) serves: Serves,
    /// The call's working directory (`structured`); `None`: the process's own.
    pub(crate) dir: Option<Confined>,
    pub(crate) server: Option<OneShotServer>,
    /// A turn did not complete, or the process cannot go on: never reused.
    pub(crate) spoiled: bool,
}

/// What a turn gets when it needs a new warm process.
pub(crate) enum NextWarm {
    /// A live process is in place.
    Ready,
    /// No warm process for this turn: it runs with `codex exec`.
    Exec,
    /// The turn ends without one (cancelled, timed out, or an error).
    Failed(crate::error::Error),
}

impl Source {
    /// Whether a turn on `wanted` may run only on the process in place: a one-shot call's
    /// re-ask continues its ephemeral thread, which lives in that process alone (no other
    /// process, and no `codex exec`, can resume it).
    pub(crate) fn pinned(&self, wanted: &crate::codex::process::ThreadWanted) -> bool {
        matches!(self, Source::OneShot(_))
            && matches!(wanted, crate::codex::process::ThreadWanted::Resume(_))
    }

    /// Whether a turn's record (what codex recorded of it) is read: a session's turns only.
    pub(crate) fn reads_record(&self) -> bool {
        matches!(self, Source::Session(_))
    }

    /// Whether it holds a warm process.
    pub(crate) fn holds_process(&self) -> bool {
        match self {
            Source::Exec => false,
            Source::Session(s) => s.process.is_some(),
            Source::OneShot(o) => o.server.is_some(),
        }
    }

    /// The credentials the warm process in place was started with (none: none).
    pub(crate) fn credentials(&self) -> crate::actors::credentials::Credentials {
        let process = match self {
            Source::Exec => None,
            Source::Session(s) => s.process.as_ref(),
            Source::OneShot(o) => o.server.as_ref().and_then(|s| s.process.as_ref()),
        };
        process.map_or(crate::actors::credentials::Credentials::NONE, |w| {
            crate::actors::credentials::Credentials::of_env(w.key().env())
        })
    }

    /// The warm process in place.
    pub(crate) fn process_mut(&mut self) -> Option<&mut WarmProcess> {
        match self {
            Source::Exec => None,
            Source::Session(s) => s.process.as_mut(),
            Source::OneShot(o) => o.server.as_mut().and_then(|s| s.process.as_mut()),
        }
    }

    /// Whether the warm turn chosen ([`super::warm_chosen`]) may run here now: not when an
    /// app-server start failed since it was chosen (a turn waits for its slot after it is
    /// planned: codex's app-server may have been found unusable meanwhile); a one-shot call's
    /// otherwise (its process comes in [`Source::keep_fitting`] and the start), a session's
    /// when the pool admits one more (`max_warm`; the least recently used idle holder may be
    /// asked to close its own). A session admitted counts as busy until [`Source::settle`].
    pub(crate) fn admit(&mut self, env: &TurnEnv<'_>) -> bool {
        if let Some(why) = env.shared.warm.unusable() {
            tracing::debug!("{why}: the turn runs with codex exec");
            return false;
        }
        match self {
            Source::Exec => false,
            Source::Session(s) => {
                matches!(s.shared.warm.acquire(&s.id, &s.closer), Admission::Granted)
            }
            Source::OneShot(_) => true,
        }
    }

    /// Keep the process in place only when it can run `turn` (started the same way, alive,
    /// reusable), else close it; a one-shot call with none takes an idle one of its client's.
    pub(crate) async fn keep_fitting(&mut self, env: &TurnEnv<'_>, turn: &WarmTurn) {
        match self {
            Source::Exec => {}
            Source::Session(s) => {
                let key = key_of(&turn.app_server(&env.common));
                if let Some(mut w) = s.process.take() {
                    if w.reusable() && w.key() == &key && !w.exited() {
                        s.process = Some(w);
                    } else {
                        // reaped before its slot goes to the next one
                        w.close().await;
                    }
                }
            }
            Source::OneShot(o) => {
                let fits = |server: &OneShotServer| o.fits(env, server);
                if o.server.as_ref().is_some_and(|s| !fits(s))
                    && let Some(s) = o.server.take()
                {
                    s.kill().await;
                }
                if o.server.is_none() {
                    o.server = env
                        .shared
                        .warm
                        .take_one_shot(o.client, &o.serves, |s| o.fits(env, s))
                        .await;
                    o.spoiled = false;
                }
            }
        }
    }

    /// A new warm process for a turn (see [`NextWarm`]).
    pub(crate) async fn obtain(&mut self, env: &TurnEnv<'_>, turn: &WarmTurn) -> NextWarm {
        let placed = match self {
            Source::Exec => return NextWarm::Exec,
            Source::Session(s) => s.obtain(env, turn).await,
            Source::OneShot(o) => o.obtain(env).await,
        };
        match placed {
            Ok(true) => NextWarm::Ready,
            Ok(false) => NextWarm::Exec,
            Err(e) => NextWarm::Failed(e),
        }
    }

    /// The process in place had ended before the turn reached it: closed, for another.
    pub(crate) async fn discard(&mut self) {
        match self {
            Source::Exec => {}
            Source::Session(s) => {
                if let Some(w) = s.process.take() {
                    w.close().await;
                }
            }
            Source::OneShot(o) => {
                if let Some(server) = o.server.take() {
                    server.kill().await;
                }
                o.spoiled = false;
            }
        }
    }

    /// A new process this turn took or started served it: the session's next spare is
    /// started (once the turn ended, not while it runs: a spare's start-up takes the CPU the
    /// turn needs), so that a host's next new session here finds one too; none for credentials
    /// nobody holds now (a task's or background turn that outlived its host).
    pub(crate) fn refill(&self, env: &TurnEnv<'_>, turn: &WarmTurn) {
        if let Source::Session(s) = self
            && s.shared.credentials.held_by(&env.common.env)
        {
            s.shared.warm.refill(turn.app_server(&env.common));
        }
    }

    /// A warm turn ended with `completed`: a process that cannot go on is let go of (a
    /// session's), or marked never to be reused (a one-shot call's, also when its turn did not
    /// complete).
    pub(crate) fn after_turn(&mut self, completed: bool) {
        match self {
            Source::Exec => {}
            Source::Session(s) => {
                if s.process.as_ref().is_some_and(|w| !w.reusable()) {
                    s.process = None;
                }
            }
            Source::OneShot(o) => {
                let reusable = o
                    .server
                    .as_ref()
                    .and_then(|s| s.process.as_ref())
                    .is_some_and(|w| w.reusable());
                if !completed || !reusable {
                    o.spoiled = true;
                }
            }
        }
    }

    /// The turn is over: a session's place in the pool says whether it keeps a process (idle)
    /// or none (released).
    pub(crate) fn settle(&self) {
        if let Source::Session(s) = self {
            if s.process.is_some() {
                s.shared.warm.idle(&s.id, &s.closer);
            } else {
                s.shared.warm.release(&s.id, &s.closer);
            }
        }
    }

    /// Let go of the process between turns (a session's: EOF first, and its place in the pool
    /// given back). A one-shot call's is kept for the call's next turn.
    pub(crate) async fn let_go(&mut self) {
        if let Source::Session(s) = self
            && let Some(w) = s.process.take()
        {
            s.shared.warm.release(&s.id, &s.closer);
            w.close().await;
        }
    }

    /// The call is over: a one-shot call's process goes back to the pool or is killed, a
    /// session's is closed.
    pub(crate) async fn give_back(mut self, shared: &Shared) {
        match &mut self {
            Source::Exec => {}
            Source::Session(_) => self.let_go().await,
            Source::OneShot(o) => o.give_back(shared).await,
        }
    }
}

impl SessionSource {
    /// The spare when it was started the same way for this directory and client (no start-up
    /// wait), else one started into a free place under `max_warm` by the one warm start
    /// ([`start_warm`]), reported to the sink (on record under the session) as it spawns.
    /// `Ok(false)`: the turn runs with `codex exec`.
    async fn obtain(&mut self, env: &TurnEnv<'_>, turn: &WarmTurn) -> Result<bool> {
        let server = turn.app_server(&env.common);
        let key: WarmKey = key_of(&server);
        if let Some(w) = self.shared.warm.take_spare(&key, &self.id).await {
            (env.sink.on_spawn)(w.info());
            self.process = Some(w);
            return Ok(true);
        }
        let hook = env.sink.on_spawn.clone();
        let started = start_warm(start_for(env), &server, || Some(hook.clone()), || {}).await?;
        Ok(match started {
            WarmStart::Process(w) => {
                self.process = Some(w);
                true
            }
            WarmStart::Exec => false,
        })
    }
}

/// Who starts a warm process for `env`'s turn, and within what.
fn start_for<'a>(env: &'a TurnEnv<'a>) -> StartFor<'a> {
    StartFor {
        shared: env.shared,
        secrets: &env.client.secrets,
        cancel: env.cancel,
        timeout: env.timeout,
    }
}

impl OneShotSource {
    /// A one-shot call's source for `client`'s calls of kind `serves` in `dir`.
    pub(crate) fn new(
        client: crate::actors::client::ClientId,
        serves: Serves,
        dir: Option<Confined>,
    ) -> OneShotSource {
        OneShotSource {
            client,
            serves,
            dir,
            server: None,
            spoiled: false,
        }
    }

    /// The app-server invocation for this call in `cwd`.
    fn spec_in(&self, env: &TurnEnv<'_>, cwd: Confined) -> Result<SpawnSpec> {
        let search = self.serves == Serves::Scratch { search: true };
        Ok(build_one_shot_server(&env.common, cwd, search)?)
    }

    /// Whether `server` is the one this call would start now (same key) and is alive.
    fn fits(&self, env: &TurnEnv<'_>, server: &OneShotServer) -> bool {
        let cwd = match (&server.home, &self.dir) {
            (Some((_, home)), _) => home.clone(),
            (None, Some(d)) => d.clone(),
            (None, None) => return false,
        };
        match (self.spec_in(env, cwd), server.process.as_ref()) {
            (Ok(spec), Some(w)) => w.key() == &key_of(&spec) && w.reusable(),
            _ => false,
        }
    }

    /// A new app-server for this call's client (in the call's directory, or a fresh one of its
    /// own), on record under a key of its own from its spawn for the crash sweep. `Ok(false)`:
    /// the call runs with `codex exec` (codex's app-server was found unusable, or no place
    /// came free in time).
    async fn obtain(&mut self, env: &TurnEnv<'_>) -> Result<bool> {
        let shared = env.shared;
        // a start that failed since this call's turn was admitted (the call's replacement
        // after a process that ended) may have found codex's app-server unusable: no other
        // start is tried
        if let Some(why) = shared.warm.unusable() {
            tracing::debug!("{why}: this one-shot call runs with codex exec");
            return Ok(false);
        }
        let (home, cwd) = match &self.dir {
            Some(d) => (None, d.clone()),
            None => {
                let (t, c) = scratch_dir()?;
                (Some((t, c.clone())), c)
            }
        };
        let spec = self.spec_in(env, cwd)?;
        let record = SessionId::generate();
        let started = start_warm(
            start_for(env),
            &spec,
            || {
                Some(crate::actors::inflight::record_hook(
                    shared.store.clone(),
                    record.clone(),
                ))
            },
            || {
                let _ = crate::actors::inflight::off_record(&shared.store, &record);
            },
        )
        .await?;
        let WarmStart::Process(w) = started else {
            return Ok(false);
        };
        let _ = shared.store.flush().await;
        let serves = self.serves.clone();
        let store = shared.store.clone();
        self.spoiled = false;
        self.server = Some(OneShotServer::new(
            self.client,
            serves,
            w,
            record,
            home,
            store,
        ));
        Ok(true)
    }

    /// Give the process back for the next call of its client (after it let go of this call's
    /// thread), or kill it (a turn that did not complete: never used again).
    async fn give_back(&mut self, shared: &Shared) {
        let Some(mut server) = self.server.take() else {
            return;
        };
        let reusable = !self.spoiled
            && match server.process.as_mut() {
                Some(w) => w.forget_thread().await && w.reusable() && !w.exited(),
                None => false,
            };
        if !reusable {
            return server.kill().await;
        }
        if let Some(refused) = shared.warm.put_one_shot(server) {
            refused.retire().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::actors::client::ClientContext;
    use crate::config::{Backend, Config, Settings};
    use crate::turn::backend::{SinkHooks, TurnAsk};

    /// A warm turn is chosen when it is planned, then waits for its slot: an app-server start
    /// that fails meanwhile (codex's app-server found unusable) sends it to `codex exec`, a
    /// session's and a one-shot call's alike, rather than to another start that fails too.
    #[tokio::test]
    async fn a_turn_chosen_warm_runs_with_exec_once_the_app_server_is_found_unusable_since() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let settings = Settings {
            roots: Some(root.to_string_lossy().into_owned()),
            store: Some(root.join("store")),
            codex_bin: Some(PathBuf::from("/nonexistent/codex")),
            backend: Some(Backend::AppServer),
            ..Default::default()
        };
        let vars = vec![("HOME".to_owned(), root.to_string_lossy().into_owned())];
        let config = Config::from_settings(&settings, &root, &vars).unwrap();
        let store = crate::store::Store::open(&config.store_dir).unwrap();
        let client = ClientContext::new(config.clone(), &vars);
        let shared = Arc::new(Shared::new(
            Arc::new(config),
            client.common.clone(),
            client.codex_home.clone(),
            store,
        ));
        let cancel = tokio_util::sync::CancellationToken::new();
        let ask = || TurnAsk {
            common: client.common_for(false),
            timeout: Duration::from_secs(5),
            prior_usage: Default::default(),
            progress: None,
            hooks: SinkHooks::spawns(Arc::new(|_: &crate::codex::process::SpawnInfo| {})),
        };
        let closer: Closer = Arc::new(|| {});
        let session = || {
            Source::Session(SessionSource {
                shared: shared.clone(),
                id: SessionId::parse("sessionId", "s").unwrap(),
                closer: closer.clone(),
                process: None,
            })
        };
        let one_shot = || {
            Source::OneShot(OneShotSource::new(
                client.id,
                Serves::Scratch { search: false },
                None,
            ))
        };
        // the control: chosen warm, and still admitted
        assert!(crate::turn::backend::warm_chosen(&shared, true));
        let (env, _) = TurnEnv::enter(&shared, &client, &cancel, ask())
            .await
            .unwrap();
        let mut s = session();
        assert!(s.admit(&env), "a session's warm turn is admitted");
        s.settle();
        assert!(one_shot().admit(&env), "a one-shot warm turn is admitted");
        drop(env);
        // a start failed since the turn was chosen
        shared.warm.record(Err("no app-server".into()));
        let (env, _) = TurnEnv::enter(&shared, &client, &cancel, ask())
            .await
            .unwrap();
        assert!(!session().admit(&env), "a session's turn goes to exec");
        assert!(!one_shot().admit(&env), "a one-shot turn goes to exec");
        assert!(!crate::turn::backend::warm_chosen(&shared, true));
    }
}

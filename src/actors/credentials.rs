//! A host's credentials end with the host: what a host's credentials are ([`Credentials`]),
//! who holds them now ([`HeldCredentials`], one count per credential set, taken by a
//! connection's [`CredentialsHold`]), and the one rule every keeper of a warm process asks
//! ([`HeldCredentials::held`]): a process started with credentials nobody holds any more is
//! closed, unless it runs a turn (a task's or a background turn keeps it until it ends).
//!
//! The owner serves many hosts; a warm `codex app-server` carries the environment of the host
//! it was started for (its API key readable in `/proc/PID/environ` to any process of the same
//! user). When that host's last connection is gone, nothing of the owner should go on
//! holding its key: the keeper closes the spare and the idle one-shot app-servers started with
//! it, each live session closes its idle warm process started with it (a running turn's is
//! closed once the turn ends), and no new spare is started with it. The owning process's own
//! client (its stdio client, its HTTP listener's) holds its credentials for the process's life.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

/// A host's credentials: the values of the secret-named variables (`OPENAI_API_KEY` first,
/// every name [`crate::security::redact::is_secret_name`] marks) of the environment codex gets,
/// kept only as one SHA-256 digest of the sorted distinct values (no copy of a secret). Two
/// environments with the same secret values have the same credentials; one with none has
/// [`Credentials::NONE`], which nobody needs to hold.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Credentials(Option<[u8; 32]>);

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            // a few bytes of the digest, enough to tell two sets apart in a log
            Some(d) => write!(
                f,
                "Credentials({:02x}{:02x}{:02x}{:02x})",
                d[0], d[1], d[2], d[3]
            ),
            None => f.write_str("Credentials(none)"),
        }
    }
}

impl Credentials {
    /// No secret at all.
    pub const NONE: Credentials = Credentials(None);

    /// The credentials of the environment `env` (name, value pairs): its secret-named
    /// variables' non-empty values.
    pub fn of<K: AsRef<str>, V: AsRef<str>>(env: impl IntoIterator<Item = (K, V)>) -> Credentials {
        let mut values: Vec<String> = env
            .into_iter()
            .filter(|(k, v)| {
                !v.as_ref().is_empty() && crate::security::redact::is_secret_name(k.as_ref())
            })
            .map(|(_, v)| v.as_ref().to_owned())
            .collect();
        if values.is_empty() {
            return Credentials::NONE;
        }
        values.sort_unstable();
        values.dedup();
        let mut h = Sha256::new();
        for v in &values {
            // length-prefixed: no two lists of values hash the same bytes
            h.update((v.len() as u64).to_le_bytes());
            h.update(v.as_bytes());
        }
        Credentials(Some(h.finalize().into()))
    }

    /// [`Credentials::of`] an environment as codex gets it (a spec's, a client's).
    pub fn of_env(env: &[(String, String)]) -> Credentials {
        Credentials::of(env.iter().map(|(k, v)| (k, v)))
    }

    /// Whether there is no secret in it.
    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

/// Called once a credential set's last hold is dropped (see [`HeldCredentials::on_release`]).
type OnRelease = Box<dyn Fn(Credentials) + Send + Sync>;

/// The credentials held now: the owning process's own, for its life, and one count per
/// credential set of the connections open now (each holds its own [`CredentialsHold`]).
pub struct HeldCredentials {
    own: Credentials,
    counts: Mutex<HashMap<[u8; 32], usize>>,
    on_release: OnceLock<OnRelease>,
}

impl HeldCredentials {
    /// The count of a process whose own client has the credentials `own` (held for its life:
    /// its stdio client and its HTTP listener's clients use them).
    pub fn new(own: Credentials) -> Arc<HeldCredentials> {
        Arc::new(HeldCredentials {
            own,
            counts: Mutex::new(HashMap::new()),
            on_release: OnceLock::new(),
        })
    }

    /// What to do once a credential set's last hold is dropped (set once, by the bridge's
    /// start: tell the keeper and the live sessions). It runs outside the count's lock.
    pub fn on_release(&self, f: impl Fn(Credentials) + Send + Sync + 'static) {
        let _ = self.on_release.set(Box::new(f));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], usize>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hold `creds` until the returned hold is dropped (a connection's, from its accepted
    /// hello to its end).
    pub fn hold(self: &Arc<Self>, creds: Credentials) -> CredentialsHold {
        if let Some(d) = creds.0 {
            *self.lock().entry(d).or_insert(0) += 1;
        }
        CredentialsHold {
            held: self.clone(),
            creds,
        }
    }

    /// The rule: whether a process started with `creds` may be kept. Yes when it carries no
    /// secret, when they are the owning process's own, or while a connection holds them.
    pub fn held(&self, creds: Credentials) -> bool {
        match creds.0 {
            None => true,
            Some(d) => creds == self.own || self.lock().get(&d).is_some_and(|n| *n > 0),
        }
    }

    /// [`HeldCredentials::held`] for a process started with the environment `env`.
    pub fn held_by(&self, env: &[(String, String)]) -> bool {
        self.held(Credentials::of_env(env))
    }

    /// Drop one hold of `creds`; at the last, tell whoever listens.
    fn release(&self, creds: Credentials) {
        let Some(d) = creds.0 else {
            return;
        };
        let last = {
            let mut counts = self.lock();
            match counts.get_mut(&d) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                Some(_) => {
                    counts.remove(&d);
                    true
                }
                None => false,
            }
        };
        if last && creds != self.own {
            tracing::info!(
                credentials = ?creds,
                "a host's last connection is gone: its warm codex processes are closed"
            );
            if let Some(f) = self.on_release.get() {
                f(creds);
            }
        }
    }
}

/// One connection's hold of its host's credentials; dropped when the connection ends.
pub struct CredentialsHold {
    held: Arc<HeldCredentials>,
    creds: Credentials,
}

impl Drop for CredentialsHold {
    fn drop(&mut self) {
        self.held.release(self.creds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(key: &str) -> Vec<(String, String)> {
        vec![
            ("HOME".into(), "/home/u".into()),
            ("OPENAI_API_KEY".into(), key.into()),
        ]
    }

    #[test]
    fn credentials_are_the_secret_named_values_only() {
        let a = Credentials::of(env("key-a"));
        assert_eq!(a, Credentials::of(env("key-a")));
        assert_ne!(a, Credentials::of(env("key-b")));
        // another HOME: the same credentials
        let mut other_home = env("key-a");
        other_home[0].1 = "/elsewhere".into();
        assert_eq!(a, Credentials::of(other_home));
        // a second secret makes another set, in any order
        let mut two = env("key-a");
        two.push(("GITHUB_TOKEN".into(), "tok".into()));
        let of = Credentials::of_env;
        assert_ne!(a, of(&two));
        let before = of(&two);
        two.reverse();
        assert_eq!(of(&two), before);
        // no secret, or an empty one: none
        assert!(Credentials::of([("HOME", "/h"), ("OPENAI_API_KEY", "")]).is_none());
        assert!(!a.is_none());
        // the digest is all that is kept or shown
        assert!(!format!("{a:?}").contains("key-a"));
        // values are length-prefixed: ["ab", "c"] is not ["a", "bc"]
        assert_ne!(
            Credentials::of([("A_KEY", "ab"), ("B_KEY", "c")]),
            Credentials::of([("A_KEY", "a"), ("B_KEY", "bc")])
        );
    }

    #[test]
    fn credentials_are_held_while_a_connection_holds_them_and_released_at_the_last() {
        let own = Credentials::of(env("own-key"));
        let held = HeldCredentials::new(own);
        let released = Arc::new(Mutex::new(Vec::new()));
        let seen = released.clone();
        held.on_release(move |c| seen.lock().unwrap().push(c));
        let a = Credentials::of(env("key-a"));
        assert!(!held.held(a), "nobody holds a yet");
        assert!(held.held(own), "the process's own are held for its life");
        assert!(held.held(Credentials::NONE), "no secret needs no holder");
        let first = held.hold(a);
        let second = held.hold(a);
        assert!(held.held(a));
        assert!(held.held_by(&env("key-a")));
        drop(first);
        assert!(held.held(a), "one connection still holds them");
        assert!(released.lock().unwrap().is_empty());
        drop(second);
        assert!(!held.held(a), "the last connection is gone");
        assert_eq!(*released.lock().unwrap(), vec![a]);
        // held again by a new connection of the same host
        let again = held.hold(a);
        assert!(held.held(a));
        drop(again);
        assert_eq!(released.lock().unwrap().len(), 2);
        // the process's own and the empty set are never released
        drop(held.hold(own));
        drop(held.hold(Credentials::NONE));
        assert!(held.held(own));
        assert_eq!(released.lock().unwrap().len(), 2);
    }
}

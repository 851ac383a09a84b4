//! Logs: tracing to stderr only (stdout is the MCP channel), `RUST_LOG`-style filtering, text
//! or JSON lines, and every line redacted before it is written: by the process-wide redactor
//! and by the literal secrets of every client connection open now ([`hold_secrets`]).
//!
//! Whatever `RUST_LOG` says, other crates log at `info` at most and rmcp at `warn` ([`capped`]):
//! their debug lines dump whole protocol messages (a tool call's arguments, a question's URL),
//! which carry what a host sent, and an owner daemon knows a host's secret values only while
//! its connection is open.

use std::io::Write;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::security::redact::{ClientSecrets, redact};

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// A writer per log event: buffers the formatted event and writes it redacted to stderr.
pub struct RedactingStderr;

/// One event's buffer.
pub struct EventBuf(Vec<u8>);

impl Write for EventBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventBuf {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.0);
        let text = redact(&text);
        let text = redact_held(&text);
        let text = hide_page_secrets(&text).into_owned();
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

/// What a question's URL elicitation says just before the code that the page's Approve needs
/// (`mcp::budget::page_message` writes it so; [`hide_page_secrets`] hides what follows).
pub const PAGE_CODE_LEAD: &str = "Decide on the page; code ";

/// `text` with every question page's id cut to its first 6 characters and every code the
/// page's Approve needs hidden: a page's address and its code decide a question (whoever has
/// both can approve), and rmcp's logs of its messages (its `info` level and below) carry the
/// URL-mode elicitations that hold both. Nothing that decides a question is logged whole.
pub fn hide_page_secrets(text: &str) -> std::borrow::Cow<'_, str> {
    static PAGE_ID: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static CODE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let id = PAGE_ID.get_or_init(|| {
        regex::Regex::new(r"/q/([0-9a-f]{6})[0-9a-f]{26,}").expect("a valid pattern")
    });
    let code = CODE.get_or_init(|| {
        regex::Regex::new(&format!(r"({})[0-9]+", regex::escape(PAGE_CODE_LEAD)))
            .expect("a valid pattern")
    });
    match id.replace_all(text, "/q/$1…") {
        std::borrow::Cow::Borrowed(t) => code.replace_all(t, "${1}…"),
        std::borrow::Cow::Owned(t) => {
            std::borrow::Cow::Owned(code.replace_all(&t, "${1}…").into_owned())
        }
    }
}

impl<'a> MakeWriter<'a> for RedactingStderr {
    type Writer = EventBuf;

    fn make_writer(&'a self) -> Self::Writer {
        EventBuf(Vec::with_capacity(256))
    }
}

/// The filter without `RUST_LOG`: this crate's `info` lines, rmcp's warnings only (its `info`
/// lines are debug dumps of whole protocol messages).
pub const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// This crate's target prefix: only its own lines may be logged below `info`.
const OWN_TARGET: &str = "codex_mcp_bridge";

/// Whether an event or span of `target` at `level` may be logged at all, whatever `RUST_LOG`
/// says: this crate's at any level; rmcp's at `warn` and above (its `info` and `debug` lines
/// carry whole JSON-RPC messages: tool arguments, prompts, elicitations and their URLs); every
/// other crate's at `info` and above (their `debug` and `trace` lines carry the bytes they move:
/// HTTP headers and bodies).
pub fn capped(target: &str, level: &tracing::Level) -> bool {
    let own = target == OWN_TARGET || target.starts_with("codex_mcp_bridge::");
    if own {
        return true;
    }
    let rmcp = target == "rmcp" || target.starts_with("rmcp::");
    let most = if rmcp {
        tracing::Level::WARN
    } else {
        tracing::Level::INFO
    };
    // tracing orders levels by verbosity: ERROR < WARN < INFO < DEBUG < TRACE
    *level <= most
}

/// Install the global subscriber (once). `RUST_LOG` filters within [`capped`]; the default is
/// [`DEFAULT_FILTER`].
pub fn init(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let cap = tracing_subscriber::filter::filter_fn(|m| capped(m.target(), m.level()));
    let registry = tracing_subscriber::registry().with(filter).with(cap);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(RedactingStderr)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => registry.with(fmt).try_init(),
        LogFormat::Json => registry.with(fmt.json()).try_init(),
    };
}

/// The literal secrets of the client connections open now, by connection.
static HELD: std::sync::RwLock<Vec<(u64, std::sync::Arc<ClientSecrets>)>> =
    std::sync::RwLock::new(Vec::new());

/// A connection's literal secrets, redacted from every log line while it is held (the
/// connection is open); dropped, they are gone from this process.
pub struct HeldSecrets(u64);

/// Redact `secrets` (a client connection's, from its hello) from every log line until the
/// guard is dropped. The owner daemon's own redactor holds no host's secret (it may outlive
/// the host); this is how a host's values stay out of its log while the host is connected.
pub fn hold_secrets(secrets: &ClientSecrets) -> Option<HeldSecrets> {
    if secrets.is_empty() {
        return None;
    }
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut held = HELD.write().unwrap_or_else(|e| e.into_inner());
    held.push((n, std::sync::Arc::new(secrets.clone())));
    Some(HeldSecrets(n))
}

impl Drop for HeldSecrets {
    fn drop(&mut self) {
        let mut held = HELD.write().unwrap_or_else(|e| e.into_inner());
        held.retain(|(n, _)| *n != self.0);
    }
}

/// `text` without the literal secrets of any connection held now.
fn redact_held(text: &str) -> std::borrow::Cow<'_, str> {
    let held = HELD.read().unwrap_or_else(|e| e.into_inner());
    let mut out = std::borrow::Cow::Borrowed(text);
    for (_, secrets) in held.iter() {
        if let std::borrow::Cow::Owned(clean) = secrets.redact_literals(&out) {
            out = std::borrow::Cow::Owned(clean);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Other crates' debug lines (rmcp's dump whole messages) never pass, whatever `RUST_LOG`
    /// enables; this crate's do.
    #[test]
    fn only_this_crates_lines_are_logged_below_info() {
        use tracing::Level;
        assert!(capped("codex_mcp_bridge::hub::owner", &Level::TRACE));
        assert!(capped("codex_mcp_bridge", &Level::DEBUG));
        assert!(!capped("rmcp::service", &Level::DEBUG));
        assert!(!capped("rmcp::service", &Level::INFO));
        assert!(capped("rmcp::service", &Level::WARN));
        assert!(!capped("rmcp", &Level::TRACE));
        assert!(!capped("hyper::proto", &Level::DEBUG));
        assert!(!capped("codex_mcp_bridgeX", &Level::DEBUG));
        assert!(capped("hyper::proto", &Level::INFO));
        assert!(capped("sled", &Level::ERROR));
    }

    /// A connection's literal secrets are redacted from log lines while it is held, and only
    /// then.
    #[test]
    fn a_held_connections_secrets_leave_no_log_line() {
        let (secrets, _) = ClientSecrets::bounded(["held-secret-value-0451"]);
        let line = "prompt: echo held-secret-value-0451";
        assert_eq!(redact_held(line), line);
        let guard = hold_secrets(&secrets).expect("held");
        assert_eq!(redact_held(line), "prompt: echo [REDACTED]");
        drop(guard);
        assert_eq!(redact_held(line), line);
    }

    #[test]
    fn a_page_address_is_logged_without_its_id() {
        let id = "0123456789abcdef".repeat(4);
        let line = format!("url: \"http://127.0.0.1:4242/q/{id}\" sent");
        let logged = hide_page_secrets(&line);
        assert_eq!(logged, "url: \"http://127.0.0.1:4242/q/012345…\" sent");
        assert_eq!(hide_page_secrets("no page here"), "no page here");
    }

    #[test]
    fn a_pages_code_is_logged_without_its_digits() {
        let id = "0123456789abcdef".repeat(4);
        // as rmcp's log of a URL-mode elicitation writes it
        let line = format!(
            "UrlElicitationParams {{ message: \"Codex: Run a command unsandboxed? {PAGE_CODE_LEAD}\
             042917\", url: \"http://127.0.0.1:4242/q/{id}\" }}"
        );
        let logged = hide_page_secrets(&line);
        assert!(!logged.contains("042917"), "{logged}");
        assert!(!logged.contains(&id), "{logged}");
        assert!(logged.contains("Decide on the page; code …\""), "{logged}");
        assert_eq!(hide_page_secrets("exit code 042917"), "exit code 042917");
    }
}

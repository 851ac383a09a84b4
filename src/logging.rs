//! Logs: tracing to stderr only (stdout is the MCP channel), `RUST_LOG`-style filtering, text
//! or JSON lines, and every line redacted before it is written.

use std::io::Write;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::security::redact::redact;

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
        let text = hide_page_secrets(&redact(&text)).into_owned();
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

/// Install the global subscriber (once). `RUST_LOG` filters; the default is
/// [`DEFAULT_FILTER`].
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(RedactingStderr)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

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

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
        let _ = std::io::stderr().lock().write_all(redact(&text).as_bytes());
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

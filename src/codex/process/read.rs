//! Reading a codex child's output: stdout as JSONL through a line codec with a maximum length
//! (an over-long line is skipped and counted, and reading goes on) under a total cap (past it
//! the turn is stopped); stderr as a bounded tail.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;

use super::turn::{Ending, Limits};
use crate::codex::events::{Event, Parsed, Transcript, parse_line};

/// How much stderr is read before the kept tail: the tail is redacted with this much of what
/// came before it, so that a secret (shorter than this) cut by the start of the tail is
/// recognised whole and its remains removed.
pub(super) const STDERR_REDACTION_MARGIN: usize = 64 * 1024;

/// When reading stops early.
pub(super) struct Stops<'a> {
    pub(super) cancel: &'a CancellationToken,
    pub(super) deadline: Instant,
    /// The timeout the deadline stands for (for [`Ending::TimedOut`]).
    pub(super) timeout: Duration,
}

/// Read codex's stdout into `transcript` until it closes (`None`), or until a cancel, the
/// deadline or the output cap ends the turn (`Some`). `on_event` sees every parsed event.
pub(super) async fn read_events(
    stdout: impl AsyncRead + Unpin,
    limits: &Limits,
    stops: &Stops<'_>,
    transcript: &mut Transcript,
    on_event: &mut (impl FnMut(&Event) + Send),
) -> Option<Ending> {
    let cap = limits.max_output_bytes;
    let capped = Counted {
        inner: stdout.take(cap as u64 + 1),
        read: 0,
    };
    let mut lines = FramedRead::new(
        capped,
        LinesCodec::new_with_max_length(limits.max_line_bytes),
    );
    let deadline = tokio::time::sleep_until(stops.deadline);
    tokio::pin!(deadline);
    let mut errored = false;
    loop {
        tokio::select! {
            biased;
            _ = stops.cancel.cancelled() => return Some(Ending::Cancelled),
            _ = &mut deadline => return Some(Ending::TimedOut { after: stops.timeout }),
            next = lines.next() => match next {
                Some(Ok(line)) => {
                    errored = false;
                    if lines.get_ref().read > cap {
                        return Some(Ending::OutputCapExceeded { limit: cap });
                    }
                    let parsed = parse_line(&line);
                    if let Parsed::Event(ev) = &parsed {
                        on_event(ev);
                    }
                    transcript.apply(&parsed);
                }
                Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                    // the codec discards up to the next newline; after this error it yields
                    // None once and then resumes
                    transcript.malformed_lines += 1;
                    errored = true;
                }
                Some(Err(LinesCodecError::Io(e))) => {
                    tracing::warn!(error = %e, "reading codex stdout failed");
                    return None;
                }
                None if lines.get_ref().read > cap => {
                    return Some(Ending::OutputCapExceeded { limit: cap });
                }
                None if errored => errored = false,
                None => return None,
            },
        }
    }
}

/// Keep the last `cap` bytes of a stream (lossy UTF-8).
pub(super) async fn read_tail(mut r: impl AsyncRead + Unpin, cap: usize) -> String {
    let mut tail: VecDeque<u8> = VecDeque::with_capacity(cap.min(64 * 1024));
    let mut buf = vec![0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend(&buf[..n]);
                let excess = tail.len().saturating_sub(cap);
                tail.drain(..excess);
            }
        }
    }
    String::from_utf8_lossy(tail.make_contiguous()).into_owned()
}

/// Read at most `cap` bytes of a stream; the rest is read and dropped (so the writer never
/// blocks on a full pipe).
pub(super) async fn read_head(mut r: impl AsyncRead + Unpin, cap: usize) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(head.len()).min(n);
                head.extend_from_slice(&buf[..room]);
            }
        }
    }
    head
}

/// An `AsyncRead` that counts the bytes that went through. Wrapped around `take(cap + 1)`, a
/// count past `cap` means the output cap was exceeded (and reading stopped there).
struct Counted<R> {
    inner: R,
    read: usize,
}

impl<R: AsyncRead + Unpin> AsyncRead for Counted<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &res {
            self.read += buf.filled().len() - before;
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counted_take_reads_one_byte_past_the_cap_and_stops() {
        let data = [b'x'; 100];
        let mut r = Counted {
            inner: (&data[..]).take(11),
            read: 0,
        };
        let mut out = vec![];
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(r.read, 11);
    }

    #[tokio::test]
    async fn stderr_keeps_only_the_tail() {
        let data: Vec<u8> = (0..100_000).map(|i| b'a' + (i % 26) as u8).collect();
        let tail = read_tail(&data[..], 1000).await;
        assert_eq!(tail.len(), 1000);
        assert_eq!(tail.as_bytes(), &data[99_000..]);
    }

    #[tokio::test]
    async fn a_short_command_keeps_only_the_head() {
        let data = [b'y'; 20_000];
        assert_eq!(read_head(&data[..], 100).await, vec![b'y'; 100]);
    }
}

//! The JSONL event parser and the transcript that folds a turn's events, on any byte stream.
//!
//! The bytes are framed the way the runner frames codex's stdout (`LinesCodec` with a line
//! cap; an over-long line is counted and skipped; a line that is not UTF-8 ends the reading),
//! fed in pipe-sized chunks. Every line goes through `parse_line`, `describe`, `classify` and
//! `Transcript::apply`. Asserted:
//! - nothing panics;
//! - every line is counted once: as an event, an unknown type (type names kept to 64 chars) or
//!   a malformed line (over-cap lines included);
//! - the transcript stays bounded: at most `MAX_COMMANDS_KEPT` commands and changed files (no
//!   duplicate file), and the text it keeps is never more than the input (no amplification);
//! - a progress line from `describe` is one line of bounded length, whatever the event holds;
//! - memory: the peak of live heap bytes while one input is processed stays within a linear
//!   bound of the input's size (a counting global allocator measures it), so no input can make
//!   the parser reserve memory out of proportion to what it read.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::BytesMut;
use codex_mcp_bridge::codex::events::{
    Event, Item, MAX_COMMANDS_KEPT, Parsed, Transcript, classify, describe, parse_line,
};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};

/// Live heap bytes and their peak, counted for every Rust allocation.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The line cap, small so fuzz inputs reach it (the server's default is 8 MiB).
const MAX_LINE: usize = 1024;
/// Bytes delivered per read, as a pipe would in pieces.
const CHUNK: usize = 97;
/// Longest progress line `describe` may produce, in characters.
const MAX_PROGRESS_CHARS: usize = 200;
/// Peak heap bound: `SLOPE` bytes per input byte, plus a fixed allowance.
const SLOPE: usize = 64;
const FIXED: usize = 256 * 1024;

#[derive(Default)]
struct Counts {
    lines: u64,
    events: u64,
    unknown: u64,
    unknown_items: u64,
    malformed: u64,
    over_cap: u64,
}

fn on_line(line: &str, t: &mut Transcript, c: &mut Counts) {
    c.lines += 1;
    let parsed = parse_line(line);
    match &parsed {
        Parsed::Event(ev) => {
            c.events += 1;
            if matches!(
                ev,
                Event::ItemCompleted {
                    item: Item::Unknown
                }
            ) {
                c.unknown_items += 1;
            }
            if let Some(p) = describe(ev) {
                assert!(
                    !p.contains('\n') && !p.contains('\r'),
                    "a progress line spans lines: {p:?} from {line:?}"
                );
                assert!(
                    p.chars().count() <= MAX_PROGRESS_CHARS,
                    "a progress line of {} chars from {line:?}",
                    p.chars().count()
                );
            }
            match ev {
                Event::Error { message } => {
                    // exec's retry notice is read as `Event::Retrying` where its line is parsed
                    assert!(
                        !message.trim_start().starts_with("Reconnecting"),
                        "a retry notice read as a failure: {message:?}"
                    );
                    let _ = classify(message);
                }
                Event::TurnFailed {
                    message: Some(message),
                    ..
                } => {
                    let _ = classify(message);
                }
                _ => {}
            }
        }
        Parsed::Unknown(kind) => {
            c.unknown += 1;
            assert!(kind.chars().count() <= 64, "{kind:?}");
        }
        Parsed::Malformed => c.malformed += 1,
    }
    t.apply(&parsed);
}

/// Text the transcript keeps, in bytes.
fn retained(t: &Transcript) -> usize {
    t.thread_id.as_ref().map_or(0, |id| id.to_arg().len())
        + t.last_message.as_ref().map_or(0, String::len)
        + t.failure.as_ref().map_or(0, String::len)
        + t.commands
            .iter()
            .map(|c| c.command.len() + c.status.as_str().len())
            .sum::<usize>()
        + t.files_changed.iter().map(String::len).sum::<usize>()
}

fuzz_target!(|data: &[u8]| {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);

    let mut codec = LinesCodec::new_with_max_length(MAX_LINE);
    let mut buf = BytesMut::new();
    let mut t = Transcript::default();
    let mut c = Counts::default();
    let mut stopped = false;
    let mut chunks = data.chunks(CHUNK).peekable();
    while !stopped {
        let eof = chunks.peek().is_none();
        if let Some(chunk) = chunks.next() {
            buf.extend_from_slice(chunk);
        }
        loop {
            let next = if eof {
                codec.decode_eof(&mut buf)
            } else {
                codec.decode(&mut buf)
            };
            match next {
                Ok(Some(line)) => on_line(&line, &mut t, &mut c),
                Ok(None) => break,
                Err(LinesCodecError::MaxLineLengthExceeded) => {
                    // as the runner does: count it, the codec skips to the next newline
                    c.over_cap += 1;
                    t.malformed_lines += 1;
                }
                Err(LinesCodecError::Io(_)) => {
                    // not UTF-8: the runner stops reading
                    stopped = true;
                    break;
                }
            }
        }
        if eof {
            break;
        }
    }

    assert_eq!(c.lines, c.events + c.unknown + c.malformed);
    assert_eq!(t.malformed_lines, c.malformed + c.over_cap);
    assert_eq!(t.unknown_events, c.unknown + c.unknown_items);
    assert!(t.commands.len() <= MAX_COMMANDS_KEPT);
    assert!(t.files_changed.len() <= MAX_COMMANDS_KEPT);
    for (i, f) in t.files_changed.iter().enumerate() {
        assert!(!t.files_changed[..i].contains(f), "duplicate file {f:?}");
    }
    let kept = retained(&t);
    assert!(
        kept <= data.len(),
        "the transcript keeps {kept} bytes of text from {} bytes of input",
        data.len()
    );
    drop(t);
    drop(buf);
    let peak = PEAK.load(Relaxed).saturating_sub(base);
    assert!(
        peak <= SLOPE * data.len() + FIXED,
        "peak heap {peak} bytes for {} bytes of input",
        data.len()
    );
});

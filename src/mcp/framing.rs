//! stdio framing in front of rmcp, so that every request line gets an answer.
//!
//! rmcp's stdio transport silently drops a line that serde_json cannot parse, and serde_json
//! stops at 128 levels of nesting: a request nested deeper was never answered, and its caller
//! waited forever. Here each input line is checked first; a request too deep to parse is
//! answered with a JSON-RPC error carrying its `id` (found by a shallow scan), a line that is
//! not JSON at all with a `Parse error` (-32700, `id` null) and a log line, an empty line is
//! skipped, and everything else is passed to rmcp unchanged. rmcp's output and these errors reach stdout one whole line
//! at a time, so stdout stays pure JSON-RPC.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Longest input line read (rmcp's own limit).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Most of an over-long line's top level ([`Skeleton`]) kept, to find its `id` and answer it.
pub const SKELETON_BYTES: usize = 256 * 1024;
/// Longest top-level string of an over-long line kept in its [`Skeleton`] (a longer one becomes
/// `null`: no id is that long).
const SKELETON_STRING_BYTES: usize = 4096;
/// Buffer between the framing tasks and rmcp.
const PIPE_BYTES: usize = 1024 * 1024;

/// Wrap `input`/`output` (the process's stdin and stdout): returns the reader and writer to give
/// rmcp. Two tasks run until `input` ends and rmcp closes its side.
pub fn guard<I, O>(input: I, output: O) -> (DuplexStream, DuplexStream)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    guard_until(input, output, CancellationToken::new()).io
}

/// A guarded stream pair: what to give rmcp, and the task that writes rmcp's lines out.
pub struct Framed {
    /// rmcp's reader and writer.
    pub io: (DuplexStream, DuplexStream),
    /// Ends once every line rmcp wrote (and every answer of the framing's own) is written to
    /// the output, or the output failed: a process that exits awaits it first, or its last
    /// answers are lost with it.
    pub written: tokio::task::JoinHandle<()>,
}

/// Wait (at most `limit`) until everything rmcp wrote is written out ([`Framed::written`]):
/// call it once rmcp's service ended.
pub async fn flushed(written: tokio::task::JoinHandle<()>, limit: std::time::Duration) {
    if tokio::time::timeout(limit, written).await.is_err() {
        tracing::warn!("the last answers could not be written out in time");
    }
}

/// How long the last answers of a connection may take to be written out.
pub const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// [`guard`], cancelling `input_ended` once `input` ended (the client closed it, or died) and
/// every line read before was passed on: the connection's plain calls end then, at once, while
/// rmcp still answers what it was asked.
///
/// One piece (about 90 lines): the two tasks share the duplex pipes and the channel of the
/// answers the framing writes itself (`errors_tx`/`errors_rx`), and each task's loop is a flat
/// list of checks, one per kind of line, in the order they must run.
pub fn guard_until<I, O>(input: I, output: O, input_ended: CancellationToken) -> Framed
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_in, mut feed) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (errors_tx, mut errors_rx) = mpsc::unbounded_channel::<String>();

    tokio::spawn(async move {
        let mut lines = BufReader::new(input);
        let mut buf = Vec::with_capacity(4096);
        loop {
            buf.clear();
            match read_line_capped(&mut lines, &mut buf).await {
                Ok(None) => break,
                Ok(Some(false)) => {
                    // over-long: not passed on (rmcp would drop it silently), but answered
                    if let Some(answer) = answer_for_too_long_request(&buf) {
                        let _ = errors_tx.send(answer);
                    }
                    continue;
                }
                Ok(Some(true)) => {}
                Err(_) => break,
            }
            if let Some(answer) = answer_for_unparsable(&buf) {
                let _ = errors_tx.send(answer);
                continue;
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue; // an empty line (a person pressing Enter): nothing to answer
            }
            if let Some(why) = not_json(&buf) {
                tracing::warn!(
                    "a line on stdin is not JSON ({why}): answered with a JSON-RPC parse error \
                     (-32700). An MCP client sends one JSON-RPC message per line"
                );
                let _ = errors_tx.send(parse_error_answer(&why));
                continue;
            }
            if let Some(answer) = answer_for_invalid_request(&buf) {
                let _ = errors_tx.send(answer);
                continue;
            }
            if feed.write_all(&buf).await.is_err() || feed.write_all(b"\n").await.is_err() {
                break;
            }
        }
        let _ = feed.shutdown().await;
        input_ended.cancel();
    });

    let written = tokio::spawn(async move {
        let mut output = output;
        let mut from_rmcp = BufReader::new(from_rmcp).lines();
        let (mut rmcp_open, mut errors_open) = (true, true);
        while rmcp_open || errors_open {
            let line = tokio::select! {
                l = from_rmcp.next_line(), if rmcp_open => match l {
                    Ok(Some(l)) if l.len() > MAX_LINE_BYTES => {
                        // a relay could not pass it on: answer its id instead
                        match answer_for_too_long_response(&Skeleton::of(l.as_bytes())) {
                            Some(e) => e,
                            None => {
                                tracing::warn!(bytes = l.len(), "a message too long to send was dropped");
                                continue;
                            }
                        }
                    }
                    Ok(Some(l)) => l,
                    _ => { rmcp_open = false; continue; }
                },
                e = errors_rx.recv(), if errors_open => match e {
                    Some(e) => e,
                    None => { errors_open = false; continue; }
                },
            };
            if output.write_all(line.as_bytes()).await.is_err()
                || output.write_all(b"\n").await.is_err()
                || output.flush().await.is_err()
            {
                break;
            }
        }
    });

    Framed {
        io: (rmcp_in, rmcp_out),
        written,
    }
}

/// Read one line into `buf` (without the newline). `None` at EOF; `Some(false)` when the line
/// was longer than [`MAX_LINE_BYTES`]: `buf` then holds its top level ([`Skeleton`], enough to
/// find its `id`), and the rest of it is skipped. Not cancel-safe: call it from a task that
/// reads lines and nothing else.
pub(crate) async fn read_line_capped<R: AsyncBufReadExt + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    read_line_capped_at_eof(r, buf, true).await
}

/// [`read_line_capped`]; `partial`: whether a last line without its newline counts (from a
/// peer that died mid-write it is a cut message: then `None`).
pub(crate) async fn read_line_capped_at_eof<R: AsyncBufReadExt + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    partial: bool,
) -> std::io::Result<Option<bool>> {
    // past the cap, what was read and the rest go through the line's skeleton only
    let mut skeleton: Option<Skeleton> = None;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            if let Some(s) = skeleton.take() {
                *buf = s.out;
                return Ok(partial.then_some(false));
            }
            return Ok(if buf.is_empty() || !partial {
                None
            } else {
                Some(true)
            });
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        match &mut skeleton {
            Some(s) => s.feed(&chunk[..take]),
            None if buf.len() + take > MAX_LINE_BYTES => {
                let mut s = Skeleton::default();
                s.feed(buf);
                s.feed(&chunk[..take]);
                skeleton = Some(s);
            }
            None => buf.extend_from_slice(&chunk[..take]),
        }
        r.consume(if done { take + 1 } else { take });
        if done {
            return Ok(match skeleton.take() {
                Some(s) => {
                    *buf = s.out;
                    Some(false)
                }
                None => Some(true),
            });
        }
    }
}

/// The top level of a JSON text too long to keep, in little room: nested objects and arrays
/// become `{}` and `[]`, a top-level string longer than [`SKELETON_STRING_BYTES`] becomes
/// `null`, and at most [`SKELETON_BYTES`] are kept. Its `id` and `method` are found there
/// ([`top_level_member`]) wherever they stand in the line: before or after a long `params`.
#[derive(Default)]
pub struct Skeleton {
    out: Vec<u8>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Where the current top-level string starts in `out`, and its length so far.
    string_start: usize,
    string_len: usize,
}

impl Skeleton {
    /// The skeleton of a whole text.
    pub fn of(text: &[u8]) -> Vec<u8> {
        let mut s = Skeleton::default();
        s.feed(text);
        s.out
    }

    fn keep(&mut self, c: u8) {
        if self.out.len() < SKELETON_BYTES {
            self.out.push(c);
        }
    }

    /// The next bytes of the text.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &c in bytes {
            let top = self.depth <= 1;
            if self.in_string {
                if top {
                    if self.string_len < SKELETON_STRING_BYTES {
                        self.keep(c);
                    }
                    self.string_len += 1;
                }
                if self.escaped {
                    self.escaped = false;
                } else if c == b'\\' {
                    self.escaped = true;
                } else if c == b'"' {
                    self.in_string = false;
                    if top && self.string_len > SKELETON_STRING_BYTES {
                        self.out.truncate(self.string_start);
                        self.out.extend_from_slice(b"null");
                    }
                }
                continue;
            }
            match c {
                b'"' => {
                    self.in_string = true;
                    if top {
                        self.string_start = self.out.len();
                        self.string_len = 0;
                        self.keep(c);
                    }
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth <= 2 {
                        self.keep(c);
                    }
                }
                b'}' | b']' => {
                    if self.depth <= 2 {
                        self.keep(c);
                    }
                    self.depth = self.depth.saturating_sub(1);
                }
                _ if top => self.keep(c),
                _ => {}
            }
        }
    }
}

/// The JSON-RPC error for a request line that is valid JSON text but nested deeper than the
/// parser allows; `None` for every other line (rmcp handles or ignores those itself).
pub fn answer_for_unparsable(line: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(line).ok()?;
    // cheap prefilter: only a line nested about as deep as serde_json's limit is parsed here
    if max_depth(text.as_bytes()) < 120 {
        return None;
    }
    let err = serde_json::from_str::<serde_json::Value>(text).err()?;
    if !err.to_string().contains("recursion limit exceeded") {
        return None;
    }
    // an id that is no JSON number or string as JSON spells it (`-`, `007`, a raw tab in a
    // string) is never copied into the answer, which would then not be JSON: such a request's
    // id cannot be read, and JSON-RPC answers it with a null id
    let id = normal_id(&top_level_id(text)?).unwrap_or_else(|| "null".to_owned());
    Some(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32600,"message":"invalid request: JSON nested deeper than 128 levels"}}}}"#
    ))
}

/// The JSON-RPC error for a request that is JSON but no message rmcp reads (params of the wrong
/// type, a `jsonrpc` other than "2.0", an id that is an object): rmcp answers those with an
/// error that has no `id` member at all, so the caller never learns which of its calls failed
/// and waits for it forever. Answered here with the request's id (`null` when it is no number
/// or string, as JSON-RPC says); `None` for every line rmcp reads, and for lines without both
/// `method` and `id` (notifications and the like are rmcp's to handle).
pub fn answer_for_invalid_request(line: &[u8]) -> Option<String> {
    use serde_json::Value;
    let err = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(line).err()?;
    if err.classify() != serde_json::error::Category::Data {
        return None;
    }
    let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    message.get("method")?;
    let id = match message.get("id")? {
        id @ (Value::Number(_) | Value::String(_)) => id.clone(),
        _ => Value::Null,
    };
    let reason: String = err.to_string().chars().take(300).collect();
    Some(
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32600,
                "message": format!("invalid request: not an MCP request this server reads ({reason})"),
            },
        })
        .to_string(),
    )
}

/// The error for a request line longer than [`MAX_LINE_BYTES`], given its head; `None` when
/// the head shows no request id (a notification or a response: nothing to answer).
pub fn answer_for_too_long_request(head: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    top_level_member(&text, "method")?;
    let id = normal_id(&top_level_id(&text)?)?;
    Some(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32600,"message":"invalid request: the message is longer than {} MiB and was not read"}}}}"#,
        MAX_LINE_BYTES >> 20
    ))
}

/// The error sent in place of an answer longer than [`MAX_LINE_BYTES`], given its head;
/// `None` when the head shows no id or it is not an answer.
pub fn answer_for_too_long_response(head: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    if top_level_member(&text, "method").is_some() {
        return None;
    }
    let id = normal_id(&top_level_id(&text)?)?;
    Some(lost_answer(&id))
}

/// The JSON-RPC error for the call `id` (as JSON text) whose answer was too long to send.
pub fn lost_answer(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"the answer to this call is longer than the {} MiB a message may hold, so it cannot be sent; ask for a shorter answer (maxResponseLength)"}}}}"#,
        MAX_LINE_BYTES >> 20
    )
}

/// An id as JSON text in one spelling (so that ids can be compared), or `None` when it is not
/// a JSON number or string.
pub fn normal_id(raw: &str) -> Option<String> {
    match serde_json::from_str::<serde_json::Value>(raw).ok()? {
        v @ (serde_json::Value::Number(_) | serde_json::Value::String(_)) => Some(v.to_string()),
        _ => None,
    }
}

/// Why `line` is not JSON text (serde_json's reason and position, never the line's content);
/// `None` for JSON text, including JSON nested too deep to parse (that is
/// [`answer_for_unparsable`]'s case, or rmcp's to drop).
pub fn not_json(line: &[u8]) -> Option<String> {
    let err = serde_json::from_slice::<serde::de::IgnoredAny>(line).err()?;
    if err.to_string().contains("recursion limit exceeded") {
        return None;
    }
    Some(err.to_string())
}

/// The JSON-RPC answer to a line that is not JSON: `Parse error` (-32700) with a null `id`, as
/// JSON-RPC 2.0 §5.1 says.
pub fn parse_error_answer(why: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: the line is not JSON ({why})")},
    })
    .to_string()
}

/// The raw value of the top-level `"id"` member of a JSON object (a number or a string), found
/// without parsing the nested parts.
pub fn top_level_id(text: &str) -> Option<String> {
    top_level_member(text, "id")
}

/// The raw value of the top-level member `name` of a JSON object when it is a number or a
/// string, found without parsing the nested parts (a cut text is fine: members past the cut
/// are not found).
pub fn top_level_member(text: &str, name: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    let mut expect_key = false;
    while i < b.len() {
        match b[i] {
            b'{' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expect_key = true,
            b'"' => {
                let end = string_end(b, i)?;
                if depth == 1 && expect_key {
                    expect_key = false;
                    let key = &text[i + 1..end];
                    if key == name {
                        let mut j = end + 1;
                        while j < b.len() && (b[j] as char).is_ascii_whitespace() {
                            j += 1;
                        }
                        if b.get(j) != Some(&b':') {
                            return None;
                        }
                        j += 1;
                        while j < b.len() && (b[j] as char).is_ascii_whitespace() {
                            j += 1;
                        }
                        return match b.get(j)? {
                            b'"' => Some(text[j..=string_end(b, j)?].to_owned()),
                            c if c.is_ascii_digit() || *c == b'-' => {
                                // the whole number (`1.5e3` too); one that reaches the end of
                                // a cut text may be cut too
                                let in_number = |c: u8| c.is_ascii_digit() || b"-+.eE".contains(&c);
                                let k = (j..b.len()).find(|&k| !in_number(b[k]))?;
                                Some(text[j..k].to_owned())
                            }
                            _ => None,
                        };
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The deepest nesting of objects and arrays in a JSON text (strings skipped).
fn max_depth(b: &[u8]) -> usize {
    let (mut depth, mut max, mut i) = (0usize, 0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => match string_end(b, i) {
                Some(end) => i = end,
                None => return max,
            },
            _ => {}
        }
        i += 1;
    }
    max
}

/// The index of the closing quote of the string starting at `start`.
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(id: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ping","arguments":{{"x":{}{}}}}}}}"#,
            "[".repeat(500),
            "]".repeat(500)
        )
    }

    #[test]
    fn a_request_too_deep_to_parse_is_answered_with_its_id() {
        let a = answer_for_unparsable(deep("7").as_bytes()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&a).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], -32600);
        let a = answer_for_unparsable(deep(r#""req-\"1""#).as_bytes()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&a).unwrap();
        assert_eq!(v["id"], "req-\"1");
    }

    #[test]
    fn the_answer_to_a_request_too_deep_to_parse_is_json_whatever_its_id() {
        let deep_then = |id: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"tools/call","params":{}{},"id":{id}}}"#,
                "[".repeat(300),
                "]".repeat(300)
            )
        };
        for (raw, want) in [
            ("-", serde_json::Value::Null),
            ("007", serde_json::Value::Null),
            ("\"a\tb\"", serde_json::Value::Null),
            ("1.5e3", serde_json::json!(1500.0)),
            ("-4", serde_json::json!(-4)),
            ("\"x\"", serde_json::json!("x")),
        ] {
            let a = answer_for_unparsable(deep_then(raw).as_bytes()).expect(raw);
            let v: serde_json::Value =
                serde_json::from_str(&a).unwrap_or_else(|e| panic!("{raw}: {a}: {e}"));
            assert_eq!(v["id"], want, "{raw}");
            assert_eq!(v["error"]["code"], -32600, "{raw}");
        }
    }

    #[test]
    fn other_lines_are_left_to_rmcp() {
        assert!(answer_for_unparsable(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        assert!(answer_for_unparsable(b"not json").is_none());
        assert!(answer_for_unparsable(&[0xff, 0xfe]).is_none());
        // too deep but no id: a notification, nothing to answer
        let n = format!(
            r#"{{"method":"x","params":{}{}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        assert!(answer_for_unparsable(n.as_bytes()).is_none());
    }

    #[test]
    fn a_line_that_is_not_json_gets_a_parse_error_with_a_null_id() {
        for line in [
            &b"this is not json at all"[..],
            b"{\"half\": ",
            &[0xff, 0xfe],
        ] {
            let why = not_json(line).expect("not JSON");
            let v: serde_json::Value = serde_json::from_str(&parse_error_answer(&why)).unwrap();
            assert_eq!(v["id"], serde_json::Value::Null);
            assert_eq!(v["error"]["code"], -32700);
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("Parse error")
            );
        }
        // the reason names a position, never the content
        assert!(!not_json(b"secret-token-123").unwrap().contains("secret"));
        // JSON text is left to rmcp, even when it is no JSON-RPC message or nested too deep
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_owned(),
            "42".to_owned(),
            deep("1"),
        ] {
            assert_eq!(not_json(line.as_bytes()), None, "{line}");
        }
    }

    #[test]
    fn the_id_is_found_at_the_top_level_only() {
        assert_eq!(
            top_level_id(r#"{"params":{"id":5},"id":9}"#).as_deref(),
            Some("9")
        );
        assert_eq!(
            top_level_id(r#"{"a":"id","id" : -3}"#).as_deref(),
            Some("-3")
        );
        assert_eq!(top_level_id(r#"{"params":{"id":5}}"#), None);
    }

    #[tokio::test]
    async fn an_over_long_line_keeps_its_head_and_a_request_is_answered() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"big-1\",\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}}\n",
            "a".repeat(MAX_LINE_BYTES)
        );
        let mut r = BufReader::new(std::io::Cursor::new(big.into_bytes()));
        let mut buf = Vec::new();
        assert_eq!(
            read_line_capped(&mut r, &mut buf).await.unwrap(),
            Some(false)
        );
        assert_eq!(
            buf,
            br#"{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{}}"#
        );
        let a = answer_for_too_long_request(&buf).unwrap();
        let v: serde_json::Value = serde_json::from_str(&a).unwrap();
        assert_eq!(v["id"], "big-1");
        assert_eq!(v["error"]["code"], -32600);
        assert!(
            answer_for_too_long_response(&buf).is_none(),
            "a request is no answer"
        );
        buf.clear();
        assert_eq!(
            read_line_capped(&mut r, &mut buf).await.unwrap(),
            Some(true)
        );
        assert_eq!(buf, br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
        // an answer's head gives the error that replaces it
        let e = answer_for_too_long_response(br#"{"jsonrpc":"2.0","id":17,"result":{"content":[{"#)
            .unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&e).unwrap()["id"],
            17
        );
        // a number cut at the end of the head is no id
        assert_eq!(top_level_id(r#"{"id":12"#), None);
    }

    /// A request rmcp cannot read is answered with its id (rmcp's own answer has none).
    #[tokio::test]
    async fn a_request_rmcp_cannot_read_is_answered_with_its_id() {
        let input = [
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":"str"}"#,
            r#"{"jsonrpc":"1.0","id":"nine","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":10,"method":"ping","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ]
        .join("\n")
            + "\n";
        let (client_out, server_in) = tokio::io::duplex(1 << 20);
        let (mut rmcp_in, rmcp_out) = guard(std::io::Cursor::new(input.into_bytes()), client_out);
        drop(rmcp_out);
        let mut passed = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut rmcp_in, &mut passed)
            .await
            .unwrap();
        assert_eq!(
            passed,
            "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}\n\
             {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            "what rmcp reads is passed on, and only that"
        );
        let mut answers = vec![];
        let mut lines = BufReader::new(server_in).lines();
        while let Some(l) = lines.next_line().await.unwrap() {
            let v: serde_json::Value = serde_json::from_str(&l).unwrap();
            assert_eq!(v["error"]["code"], -32600, "{l}");
            answers.push(v["id"].clone());
        }
        assert_eq!(
            answers,
            [
                serde_json::json!(8),
                serde_json::json!("nine"),
                serde_json::json!(10),
                serde_json::Value::Null
            ]
        );
    }

    /// An over-long request is answered whatever the place of its `id`: after a long
    /// `params` (as many clients write it), after a long top-level string, or first.
    #[tokio::test]
    async fn an_over_long_request_is_answered_wherever_its_id_stands() {
        let pad = "a\\\"{[".repeat(MAX_LINE_BYTES / 5);
        let lines = [
            format!(
                r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"x":["{pad}"]}},"id":"last"}}"#
            ),
            format!(r#"{{"method":"tools/call","pad":"{pad}","id":7,"params":{{}}}}"#),
            format!(r#"{{"id":-3,"jsonrpc":"2.0","method":"x","params":{{"x":"{pad}"}}}}"#),
        ];
        let mut r = BufReader::new(std::io::Cursor::new(
            format!("{}\n", lines.join("\n")).into_bytes(),
        ));
        for want in [
            serde_json::json!("last"),
            serde_json::json!(7),
            serde_json::json!(-3),
        ] {
            let mut buf = Vec::new();
            assert_eq!(
                read_line_capped(&mut r, &mut buf).await.unwrap(),
                Some(false)
            );
            assert!(buf.len() < 1024, "{}", buf.len());
            let a = answer_for_too_long_request(&buf).expect("answered");
            let v: serde_json::Value = serde_json::from_str(&a).unwrap();
            assert_eq!(v["id"], want);
        }
        // an answer, too, whatever the place of its id
        let answer = format!(r#"{{"jsonrpc":"2.0","result":{{"x":"{pad}"}},"id":9}}"#);
        let e = answer_for_too_long_response(&Skeleton::of(answer.as_bytes())).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&e).unwrap()["id"],
            9
        );
    }

    #[tokio::test]
    async fn lines_flow_through_and_deep_requests_get_answers() {
        let deep_line = deep("42");
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}}\n\nnot json\n{deep_line}\n"
        );
        let (client_out, server_in) = tokio::io::duplex(1 << 20);
        let (mut rmcp_in, rmcp_out) = guard(std::io::Cursor::new(input.into_bytes()), client_out);
        drop(rmcp_out); // rmcp wrote nothing
        let mut forwarded = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut rmcp_in, &mut forwarded)
            .await
            .unwrap();
        assert_eq!(
            forwarded,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
        );
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut BufReader::new(server_in), &mut out)
            .await
            .unwrap();
        let answers: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(answers.len(), 2, "{out}");
        assert_eq!(answers[0]["error"]["code"], -32700);
        assert_eq!(answers[0]["id"], serde_json::Value::Null);
        assert_eq!(answers[1]["id"], 42);
    }
}

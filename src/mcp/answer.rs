//! A call's arguments in and its answer out: arguments parsed with the field at fault named,
//! successes and errors shaped as tool results (redacted, fitting the tools' output schemas),
//! and every result kept within one message a relay can pass on.

use rmcp::model::{CallToolResult, ContentBlock};

use super::{framing, results};
use crate::error::Error;
use crate::security::redact::redact;

/// Parse tool arguments, naming the field at fault.
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(
    args: rmcp::model::JsonObject,
) -> Result<T, Error> {
    serde_path_to_error::deserialize(serde_json::Value::Object(args)).map_err(named)
}

/// [`parse_args`] without taking the arguments.
pub(crate) fn parse_args_ref<T: serde::de::DeserializeOwned>(
    args: &rmcp::model::JsonObject,
) -> Result<T, Error> {
    serde_path_to_error::deserialize(args).map_err(named)
}

/// A parse error as a refusal naming the field at fault.
fn named(e: serde_path_to_error::Error<serde_json::Error>) -> Error {
    {
        let path = e.path().to_string();
        let inner = e.inner().to_string();
        // serde's message can quote the offending value; keep messages short
        let inner: String = inner.chars().take(300).collect();
        if path == "." {
            // a missing or unknown field: serde names it in the message
            let field = inner.split('`').nth(1).unwrap_or("arguments").to_owned();
            Error::invalid(field, inner)
        } else {
            Error::invalid(path, inner)
        }
    }
}

/// A turn tool's error (`codex`, `query`, `search`, `structured`, `review`) as an `isError`
/// tool result: a redacted message naming the field or cause, and a [`results::TurnResult`]
/// (the partial answer, `timedOut`, the error's kind) that matches the tool's `outputSchema`.
pub(crate) fn error_result(e: &Error, partial: Option<results::TurnResult>) -> CallToolResult {
    let message = redact(&e.to_string()).into_owned();
    let kind = error_kind(e);
    let mut value = partial.unwrap_or_default();
    value.timed_out = matches!(e, Error::TimedOut { .. });
    value.error = Some(results::ErrorReport {
        kind,
        message: message.clone(),
    });
    let mut text = message;
    if !value.response.is_empty() {
        text.push_str("\n\nPartial answer:\n");
        text.push_str(&value.response);
    }
    let mut structured = serde_json::to_value(&value).unwrap_or_default();
    let text = fit(text, &mut structured);
    let mut r = CallToolResult::structured_error(structured);
    r.content = vec![ContentBlock::text(text)];
    r
}

/// The most a tool result may take in one message: what a relay passes on
/// ([`framing::MAX_LINE_BYTES`]), less room for the JSON-RPC envelope, the id and a task's
/// wrapping.
pub(crate) const MAX_RESULT_BYTES: usize = framing::MAX_LINE_BYTES - 1024 * 1024;

fn json_len(v: &(impl serde::Serialize + ?Sized)) -> usize {
    serde_json::to_vec(v).map(|v| v.len()).unwrap_or(usize::MAX)
}

/// `text` cut (at a character boundary) so that it and `marker` take at most `max` bytes as a
/// JSON string.
fn cut(text: &str, max: usize, marker: &str) -> String {
    let room = max.saturating_sub(json_len(marker));
    let mut keep = text.len();
    loop {
        let len = json_len(&text[..keep]);
        if len <= room || keep == 0 {
            break;
        }
        // escapes make the JSON longer than the text: shrink in proportion, then some
        let mut next = ((keep as u128 * room as u128) / len as u128) as usize;
        next = next.min(keep - 1).saturating_sub(next / 64);
        while !text.is_char_boundary(next) {
            next -= 1;
        }
        keep = next;
    }
    format!("{}{marker}", &text[..keep])
}

/// Keep a result within [`MAX_RESULT_BYTES`], so that a relay can always pass it on. A long
/// answer is carried once in full, in `structuredContent.response`; the text block (which
/// repeats it for clients that ignore structured content) is then cut, with a marker saying
/// where the whole answer is. Only when the structured content alone is too long (an operator
/// who raised the line cap) is `response` cut too, with a marker and `truncated: true`.
fn fit(text: String, structured: &mut serde_json::Value) -> String {
    let mut s_len = json_len(structured);
    if s_len > MAX_RESULT_BYTES / 4 * 3
        && let Some(response) = structured.get("response").and_then(|r| r.as_str())
    {
        let over = s_len - MAX_RESULT_BYTES / 4 * 3;
        let marker =
            "\n\n[codex-mcp-bridge: the answer was cut here: it is too long for one message]";
        let cut_response = cut(response, json_len(response).saturating_sub(over), marker);
        structured["response"] = cut_response.into();
        structured["truncated"] = true.into();
        s_len = json_len(structured);
    }
    let t_len = json_len(&text);
    if s_len.saturating_add(t_len) <= MAX_RESULT_BYTES {
        return text;
    }
    let marker = format!(
        "\n\n[codex-mcp-bridge: this text was cut here: the answer is {} bytes, too long to \
         send twice in one message; the whole answer is in structuredContent.response]",
        structured
            .get("response")
            .and_then(|r| r.as_str())
            .map_or(0, str::len)
    );
    cut(&text, MAX_RESULT_BYTES.saturating_sub(s_len), &marker)
}

/// The error of a tool whose result is not a turn (`listSessions`, `getSession`,
/// `closeSession`, `ping`) as an `isError` tool result: the redacted message only, no
/// `structuredContent`. Those tools' output schemas describe their success, and hosts on the
/// TypeScript SDK validate `structuredContent` even on an error: a copy that broke the schema
/// hid the bridge's sentence behind `Structured content does not match the tool's output
/// schema`.
pub(crate) fn plain_error(e: &Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(
        redact(&e.to_string()).into_owned(),
    )])
}

fn error_kind(e: &Error) -> results::ErrorKind {
    use results::ErrorKind as K;
    match e {
        Error::InvalidArgument { .. } => K::InvalidArgument,
        Error::Config(_) => K::InvalidSetting,
        Error::Process(p) if p.is_not_found() => K::CodexNotFound,
        Error::Process(_) => K::Io,
        Error::TimedOut { .. } => K::TimedOut,
        Error::Cancelled { .. } => K::Cancelled,
        Error::Codex { kind, .. } => K::Codex(*kind),
        Error::OutputCap { .. } => K::OutputCap,
        Error::Busy(_) => K::Busy,
        Error::SessionFailed(_) => K::SessionFailed,
        Error::Store(_) => K::Store,
        Error::Io { .. } => K::Io,
    }
}

/// The refusal of a call to a tool this server does not have.
pub(crate) fn unknown_tool(name: &str) -> rmcp::ErrorData {
    rmcp::ErrorData::invalid_params(
        format!(
            "unknown tool `{}`",
            name.chars().take(64).collect::<String>()
        ),
        None,
    )
}

/// A success result: structured content plus a text block.
pub(crate) fn ok_result(text: String, value: impl serde::Serialize) -> CallToolResult {
    let mut structured = serde_json::to_value(value).unwrap_or_default();
    let text = fit(text, &mut structured);
    let mut r = CallToolResult::structured(structured);
    r.content = vec![ContentBlock::text(text)];
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_answer_is_sent_once_in_full_and_the_result_fits_a_relayed_line() {
        // an answer at the codex line cap, with characters JSON escapes
        let answer = "é\"x\n".repeat(8 * 1024 * 1024 / 5);
        let value = results::TurnResult {
            response: answer.clone(),
            ..Default::default()
        };
        let r = ok_result(answer.clone(), &value);
        let line = serde_json::to_vec(&r).unwrap().len();
        assert!(line <= MAX_RESULT_BYTES, "{line} bytes");
        let s = r.structured_content.as_ref().unwrap();
        assert_eq!(s["response"], answer.as_str(), "the whole answer, once");
        assert_eq!(s["truncated"], false);
        let text = &r.content[0].as_text().unwrap().text;
        assert!(
            text.len() < answer.len()
                && answer.starts_with(text.split("\n\n[codex-mcp-bridge").next().unwrap())
        );
        assert!(
            text.ends_with("the whole answer is in structuredContent.response]"),
            "{}",
            &text[text.len() - 200..]
        );

        // a short one is left alone
        let short = results::TurnResult {
            response: "hi".into(),
            ..Default::default()
        };
        let r = ok_result("hi".into(), &short);
        assert_eq!(r.content[0].as_text().unwrap().text, "hi");

        // structured content alone too long (a raised line cap): the response is cut, marked
        let huge = "y".repeat(MAX_RESULT_BYTES);
        let value = results::TurnResult {
            response: huge.clone(),
            ..Default::default()
        };
        let r = ok_result(huge, &value);
        assert!(serde_json::to_vec(&r).unwrap().len() <= MAX_RESULT_BYTES);
        let s = r.structured_content.as_ref().unwrap();
        assert_eq!(s["truncated"], true);
        assert!(
            s["response"]
                .as_str()
                .unwrap()
                .ends_with("too long for one message]")
        );
    }
}

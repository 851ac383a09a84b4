//! One line from codex, read ([`parse_line`]): a response, a notification or a request
//! ([`Incoming`]). The top of the protocol's files: it names the frame, the notifications and
//! the requests.

use serde::Deserialize;
use serde_json::Value;

use super::frame::{ProtocolError, RequestId, RpcError};
use super::items::{Notification, notification};
use super::requests::ServerRequest;

/// One line from codex.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of the bridge's requests.
    Response {
        id: RequestId,
        result: Result<Value, RpcError>,
    },
    Notification(Notification),
    /// A request codex sends the bridge; answer it at once with [`ServerRequest::decline`].
    Request(ServerRequest),
}

/// Parse one line from codex: a response, a notification (those the bridge reads typed, a
/// missing or mistyped field an error) or a request (always answerable: its id and method are
/// read first).
pub fn parse_line(line: &str) -> Result<Incoming, ProtocolError> {
    let v: Value =
        serde_json::from_str(line).map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let Value::Object(mut m) = v else {
        return Err(ProtocolError::Malformed("not an object".into()));
    };
    let id = match m.get("id") {
        None | Some(Value::Null) => None,
        Some(raw) => Some(RequestId::deserialize(raw).map_err(|_| {
            ProtocolError::Malformed("`id` is neither a number nor a string".into())
        })?),
    };
    let params = m.remove("params").unwrap_or(Value::Null);
    let method = match m.get("method") {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(ProtocolError::Malformed("`method` is not a string".into())),
    };
    match (id, method) {
        (Some(id), Some(method)) => Ok(Incoming::Request(ServerRequest::new(id, method, params))),
        (None, Some(method)) => Ok(Incoming::Notification(notification(method, params)?)),
        (Some(id), None) => {
            let result = match (m.remove("result"), m.get("error")) {
                (_, Some(e)) => Err(RpcError::deserialize(e).map_err(|_| {
                    ProtocolError::Malformed("`error` is not a JSON-RPC error".into())
                })?),
                (Some(r), None) => Ok(r),
                (None, None) => {
                    return Err(ProtocolError::Malformed(
                        "a response without `result` or `error`".into(),
                    ));
                }
            };
            Ok(Incoming::Response { id, result })
        }
        (None, None) => Err(ProtocolError::Malformed("no `id` and no `method`".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::app_server::protocol::fixtures::TURN;
    use crate::codex::app_server::protocol::parse_turn_started;
    use serde_json::json;

    #[test]
    fn responses_and_malformed_lines() {
        assert_eq!(
            parse_line(r#"{"id":4,"result":{}}"#).unwrap(),
            Incoming::Response {
                id: RequestId::Int(4),
                result: Ok(json!({}))
            }
        );
        let err = parse_line(r#"{"error":{"code":-32600,"message":"Invalid request: unknown variant `bogus/method`"},"id":31}"#).unwrap();
        let Incoming::Response { id, result: Err(e) } = err else {
            panic!("{err:?}")
        };
        assert_eq!((id, e.code), (RequestId::Int(31), -32600));
        for bad in [
            "",
            "[]",
            "{}",
            "nope",
            r#"{"id":1}"#,
            r#"{"id":{},"result":1}"#,
            r#"{"id":1,"error":"x"}"#,
            // an error without its message
            r#"{"id":1,"error":{"code":-32600}}"#,
        ] {
            assert!(
                matches!(parse_line(bad), Err(ProtocolError::Malformed(_))),
                "{bad}"
            );
        }
        let turn =
            parse_turn_started(&json!({"turn": {"id": TURN, "items": [], "status": "inProgress"}}));
        assert_eq!(turn.unwrap().as_str(), TURN);
        assert!(parse_turn_started(&json!({"turn": {}})).is_err());
    }
}

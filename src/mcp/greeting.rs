//! The answer to a client's `initialize` made in this process, before the store's owner is
//! reached: a relay that starts the owner daemon answers its client at once, as the process
//! owner does, and replays the handshake to the owner once it answers (the owner's own answer
//! swallowed). The answer is rmcp's, from the same server description
//! ([`super::server_config`]) and the same negotiation as the owner's, so the two are alike.

use std::time::Duration;

use rmcp::model::ServerConfig;
use rmcp::{ServerHandler, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A server that only greets: the owner's description, nothing else.
#[derive(Clone)]
struct Greeter;

impl ServerHandler for Greeter {
    fn get_info(&self) -> ServerConfig {
        super::server_config()
    }
}

/// How long rmcp may take to answer (it answers in microseconds).
const LIMIT: Duration = Duration::from_secs(5);

/// rmcp's answer to `line`, an `initialize` request, as the store's owner would give it: the
/// answer line when it is a result (an error, or no answer, is `None`: the owner answers that
/// request itself).
pub async fn answer_initialize(line: &[u8]) -> Option<Vec<u8>> {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(theirs);
    let serving = tokio::spawn(async move {
        // ends when the duplex closes (its handshake never completes here)
        let _ = Greeter.serve((read, write)).await;
    });
    let (our_read, mut our_write) = tokio::io::split(ours);
    let answer = async {
        our_write.write_all(line).await.ok()?;
        our_write.write_all(b"\n").await.ok()?;
        our_write.flush().await.ok()?;
        let mut lines = BufReader::new(our_read).lines();
        lines.next_line().await.ok()?
    };
    let answer = tokio::time::timeout(LIMIT, answer).await.ok().flatten();
    serving.abort();
    let answer = answer?;
    let v: serde_json::Value = serde_json::from_str(&answer).ok()?;
    v.get("result").is_some().then(|| answer.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer carries the request's id, the negotiated version and the server's
    /// description; a request that is not a valid `initialize` gets none.
    #[tokio::test]
    async fn an_initialize_is_answered_as_the_owner_answers_it() {
        let line = br#"{"jsonrpc":"2.0","id":"x-1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let answer = answer_initialize(line).await.expect("an answer");
        let v: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(v["id"], "x-1");
        assert_eq!(v["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(v["result"]["serverInfo"]["name"], "codex-mcp-bridge");
        let ours = serde_json::to_value(super::super::server_config()).unwrap();
        assert_eq!(v["result"]["instructions"], ours["instructions"]);
        assert_eq!(v["result"]["capabilities"], ours["capabilities"]);
        assert_eq!(
            answer_initialize(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await,
            None
        );
    }
}

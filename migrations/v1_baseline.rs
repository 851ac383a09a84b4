//! v0 → v1, the baseline. v0 is a store with only a `sessions` tree (session id → JSON record),
//! as written by development builds before the schema was versioned. v1 adds the `last_used`
//! index (big-endian millis ++ session id → empty), so listing never scans every session, and
//! the session counter in `meta`.

use super::step::{Change, Step};

pub const STEP: Step = Step {
    to: 1,
    name: "baseline: last_used index and session counter",
    plan,
};

fn plan(db: &sled::Db) -> sled::Result<Vec<Change>> {
    let sessions = db.open_tree("sessions")?;
    let mut changes = Vec::new();
    for kv in sessions.iter() {
        let (key, value) = kv?;
        let last_used = serde_json::from_slice::<serde_json::Value>(&value)
            .ok()
            .and_then(|v| v.get("lastUsedMs").and_then(|t| t.as_u64()))
            .unwrap_or(0);
        let mut index_key = last_used.to_be_bytes().to_vec();
        index_key.extend_from_slice(&key);
        changes.push(Change::Insert {
            tree: "last_used",
            key: index_key,
            value: vec![],
        });
    }
    let count = changes.len() as u64;
    changes.push(Change::Insert {
        tree: "meta",
        key: b"session_count".to_vec(),
        value: count.to_be_bytes().to_vec(),
    });
    Ok(changes)
}

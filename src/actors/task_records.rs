//! The store's records of MCP tasks, for the MCP layer: a task's call and a background call
//! outlive the connection that started them, and their records outlive the process that ran
//! them ([`StoredTask`]). Written only by the MCP layer's task store (`mcp::tasks`), through
//! these methods; the store keeps the bytes, this module their shape (the task's own part is
//! the MCP layer's type, which holds no question a running task has open).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::Bridge;
use crate::error::{Error, Result};

/// What the store keeps of one task: who may read it once its connection is gone, until when,
/// and the task as the MCP layer keeps it (`T`, opaque here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTask<T> {
    pub id: String,
    /// The host that started it, as the MCP layer recognises a host across its restarts.
    pub host: String,
    /// A background call's handle (`wait` finds the task by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    /// After this (ms since the epoch) the record is forgotten.
    pub expires_ms: u64,
    /// The task's state (the MCP layer's own type).
    pub task: T,
}

impl Bridge {
    /// Keep `task`'s record ([`Bridge::flush_tasks`] makes it durable).
    pub fn save_task<T: Serialize>(&self, task: &StoredTask<T>) -> Result<()> {
        let bytes = serde_json::to_vec(task).map_err(|e| Error::Io {
            doing: "encoding a task's record",
            source: std::io::Error::other(e),
        })?;
        Ok(self.shared.store.put_task(&task.id, &bytes)?)
    }

    /// Make every task record written so far durable.
    pub async fn flush_tasks(&self) -> Result<()> {
        Ok(self.shared.store.flush().await?)
    }

    /// Task `id`'s record, if kept and readable.
    pub fn load_task<T: DeserializeOwned>(&self, id: &str) -> Result<Option<StoredTask<T>>> {
        Ok(self
            .shared
            .store
            .get_task(id)?
            .and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// Every task record kept (those that do not read are forgotten).
    pub fn stored_tasks<T: DeserializeOwned>(&self) -> Result<Vec<StoredTask<T>>> {
        let mut out = vec![];
        for (id, bytes) in self.shared.store.tasks()? {
            match serde_json::from_slice::<StoredTask<T>>(&bytes) {
                Ok(t) => out.push(t),
                Err(_) => self.shared.store.remove_task(&id)?,
            }
        }
        Ok(out)
    }

    /// Forget task `id`'s record.
    pub fn forget_task(&self, id: &str) -> Result<()> {
        Ok(self.shared.store.remove_task(id)?)
    }
}

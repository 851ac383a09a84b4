//! Shared helpers for the integration tests: the pinned codex binary, a mock of the OpenAI
//! Responses API, per-test directories and process helpers.
#![allow(dead_code, unused_imports)]

pub mod app_server;
pub mod bridge;
pub mod browser;
pub mod codex_bin;
pub mod env;
pub mod http1;
pub mod mcp;
pub mod mock_api;
pub mod page;
pub mod process;
pub mod work_dir;

pub use codex_bin::{
    Codex, codex_bin, codex_version, repo_root, target_dir, test_work_dir, under_test,
};
pub use env::{TEST_API_KEY, TestEnv, git, init_git_repo};
pub use mock_api::{MockApi, RecordedRequest, Reply, function_call_item, message_item};
pub use process::{completed_items, describe_output, events_of_type, jsonl, run_with_timeout};

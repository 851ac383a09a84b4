//! Integration test suites (each module is one area).

mod actors;
mod app_server;
mod cli;
mod codex_host;
mod config_layers;
mod escalation;
mod faults;
mod hostile;
mod http;
mod hub;
mod hub_in_process;
mod mcp;
mod person;
mod person_bridge;
mod proofs;
mod review;
mod runner;
mod runner_fake;
mod smoke;
mod tasks;
mod terminal;
mod ts_sdk;
mod warm;

//! Integration test suites (each module is one area).

mod smoke;
mod runner;
mod runner_fake;
mod escalation;
mod actors;
mod mcp;

//! Integration test suites (each module is one area).

mod actors;
mod escalation;
mod mcp;
mod runner;
mod runner_fake;
mod smoke;

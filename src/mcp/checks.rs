//! A turn tool's (or `wait`'s) arguments checked before anything is kept or started (a
//! 2026-07-28 call's state, [`super::mrtr`]): the same checks the tool makes, without taking
//! the arguments.

use rmcp::model::{CallToolResponse, JsonObject};

use super::answer::error_result;

use crate::error::Result;

/// Check a tool's arguments as the tool checks them before it starts anything, without
/// taking them (its entry's `precheck`; a tool without one: nothing to check first): before a
/// call's state is kept for a 2026-07-28 client, or a background call starts (its working
/// directory and files are resolved when it runs).
pub(crate) fn check_call(tool: &str, args: &JsonObject) -> Result<()> {
    match super::tools::tool_named(tool).and_then(|t| t.is.precheck) {
        Some(check) => check(args),
        None => Ok(()),
    }
}

/// A 2026-07-28 call's arguments checked as its tool checks them, before any state of it is
/// kept ([`super::mrtr::Rounds`]): the tool's refusal naming the field, or `None` when they pass.
pub(super) fn checked_first(
    name: &str,
    args: &rmcp::model::JsonObject,
) -> Option<CallToolResponse> {
    let e = check_call(name, args).err()?;
    let reason = crate::security::redact::redact(&e.to_string()).into_owned();
    tracing::info!(tool = %name, %reason, "a call's arguments were refused before it asked");
    Some(CallToolResponse::Complete(error_result(&e, None)))
}

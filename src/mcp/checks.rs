//! A turn tool's (or `wait`'s) arguments checked before anything is kept or started (a
//! 2026-07-28 call's state, [`super::mrtr`]): the same checks the tool makes, without taking
//! the arguments.

use rmcp::model::{CallToolResponse, JsonObject};

use super::answer::error_result;

use crate::actors::schema;
use crate::error::{Error, Result};
use crate::mcp::answer::parse_args_ref;
use crate::mcp::tools::codex::CodexParams;
use crate::mcp::tools::review::ReviewParams;
use crate::mcp::tools::structured::StructuredParams;
use crate::mcp::tools::wait::WaitParams;
use crate::security::ids::SessionId;
use crate::security::prompt::Prompt;

/// The model id, when given, checked as every tool checks it.
fn check_model(model: Option<&str>) -> Result<()> {
    model.map_or(Ok(()), |m| {
        Ok(crate::security::ids::check_model("model", m)?)
    })
}

/// Check a turn tool's arguments as the tool checks them before it starts anything (each
/// field's type, no unknown field, the prompt's size, the model id, the session id, the schema,
/// how many files), without taking them: before a call's state is kept for a 2026-07-28 client
/// (its working directory and files are resolved when it runs).
pub(crate) fn check_call(tool: &str, args: &JsonObject) -> Result<()> {
    let files = |f: &Option<Vec<String>>| -> Result<()> {
        match f {
            Some(f) if f.len() > crate::actors::files::MAX_FILES => Err(Error::invalid(
                "files",
                format!("at most {} files per call", crate::actors::files::MAX_FILES),
            )),
            _ => Ok(()),
        }
    };
    match tool {
        "codex" => {
            let p: CodexParams = parse_args_ref(args)?;
            check_model(p.model.as_deref())?;
            if let Some(s) = &p.session_id {
                SessionId::parse("sessionId", s)?;
            }
            files(&p.files)?;
            Prompt::parse("prompt", p.prompt)?;
        }
        "structured" => {
            let p: StructuredParams = parse_args_ref(args)?;
            check_model(p.model.as_deref())?;
            files(&p.files)?;
            schema::plan(&p.schema)?;
            Prompt::parse("prompt", p.prompt)?;
        }
        "review" => {
            let p: ReviewParams = parse_args_ref(args)?;
            check_model(p.model.as_deref())?;
        }
        // a `wait` carries its background turn's questions
        "wait" => {
            let _: WaitParams = parse_args_ref(args)?;
        }
        _ => {}
    }
    Ok(())
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

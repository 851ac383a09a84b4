//! The whole form of a question (pure): the message a person reads, with every field redacted
//! and the lines of a field that runs over several behind a gutter, the schema of what they fill
//! in. Why a question cannot be put to a person as it is is [`crate::approval::unasked`]'s; what
//! a host shows of it is `super::budget`'s; asking is `super`'s.

use rmcp::model::{
    ElicitRequestParams, ElicitationSchema, PrimitiveSchemaDefinition, StringSchema,
};
use serde_json::Value;

use super::budget::APPROVE_FIELD;
use crate::approval::Question;
use crate::approval::message::message;
use crate::approval::unasked::unshowable;
use crate::security::redact::ClientSecrets;

/// `s` cut after `max` characters, with `…` when cut.
pub(super) fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

fn approval_schema() -> ElicitationSchema {
    ElicitationSchema::builder()
        .required_bool_with(APPROVE_FIELD, |b| {
            b.title("Allow this once")
                .description("Leave unchecked (or decline) to refuse.")
                .with_default(false)
        })
        // its one required field is among its properties
        .build_unchecked()
}

/// The form of a question: the message, and the schema of what the person fills in. `None` when
/// no form can carry it (a nested server's URL elicitation, or a form schema that is not the
/// flat object MCP allows): decline without asking.
pub fn form(question: &Question, secrets: &ClientSecrets) -> Option<ElicitRequestParams> {
    // only what a person can read as it is
    if unshowable(question, secrets).is_some() {
        return None;
    }
    let schema = match question {
        Question::UserInput { questions } => {
            let mut b = ElicitationSchema::builder();
            for q in questions {
                let title = secrets.redact(&q.header).into_owned();
                let mut desc = secrets.redact(&q.question).into_owned();
                if !q.options.is_empty() {
                    desc.push_str(&format!(
                        " (one of: {})",
                        secrets.redact(&q.options.join(", "))
                    ));
                }
                b = b.property(
                    q.id.clone(),
                    PrimitiveSchemaDefinition::String(
                        StringSchema::new().title(title).description(desc),
                    ),
                );
            }
            b.build_unchecked()
        }
        Question::McpElicitation { form: None, .. } => return None,
        Question::McpElicitation {
            form: Some(schema), ..
        } => {
            let mut schema = schema.clone();
            secrets.redact_json(&mut schema);
            let Value::Object(obj) = schema else {
                return None;
            };
            ElicitationSchema::from_json_schema(obj).ok()?
        }
        _ => approval_schema(),
    };
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(question, secrets),
        requested_schema: schema,
    })
}

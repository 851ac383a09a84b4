//! The tools' JSON Schemas (draft 2020-12) from the params and results types, through one
//! schemars generator that keeps only JSON Schema's standard formats, lists an optional value
//! set's strings only and writes each description on one line; and the tools' annotations.

use std::sync::Arc;

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;

/// The formats JSON Schema 2020-12 defines (§7.3). Every other `format` is dropped from the
/// tools' schemas.
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// schemars tags Rust numbers with formats of its own (`uint64`, `uint32`, `uint`, `int64`,
/// `double`, …) that are no JSON Schema format: Ajv, in the TypeScript SDK and most hosts,
/// warns `unknown format "uint64" ignored` for each. They are dropped; an unsigned integer
/// keeps its meaning as `minimum: 0`.
fn standard_formats_only(schema: &mut schemars::Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let Some(format) = obj.get("format").and_then(|f| f.as_str()) else {
        return;
    };
    if STANDARD_FORMATS.contains(&format) {
        return;
    }
    let unsigned = format.starts_with("uint");
    obj.remove("format");
    if unsigned {
        obj.entry("minimum").or_insert(serde_json::json!(0));
    }
}

/// An optional argument with a fixed value set (`sandbox`, …) lists its string values only:
/// schemars adds `null` to the `enum` of an `Option`, which hosts show their models as a value
/// to pick; omitting the argument is the way to leave it unset.
fn string_values_only(schema: &mut schemars::Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(values) = obj.get_mut("enum").and_then(|e| e.as_array_mut())
        && values.iter().any(|v| v.is_string())
    {
        values.retain(|v| !v.is_null());
    }
}

/// A description is one line: a doc comment's line breaks are where its source wrapped, and a
/// host may show a line break as a mark of its own or cut the text there (Claude Code's forms
/// show one as `�`).
fn one_line_descriptions(schema: &mut schemars::Schema) {
    if let Some(serde_json::Value::String(d)) = schema
        .as_object_mut()
        .and_then(|o| o.get_mut("description"))
        && d.contains('\n')
    {
        *d = d.split('\n').map(str::trim).collect::<Vec<_>>().join(" ");
    }
}

/// The JSON Schema (draft 2020-12) of `T`, with standard formats only and one-line
/// descriptions.
pub(super) fn schema<T: JsonSchema>() -> Arc<rmcp::model::JsonObject> {
    let settings = schemars::generate::SchemaSettings::draft2020_12()
        .with_transform(schemars::transform::RecursiveTransform(
            standard_formats_only,
        ))
        .with_transform(schemars::transform::RecursiveTransform(string_values_only))
        .with_transform(schemars::transform::RecursiveTransform(
            one_line_descriptions,
        ));
    match serde_json::to_value(settings.into_generator().into_root_schema_for::<T>()) {
        Ok(serde_json::Value::Object(o)) => Arc::new(o),
        // a derived schema is always an object
        other => unreachable!("schemars produced a non-object schema: {other:?}"),
    }
}

pub(super) fn annotations(
    title: &str,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(open_world)
}

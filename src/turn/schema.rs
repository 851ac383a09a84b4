//! `structured`: how a caller's JSON Schema is handed to codex and how the answer is checked.
//! Pure: no process, no store (the re-ask loop that uses it is [`super::structured`]).
//!
//! Codex's `--output-schema` is sent to the model as strict structured output, which accepts
//! only a subset of JSON Schema (every object closed with `additionalProperties: false`, every
//! property required, a small set of keywords). A schema inside that subset goes native (a
//! non-object root wrapped in `{"value": …}`); any other schema is put in the prompt instead.
//! Either way the answer is validated here with a JSON Schema validator (`boon`), which is
//! never allowed to load a document: a `$ref` to a file or a URL is refused with the schema, so a
//! caller's schema cannot make the server read a file (only the drafts' own metaschemas, built
//! into the validator, resolve).

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// Largest `structured` schema accepted, serialized.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// Keywords the strict structured-output subset understands.
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "description",
    "title",
    "anyOf",
    "$defs",
    "definitions",
    "$ref",
    "$schema",
];

/// How a schema is used.
pub struct SchemaUse {
    /// The schema given to `--output-schema`, when the schema fits the strict subset.
    pub native_schema: Option<Value>,
    /// Appended to the prompt (the schema itself, when it does not go native).
    pub prompt_suffix: String,
    /// The answer is `{"value": …}` and must be unwrapped.
    wrapped: bool,
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

/// The validator's loader for every document it does not hold: none is loaded.
struct NoLoader;

impl boon::UrlLoader for NoLoader {
    fn load(&self, url: &str) -> std::result::Result<Value, Box<dyn std::error::Error>> {
        Err(
            format!("the schema refers to {url}, and no document outside the schema is loaded")
                .into(),
        )
    }
}

/// The caller's schema compiled for validation (the metaschema check included).
fn compile(schema: &Value) -> Result<(boon::Schemas, boon::SchemaIndex)> {
    const LOCATION: &str = "urn:codex-mcp-bridge:schema";
    let mut compiler = boon::Compiler::new();
    compiler.use_loader(Box::new(NoLoader));
    let mut schemas = boon::Schemas::new();
    let refused = |e: boon::CompileError| {
        let why = match std::error::Error::source(&e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        };
        Error::invalid("schema", format!("is not a valid JSON Schema: {why}"))
    };
    compiler
        .add_resource(LOCATION, schema.clone())
        .map_err(refused)?;
    // boon panics on a pattern whose compiled regex exceeds the regex crate's size limit
    // ("encountered bug in jsonschema compiler"): a caller's schema must get an answer
    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compiler.compile(LOCATION, &mut schemas).map_err(refused)
    }))
    .map_err(|_| {
        Error::invalid(
            "schema",
            "is not a valid JSON Schema: a `pattern` (or another part) is too large to compile",
        )
    })?;
    let index = compiled?;
    Ok((schemas, index))
}

/// The innermost errors of a validation failure, each at its place in the answer.
fn leaves(e: &boon::ValidationError<'_, '_>, out: &mut Vec<String>) {
    if e.causes.is_empty() {
        out.push(format!("- at `{}`: {}", e.instance_location, e.kind));
    }
    for c in &e.causes {
        leaves(c, out);
    }
}

/// Check a caller's schema (an object, or a string holding one) and decide how to use it.
pub fn plan(raw: &Value) -> Result<SchemaUse> {
    let schema = match raw {
        Value::String(s) => serde_json::from_str::<Value>(s)
            .map_err(|e| Error::invalid("schema", format!("is a string but not JSON: {e}")))?,
        v => v.clone(),
    };
    let size = schema.to_string().len();
    if size > MAX_SCHEMA_BYTES {
        return Err(Error::invalid(
            "schema",
            format!("is larger than {} bytes", MAX_SCHEMA_BYTES),
        ));
    }
    if !schema.is_object() {
        return Err(Error::invalid("schema", "must be a JSON Schema object"));
    }
    let (schemas, index) = compile(&schema)?;
    if is_strict(&schema) {
        let object_root = schema.get("type").and_then(Value::as_str) == Some("object");
        let (native, wrapped) = if object_root {
            (schema, false)
        } else {
            let mut inner = schema;
            let defs = inner.as_object_mut().and_then(|o| o.remove("$defs"));
            let mut w = json!({
                "type": "object",
                "properties": {"value": inner},
                "required": ["value"],
                "additionalProperties": false
            });
            if let Some(d) = defs {
                w["$defs"] = d;
            }
            (w, true)
        };
        Ok(SchemaUse {
            native_schema: Some(native),
            prompt_suffix: String::new(),
            wrapped,
            schemas,
            index,
        })
    } else {
        let suffix = format!(
            "\n\nAnswer with only a JSON value (no prose, no code fence) that validates against this JSON Schema:\n{}",
            serde_json::to_string_pretty(&schema).unwrap_or_default()
        );
        Ok(SchemaUse {
            native_schema: None,
            prompt_suffix: suffix,
            wrapped: false,
            schemas,
            index,
        })
    }
}

impl SchemaUse {
    /// Parse and validate an answer; `Err` lists the validation errors (for the re-ask).
    pub fn check(&self, text: &str) -> std::result::Result<Value, String> {
        let mut value = extract_json(text).ok_or_else(|| "the answer is not JSON".to_owned())?;
        if self.wrapped {
            value = value
                .get("value")
                .cloned()
                .ok_or_else(|| "the answer lacks the `value` wrapper".to_owned())?;
        }
        let mut errors = vec![];
        if let Err(e) = self.schemas.validate(&value, self.index) {
            leaves(&e, &mut errors);
        }
        errors.truncate(10);
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(errors.join("\n"))
        }
    }
}

/// Does the schema fit the strict structured-output subset?
pub fn is_strict(schema: &Value) -> bool {
    fn node(v: &Value) -> bool {
        let Some(o) = v.as_object() else { return false };
        if o.keys().any(|k| !STRICT_KEYWORDS.contains(&k.as_str())) {
            return false;
        }
        let is_object = o.get("type").and_then(Value::as_str) == Some("object");
        if is_object {
            let Some(props) = o.get("properties").and_then(Value::as_object) else {
                return false;
            };
            if o.get("additionalProperties") != Some(&Value::Bool(false)) {
                return false;
            }
            let required: Vec<&str> = o
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if props.keys().any(|k| !required.contains(&k.as_str())) {
                return false;
            }
            if !props.values().all(node) {
                return false;
            }
        }
        if let Some(items) = o.get("items")
            && !node(items)
        {
            return false;
        }
        for key in ["anyOf"] {
            if let Some(arr) = o.get(key).and_then(Value::as_array)
                && !arr.iter().all(node)
            {
                return false;
            }
        }
        for key in ["$defs", "definitions"] {
            if let Some(defs) = o.get(key).and_then(Value::as_object)
                && !defs.values().all(node)
            {
                return false;
            }
        }
        true
    }
    node(schema)
}

/// The JSON in a model's answer: the whole text, a fenced block, or the outermost braces.
pub fn extract_json(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(v) = serde_json::from_str(t) {
        return Some(v);
    }
    if let Some(start) = t.find("```") {
        let rest = &t[start + 3..];
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        if let Some(end) = rest.find("```")
            && let Ok(v) = serde_json::from_str(rest[..end].trim())
        {
            return Some(v);
        }
    }
    let open = t.find(['{', '['])?;
    let close = t.rfind(['}', ']'])?;
    (close > open)
        .then(|| serde_json::from_str(&t[open..=close]).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// boon panics on such a pattern: the caller still gets an answer naming `schema`.
    #[test]
    fn a_pattern_too_large_to_compile_is_refused_naming_the_schema() {
        let huge = json!({"type": "string", "pattern": "(?:a{100}){100}{100}"});
        let err = plan(&huge).err().expect("refused").to_string();
        assert!(err.contains("schema") && err.contains("too large"), "{err}");
    }

    #[test]
    fn strict_schemas_go_native_and_others_into_the_prompt() {
        let strict = json!({"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false});
        let p = plan(&strict).unwrap();
        assert!(p.native_schema.is_some() && p.prompt_suffix.is_empty());
        let loose = json!({"type":"object","properties":{"a":{"type":"string","minLength":2}}});
        let p = plan(&loose).unwrap();
        assert!(p.native_schema.is_none() && p.prompt_suffix.contains("minLength"));
        assert_eq!(p.check("{\"a\":\"xy\"}").unwrap(), json!({"a":"xy"}));
        assert!(p.check("{\"a\":\"x\"}").unwrap_err().contains("/a"));
    }

    #[test]
    fn a_non_object_root_is_wrapped_and_unwrapped() {
        let p = plan(&json!({"type":"array","items":{"type":"integer"}})).unwrap();
        let native = p.native_schema.clone().unwrap();
        assert_eq!(native["properties"]["value"]["type"], "array");
        assert_eq!(p.check("{\"value\":[1,2]}").unwrap(), json!([1, 2]));
        assert!(p.check("{\"value\":[\"x\"]}").is_err());
    }

    #[test]
    fn bad_schemas_are_refused_with_the_field_named() {
        for s in [json!("not json {"), json!(5), json!({"type": 12})] {
            let err = plan(&s).err().unwrap().to_string();
            assert!(err.contains("`schema`"), "{err}");
        }
        let huge = json!({"description": "x".repeat(super::MAX_SCHEMA_BYTES)});
        assert!(plan(&huge).is_err());
        assert!(plan(&json!("{\"type\":\"object\"}")).is_ok());
    }

    #[test]
    fn a_schema_referring_to_a_file_or_a_url_is_refused_and_nothing_is_read() {
        // a file that is itself a valid schema: the default loader would read it and succeed
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        std::fs::write(&file, r#"{"type": "string"}"#).unwrap();
        let url = format!("file://{}", file.display());
        for r in [
            url.as_str(),
            "http://127.0.0.1:9/s.json",
            "https://example.com/s.json",
        ] {
            let err = plan(&json!({"$ref": r})).err().unwrap().to_string();
            assert!(
                err.contains("`schema`") && err.contains("no document"),
                "{err}"
            );
        }
        // the drafts' own metaschemas still resolve, and a local `$ref` works
        let p = plan(&json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"n": {"type": "integer"}},
            "type": "object", "properties": {"a": {"$ref": "#/definitions/n"}}
        }))
        .unwrap();
        assert!(p.check(r#"{"a": 1}"#).is_ok());
        assert!(p.check(r#"{"a": "x"}"#).unwrap_err().contains("/a"));
    }

    #[test]
    fn json_is_found_in_fences_and_prose() {
        assert_eq!(
            extract_json("```json\n{\"a\":1}\n```"),
            Some(json!({"a":1}))
        );
        assert_eq!(extract_json("Here: {\"a\":1} done"), Some(json!({"a":1})));
        assert_eq!(extract_json("nothing"), None);
    }
}

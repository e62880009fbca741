//! The schemas of the tools `discover` found: results checked against
//! the tool's `outputSchema`, and its `inputSchema` kept for the encoder
//! (see `input_shape`).
//!
//! Input schemas are most of a tool list, and taking every one apart at
//! `discover` made a 1 MB listing three times slower (7 -> 21 ms): the
//! pages are kept as they came, and their input schemas taken apart once,
//! at the first call that asks for one.
//!
//! A tool that declares an output schema promises `structuredContent` of
//! that shape, and agents act on it without looking; a server that breaks
//! its promise should fail the call, not the agent three steps later. The
//! checking itself is `json_schema`'s (2020-12 by default, and the drafts
//! a schema names in `$schema`).
//!
//! Schemas come from servers: one that does not compile is left
//! unchecked rather than failing the discovery that brought it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::codec::{Json, Select};
use crate::error::Error;
use crate::json_schema::{plain, Validator};

/// What [`ToolSchemas::learn`] reads of a `tools/list` page.
pub const TOOL_SCHEMAS: Select = Select::Keys(&[(
    "tools",
    Select::Each(&Select::Keys(&[("name", Select::Whole), ("outputSchema", Select::Whole)])),
)]);

/// What [`ToolSchemas::input`] reads of the pages, the first time.
const INPUT_SCHEMAS: Select =
    Select::Keys(&[("tools", Select::Each(&Select::Keys(&[("name", Select::Whole), ("inputSchema", Select::Whole)])))]);

/// What [`OutputSchemas::check`] reads of a result.
const CHECKED_FIELDS: Select = Select::Keys(&[("isError", Select::Whole), ("structuredContent", Select::Whole)]);

#[derive(Default)]
pub struct ToolSchemas {
    by_tool: HashMap<Vec<u8>, Validator>,
    /// The listing's pages, as they came.
    pages: Vec<Json>,
    /// Their input schemas by tool, once something asked for one.
    inputs: RefCell<Option<HashMap<Vec<u8>, Rc<Json>>>>,
}

impl ToolSchemas {
    /// Learns the schemas of a tool list (the `tools` of each page of
    /// `tools/list`, in order), forgetting those of any earlier one.
    /// Only the tools' names and schemas are read: callers may pass what
    /// [`TOOL_SCHEMAS`] selects of each page.
    pub fn learn<'a>(&mut self, pages: impl IntoIterator<Item = &'a Json>) {
        self.by_tool.clear();
        for page in pages {
            let Some(Json::Array(tools)) = page.get("tools") else { continue };
            for tool in tools {
                let (Some(Json::Str(name)), Some(schema @ Json::Object(_))) =
                    (tool.get("name"), tool.get("outputSchema"))
                else {
                    continue;
                };
                if let Ok(validator) = Validator::new(schema) {
                    self.by_tool.insert(name.clone(), validator);
                }
            }
        }
    }

    /// Keeps the listing's pages (`tools/list` results, in order) for
    /// [`ToolSchemas::input`], forgetting any earlier listing.
    pub fn keep_pages(&mut self, pages: &[Json]) {
        self.pages = pages.to_vec();
        *self.inputs.borrow_mut() = None;
    }

    /// The `inputSchema` of `tool`, when `discover` found one: a plain
    /// tree, for the encoder to walk.
    pub fn input(&self, tool: &[u8]) -> Option<Rc<Json>> {
        let mut inputs = self.inputs.borrow_mut();
        let inputs = inputs.get_or_insert_with(|| {
            let mut found = HashMap::new();
            for page in &self.pages {
                let page = page.selected(INPUT_SCHEMAS);
                let Some(Json::Array(tools)) = page.get("tools") else { continue };
                for tool in tools {
                    if let (Some(Json::Str(name)), Some(schema @ Json::Object(_))) =
                        (tool.get("name"), tool.get("inputSchema"))
                    {
                        found.insert(name.clone(), Rc::new(plain(schema)));
                    }
                }
            }
            found
        });
        inputs.get(tool).cloned()
    }

    /// Whether the listing says calling `tool` again changes nothing more
    /// than calling it once: annotated `readOnlyHint` or `idempotentHint`
    /// (both false when absent, as the revisions define them). A server
    /// that says so of a tool that is neither only brings a second run
    /// upon itself.
    pub fn says_repeatable(&self, tool: &[u8]) -> bool {
        const ANNOTATIONS: Select = Select::Keys(&[(
            "tools",
            Select::Each(&Select::Keys(&[("name", Select::Whole), ("annotations", Select::Whole)])),
        )]);
        let hint = |annotations: &Json, name: &str| annotations.get(name) == Some(&Json::Bool(true));
        self.pages.iter().any(|page| {
            let page = page.selected(ANNOTATIONS);
            let Some(Json::Array(tools)) = page.get("tools") else { return false };
            tools.iter().any(|t| {
                let Some(annotations) = t.get("annotations") else { return false };
                matches!(t.get("name"), Some(Json::Str(name)) if name == tool)
                    && (hint(annotations, "readOnlyHint") || hint(annotations, "idempotentHint"))
            })
        })
    }

    /// What the listing says of running `tool` as a task (the 2025-11-25
    /// revision's `execution.taskSupport`: "required", "optional", or
    /// absent, which means "forbidden"), when the tool was listed.
    pub fn task_support(&self, tool: &[u8]) -> Option<Vec<u8>> {
        const EXECUTION: Select = Select::Keys(&[(
            "tools",
            Select::Each(&Select::Keys(&[("name", Select::Whole), ("execution", Select::Whole)])),
        )]);
        self.pages.iter().find_map(|page| {
            let page = page.selected(EXECUTION);
            let Some(Json::Array(tools)) = page.get("tools") else { return None };
            let listed = tools.iter().find(|t| matches!(t.get("name"), Some(Json::Str(name)) if name == tool))?;
            match listed.get("execution").and_then(|e| e.get("taskSupport")) {
                Some(Json::Str(support)) => Some(support.clone()),
                _ => Some(b"forbidden".to_vec()),
            }
        })
    }

    /// Whether `result`, the result of calling `tool`, keeps the tool's
    /// promise. A tool's own failure (`isError`) carries no structured
    /// content and is not checked.
    pub fn check(&self, tool: &[u8], result: &Json, what: &str) -> Result<(), Error> {
        let Some(validator) = self.by_tool.get(tool) else { return Ok(()) };
        let result = result.selected(CHECKED_FIELDS);
        if result.get("isError").is_some_and(Json::is_truthy) {
            return Ok(());
        }
        let mismatch = |detail: String| Error::OutputMismatch { what: what.to_string(), detail };
        let Some(structured) = result.get("structuredContent") else {
            return Err(mismatch("the result has no structuredContent".into()));
        };
        match validator.first_error(structured) {
            None => Ok(()),
            Some(failure) => {
                let at = if failure.at.is_empty() { String::new() } else { format!(" at {}", failure.at) };
                Err(mismatch(format!("{}{at}", failure.message)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    fn schemas(tools: &str) -> ToolSchemas {
        let mut s = ToolSchemas::default();
        let page = decode(format!(r#"{{"tools":{tools}}}"#).as_bytes()).unwrap();
        s.learn([&page]);
        s
    }

    const WEATHER: &str = r#"[{"name":"weather","outputSchema":{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]}}]"#;

    #[test]
    fn structured_content_that_keeps_the_promise_passes() {
        let result = decode(br#"{"content":[],"structuredContent":{"temperature":21.5}}"#).unwrap();
        assert!(schemas(WEATHER).check(b"weather", &result, "tools/call weather").is_ok());
    }

    #[test]
    fn a_mismatch_names_the_tool_and_what_is_wrong() {
        let result = decode(br#"{"content":[],"structuredContent":{"temperature":"warm"}}"#).unwrap();
        let err = schemas(WEATHER).check(b"weather", &result, "tools/call weather").unwrap_err();
        assert_eq!(
            err.to_string(),
            "MCP tools/call weather: structuredContent does not match the tool's outputSchema: \"warm\" is not of type \"number\" at /temperature"
        );
        let missing = decode(br#"{"content":[]}"#).unwrap();
        let err = schemas(WEATHER).check(b"weather", &missing, "tools/call weather").unwrap_err();
        assert!(err.to_string().ends_with("outputSchema: the result has no structuredContent"));
    }

    #[test]
    fn tool_errors_tools_without_a_schema_and_broken_schemas_are_not_checked() {
        let failed = decode(br#"{"content":[],"isError":true}"#).unwrap();
        assert!(schemas(WEATHER).check(b"weather", &failed, "w").is_ok());
        assert!(schemas(WEATHER).check(b"other", &failed, "w").is_ok());
        let broken = schemas(r#"[{"name":"weather","outputSchema":{"type":12}}]"#);
        assert!(broken.check(b"weather", &decode(b"{}").unwrap(), "w").is_ok());
    }
}

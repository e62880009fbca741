//! What a handler returns, made into the protocol's result:
//! - a tool: a string or number is its text; a table with `content` or
//!   `structuredContent` is the result as given; any other table is the
//!   structured content of a tool with an `output_schema` (and its JSON
//!   text), or the JSON text of one without; `nil, message` and
//!   `error(message)` are a result with `isError` and the message.
//! - a resource: a string is its text (bytes that are not UTF-8 go as a
//!   base64 blob); a table is one content item, or a list of them.
//! - a prompt: a string is one user message; a table is the result.
//!
//! And the other way: what a client answered the server's own request,
//! made into what Lua gets back.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use mlua::{MultiValue, Value};

use super::Slot;
use crate::binding::decode::to_lua;
use crate::binding::encode::encode_lua;
use crate::binding::lua::{lua_tostring, Cx, Outcome};
use crate::codec::{encode, Json};
use crate::error::Error;
use crate::server::channel::Unanswered;

/// What a handler returned for `method`, as its result (`name`: the
/// resource's uri, for its contents).
pub(super) fn shaped(lua: &Cx, method: &str, slot: &Slot, value: Value, name: &[u8]) -> Outcome<Json> {
    match method {
        "tools/call" => tool_result(lua, value, slot.structured),
        "resources/read" => resource_contents(lua, value, name, slot.mime_type.as_ref()),
        _ => prompt_result(lua, value),
    }
}

fn text_item(text: Vec<u8>) -> Json {
    Json::Object(vec![(b"type".to_vec(), Json::str("text")), (b"text".to_vec(), Json::Str(text))])
}

fn plain_text(lua: &Cx, value: &Value) -> Outcome<Option<Vec<u8>>> {
    Ok(match value {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(_) | Value::Number(_) | Value::Boolean(_) => Some(lua_tostring(lua, value.clone())?),
        _ => None,
    })
}

/// A tool handler's return as the protocol's result (see the header).
fn tool_result(lua: &Cx, value: Value, structured: bool) -> Outcome<Json> {
    if let Some(text) = plain_text(lua, &value)? {
        return Ok(Json::object([("content", Json::Array(vec![text_item(text)]))]));
    }
    let Value::Table(table) = &value else {
        return Ok(Json::object([("content", Json::Array(vec![]))]));
    };
    let plain = table.raw_get::<Value>("content")?.is_nil() && table.raw_get::<Value>("structuredContent")?.is_nil();
    let json = encode_lua(lua, "the tool's result", &value)?;
    if !plain {
        let mut result = json;
        result.materialize();
        if result.get("content").is_none() {
            if let Json::Object(pairs) = &mut result {
                let text = result_text(pairs.iter().find(|(k, _)| k == b"structuredContent").map(|(_, v)| v));
                pairs.push((b"content".to_vec(), Json::Array(vec![text_item(text)])));
            }
        }
        return Ok(result);
    }
    let text = encode(&json);
    let mut result = vec![(b"content".to_vec(), Json::Array(vec![text_item(text)]))];
    if structured {
        result.push((b"structuredContent".to_vec(), json));
    }
    Ok(Json::Object(result))
}

fn result_text(value: Option<&Json>) -> Vec<u8> {
    value.map(encode).unwrap_or_default()
}

/// A resource handler's return as `contents`.
fn resource_contents(lua: &Cx, value: Value, uri: &[u8], mime_type: Option<&Json>) -> Outcome<Json> {
    let item = |mut pairs: Vec<(Vec<u8>, Json)>| {
        if !pairs.iter().any(|(k, _)| k == b"uri") {
            pairs.push((b"uri".to_vec(), Json::Str(uri.to_vec())));
        }
        if let (Some(mime), false) = (mime_type, pairs.iter().any(|(k, _)| k == b"mimeType")) {
            pairs.push((b"mimeType".to_vec(), mime.clone()));
        }
        crate::sorting::sort_by(&mut pairs, |a, b| a.0.cmp(&b.0));
        Json::Object(pairs)
    };
    if let Value::String(s) = &value {
        let bytes = s.as_bytes().to_vec();
        let field = match std::str::from_utf8(&bytes) {
            Ok(_) => (b"text".to_vec(), Json::Str(bytes)),
            Err(_) => (b"blob".to_vec(), Json::str(STANDARD.encode(&bytes))),
        };
        return Ok(Json::Array(vec![item(vec![field])]));
    }
    let Value::Table(table) = &value else {
        return Err(Error::BadInput("the resource handler returned neither a string nor a table".into()).into());
    };
    let mut json = encode_lua(lua, "the resource", &value)?;
    json.materialize();
    let items: Vec<Json> = match json {
        Json::Array(items) => items,
        Json::Object(_) if table.raw_len() == 0 => vec![json],
        other => vec![other],
    };
    Ok(Json::Array(
        items
            .into_iter()
            .map(|mut one| {
                one.materialize();
                match one {
                    Json::Object(pairs) => item(pairs),
                    other => other,
                }
            })
            .collect(),
    ))
}

/// A prompt handler's return as the result of `prompts/get`.
fn prompt_result(lua: &Cx, value: Value) -> Outcome<Json> {
    if let Some(text) = plain_text(lua, &value)? {
        let message = Json::Object(vec![(b"content".to_vec(), text_item(text)), (b"role".to_vec(), Json::str("user"))]);
        return Ok(Json::object([("messages", Json::Array(vec![message]))]));
    }
    encode_lua(lua, "the prompt", &value)
}

/// The result of a request of the server's, or nil and why in words.
pub(super) fn unanswered_words(lua: &Cx, method: &str, answered: Result<Json, Unanswered>) -> Outcome {
    match answered {
        Ok(result) => Ok(MultiValue::from_vec(vec![to_lua(lua, &result)?])),
        Err(Unanswered::Interrupted) => Err(Error::Interrupted { what: format!("ctx:request {method}") }.into()),
        Err(Unanswered::Refused(code, message)) => {
            refused(lua, format!("the client refused {method}: {message} (code {code})"))
        }
        Err(Unanswered::TimedOut(after)) => refused(
            lua,
            format!("the client did not answer {method} within {} s (opts.request_timeout)", after.as_secs_f64()),
        ),
        Err(Unanswered::Ended) => refused(lua, format!("the client went away before it answered {method}")),
        Err(Unanswered::Io(e)) => refused(lua, format!("{method} could not be sent: {e}")),
    }
}

/// Nil and why, as Lua gets a request that got no answer.
pub(super) fn refused(lua: &Cx, why: String) -> Outcome {
    Ok(MultiValue::from_vec(vec![Value::Nil, Value::String(lua.create_string(why)?)]))
}

//! `mcp.mount(registry, client, {max_output = BYTES})`: each mounted
//! tool's text is capped (`crate::output_cap`) before the model sees it,
//! and the registry gets one `mcp_read_output` entry, shared by every
//! client mounted into it so, to page through what was cut. The entry's
//! run is the prelude's; the texts are made here.

use std::cell::RefCell;

use mlua::{AnyUserData, Function, MultiValue, Table, UserData, Value};

use super::convert::concat_text;
use super::lua::{arg, call_method, truthy, Cx, Outcome};
use super::mount_entries::{entry, records, weak_table, REGISTRY};
use crate::codec::{self, Json};
use crate::error::Error;
use crate::mount;
use crate::output_cap::{Outputs, MIN_CAP};

pub(super) const READ_OUTPUT: &str = "mcp_read_output";

/// Registry -> its outputs record (weak keys); and every holder, to let
/// go of a closed client's files (weak values).
const RECORDS: &str = "lua-mcp output records";
const HOLDERS: &str = "lua-mcp output holders";

struct Holder(RefCell<Outputs>);
impl UserData for Holder {}

/// `opts.max_output`: a whole number of bytes, [`MIN_CAP`] or more.
pub(super) fn cap_option(opts: &Table) -> Outcome<Option<usize>> {
    match opts.get::<Value>("max_output")? {
        Value::Nil => Ok(None),
        Value::Integer(n) if n >= MIN_CAP as i64 => Ok(Some(n as usize)),
        Value::Number(n) if n >= MIN_CAP as f64 && n.fract() == 0.0 && n < 1e15 => Ok(Some(n as usize)),
        _ => Err(Error::BadInput(format!(
            "mcp.mount: opts.max_output must be a whole number of bytes, {MIN_CAP} or more"
        ))
        .into()),
    }
}

/// The registry's outputs record (`holder`, `max`), made with its entry
/// the first time; the largest cap asked for pages its reads.
pub(super) fn record_for(lua: &Cx, registry: &Table, cap: usize) -> Outcome<Table> {
    let records = records(lua, RECORDS)?;
    if let Value::Table(record) = records.raw_get::<Value>(registry.clone())? {
        if record.raw_get::<usize>("max")? < cap {
            record.raw_set("max", cap)?;
        }
        return Ok(record);
    }
    let existing = call_method(lua, registry, REGISTRY, "get", READ_OUTPUT)?;
    if existing.front().is_some_and(truthy) {
        return Err(Error::Collision { quoted: mount::lua_quote(READ_OUTPUT.as_bytes()) }.into());
    }
    let record = lua.create_table()?;
    let holder = lua.create_userdata(Holder(RefCell::new(Outputs::default())))?;
    record.raw_set("holder", holder.clone())?;
    record.raw_set("max", cap)?;
    let holders = weak_table(lua, HOLDERS, "v")?;
    holders.raw_set(holders.raw_len() + 1, holder)?;
    let run: Function = lua.prelude.output_reader.call(record.clone())?;
    let entry = entry(
        lua,
        READ_OUTPUT,
        "Read more of a tool output that was cut: its id (out-N, as the cut output says), an offset in bytes, and a length.",
        &[("id", "string", true), ("offset", "number", false), ("length", "number", false)],
        run,
    )?;
    entry.set("requires_approval", false)?;
    call_method(lua, registry, REGISTRY, "add", entry)?;
    records.raw_set(registry.clone(), record.clone())?;
    Ok(record)
}

fn holder_of(record: &Table) -> Outcome<AnyUserData> {
    Ok(record.raw_get::<AnyUserData>("holder")?)
}

/// `native.cap_output(record, cap, client, text, result)`: the text the
/// model gets for a tool's result (see [`model_text`]), within `cap`.
pub(super) fn cap_output(lua: &Cx, args: MultiValue) -> Outcome {
    let (Value::Table(record), Value::Table(client)) = (arg(&args, 0), arg(&args, 2)) else {
        return Err(Error::BadInput("cap_output: no record".into()).into());
    };
    let cap = match arg(&args, 1) {
        Value::Integer(n) => n as usize,
        Value::Number(n) => n as usize,
        _ => MIN_CAP,
    };
    let text = model_text(lua, &arg(&args, 4), cap)?.unwrap_or_else(|| concat_text(&arg(&args, 3)).unwrap_or_default());
    let holder = holder_of(&record)?;
    let capped = holder
        .borrow::<Holder>()?
        .0
        .borrow_mut()
        .cap(&text, cap, client.to_pointer() as usize)
        .map_err(|e| Error::BadInput(format!("the tool's output is over max_output and could not be kept: {e}")))?;
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(capped)?)]))
}

/// A result's text for a capped mount: text blocks as they are, an image
/// or audio block named with its type and size (said to be left out when
/// it alone is past the cap: a model cannot take it as text anyway), and
/// the JSON text of `structuredContent` where no block has text. None
/// when the result is not a table (the call's text stands).
fn model_text(lua: &Cx, result: &Value, cap: usize) -> Outcome<Option<Vec<u8>>> {
    let Value::Table(result) = result else { return Ok(None) };
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut any_text = false;
    if let Value::Table(blocks) = result.get::<Value>("content")? {
        for block in blocks.sequence_values::<Value>() {
            let Value::Table(block) = block? else { continue };
            let kind = concat_text(&block.get::<Value>("type")?).unwrap_or_default();
            if kind == b"text" {
                if let Some(text) = concat_text(&block.get::<Value>("text")?).filter(|t| !t.is_empty()) {
                    parts.push(text);
                    any_text = true;
                }
                continue;
            }
            let kind_text = String::from_utf8_lossy(&kind).into_owned();
            let data = concat_text(&block.get::<Value>("data")?);
            parts.push(match (kind.as_slice(), data) {
                (b"image" | b"audio", Some(data)) => {
                    let padding = data.iter().rev().take_while(|&&b| b == b'=').count();
                    let bytes = (data.len() * 3 / 4).saturating_sub(padding);
                    let mime = concat_text(&block.get::<Value>("mimeType")?).unwrap_or_else(|| b"?".to_vec());
                    let left_out = if bytes > cap { ": over the output cap, left out" } else { "" };
                    format!("[{kind_text} content: {}, {bytes} bytes{left_out}]", String::from_utf8_lossy(&mime))
                        .into_bytes()
                }
                _ => format!("[{kind_text} content]").into_bytes(),
            });
        }
    }
    let structured = result.get::<Value>("structuredContent")?;
    if !any_text && truthy(&structured) {
        let json = super::encode::encode_lua(lua, "structuredContent", &structured).unwrap_or(Json::Null);
        parts.push(codec::encode(&json));
    }
    if parts.is_empty() {
        return Ok(None);
    }
    Ok(Some(parts.join(&b'\n')))
}

/// `native.read_output(record, id, offset, length)`: a page of a kept
/// output, or the error a model reads when there is none.
pub(super) fn read_output(lua: &Cx, args: MultiValue) -> Outcome {
    let Value::Table(record) = arg(&args, 0) else {
        return Err(Error::BadInput("mcp_read_output: no record".into()).into());
    };
    let id = concat_text(&arg(&args, 1)).unwrap_or_default();
    let id = String::from_utf8_lossy(&id).into_owned();
    let max: usize = record.raw_get("max")?;
    let number = |v: Value| match v {
        Value::Integer(n) if n >= 0 => Some(n as u64),
        Value::Number(n) if n >= 0.0 => Some(n as u64),
        _ => None,
    };
    let offset = number(arg(&args, 2)).unwrap_or(0);
    let length = number(arg(&args, 3)).map_or(max, |n| (n as usize).clamp(1, max));
    let holder = holder_of(&record)?;
    let page = holder.borrow::<Holder>()?.0.borrow().read(&id, offset, length);
    match page {
        Ok(Some(page)) => Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(page)?)])),
        Ok(None) => Err(Error::BadInput(format!(
            "mcp_read_output: no output {id:?} is kept (ids are out-N, as a cut output names them; an output goes when its client closes, or when newer ones need its room)"
        ))
        .into()),
        Err(e) => Err(Error::BadInput(format!("mcp_read_output: output {id:?} could not be read: {e}")).into()),
    }
}

/// A client closed: the outputs its tools made go.
pub(super) fn forget_client(lua: &Cx, client: &Table) -> Outcome<()> {
    let Value::Table(holders) = lua.named_registry_value::<Value>(HOLDERS)? else { return Ok(()) };
    for holder in holders.pairs::<Value, Value>() {
        if let (_, Value::UserData(holder)) = holder? {
            if let Ok(holder) = holder.borrow::<Holder>() {
                holder.0.borrow_mut().forget_owner(client.to_pointer() as usize);
            }
        }
    }
    Ok(())
}

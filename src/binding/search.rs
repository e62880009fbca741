//! `mcp.mount(registry, client, {search = true})`: the registry gets two
//! entries, `mcp_search_tools` and `mcp_call_tool`, in place of every
//! tool, shared by every client mounted into it that way; the tools go
//! into an index (`crate::tool_search`) under the names they would have
//! had mounted. The runs of the two entries are the prelude's (a tool's
//! own error is raised as it is); the ranking and the texts for the
//! model are made here.

use std::cell::RefCell;

use mlua::{AnyUserData, Function, MultiValue, Table, UserData, Value};

use super::convert::concat_text;
use super::encode::encode_lua;
use super::lua::{arg, call_method, Cx, Outcome};
use super::mount_entries::entry;
use super::mount_entries::{records, REGISTRY};
use crate::codec::{self, Json};
use crate::error::Error;
use crate::mount;
use crate::tool_search::{Index, ToolText};

pub(super) const SEARCH_TOOLS: &str = "mcp_search_tools";
pub(super) const CALL_TOOL: &str = "mcp_call_tool";

/// How many tools a search returns when the model names no limit, and
/// at most.
const DEFAULT_LIMIT: usize = 8;
const MAX_LIMIT: usize = 50;

/// The longest name of a miss that is quoted and compared.
const MAX_NAME: usize = 256;

/// Registry -> its shared search record, weak keys.
const SHARED: &str = "lua-mcp search records";

struct SearchIndex(RefCell<Index>);
impl UserData for SearchIndex {}

/// The registry's search record (`index`, `tools` by mounted name, the
/// call entry), made with its two entries the first time; a mount that
/// needs approval makes the call entry need it.
pub(super) fn record_for(lua: &Cx, registry: &Table, requires_approval: bool) -> Outcome<Table> {
    let all = records(lua, SHARED)?;
    if let Value::Table(record) = all.raw_get::<Value>(registry.clone())? {
        if requires_approval {
            record.raw_get::<Table>("call_entry")?.set("requires_approval", true)?;
        }
        return Ok(record);
    }
    let record = lua.create_table()?;
    record.raw_set("index", lua.create_userdata(SearchIndex(RefCell::new(Index::default())))?)?;
    record.raw_set("tools", lua.create_table()?)?;
    let (search, call): (Function, Function) = lua.prelude.search_runs.call(record.clone())?;
    let search_entry = entry(
        lua,
        SEARCH_TOOLS,
        "Find tools for a task: give words for what you want done. Returns the best matches with their input schemas; run one with mcp_call_tool.",
        &[("query", "string", true), ("limit", "number", false)],
        search,
    )?;
    search_entry.set("requires_approval", false)?;
    let call_entry = entry(
        lua,
        CALL_TOOL,
        "Run a tool mcp_search_tools found: its name as listed, and its arguments as a JSON object.",
        &[("name", "string", true), ("arguments", "string", false)],
        call,
    )?;
    call_entry.set("requires_approval", requires_approval)?;
    for entry in [&search_entry, &call_entry] {
        let name: mlua::LuaString = entry.get("name")?;
        let existing = call_method(lua, registry, REGISTRY, "get", name.clone())?;
        if existing.front().is_some_and(super::lua::truthy) {
            return Err(Error::Collision { quoted: mount::lua_quote(&name.as_bytes()) }.into());
        }
    }
    call_method(lua, registry, REGISTRY, "add", search_entry)?;
    call_method(lua, registry, REGISTRY, "add", call_entry.clone())?;
    record.raw_set("call_entry", call_entry)?;
    all.raw_set(registry.clone(), record.clone())?;
    Ok(record)
}

/// Whether a tool of this mounted name is in the registry's index.
pub(super) fn holds(lua: &Cx, record: &Table, name: &[u8]) -> Outcome<bool> {
    let tools: Table = record.raw_get("tools")?;
    Ok(!tools.raw_get::<Value>(lua.create_string(name)?)?.is_nil())
}

/// Adds a mounted tool (`tool`, the server's descriptor; `run`, what its
/// registry entry would have run) to the index.
pub(super) fn add(lua: &Cx, record: &Table, name: &[u8], tool: &Table, run: Function) -> Outcome<()> {
    let text = |field: &str| -> Outcome<Vec<u8>> { Ok(concat_text(&tool.get::<Value>(field)?).unwrap_or_default()) };
    let (title, description) = (text("title")?, text("description")?);
    let mut parameters = Vec::new();
    if let Value::Table(schema) = tool.get::<Value>("inputSchema")? {
        if let Value::Table(properties) = schema.get::<Value>("properties")? {
            for pair in properties.pairs::<Value, Value>() {
                parameters.extend(concat_text(&pair?.0));
            }
        }
    }
    let index: AnyUserData = record.raw_get("index")?;
    index.borrow::<SearchIndex>()?.0.borrow_mut().add(&ToolText {
        name,
        title: &title,
        description: &description,
        parameters: parameters.iter().map(Vec::as_slice).collect(),
    });
    let held = lua.create_table()?;
    held.raw_set("tool", tool.clone())?;
    held.raw_set("run", run)?;
    let tools: Table = record.raw_get("tools")?;
    tools.raw_set(lua.create_string(name)?, held)?;
    Ok(())
}

/// Takes a tool out of the index (a watched list changed).
pub(super) fn remove(lua: &Cx, record: &Table, name: &[u8]) -> Outcome<()> {
    let index: AnyUserData = record.raw_get("index")?;
    index.borrow::<SearchIndex>()?.0.borrow_mut().remove(name);
    let tools: Table = record.raw_get("tools")?;
    tools.raw_set(lua.create_string(name)?, Value::Nil)?;
    Ok(())
}

/// `native.search_tools(record, query, limit)`: the JSON text the model
/// reads: the best tools with their names as mounted, descriptions and
/// input schemas.
pub(super) fn search_tools(lua: &Cx, args: MultiValue) -> Outcome {
    let Value::Table(record) = arg(&args, 0) else {
        return Err(Error::BadInput("mcp_search_tools: no index".into()).into());
    };
    let query = concat_text(&arg(&args, 1)).unwrap_or_default();
    let limit = match arg(&args, 2) {
        Value::Integer(n) => n.max(1) as usize,
        Value::Number(n) if n >= 1.0 => n as usize,
        _ => DEFAULT_LIMIT,
    }
    .min(MAX_LIMIT);
    let index: AnyUserData = record.raw_get("index")?;
    let (found, total) = {
        let index = index.borrow::<SearchIndex>()?;
        let index = index.0.borrow();
        (index.search(&query, limit), index.len())
    };
    let tools: Table = record.raw_get("tools")?;
    let mut listed = Vec::new();
    for name in &found {
        let held: Table = tools.raw_get(lua.create_string(name)?)?;
        let tool: Table = held.raw_get("tool")?;
        let mut fields = vec![("name", Json::Str(name.clone()))];
        if let Some(title) = concat_text(&tool.get::<Value>("title")?) {
            fields.push(("title", Json::Str(title)));
        }
        if let Some(description) = concat_text(&tool.get::<Value>("description")?) {
            fields.push(("description", Json::Str(description)));
        }
        let schema = tool.get::<Value>("inputSchema")?;
        fields.push(("input_schema", encode_lua(lua, "inputSchema", &schema).unwrap_or(Json::Object(vec![]))));
        listed.push(Json::object(fields));
    }
    let note = match listed.len() {
        0 => format!("No tool of the {total} matched those words; try others (a verb, the thing it acts on)."),
        n => format!("{n} of {total} tools. Run one with mcp_call_tool {{name, arguments}}."),
    };
    let reply = Json::object([("tools", Json::Array(listed)), ("note", Json::str(note))]);
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(codec::encode(&reply))?)]))
}

/// `native.search_miss(record, name)`: the error a model reads when it
/// calls a tool the index does not hold, with the nearest names.
pub(super) fn search_miss(lua: &Cx, args: MultiValue) -> Outcome {
    let Value::Table(record) = arg(&args, 0) else {
        return Err(Error::BadInput("mcp_call_tool: no index".into()).into());
    };
    let mut name = concat_text(&arg(&args, 1)).unwrap_or_default();
    // A model's name is quoted and measured against every tool's: a long
    // one is cut first.
    name.truncate(MAX_NAME);
    let index: AnyUserData = record.raw_get("index")?;
    let closest = index.borrow::<SearchIndex>()?.0.borrow().closest(&name, 3);
    let quoted: Vec<String> = closest.iter().map(|n| format!("\"{}\"", String::from_utf8_lossy(n))).collect();
    let mut text = format!(
        "no tool named \"{}\"; search first with mcp_search_tools and use a name it lists",
        String::from_utf8_lossy(&name)
    );
    if !quoted.is_empty() {
        text.push_str(&format!(" (closest: {})", quoted.join(", ")));
    }
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(text)?)]))
}

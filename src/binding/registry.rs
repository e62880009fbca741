//! `mcp.mount`: a server's tools into the user's registry, by the rules in
//! `crate::mount` (or into its search index, `search`); with `watch =
//! true`, mounted again each time the server's tool list changes and the
//! client lists it again.

use mlua::{Function, MultiValue, Table, Value};

use super::code_mode;
use super::convert::concat_text;
use super::entry::Entry;
use super::lua::{arg, call_method, truthy, Cx, Outcome};
use super::mount_entries::REGISTRY;
use super::outputs;
use super::results::deliver_notifications;
use super::search;
use crate::codec::Json;
use crate::error::Error;
use crate::mount;
use crate::protocol::{self};
pub(super) fn mount_tools(lua: &Cx, args: MultiValue) -> Outcome {
    let Value::Table(registry) = arg(&args, 0) else {
        return Err(Error::BadInput("mcp.mount: the registry must be a table".into()).into());
    };
    let Value::Table(client) = arg(&args, 1) else {
        return Err(Error::BadInput("mcp.mount: the client must be a table".into()).into());
    };
    let opts = match arg(&args, 2) {
        Value::Table(t) => t,
        _ => lua.create_table()?,
    };
    let mounted = mount_into(lua, &registry, &client, &opts, &[])?;
    if opts.get::<Value>("watch")? == Value::Boolean(true) {
        watch(lua, &client, &registry, &opts, &mounted)?;
    }
    Ok(MultiValue::from_vec(vec![Value::Table(mounted)]))
}

/// Mounts the client's tools into `registry` by the mount rules, leaving
/// out the names in `kept` (already there, from an earlier mount that
/// could not be undone); returns the names added.
pub(super) fn mount_into(lua: &Cx, registry: &Table, client: &Table, opts: &Table, kept: &[Vec<u8>]) -> Outcome<Table> {
    let mut prefix: Value = opts.get("prefix")?;
    if !truthy(&prefix) {
        prefix = client.get("prefix")?;
    }
    let prefix = if truthy(&prefix) {
        concat_text(&prefix).ok_or_else(|| Error::BadInput("mcp.mount: the prefix must be a string".into()))?
    } else {
        Vec::new()
    };
    let mut tools: Value = client.get("tools")?;
    if !truthy(&tools) {
        tools = call_method(lua, client, "the client", "discover", ())?.pop_front().unwrap_or(Value::Nil);
    }
    let Value::Table(tools) = tools else {
        return Err(Error::BadInput("mcp.mount: the client's tools are not a list".into()).into());
    };
    let trusted = opts.get::<Value>("trust")? == Value::Boolean(true);
    let policy = Policy::read(opts)?;
    let runner = lua.prelude.runner.clone();
    // max_output: each run's text capped, and mcp_read_output for the rest.
    let capped = match outputs::cap_option(opts)? {
        Some(cap) => (Value::Table(outputs::record_for(lua, registry, cap)?), Value::Integer(cap as _)),
        None => (Value::Nil, Value::Nil),
    };
    // code = true: the tools are functions of mcp_run_lua's chunks too.
    let coded = match opts.get::<Value>("code")? {
        Value::Boolean(true) => {
            Some(code_mode::record_for(lua, registry, !trusted && policy.approve.is_none(), &capped)?)
        }
        Value::Nil | Value::Boolean(false) => None,
        _ => return Err(Error::BadInput("mcp.mount: opts.code must be a boolean".into()).into()),
    };
    // search = true: the tools go into the registry's index, behind its
    // two entries (see `search`).
    let searched = match opts.get::<Value>("search")? {
        Value::Boolean(true) => Some(search::record_for(lua, registry, !trusted && policy.approve.is_none())?),
        Value::Nil | Value::Boolean(false) => None,
        _ => return Err(Error::BadInput("mcp.mount: opts.search must be a boolean".into()).into()),
    };
    let mounted = lua.create_table()?;
    for tool in tools.sequence_values::<Value>() {
        let Value::Table(tool) = tool? else {
            return Err(Error::BadInput("mcp.mount: a tool descriptor is not a table".into()).into());
        };
        let tool_name: Value = tool.get("name")?;
        let suffix = concat_text(&tool_name).ok_or_else(|| Error::BadInput("mcp.mount: a tool has no name".into()))?;
        let full = [prefix.as_slice(), suffix.as_slice()].concat();
        if kept.contains(&full) || !policy.selects(&suffix) {
            continue;
        }
        let name = lua.create_string(&full)?;
        // A name taken is a collision wherever the tools go (checked
        // before anything is added, so a refused mount changes nothing).
        let taken = match &searched {
            Some(record) => search::holds(lua, record, &full)?,
            None => call_method(lua, registry, REGISTRY, "get", name.clone())?.front().is_some_and(truthy),
        };
        if taken {
            return Err(Error::Collision { quoted: mount::lua_quote(&full) }.into());
        }
        // What the tool's entry runs; `structured` for a chunk's call.
        let run = |structured: bool| -> mlua::Result<Function> {
            let (approve, outputs, cap) = (policy.approve.clone(), capped.0.clone(), capped.1.clone());
            runner.call((client.clone(), tool_name.clone(), approve, tool.clone(), outputs, cap, structured))
        };
        if let Some(record) = &coded {
            code_mode::add(lua, record, &full, run(true)?)?;
        }
        if let Some(record) = &searched {
            search::add(lua, record, &full, &tool, run(false)?)?;
            mounted.raw_set(mounted.raw_len() + 1, name)?;
            continue;
        }
        let description = match tool.get::<Value>("description")? {
            v if truthy(&v) => concat_text(&v).unwrap_or_else(|| b"MCP tool".to_vec()),
            _ => b"MCP tool".to_vec(),
        };
        let entry = lua.create_table()?;
        entry.set("name", name.clone())?;
        entry.set("description", lua.create_string(mount::fold_description(&description))?)?;
        entry.set("args", schema_args(lua, tool.get("inputSchema")?)?)?;
        // The host's approve decides each run itself: the agent loop need
        // not ask as well.
        entry.set("requires_approval", !trusted && policy.approve.is_none())?;
        carry_details(&tool, &entry)?;
        entry.set("run", run(false)?)?;
        call_method(lua, registry, REGISTRY, "add", entry)?;
        mounted.raw_set(mounted.raw_len() + 1, name)?;
    }
    Ok(mounted)
}

/// What a host decides of a server's tools at mount: which are mounted
/// (`include`, `exclude`: names, or patterns with `*`, matched against
/// the server's names) and whether each run goes ahead (`approve`).
struct Policy {
    include: Vec<Vec<u8>>,
    exclude: Vec<Vec<u8>>,
    approve: Option<Function>,
}

impl Policy {
    fn read(opts: &Table) -> Outcome<Policy> {
        let approve = match opts.get::<Value>("approve")? {
            Value::Nil => None,
            Value::Function(f) => Some(f),
            _ => return Err(Error::BadInput("mcp.mount: opts.approve must be a function".into()).into()),
        };
        Ok(Policy { include: names_option(opts, "include")?, exclude: names_option(opts, "exclude")?, approve })
    }

    fn selects(&self, name: &[u8]) -> bool {
        let matches = |patterns: &[Vec<u8>]| patterns.iter().any(|p| mount::name_matches(p, name));
        (self.include.is_empty() || matches(&self.include)) && !matches(&self.exclude)
    }
}

/// `opts.include` or `opts.exclude`: a list of strings (empty when absent).
fn names_option(opts: &Table, field: &str) -> Outcome<Vec<Vec<u8>>> {
    let refuse = || Error::BadInput(format!("mcp.mount: opts.{field} must be a list of tool names or patterns"));
    let list = match opts.get::<Value>(field)? {
        Value::Nil => return Ok(Vec::new()),
        Value::Table(list) => list,
        _ => return Err(refuse().into()),
    };
    let mut names = Vec::new();
    for item in list.sequence_values::<Value>() {
        match item? {
            Value::String(s) => names.push(s.as_bytes().to_vec()),
            _ => return Err(refuse().into()),
        }
    }
    Ok(names)
}

/// What the server said of a tool beyond its name, description and
/// arguments, for hosts that show it or decide by it: `title`,
/// `annotations` (readOnlyHint, destructiveHint, ...), `icons` and
/// `output_schema`. Only what the server sent: a server that sends none
/// gives the reference's entries exactly.
fn carry_details(tool: &Table, entry: &Table) -> Outcome<()> {
    for (from, to) in
        [("title", "title"), ("annotations", "annotations"), ("icons", "icons"), ("outputSchema", "output_schema")]
    {
        let value: Value = tool.get(from)?;
        if !matches!(value, Value::Nil) {
            entry.set(to, value)?;
        }
    }
    Ok(())
}

/// Keeps the mount in the client's entry, for [`resync_watches`].
pub(super) fn watch(lua: &Cx, client: &Table, registry: &Table, opts: &Table, mounted: &Table) -> Outcome<()> {
    let Some(entry) = Entry::of(lua, client)? else {
        return Err(Error::BadInput("mcp.mount: watch = true needs a client made by mcp.new".into()).into());
    };
    let watches = entry.watches(lua)?;
    let record = lua.create_table()?;
    record.raw_set("registry", registry.clone())?;
    record.raw_set("opts", opts.clone())?;
    record.raw_set("names", mounted.clone())?;
    watches.raw_set(watches.raw_len() + 1, record)?;
    Ok(())
}

/// After the client's tool list changed: every watched registry gets the
/// new list. The tools mounted before are removed (`registry:remove(name)`)
/// and the current ones mounted again, so changed ones are replaced and
/// gone ones disappear. A registry without `remove` keeps what it had;
/// the names it could not drop or replace are reported to
/// `on_notification` as `lua-mcp/tools_not_removed` ({names = {...}}).
pub(super) fn resync_watches(lua: &Cx, client: &Table) -> Outcome<()> {
    let Some(entry) = Entry::of(lua, client)? else { return Ok(()) };
    let Some(watches) = entry.watches_if_any()? else { return Ok(()) };
    for record in watches.sequence_values::<Table>() {
        let record = record?;
        let registry: Table = record.raw_get("registry")?;
        let opts: Table = record.raw_get("opts")?;
        let before: Table = record.raw_get("names")?;
        let searched = opts.get::<Value>("search")? == Value::Boolean(true);
        let can_remove = searched || matches!(registry.get::<Value>("remove")?, Value::Function(_));
        let mut kept = Vec::new();
        for name in before.sequence_values::<mlua::LuaString>() {
            let name = name?;
            if opts.get::<Value>("code")? == Value::Boolean(true) {
                let record = code_mode::record_for(lua, &registry, false, &(Value::Nil, Value::Nil))?;
                code_mode::remove(lua, &record, &name.as_bytes())?;
            }
            if searched {
                let record = search::record_for(lua, &registry, false)?;
                search::remove(lua, &record, &name.as_bytes())?;
            } else if can_remove {
                call_method(lua, &registry, REGISTRY, "remove", name)?;
            } else {
                kept.push(name.as_bytes().to_vec());
            }
        }
        let added = mount_into(lua, &registry, client, &opts, &kept)?;
        for name in &kept {
            added.raw_set(added.raw_len() + 1, lua.create_string(name)?)?;
        }
        record.raw_set("names", added)?;
        if !kept.is_empty() {
            let names = Json::Array(kept.into_iter().map(Json::Str).collect());
            let notice = protocol::notification("lua-mcp/tools_not_removed", Some(Json::object([("names", names)])));
            deliver_notifications(lua, client, vec![notice])?;
        }
    }
    Ok(())
}

/// Reads what the mount rules need from a JSON Schema held in Lua.
pub(super) fn schema_args(lua: &Cx, schema: Value) -> Outcome<Table> {
    let out = lua.create_table()?;
    let Value::Table(schema) = schema else { return Ok(out) };
    let Value::Table(properties) = schema.get::<Value>("properties")? else { return Ok(out) };
    let mut required = Vec::new();
    if let Value::Table(list) = schema.get::<Value>("required")? {
        for r in list.sequence_values::<Value>() {
            if let Some(name) = concat_text(&r?) {
                required.push(name);
            }
        }
    }
    let mut props = Vec::new();
    for pair in properties.pairs::<Value, Value>() {
        let (k, prop) = pair?;
        let Some(name) = concat_text(&k) else { continue };
        let ty = match prop {
            Value::Table(p) => match p.get::<Value>("type")? {
                Value::String(s) => Some(s.as_bytes().to_vec()),
                _ => None,
            },
            _ => None,
        };
        props.push((name, ty));
    }
    for (i, a) in mount::args_from_schema(props, &required).into_iter().enumerate() {
        let entry = lua.create_table()?;
        entry.set("name", lua.create_string(&a.name)?)?;
        entry.set("type", a.kind)?;
        entry.set("required", a.required)?;
        out.raw_set(i + 1, entry)?;
    }
    Ok(out)
}

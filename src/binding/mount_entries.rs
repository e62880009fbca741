//! What mount's options (`search`, `max_output`, `code`) share: the
//! registry entries mount makes of its own (their runs are the
//! prelude's), and the records each option keeps per registry, weakly
//! keyed so that a registry that goes takes its records along.

use mlua::{Function, Table, Value};

use super::lua::{Cx, Outcome};

/// How a registry is named when it lacks what mount needs of it.
pub(super) const REGISTRY: &str = "the registry (it needs get(name) and add(tool))";

/// A table kept under `key` in the Lua registry, registry -> what one of
/// mount's options keeps for it (search, max_output, code), weak keys: a
/// registry that goes takes its records along.
pub(super) fn records(lua: &Cx, key: &str) -> Outcome<Table> {
    weak_table(lua, key, "k")
}

/// A weak table (`mode` "k" or "v") kept under `key` in the Lua registry.
pub(super) fn weak_table(lua: &Cx, key: &str, mode: &str) -> Outcome<Table> {
    if let Value::Table(t) = lua.named_registry_value::<Value>(key)? {
        return Ok(t);
    }
    let table = lua.create_table()?;
    let meta = lua.create_table()?;
    meta.set("__mode", mode)?;
    table.set_metatable(Some(meta))?;
    lua.set_named_registry_value(key, table.clone())?;
    Ok(table)
}

/// A registry entry of mount's own (its run is the prelude's).
pub(super) fn entry(
    lua: &Cx,
    name: &str,
    description: &str,
    args: &[(&str, &str, bool)],
    run: Function,
) -> Outcome<Table> {
    let entry = lua.create_table()?;
    entry.set("name", name)?;
    entry.set("description", description)?;
    let list = lua.create_table()?;
    for (i, (arg, kind, required)) in args.iter().enumerate() {
        let a = lua.create_table()?;
        a.set("name", *arg)?;
        a.set("type", *kind)?;
        a.set("required", *required)?;
        list.raw_set(i + 1, a)?;
    }
    entry.set("args", list)?;
    entry.set("run", run)?;
    Ok(entry)
}

//! The module opened on an in-process Lua (the test build links the system
//! Lua instead of resolving it from a host): errors must arrive as plain
//! strings, and the fixture seam must send the reference's bytes.

use mlua::{Lua, Table, Value};

fn module(lua: &Lua) -> Table {
    let m = mcp::open(lua).expect("module opens");
    lua.globals().set("mcp", m.clone()).unwrap();
    m
}

#[test]
fn errors_are_plain_strings_with_the_reference_wording() {
    let lua = Lua::new();
    module(&lua);
    let (ok, err): (bool, Value) = lua.load("return pcall(mcp.new, {})").eval().unwrap();
    assert!(!ok);
    let Value::String(err) = err else { panic!("error is not a string: {err:?}") };
    assert_eq!(err.to_str().unwrap(), "mcp.new: needs a command, a url, or a transport");
}

#[test]
fn the_fixture_seam_sends_the_reference_bytes() {
    let lua = Lua::new();
    module(&lua);
    let sent: String = lua
        .load(
            r#"
            local sent
            local c = mcp.new({ transport = function(text)
              sent = text
              return true, '{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ok"}]}}', 200
            end })
            assert(c:call('echo', { message = 'hi' }) == 'ok')
            return sent
            "#,
        )
        .eval()
        .unwrap();
    assert_eq!(
        sent,
        concat!(
            r#"{"id":1,"jsonrpc":"2.0","method":"initialize","params":{"capabilities":{},"clientInfo":{"name":"lua-agent","version":"0.1"},"protocolVersion":"2025-06-18"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n",
            r#"{"id":2,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"message":"hi"},"name":"echo"}}"#,
            "\n"
        )
    );
}

#[test]
fn a_value_json_cannot_carry_is_named_by_its_path() {
    let lua = Lua::new();
    module(&lua);
    let err: String = lua
        .load(
            r#"
            local c = mcp.new({ transport = function() return true, '', 200 end })
            local ok, err = pcall(c.call, c, 'x', { list = { 1, { cb = print } } })
            return err
            "#,
        )
        .eval()
        .unwrap();
    assert_eq!(err, "MCP: cannot encode a function at arguments.list[2].cb");
}

//! The module opened on an in-process Lua (the test build links the system
//! Lua instead of resolving it from a host): errors must arrive as plain
//! strings, and the fixture seam must send the reference's bytes.

use mlua::{Lua, Table, Value};

fn module(lua: &Lua) -> Table {
    let m = mcp::open(lua).expect("module opens");
    lua.globals().set("mcp", m.clone()).unwrap();
    // A fixture transport answering each tools/call with a text block
    // `text`, and a table whose `last` is the last text it was sent.
    lua.load(
        r#"
        function answering(text)
          local seen = {}
          return function(sent)
            seen.last = sent
            local id = sent:match('"id":(%d+),"jsonrpc":"2.0","method":"tools/call"')
            return true, '{"jsonrpc":"2.0","id":' .. id .. ',"result":{"content":[{"type":"text","text":"'
              .. text .. '"}]}}', 200
          end, seen
        end
        "#,
    )
    .exec()
    .unwrap();
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

/// An `on_done` that raises leaves the other ready callbacks pending, and
/// the descriptor an event loop watches rings for them: no message will.
/// A callback that calls the client runs the others itself, each once.
#[test]
fn callbacks_left_pending_by_a_raise_ring_the_descriptor_and_none_runs_twice() {
    let lua = Lua::new();
    module(&lua);
    let counter = format!("lua5.4 {}/lua/servers/counter.lua", env!("CARGO_MANIFEST_DIR"));
    lua.globals().set("COUNTER", counter).unwrap();
    let (fd, first): (i32, String) = lua
        .load(
            r#"
            C = mcp.new({ command = COUNTER })
            C:call('increment', {})
            local fd = C:fd()
            RUNS = {}
            for _, name in ipairs({ 'a', 'b' }) do
              C:call_async('increment', {}, { on_done = function()
                RUNS[#RUNS + 1] = name
                error('failed in ' .. name, 0)
              end })
            end
            local t0 = mcp.clock()
            while mcp.clock() - t0 < 0.5 do end
            local _, first = pcall(C.dispatch, C)
            return fd, first
            "#,
        )
        .eval()
        .unwrap();
    assert!(first.starts_with("failed in "), "{first}");
    let mut ready = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one live pollfd; the client (and so its descriptor) is open.
    let readable = unsafe { libc::poll(&mut ready, 1, 0) };
    assert_eq!(readable, 1, "the descriptor did not ring for the callback left pending");
    let (second, runs): (String, String) = lua
        .load(
            r#"
            local _, second = pcall(C.dispatch, C)
            assert(C:dispatch() == 0)
            C:close()
            table.sort(RUNS)
            return second, table.concat(RUNS, ' ')
            "#,
        )
        .eval()
        .unwrap();
    assert!(second.starts_with("failed in ") && second != first, "{second}");
    assert_eq!(runs, "a b");
    let once_each: String = lua
        .load(
            r#"
            local c = mcp.new({ command = COUNTER })
            local runs = {}
            for i = 1, 3 do
              c:call_async('increment', {}, { on_done = function()
                runs[#runs + 1] = i
                if i == 1 then c:call('increment', {}) end
              end })
            end
            local t0 = mcp.clock()
            while mcp.clock() - t0 < 0.5 do end
            c:dispatch()
            c:close()
            table.sort(runs)
            return table.concat(runs, ' ')
            "#,
        )
        .eval()
        .unwrap();
    assert_eq!(once_each, "1 2 3");
}

#[test]
fn a_flat_table_is_written_as_the_general_walk_writes_it() {
    // A table of a few scalar fields is read on the Lua stack; with any
    // metatable (here an empty one) the general walk writes it. Both must
    // give the same bytes, and the same refusal for what the wire refuses.
    let lua = Lua::new();
    module(&lua);
    let mismatches: String = lua
        .load(
            r#"
            local scalars = { 'a', '', 'é', 'x"y\\z\n', '\0', 0, -0.0, 1, -7, 2^53, 2^63, 0.5, 1e300, 1/3,
              true, false, mcp.null, 0/0, 1/0, -1/0, '\255', {}, { 1 } }
            local keys = { 'a', 'b', 'B', 'ab', '', 'é', 'k\0', '10', '9', '\255', 1, 2.5 }
            local seed, out = 7, {}
            local function next_int(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
            local function encoded(t)
              local ok, text = pcall(mcp.json_encode, t)
              return tostring(ok) .. ' ' .. tostring(text)
            end
            for _ = 1, 3000 do
              local t = {}
              for _ = 1, next_int(20) - 1 do t[keys[next_int(#keys)]] = scalars[next_int(#scalars)] end
              local fast = encoded(t)
              local general = encoded(setmetatable(t, {}))
              if fast ~= general then out[#out + 1] = fast .. ' ~= ' .. general end
            end
            return table.concat(out, '\n')
            "#,
        )
        .eval()
        .unwrap();
    assert_eq!(mismatches, "");
}

#[test]
fn each_call_names_its_own_tool_however_names_come_and_go() {
    // Tool names are known again by their Lua string's address; names made
    // afresh, more of them than are remembered, with collections between
    // them, must each still reach the wire as themselves.
    let lua = Lua::new();
    module(&lua);
    let wrong: String = lua
        .load(
            r#"
            local transport, seen = answering('ok')
            local c = mcp.new({ transport = transport })
            local wrong = {}
            for i = 1, 200 do
              local name = 'tool' .. (i * 7 % 13)
              if i % 5 == 0 then name = name .. string.rep('x', 50) end
              if i % 17 == 0 then collectgarbage() end
              c:call(name, { n = i })
              local went = seen.last:match('"name":"([^"]*)"}}%s*$')
              if went ~= name then wrong[#wrong + 1] = name .. ' went as ' .. tostring(went) end
            end
            return table.concat(wrong, '; ')
            "#,
        )
        .eval()
        .unwrap();
    assert_eq!(wrong, "");
}

#[test]
fn a_transport_a_metatable_gives_is_the_seam_as_a_field_is() {
    // client.transport is read as Lua reads the field: through __index
    // too, as the reference's self.transport does.
    let lua = Lua::new();
    module(&lua);
    let text: String = lua
        .load(
            r#"
            local c = mcp.new({ transport = (answering('fixture')) })
            local transport, methods = c.transport, getmetatable(c).__index
            c.transport = nil
            setmetatable(c, { __index = function(_, k)
              if k == 'transport' then return transport end
              return methods[k]
            end })
            return (c:call('echo', {}))
            "#,
        )
        .eval()
        .unwrap();
    assert_eq!(text, "fixture");
}

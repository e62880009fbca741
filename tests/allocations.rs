//! Allocations per small `client:call`, counted by a global allocator
//! around calls to a live stdio server (`lua/servers/counter.lua`).
//!
//!   cargo test --release --test allocations -- --nocapture
//!
//! Every allocation in the process is counted, the reader threads'
//! included. Lua's own (the result table, the returned text) go through
//! the same allocator here, since mlua gives the in-process state a Rust
//! allocator; they are told apart by their alignment: mlua asks for 16
//! bytes (the C allocator's), which no allocation of the client does
//! except hash tables (whose SIMD groups want 16 as well): the client's
//! count is a floor, Lua's a ceiling.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::Lua;

struct Counting;

static CLIENT: AtomicU64 = AtomicU64::new(0);
static LUA: AtomicU64 = AtomicU64::new(0);

/// mlua's `SYS_MIN_ALIGN` on 64-bit targets.
const LUA_ALIGN: usize = 16;

fn count(layout: Layout) {
    let counter = if layout.align() == LUA_ALIGN { &LUA } else { &CLIENT };
    counter.fetch_add(1, Ordering::Relaxed);
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The median over batches of calls: (by the client, by Lua) per call.
fn allocations_per_call(lua: &Lua) -> (f64, f64) {
    let m = mcp::open(lua).expect("module opens");
    lua.globals().set("mcp", m).unwrap();
    let counted =
        lua.create_function(|_, ()| Ok((CLIENT.load(Ordering::Relaxed), LUA.load(Ordering::Relaxed)))).unwrap();
    lua.globals().set("allocations", counted).unwrap();
    lua.load(
        r#"
        local c = mcp.new({ command = { 'lua5.4', 'lua/servers/counter.lua' } })
        c:discover()
        local args = { by = 1, note = 'a small call', ratio = 0.5 }
        for _ = 1, 100 do c:call('increment', args) end
        local client, lua = {}, {}
        for batch = 1, 7 do
          local c0, l0 = allocations()
          for _ = 1, 200 do c:call('increment', args) end
          local c1, l1 = allocations()
          client[batch], lua[batch] = (c1 - c0) / 200, (l1 - l0) / 200
        end
        c:close()
        table.sort(client)
        table.sort(lua)
        return client[4], lua[4]
        "#,
    )
    .eval()
    .expect("the calls run")
}

#[test]
fn a_small_call_allocates_little() {
    let lua = Lua::new();
    let (client, lua_side) = allocations_per_call(&lua);
    println!("allocations per small call: {client:.1} by the client, {lua_side:.1} by Lua");
    // 54 when the arguments were copied into a tree and the request had
    // an owned key per field; 27 once they were not; 24 since the tool's
    // label is shared between calls, the result's values make room for
    // the boundary's flag, and the handshake check compares in place; 23
    // since a result's text is read on the Lua stack it was built on; 10
    // since the arguments are written from the Lua stack, a usual reply is
    // held as its parts, the method, the Ctrl-C check and a few member
    // counts need none of their own, and the tool's name is known by its
    // string's address; 8 since `native.call` takes and returns fixed
    // lists.
    assert!(client <= 8.0, "{client} allocations per call by the client");
}

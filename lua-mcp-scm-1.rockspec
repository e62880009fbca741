-- `luarocks make` from a checkout builds the native module with cargo for
-- the Lua luarocks targets (--lua-version 5.1, 5.3, 5.4; a LuaJIT
-- luarocks gets the LuaJIT build) and installs it as `mcp`, with the types
-- for editors. Offline, only luarocks' built-in build types work, so this
-- one runs a command; a rock published online would use the rust-mlua
-- build backend (`build = { type = "rust-mlua", modules = { "mcp" } }`,
-- with `build_dependencies = { "luarocks-build-rust-mlua" }`).
rockspec_format = "3.0"
package = "lua-mcp"
version = "scm-1"
source = {
  url = "git+https://github.com/lua-mcp/lua-mcp.git",
}
description = {
  summary = "A Model Context Protocol client for Lua, as a native module",
  detailed = [[
    require('mcp') gives the pure-Lua mcp.lua's functions, returns and error
    strings, over long-lived stdio sessions and native Streamable HTTP, with
    many requests in flight and an async API for event loops (luv, Neovim).
  ]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.1, < 5.5",
}
build = {
  type = "command",
  build_command = [[sh scripts/rock-build.sh "$(LUA)"]],
  install = {
    lib = { mcp = "target/rock/mcp.so" },
    bin = { ["lua-mcp"] = "bin/lua-mcp" },
  },
  copy_directories = { "lua/types" },
}

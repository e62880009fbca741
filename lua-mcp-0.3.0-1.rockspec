-- lua-mcp 0.3.0 from source: `luarocks make lua-mcp-0.3.0-1.rockspec` in
-- a checkout of v0.3.0 builds the native module with cargo, as the scm
-- rockspec does (see there). Without Rust, install the binary rock for
-- your platform instead (docs/install.md): it holds the module already
-- built for every Lua.
rockspec_format = "3.0"
package = "lua-mcp"
version = "0.3.0-1"
source = {
  url = "git+https://github.com/lua-mcp/lua-mcp.git",
  tag = "v0.3.0",
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

# close_state.py MODULE - a host that embeds Lua 5.4 itself (through
# liblua5.4), loads MODULE in a state, closes the state, and says whether
# the module is still mapped in the process. Lua unloads C modules when a
# state closes, well before the process exits; the module must stay, since
# its exit hook (which stops servers nobody closed) runs at the exit.
import ctypes
import os
import sys

module = sys.argv[1]
lua = ctypes.CDLL('liblua5.4.so.0', mode=os.RTLD_GLOBAL)
state = ctypes.c_void_p
lua.luaL_newstate.restype = state
lua.luaL_openlibs.argtypes = [state]
lua.lua_close.argtypes = [state]
lua.luaL_loadstring.argtypes = [state, ctypes.c_char_p]
lua.lua_pcallk.argtypes = [state, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]

L = lua.luaL_newstate()
lua.luaL_openlibs(L)
load = "package.preload.mcp = package.loadlib(%r, 'luaopen_mcp'); assert(require('mcp').native)" % module
assert lua.luaL_loadstring(L, load.encode()) == 0
assert lua.lua_pcallk(L, 0, 0, 0, None, None) == 0
lua.lua_close(L)
mapped = any(module in line for line in open('/proc/self/maps'))
print('mapped after the state closed: %s' % mapped)

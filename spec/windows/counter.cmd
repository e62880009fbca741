@echo off
rem A command as npm installs them on Windows (npx.cmd, for one): a batch
rem file that runs the real program, found by the module through PATHEXT.
"%MCP_LUA_EXE%" "%~dp0..\..\lua\servers\counter.lua" %*

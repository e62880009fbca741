"""echo_server.py - the Python SDK's (2.3) smallest stdio server: one
tool, `echo`, for bench/server.lua."""
from mcp.server.mcpserver import MCPServer

server = MCPServer("py-echo", log_level="WARNING")


@server.tool(structured_output=False)
def echo(message: str = "") -> str:
    return f"Echo: {message}"


server.run()

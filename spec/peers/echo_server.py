"""echo_server.py [http PORT] - the Python SDK's (2.3) smallest server:
one tool, `echo`, for bench/server.lua. Over stdio, or over Streamable HTTP
at /mcp (`listening PORT` on stdout)."""
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-echo", log_level="WARNING")


@server.tool(structured_output=False)
def echo(message: str = "") -> str:
    return f"Echo: {message}"


if sys.argv[1:2] == ["http"]:
    from serve_http import main

    main(server, lambda: server.streamable_http_app(host="127.0.0.1"), "echo_server.py")
else:
    server.run()

# crash_at_start.py - a Python MCP server that dies while it starts, as
# mcp-server-sqlite 2025.4.25 does on the Python SDK 2.x: a traceback on
# stderr, longer than the start of it that says anything, whose last line
# is the exception.
import sys


class Server:
    pass


def register(server, depth):
    if depth:
        return register(server, depth - 1)
    return server.list_resources()


print("starting the sqlite server with " + "a long configuration line " * 10, file=sys.stderr)
register(Server(), 12)

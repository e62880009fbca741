"""A 2025-era MCP server built on the Python SDK's last 1.x release (mcp 1.30.0).

The server most Python users still run: FastMCP of the 1.x API, which knows
only the initialize handshake (its newest revision is 2025-11-25), so the
specs can check that the client's era probe leaves it working as before.

    spec/peers/python-v1/bin/python legacy_server.py stdio
    spec/peers/python-v1/bin/python legacy_server.py http PORT   (Streamable HTTP at /mcp)
    spec/peers/python-v1/bin/python legacy_server.py sse PORT    (HTTP+SSE of 2024-11-05 at /sse)

Over HTTP the one line on stdout is `listening PORT` (PORT 0 picks a free
one and prints it); over stdio stdout is the protocol alone.
"""


from serve_http import main

from mcp.server.fastmcp import FastMCP

# log_level: at INFO the SDK logs every request to stderr, noise in what the
# specs capture. host: 127.0.0.1 turns on the SDK's DNS-rebinding check for
# loopback, as a user's default server has it.
mcp = FastMCP("legacy-py", instructions="Test peer for lua-mcp: add and echo tools.", log_level="WARNING", host="127.0.0.1")


def number(x: float) -> float | int:
    # 5 rather than 5.0, as the modern twins answer.
    return int(x) if x.is_integer() else x


# structured_output=False: otherwise a `-> str` tool also answers
# {"result": ...} with an outputSchema, which the modern twins do not.
@mcp.tool(description="Adds two numbers", structured_output=False)
def add(a: float, b: float) -> str:
    return str(number(a + b))


@mcp.tool(description="Returns its text", structured_output=False)
def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["sse"]:
        # The 2024-11-05 transport: a GET stream at /sse names /messages/.
        sys.argv[1] = "http"
        main(mcp, lambda: mcp.sse_app(), "legacy_server.py")
    else:
        main(mcp, lambda: mcp.streamable_http_app(), "legacy_server.py")

"""A 2025-era MCP server built on the Python SDK's last 1.x release (mcp 1.30.0).

The server most Python users still run: FastMCP of the 1.x API, which knows
only the initialize handshake (its newest revision is 2025-11-25), so the
specs can check that the client's era probe leaves it working as before.

    spec/peers/python-v1/bin/python legacy_server.py stdio
    spec/peers/python-v1/bin/python legacy_server.py http PORT   (Streamable HTTP at /mcp)

Over HTTP the one line on stdout is `listening PORT` (PORT 0 picks a free
one and prints it); over stdio stdout is the protocol alone.
"""

import signal
import socket
import sys

import anyio

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


async def serve_http(port: int) -> None:
    import uvicorn

    # Bound here rather than by uvicorn so that port 0 works and the line on
    # stdout names the real port, printed only once requests are served.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # access_log off: uvicorn writes it to stdout.
    config = uvicorn.Config(mcp.streamable_http_app(), log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.01)
        # uvicorn's SIGTERM waits for every open stream (a session's GET) to
        # end, which never comes when a spec tears the server down; the
        # default action ends it at once.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        print(f"listening {sock.getsockname()[1]}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["stdio"]:
        mcp.run("stdio")
    elif len(args) == 2 and args[0] == "http" and args[1].isdigit():
        anyio.run(serve_http, int(args[1]))
    else:
        sys.exit("usage: legacy_server.py stdio | http PORT")

"""Serving a peer's Starlette app over HTTP for the specs, on 127.0.0.1.

The socket is bound here rather than by uvicorn so that port 0 works and
the line on stdout names the real port, printed only once requests are
served. uvicorn's SIGTERM waits for every open stream (a listen, a 2025
GET) to end, which never comes when a spec tears the server down; the
default action ends it at once, as it does the node peers.
"""
import signal
import socket
import sys

import anyio


async def serve(app, port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # access_log off: uvicorn writes it to stdout.
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.01)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        print(f"listening {sock.getsockname()[1]}", flush=True)


def main(server, http_app, name: str) -> None:
    """`NAME stdio` serves `server` on stdin and stdout; `NAME http PORT`
    serves what `http_app()` makes over HTTP."""
    args = sys.argv[1:]
    if args == ["stdio"]:
        server.run("stdio")
    elif len(args) == 2 and args[0] == "http" and args[1].isdigit():
        anyio.run(serve, http_app(), int(args[1]))
    else:
        sys.exit(f"usage: {name} stdio | http PORT")

"""stdio_client.py COMMAND ARGS... | URL - the Python SDK's client over
stdio, or Streamable HTTP for a URL, against a server we serve: lists the
tools, calls two, reads a resource, and prints what it got as one JSON
object."""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def connect():
    if sys.argv[1].startswith("http"):
        return streamable_http_client(sys.argv[1])
    return stdio_client(StdioServerParameters(command=sys.argv[1], args=sys.argv[2:]))


async def main() -> None:
    async with connect() as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out = {"server": init.server_info.name}
            out["tools"] = [t.name for t in (await session.list_tools()).tools]
            out["add"] = (await session.call_tool("add", {"a": 2, "b": 3})).content[0].text
            out["note"] = (await session.call_tool("note", {"day": "tuesday"})).structured_content
            out["today"] = (await session.read_resource("notes://today")).contents[0].text
            print(json.dumps(out))


asyncio.run(main())

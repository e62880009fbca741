"""stdio_client.py COMMAND ARGS... - the Python SDK's client over stdio
against a server we serve: lists the tools, calls two, reads a resource,
and prints what it got as one JSON object."""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out = {"server": init.server_info.name}
            out["tools"] = [t.name for t in (await session.list_tools()).tools]
            out["add"] = (await session.call_tool("add", {"a": 2, "b": 3})).content[0].text
            out["note"] = (await session.call_tool("note", {"day": "tuesday"})).structured_content
            out["today"] = (await session.read_resource("notes://today")).contents[0].text
            print(json.dumps(out))


asyncio.run(main())

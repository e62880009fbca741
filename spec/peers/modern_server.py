"""A 2026-07-28 MCP server built on the official Python SDK v2 (mcp 2.3.0).

The twin of modern_server.mjs: the same tools, prompt and resource, so the
specs can hold both SDKs to one expectation. MCPServer answers both eras on
each transport by itself: server/discover and per-request _meta for
2026-07-28, the initialize handshake for 2025 clients.

    spec/peers/python/bin/python modern_server.py stdio
    spec/peers/python/bin/python modern_server.py http PORT   (Streamable HTTP at /mcp)

Over HTTP the one line on stdout is `listening PORT` (PORT 0 picks a free
one and prints it); over stdio stdout is the protocol alone.
"""

from typing import Annotated

from serve_http import main
from pydantic import BaseModel, Field

from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.types import CallToolResult, EmptyResult, SubscribeRequestParams, TextContent, UnsubscribeRequestParams

# log_level: at INFO the SDK logs every request to stderr, noise in what the
# specs capture.
mcp = MCPServer(
    "modern-py",
    version="1.0.0",
    instructions="Test peer for lua-mcp: add, echo, route, confirm, grow and steps tools, a greet prompt, a memo://note resource.",
    log_level="WARNING",
)


class Sum(BaseModel):
    sum: float


def number(x: float) -> float | int:
    # JSON has one number type; 5 rather than 5.0 keeps the answer byte-equal
    # to the TypeScript twin's.
    return int(x) if x.is_integer() else x


@mcp.tool(description="Adds two numbers")
def add(a: float, b: float) -> Annotated[CallToolResult, Sum]:
    # The CallToolResult is built by hand so the text is the bare sum; the
    # Annotated model still publishes the {sum} outputSchema.
    total = number(a + b)
    return CallToolResult(content=[TextContent(type="text", text=str(total))], structured_content={"sum": total})


# structured_output=False on the text tools: otherwise a `-> str` tool also
# answers {"result": ...} with an outputSchema, which the twin does not.
@mcp.tool(description="Returns its text", structured_output=False)
def echo(text: str) -> str:
    return text


@mcp.tool(
    description="Echoes region and query, and the Mcp-Param-Region header when there is one",
    structured_output=False,
)
def route(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], query: str, ctx: Context
) -> list[TextContent]:
    content = [TextContent(type="text", text=f"{region}:{query}")]
    header = (ctx.headers or {}).get("mcp-param-region")
    if header is not None:
        content.append(TextContent(type="text", text=f"header={header}"))
    return content


class Ok(BaseModel):
    ok: bool


async def ask(action: str) -> Elicit[Ok]:
    return Elicit(f"Confirm {action}?", Ok)


# Resolve picks the channel from the negotiated version: an input_required
# result (with the SDK's sealed requestState) on 2026-07-28, a real
# elicitation/create on a 2025 session.
@mcp.tool(description="Asks the user to confirm an action", structured_output=False)
async def confirm(action: str, answer: Annotated[ElicitationResult[Ok], Resolve(ask)]) -> str:
    ok = isinstance(answer, AcceptedElicitation) and answer.data.ok
    return f"{'confirmed' if ok else 'declined'} {action}"


def extra() -> str:
    """Exists once grow has run"""
    return "extra"


# Every call announces a change, not just the first, so a spec sees the
# notification whatever ran before it on a shared server.
@mcp.tool(description="Adds the tool extra", structured_output=False)
async def grow(ctx: Context) -> str:
    if mcp._tool_manager.get_tool("extra") is None:  # pyright: ignore[reportPrivateUsage]
        mcp.add_tool(extra, structured_output=False)
    # The eras listen on different pipes: the bus feeds 2026-07-28
    # subscriptions/listen streams, the session a 2025 client's own
    # connection (and drops it on a modern one).
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "grown"


# A tool that logs as it works, the way a new user's first tool does: a
# 2026-07-28 request gets these only when its envelope asks (logLevel).
@mcp.tool(description="Logs three steps", structured_output=False)
async def steps(ctx: Context) -> str:
    for step in (1, 2, 3):
        await ctx.info(f"step {step}", logger_name="steps")
    return "done"


@mcp.prompt(description="Greets someone")
def greet(name: str) -> str:
    return f"Hello, {name}"


@mcp.resource("memo://note", name="note", description="A note", mime_type="text/plain")
def note() -> str:
    return "a note"


# MCPServer has no public hook for the 2025 resources/subscribe yet; the
# migration guide registers it on the low-level server like this. The note
# never changes, so accepting the subscription is all there is to do.
async def subscribe(ctx, params: SubscribeRequestParams | UnsubscribeRequestParams) -> EmptyResult:
    return EmptyResult()


mcp._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)  # pyright: ignore[reportPrivateUsage]
mcp._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, subscribe)  # pyright: ignore[reportPrivateUsage]


if __name__ == "__main__":
    main(mcp, lambda: mcp.streamable_http_app(host="127.0.0.1"), "modern_server.py")

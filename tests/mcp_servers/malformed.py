"""A stdio MCP server (official SDK, low-level Server) that misbehaves on purpose:
``broken_schema`` is listed with an input schema that is not valid JSON Schema, and
``bad_result`` declares an output schema and returns structured content that violates it
(a malformed result). ``fine`` works, so the server as a whole is usable."""

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(name="fine", description="Works.", input_schema={"type": "object",
                                                                "properties": {}}),
    types.Tool(name="broken_schema", description="Its schema is invalid.",
               input_schema={"type": "object", "properties": {"x": {"type": "banana"}}}),
    types.Tool(name="bad_result", description="Returns a result that breaks its schema.",
               input_schema={"type": "object", "properties": {}},
               output_schema={"type": "object", "properties": {"n": {"type": "integer"}},
                              "required": ["n"]}),
]


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params) -> types.CallToolResult:
    if params.name == "bad_result":
        return types.CallToolResult(content=[types.TextContent(type="text", text="oops")],
                                    structured_content={"n": "not a number"})
    return types.CallToolResult(content=[types.TextContent(type="text", text="fine")])


server = Server("malformed", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

"""A streamable-HTTP MCP server for the tests (official SDK, uvicorn): ``lookup`` and
``shout``. Run as ``python http_tools.py PORT``; serves http://127.0.0.1:PORT/mcp."""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("http-tools")


@server.tool()
def lookup(key: str) -> str:
    """Look a key up in a fixed table."""
    return {"colour": "blue", "animal": "heron"}.get(key, "unknown")


@server.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))

"""A stdio MCP server for the tests (official SDK): echo, add, a large output, a crash.

Run as ``python stdio_tools.py [--slow SECONDS]``: with --slow it sleeps before serving
(a server that starts slowly). ``crash`` exits the process in the middle of the call (a
server that dies mid-call). ``big`` returns N characters (the spill). ``sleepy`` takes
its time (Stop and call timeouts). With --extra it also offers ``extra``.
"""

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("test-tools")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back, prefixed with 'echo:'."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def big(chars: int) -> str:
    """Return a text of the given number of characters (lines of 'x')."""
    line = "x" * 99 + "\n"
    return (line * (chars // 100 + 1))[:chars]


@server.tool()
async def sleepy(seconds: float) -> str:
    """Sleep for the given seconds, then answer."""
    import anyio

    await anyio.sleep(seconds)
    return "slept"


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of this call."""
    os._exit(3)


def extra() -> str:
    """Only offered when started with --extra (a server whose tools changed)."""
    return "extra"


if __name__ == "__main__":
    if "--extra" in sys.argv:
        server.tool()(extra)
    if "--slow" in sys.argv:
        time.sleep(float(sys.argv[sys.argv.index("--slow") + 1]))
    server.run()

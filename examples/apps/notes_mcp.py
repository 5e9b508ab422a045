"""A minimal MCP server behind dial-host (the official `mcp` package), Streamable HTTP at `/mcp`.

    python examples/apps/notes_mcp.py --port 8102 --host-url http://127.0.0.1:8080

Tools: `remember(name, text)` keeps a note (a skill in `skills/{current-user}/notes/`) and
answers the host's status; `notes()` lists them. Each tool call arrives with the per-request key
the host minted for that request, as `Api-Key`.
"""

from __future__ import annotations

import argparse

import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from notes import Notes

HOST_URL = "http://127.0.0.1:8080"
server = MCPServer("notes")


def notes_for(ctx: Context) -> Notes:
    headers = ctx.headers or {}
    return Notes(HOST_URL, headers.get("api-key", ""))


@server.tool()
async def remember(name: str, text: str, ctx: Context) -> int:
    """Keeps a note for the calling user; the status the host answered (200: kept)."""
    return await notes_for(ctx).save(name, text)


@server.tool()
async def notes(ctx: Context) -> list[str]:
    """The calling user's notes."""
    return await notes_for(ctx).names()


def main() -> None:
    global HOST_URL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8102)
    parser.add_argument("--host-url", default=HOST_URL, help="the dial-host the tools call back")
    args = parser.parse_args()
    HOST_URL = args.host_url
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

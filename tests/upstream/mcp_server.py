"""A real MCP server (the official SDK's MCPServer, formerly FastMCP) for dial-host's MCP tests.

    python tests/upstream/mcp_server.py --port P [--elsewhere-url URL]

Prints `ready` on stdout once it accepts connections. Streamable HTTP at `/mcp`, with tools

    whoami()          the Api-Key header of the HTTP request that carried this call (null if none)
    add(a, b) -> int
    write(host_url, url) -> int   PUT a small file at {host_url}/v1/{url} with that Api-Key: the status

and redirects for the host's redirect rules:

    /old-mcp, /old-mcp/...   307 to /mcp on this origin (the host follows it, with the same key)
    /elsewhere-mcp           307 to --elsewhere-url, another origin (the host must not follow);
                             by default a loopback port on which nothing listens
"""

from __future__ import annotations

import argparse
import socket

import httpx2
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from serving import run

server = MCPServer("dial-host-test-mcp")


@server.tool()
def whoami(ctx: Context) -> str | None:
    """The Api-Key header this request arrived with."""
    # Per message: with Streamable HTTP each call is its own POST, so these are its headers.
    headers = ctx.headers
    return headers.get("api-key") if headers is not None else None


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@server.tool()
async def write(host_url: str, url: str, ctx: Context) -> int:
    """PUTs a small file at `{host_url}/v1/{url}` with this request's Api-Key; the status."""
    headers = ctx.headers
    key = headers.get("api-key") if headers is not None else None
    name = url.rsplit("/", 1)[-1] or "file.txt"
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.put(
            f"{host_url}/v1/{url}",
            headers={"Api-Key": key} if key else {},
            files={"file": (name, b"written by an MCP tool", "text/plain")},
        )
    return response.status_code


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def redirects(elsewhere_url: str) -> None:
    # 307 keeps the method and body, which an MCP POST needs; every method, because the
    # transport also sends GET (the event stream) and DELETE (session end).
    methods = ["GET", "POST", "DELETE"]

    @server.custom_route("/old-mcp", methods=methods)
    @server.custom_route("/old-mcp/{rest:path}", methods=methods)
    async def old_mcp(_: Request) -> Response:
        return RedirectResponse("/mcp", status_code=307)

    @server.custom_route("/elsewhere-mcp", methods=methods)
    async def elsewhere_mcp(_: Request) -> Response:
        return RedirectResponse(elsewhere_url, status_code=307)

    @server.custom_route("/health", methods=["GET"])
    async def health(_: Request) -> Response:
        return PlainTextResponse("ok")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--elsewhere-url", help="where /elsewhere-mcp redirects (default: a dead loopback port)")
    args = parser.parse_args()
    redirects(args.elsewhere_url or f"http://127.0.0.1:{unused_port()}/mcp")
    # host= turns on the SDK's DNS-rebinding check for loopback Host headers, which the host's
    # requests (Host: 127.0.0.1:P) pass.
    run(server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1"), args.port)


if __name__ == "__main__":
    main()

"""Talks to an MCP server with the official `mcp` SDK over Streamable HTTP; prints one JSON line.

    python tests/clients/mcp_client.py --url URL --api-key KEY [--header NAME=VALUE ...]
        [--mode legacy|auto] [--timeout SECONDS] [--write HOST_URL URL ...]

Connects (initialize), lists the tools, calls `add(2, 3)` and `whoami()`, and `write(HOST_URL, URL)`
per `--write`. Success (exit 0): {"tools": [<names, sorted>], "add": 5, "whoami": <the Api-Key the
server saw, or null>, "writes": {URL: <the status the server's PUT got>},
"protocol_version": <negotiated>, "http": ["<METHOD> <path> <status>", ...]}. Failure (exit 1):
{"error", "status": <the last HTTP status >= 300 seen, or null>, "body": {"code": <JSON-RPC error
code, for an MCP error>, "http": [...]}, "type"}. The SDK reports HTTP failures as JSON-RPC errors
without their status, hence the `http` log of every exchange.

Every request carries `Api-Key: KEY` (none with `--api-key ""`). `--mode legacy` (the default) is
the initialize handshake with a session: POSTs, the GET event stream and the closing DELETE, all
three of the host's MCP methods. `--mode auto` lets the SDK probe for the stateless 2026 protocol first. The SDK follows
a 307/308 redirect only within the URL's origin.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

import common


def value_of(result: CallToolResult) -> Any:
    """A tool's return value: the structured `result`, else the text content."""
    if result.is_error:
        raise RuntimeError(f"tool error: {' '.join(getattr(c, 'text', '') for c in result.content)}")
    if isinstance(result.structured_content, dict) and "result" in result.structured_content:
        return result.structured_content["result"]
    return " ".join(getattr(c, "text", "") for c in result.content)


async def session(args: argparse.Namespace, exchanges: list[tuple[str, str, int]]) -> dict[str, Any]:
    # An empty key sends no Api-Key at all, for the host's 401.
    headers = ({"Api-Key": args.api_key} if args.api_key else {}) | common.headers(args.header)

    async def record(response: httpx2.Response) -> None:
        # The SDK turns HTTP failures into JSON-RPC errors without the status; keep it here.
        exchanges.append((response.request.method, response.request.url.path, response.status_code))

    hooks = {"response": [record]}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(args.timeout), event_hooks=hooks) as http:
        async with Client(streamable_http_client(args.url, http_client=http), mode=args.mode) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            return {
                "tools": sorted(tools),
                "add": value_of(await client.call_tool("add", {"a": 2, "b": 3})),
                "whoami": value_of(await client.call_tool("whoami", {})),
                "writes": {
                    url: value_of(await client.call_tool("write", {"host_url": host, "url": url}))
                    for host, url in args.write
                },
                "protocol_version": client.protocol_version,
            }


def leaf(error: BaseException) -> BaseException:
    """The first real error inside the SDK's task-group exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--header", action="append", default=[], help="an extra request header, NAME=VALUE")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--write", nargs=2, action="append", default=[], metavar=("HOST_URL", "URL"))
    args = parser.parse_args()
    exchanges: list[tuple[str, str, int]] = []
    try:
        result = asyncio.run(session(args, exchanges))
    except Exception as failure:  # noqa: BLE001 - the contract is one JSON line whatever happened
        error = leaf(failure)
        log = [" ".join(map(str, exchange)) for exchange in exchanges]
        # The status that made the call fail: the last redirect or error the transport saw.
        statuses = [status for _, _, status in exchanges if status >= 300]
        body = {"code": error.code, "http": log} if isinstance(error, MCPError) else {"http": log}
        common.fail(str(error) or repr(error), statuses[-1] if statuses else None, body, type(error).__name__)
    return result | {"http": [" ".join(map(str, exchange)) for exchange in exchanges]}


if __name__ == "__main__":
    common.run(main)

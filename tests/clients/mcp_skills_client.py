"""Reads every skill file an MCP server offers with the official `mcp` SDK; prints one JSON line.

    python tests/clients/mcp_skills_client.py --url URL [--api-key KEY] [--header NAME=VALUE ...]
        [--mode legacy|auto]

Connects (`--mode legacy`: the initialize handshake; `auto`: the SDK probes `server/discover` and
speaks the stateless 2026-07-28 protocol when the server does), pages through `resources/list`
and reads each resource with `resources/read`. Success (exit 0): {"protocol_version",
"extensions": <the server's capabilities.extensions>, "resources": {URI: {"name", "mimeType",
"size", "content": <base64 of the bytes read, text or blob alike>, "as": "text"|"blob"}},
"pages": <resources/list pages>}. Failure (exit 1): {"error", "type"}.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import common


async def session(args: argparse.Namespace) -> dict[str, Any]:
    headers = ({"Api-Key": args.api_key} if args.api_key else {}) | common.headers(args.header)
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(args.timeout)) as http:
        async with Client(streamable_http_client(args.url, http_client=http), mode=args.mode) as client:
            listed: list[Any] = []
            cursor, pages = None, 0
            while True:
                page = await client.list_resources(cursor=cursor)
                pages += 1
                listed.extend(page.resources)
                cursor = page.next_cursor
                if not cursor:
                    break
            resources: dict[str, Any] = {}
            for resource in listed:
                uri = str(resource.uri)
                read = await client.read_resource(uri)
                (content,) = read.contents
                if hasattr(content, "text"):
                    data, kind = content.text.encode("utf-8"), "text"
                else:
                    data, kind = base64.b64decode(content.blob), "blob"
                resources[uri] = {
                    "name": resource.name,
                    "mimeType": content.mime_type,
                    "size": resource.size,
                    "content": base64.b64encode(data).decode(),
                    "as": kind,
                }
            capabilities = client.server_capabilities
            return {
                "protocol_version": client.protocol_version,
                "extensions": capabilities.extensions if capabilities else None,
                "resources": resources,
                "pages": pages,
            }


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--header", action="append", default=[], help="an extra request header, NAME=VALUE")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    try:
        return asyncio.run(session(args))
    except BaseException as error:  # noqa: BLE001 - every failure is reported as one JSON line
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        common.fail(str(error), kind=type(error).__name__)


if __name__ == "__main__":
    common.succeed(main())

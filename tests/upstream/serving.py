"""Runs an ASGI app on a loopback port and prints `ready` once it accepts connections.

Shared by the mock upstream servers. The Rust harness waits for that line instead of polling
the port, and retries on another port when the process exits early (the port was taken).
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from starlette.types import ASGIApp


async def serve(app: ASGIApp, port: int, host: str = "127.0.0.1") -> None:
    # Warnings only: stderr is relayed into the test output, access logs would drown it.
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    # `started` flips after the lifespan startup and the bind; a failed bind ends the task instead.
    while not server.started:
        if task.done():
            task.result()  # re-raises uvicorn's SystemExit on a taken port
            sys.exit(1)
        await asyncio.sleep(0.02)
    print("ready", flush=True)
    await task


def run(app: ASGIApp, port: int) -> None:
    try:
        asyncio.run(serve(app, port))
    except KeyboardInterrupt:
        pass

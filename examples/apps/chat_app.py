"""A minimal chat application behind dial-host: OpenAI chat completions and Anthropic messages.

    python examples/apps/chat_app.py --port 8101 --host-url http://127.0.0.1:8080

A user message `remember <name>: <text>` keeps a note (a skill in `skills/{current-user}/notes/`);
every answer lists the notes kept so far. It calls back into the host with the `Api-Key` the host
sent with the request: the per-request key, valid for this call only.
"""

from __future__ import annotations

import argparse
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from notes import Notes

HOST_URL = "http://127.0.0.1:8080"


def user_text(messages: list[dict]) -> str:
    """The last user message's text (a string, or the text parts of a content list)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return content or ""
    return ""


async def reply_to(request: Request, messages: list[dict]) -> str:
    notes = Notes(HOST_URL, request.headers.get("api-key", ""))
    text = user_text(messages).strip()
    said = ""
    if text.startswith("remember ") and ":" in text:
        name, note = text[len("remember ") :].split(":", 1)
        status = await notes.save(name.strip(), note.strip())
        said = "Noted. " if status == 200 else f"I could not keep that ({status}). "
    return f"{said}Your notes: {', '.join(await notes.names()) or 'none yet'}."


async def chat_completions(request: Request) -> JSONResponse:
    body = await request.json()
    text = await reply_to(request, body.get("messages", []))
    return JSONResponse({
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
        "model": body.get("model", "notes"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })


async def messages(request: Request) -> JSONResponse:
    body = await request.json()
    text = await reply_to(request, body.get("messages", []))
    return JSONResponse({
        "id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant", "model": body.get("model", "notes"),
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    })


app = Starlette(routes=[
    Route("/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/messages", messages, methods=["POST"]),
])


def main() -> None:
    global HOST_URL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8101)
    parser.add_argument("--host-url", default=HOST_URL, help="the dial-host the app calls back")
    args = parser.parse_args()
    HOST_URL = args.host_url
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

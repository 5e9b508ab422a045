"""A mock upstream LLM application for dial-host's deployment tests.

    python tests/upstream/mock_app.py --port P [--host-url http://127.0.0.1:H]

Prints `ready` on stdout once it accepts connections. It speaks three wire formats, each
non-streaming and streaming (`"stream": true`), close enough that the official SDKs parse them:

    POST /chat/completions   OpenAI Chat Completions
    POST /responses          OpenAI Responses
    POST /v1/messages        Anthropic Messages

The assistant's text is always a compact JSON *report* of what the app saw: the credential
headers, the path and query, every `url` in the request body, and the outcome of the callbacks
it made into the host. The last user message is read as space-separated commands (unknown words
are ignored), run in order while the client's request is still open:

    appdata            GET /v1/bucket with the received Api-Key, PUT a note into the appdata
                       folder (multipart), GET it back
    user-bucket        try to PUT /v1/files/<user bucket>/stolen.txt (the host must refuse: 403)
    read:<url>         GET /v1/<url>
    chain:<id>         POST /openai/deployments/<id>/chat/completions with the received key and
                       the message `appdata` (`chain:<id>|<command>|…`: those commands instead);
                       records the callee's report
    write:<url>        PUT a small file at /v1/<url> (multipart)
    skill:<url>        PUT a whole skill at /v2/<url>: a SKILL.md named after the last segment
    status:<code>      answer with that status and {"error": {"message": "mock error <code>"}}
    hold               streaming only: send the first text delta, then wait for POST /release
    set-headers        answer with headers an application must not set on the host's origin
                       (Set-Cookie, Strict-Transport-Security, Access-Control-*, Alt-Svc) and
                       X-Mock-Kept, which the host relays
    slow:<ms>          sleep, e.g. to make the host's upstream timeout fire

Control routes for the tests: `GET /health`, `POST /release`, `GET /last` (the last report per
API), `POST /host-url` (plain-text body; for when the host starts after the app).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from serving import run

MODEL = "mock-model"
# A held stream goes on by itself after this long, so a test that never releases fails on its
# assertions instead of hanging until the harness kills it.
HOLD_LIMIT_SECONDS = 60.0
NOTE = b"written by the app with its per-request key"
APIS = ("chat_completions", "responses", "messages")


class State:
    def __init__(self, host_url: str | None) -> None:
        self.host_url = host_url.rstrip("/") if host_url else None
        self.release = asyncio.Event()
        self.waiting = 0
        self.last: dict[str, Any] = {api: None for api in APIS}

    async def hold(self) -> None:
        self.waiting += 1
        try:
            await asyncio.wait_for(self.release.wait(), HOLD_LIMIT_SECONDS)
        except TimeoutError:
            print(f"mock_app: hold not released within {HOLD_LIMIT_SECONDS}s, going on", file=sys.stderr)
        finally:
            self.waiting -= 1
        # Ready for the next held stream; streams held at the same time were all woken by set().
        self.release.clear()


state: State  # set in main()


# ---------------------------------------------------------------------------------------------
# Callbacks into the host, made with the Api-Key this request carried.


class Host:
    def __init__(self, http: httpx2.AsyncClient, url: str, key: str | None) -> None:
        self.http, self.url = http, url
        self.headers = {"Api-Key": key} if key else {}

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx2.Response:
        return await self.http.request(method, self.url + path, headers=self.headers, **kwargs)


def outcome(response: httpx2.Response) -> dict[str, Any]:
    return {"status": response.status_code, "body": response.text}


def json_or_none(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


async def appdata(host: Host, _: str) -> dict[str, Any]:
    got = await host.request("GET", "/v1/bucket")
    info = json_or_none(got) if got.status_code == 200 else None
    result: dict[str, Any] = {"status": got.status_code, "bucket": None, "appdata": None}
    if not isinstance(info, dict):
        return result | {"body": got.text}
    result |= {"bucket": info.get("bucket"), "appdata": info.get("appdata")}
    if not result["appdata"]:
        return result
    url = f"/v1/files/{result['appdata']}/note.txt"
    put = await host.request("PUT", url, files={"file": ("note.txt", NOTE, "text/plain")})
    back = await host.request("GET", url)
    return result | {"put_status": put.status_code, "get_status": back.status_code, "get_body": back.text}


async def user_bucket(host: Host, _: str) -> dict[str, Any]:
    # A key's appdata is `<user bucket>/appdata/<app>`: the user's own bucket is the part before.
    got = await host.request("GET", "/v1/bucket")
    info = json_or_none(got)
    appdata_url = info.get("appdata") if isinstance(info, dict) else None
    if not appdata_url or "/appdata/" not in appdata_url:
        return {"error": "no appdata in /v1/bucket", "status": got.status_code, "body": got.text}
    bucket = appdata_url.split("/appdata/", 1)[0]
    put = await host.request(
        "PUT", f"/v1/files/{bucket}/stolen.txt", files={"file": ("stolen.txt", b"stolen", "text/plain")}
    )
    return {"user_bucket": bucket, "put_status": put.status_code, "body": put.text}


async def read(host: Host, url: str) -> dict[str, Any]:
    return outcome(await host.request("GET", f"/v1/{url}"))


async def read_skill_file(host: Host, url: str) -> dict[str, Any]:
    """GET one file of a skill at `/v2/<url>` (`skills/<bucket>/<path>/files/<file>`)."""
    return outcome(await host.request("GET", f"/v2/{url}"))


async def chain(host: Host, argument: str) -> dict[str, Any]:
    # `<id>` asks the callee for `appdata`; `<id>|<command>|<command>…` for those commands instead.
    deployment, *commands = argument.split("|")
    body = {"model": deployment, "messages": [{"role": "user", "content": " ".join(commands) or "appdata"}]}
    got = await host.request("POST", f"/openai/deployments/{deployment}/chat/completions", json=body)
    completion = json_or_none(got)
    try:
        report = json.loads(completion["choices"][0]["message"]["content"])
    except (TypeError, KeyError, IndexError, ValueError):
        return outcome(got)
    return {"status": got.status_code, "report": report}


async def write(host: Host, url: str) -> dict[str, Any]:
    """PUT a small file at `/v1/<url>` (a v1 file URL)."""
    name = url.rsplit("/", 1)[-1] or "file.txt"
    return outcome(await host.request("PUT", f"/v1/{url}", files={"file": (name, NOTE, "text/plain")}))


async def skill(host: Host, url: str) -> dict[str, Any]:
    """PUT a whole skill at `/v2/<url>` (a v2 skills URL): a SKILL.md named after the last segment."""
    name = url.rstrip("/").rsplit("/", 1)[-1]
    skill_md = f"---\nname: {name}\ndescription: Written by an application with its key.\n---\n# {name}\n"
    files = [("file", ("SKILL.md", skill_md.encode(), "text/markdown"))]
    return outcome(await host.request("PUT", f"/v2/{url}", files=files))


CALLBACKS: dict[str, Callable[[Host, str], Awaitable[dict[str, Any]]]] = {
    "appdata": appdata,
    "user-bucket": user_bucket,
    "read": read,
    "read-skill-file": read_skill_file,
    "write": write,
    "skill": skill,
    "chain": chain,
}


# ---------------------------------------------------------------------------------------------
# What the app saw.


def text_of(content: Any) -> str:
    """A message's text: a plain string, or the text parts of a content list (any API's)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def last_user_text(api: str, body: dict[str, Any]) -> str:
    messages = body.get("input") if api == "responses" else body.get("messages")
    if isinstance(messages, str):  # Responses: `input` may be the user's text itself
        return messages
    users = [m for m in messages or [] if isinstance(m, dict) and m.get("role") == "user"]
    return text_of(users[-1].get("content")) if users else ""


def urls_in(value: Any) -> list[str]:
    """Every `url` string in the body, in order: attachment URLs, image_url parts, image sources."""
    if isinstance(value, dict):
        found = [value["url"]] if isinstance(value.get("url"), str) else []
        return found + [url for key, item in value.items() if key != "url" for url in urls_in(item)]
    if isinstance(value, list):
        return [url for item in value for url in urls_in(item)]
    return []


def new_report(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    headers = request.headers
    return {
        "api_key": headers.get("api-key"),
        "authorization": headers.get("authorization"),
        "cookie": headers.get("cookie"),
        "x_api_key": headers.get("x-api-key"),
        "x_test": headers.get("x-test"),
        "query": request.url.query,
        "path": request.url.path,
        "attachments": urls_in(body),
        "callbacks": {},
        # Beyond the fixed fields: every header as received (lower-case names), for forwarding tests.
        "headers": dict(headers.items()),
        "stream": body.get("stream") is True,
    }


# ---------------------------------------------------------------------------------------------
# Wire formats. Each stream calls `hold()` right after its first text delta.

Hold = Callable[[], Awaitable[None]]


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


def pieces(text: str, count: int = 3) -> list[str]:
    """The text in `count` deltas (fewer for a very short text), so streams carry several."""
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def chat_whole(text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": len(text), "total_tokens": 1 + len(text)},
    }


async def chat_stream(text: str, hold: Hold) -> AsyncIterator[bytes]:
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return sse(base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    for i, piece in enumerate(pieces(text)):
        yield chunk({"role": "assistant", "content": piece} if i == 0 else {"content": piece})
        if i == 0:
            await hold()
    yield chunk({}, "stop")
    yield sse("[DONE]")


def response_object(response_id: str, item: dict[str, Any] | None, text: str = "") -> dict[str, Any]:
    done = item is not None
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed" if done else "in_progress",
        "model": MODEL,
        "output": [item] if done else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "usage": {
            "input_tokens": 1,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": len(text),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 1 + len(text),
        }
        if done
        else None,
    }


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


def message_item(item_id: str, text: str | None) -> dict[str, Any]:
    """The assistant message output item; `text=None` for the empty, in-progress one."""
    content = [] if text is None else [output_text(text)]
    status = "in_progress" if text is None else "completed"
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def responses_whole(text: str) -> dict[str, Any]:
    return response_object(f"resp_{uuid.uuid4().hex}", message_item(f"msg_{uuid.uuid4().hex}", text), text)


async def responses_stream(text: str, hold: Hold) -> AsyncIterator[bytes]:
    # The full event sequence of a real one-message response, so the SDK's `responses.stream()`
    # accumulator works too, not only the three events the tests look at.
    response_id, item_id = f"resp_{uuid.uuid4().hex}", f"msg_{uuid.uuid4().hex}"
    sequence = iter(range(1_000_000))
    part = {"item_id": item_id, "output_index": 0, "content_index": 0}

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(sequence), **fields}, kind)

    yield event("response.created", response=response_object(response_id, None))
    yield event("response.in_progress", response=response_object(response_id, None))
    yield event("response.output_item.added", output_index=0, item=message_item(item_id, None))
    yield event("response.content_part.added", **part, part=output_text(""))
    for i, piece in enumerate(pieces(text)):
        yield event("response.output_text.delta", **part, delta=piece, logprobs=[])
        if i == 0:
            await hold()
    yield event("response.output_text.done", **part, text=text, logprobs=[])
    yield event("response.content_part.done", **part, part=output_text(text))
    yield event("response.output_item.done", output_index=0, item=message_item(item_id, text))
    yield event("response.completed", response=response_object(response_id, message_item(item_id, text), text))


def messages_whole(text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": len(text)},
    }


async def messages_stream(text: str, hold: Hold) -> AsyncIterator[bytes]:
    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, **fields}, kind)

    message = messages_whole(text) | {"content": [], "stop_reason": None}
    message["usage"] = {"input_tokens": 1, "output_tokens": 1}
    yield event("message_start", message=message)
    yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
    for i, piece in enumerate(pieces(text)):
        yield event("content_block_delta", index=0, delta={"type": "text_delta", "text": piece})
        if i == 0:
            await hold()
    yield event("content_block_stop", index=0)
    delta = {"stop_reason": "end_turn", "stop_sequence": None}
    yield event("message_delta", delta=delta, usage={"output_tokens": len(text)})
    yield event("message_stop")


# ---------------------------------------------------------------------------------------------
# Routes.


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message}}, status_code=status)


# What the `set-headers` command answers with.
ORIGIN_HEADERS = {
    "Set-Cookie": "session=app; Domain=example.com; Path=/",
    "Strict-Transport-Security": "max-age=0",
    "Access-Control-Allow-Origin": "https://evil.example",
    "Access-Control-Allow-Credentials": "true",
    "Alt-Svc": 'h3=":443"; ma=86400',
    "X-Mock-Kept": "yes",
}


async def no_hold() -> None:
    pass


def endpoint(
    api: str,
    whole: Callable[[str], dict[str, Any]],
    stream: Callable[[str, Hold], AsyncIterator[bytes]],
) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return error(400, "the body is not a JSON object")
        report = new_report(request, body)
        status, hold, headers = None, False, {}
        async with httpx2.AsyncClient(timeout=30) as http:
            host = Host(http, state.host_url, request.headers.get("api-key")) if state.host_url else None
            for command in last_user_text(api, body).split():
                name, _, argument = command.partition(":")
                if name == "status" and argument.isdigit():
                    status = int(argument)
                elif name == "hold":
                    hold = True
                elif name == "set-headers":
                    headers = ORIGIN_HEADERS
                elif name == "slow" and argument.isdigit():
                    await asyncio.sleep(int(argument) / 1000)
                elif name in CALLBACKS:
                    report["callbacks"][command] = await callback(host, name, argument)
        state.last[api] = report
        if status is not None:
            return error(status, f"mock error {status}")
        text = json.dumps(report, separators=(",", ":"))
        if report["stream"]:
            events = stream(text, state.hold if hold else no_hold)
            headers = {"Cache-Control": "no-cache"} | headers
            return StreamingResponse(events, media_type="text/event-stream", headers=headers)
        return JSONResponse(whole(text), headers=headers)

    return handle


async def callback(host: Host | None, name: str, argument: str) -> dict[str, Any]:
    """One command's outcome; a failure is recorded, not raised, so the report still arrives."""
    if host is None:
        return {"error": "no host URL: pass --host-url or POST /host-url"}
    try:
        return await CALLBACKS[name](host, argument)
    except httpx2.HTTPError as failure:
        return {"error": f"{type(failure).__name__}: {failure}"}


async def health(_: Request) -> Response:
    return PlainTextResponse("ok")


async def release(_: Request) -> Response:
    waiting = state.waiting
    state.release.set()
    return JSONResponse({"waiting": waiting})


async def last(_: Request) -> Response:
    return JSONResponse(state.last)


async def host_url(request: Request) -> Response:
    state.host_url = (await request.body()).decode().strip().rstrip("/") or None
    return Response(status_code=204)


def app() -> Starlette:
    return Starlette(
        routes=[
            Route("/chat/completions", endpoint("chat_completions", chat_whole, chat_stream), methods=["POST"]),
            Route("/responses", endpoint("responses", responses_whole, responses_stream), methods=["POST"]),
            Route("/v1/messages", endpoint("messages", messages_whole, messages_stream), methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/release", release, methods=["POST"]),
            Route("/last", last, methods=["GET"]),
            Route("/host-url", host_url, methods=["POST"]),
        ]
    )


def main() -> None:
    global state
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host-url", help="the dial-host under test, e.g. http://127.0.0.1:8080")
    args = parser.parse_args()
    state = State(args.host_url)
    run(app(), args.port)


if __name__ == "__main__":
    main()

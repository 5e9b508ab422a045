"""Calls a deployment with the official `openai` SDK; prints one JSON line.

    python tests/clients/openai_client.py --base-url URL --api-key KEY --message TEXT
        [--stream] [--responses] [--release-url URL] [--header NAME=VALUE ...]
        [--attachment URL ...] [--image-url URL ...] [--model NAME] [--timeout SECONDS] [--key-only] [--max-retries N]

Success (exit 0): {"text": <assistant text>, "events": <chunks/events received, 0 unless
--stream>, "report": <the text parsed as JSON, or null>, "first_before_release": <bool, only with
--release-url>}. Failure (exit 1): {"error", "status", "body", "type"}.

The SDK appends `/chat/completions` (or `/responses` with --responses) to the base URL and sends
the key as `Authorization: Bearer KEY`; the key also goes as `Api-Key`, DIAL's header.
"""

from __future__ import annotations

import argparse
from typing import Any

import openai

import common


def chat_messages(args: argparse.Namespace) -> list[dict[str, Any]]:
    message: dict[str, Any] = {"role": "user", "content": args.message}
    if args.image_url:
        parts = [{"type": "text", "text": args.message}]
        message["content"] = parts + [{"type": "image_url", "image_url": {"url": url}} for url in args.image_url]
    if args.attachment:
        # DIAL's attachment field; the SDK passes unknown message keys through unchanged.
        message["custom_content"] = {"attachments": [{"url": url} for url in args.attachment]}
    return [message]


def chat(client: openai.OpenAI, args: argparse.Namespace, release: common.Release) -> tuple[str, int]:
    request = {"model": args.model, "messages": chat_messages(args)}
    if not args.stream:
        completion = client.chat.completions.create(**request)
        return completion.choices[0].message.content or "", 0
    text, events = "", 0
    for chunk in client.chat.completions.create(**request, stream=True):
        events += 1
        delta = chunk.choices[0].delta.content if chunk.choices else None
        if delta:
            text += delta
            release.on_delta()
    return text, events


def responses(client: openai.OpenAI, args: argparse.Namespace, release: common.Release) -> tuple[str, int]:
    if args.attachment or args.image_url:
        common.fail("--attachment and --image-url are for chat completions only")
    if not args.stream:
        return client.responses.create(model=args.model, input=args.message).output_text, 0
    text, events = "", 0
    for event in client.responses.create(model=args.model, input=args.message, stream=True):
        events += 1
        if event.type == "response.output_text.delta":
            text += event.delta
            release.on_delta()
        elif event.type == "response.completed" and event.response.output_text != text:
            common.fail("response.completed disagrees with the deltas", body=event.response.output_text)
    return text, events


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--message", required=True)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--responses", action="store_true", help="the Responses API instead of chat completions")
    parser.add_argument("--release-url", help="POSTed after the first text delta (with --stream)")
    parser.add_argument("--header", action="append", default=[], help="an extra request header, NAME=VALUE")
    parser.add_argument("--attachment", action="append", default=[], help="a DIAL attachment URL (chat only)")
    parser.add_argument("--image-url", action="append", default=[], help="an image_url content part (chat only)")
    parser.add_argument("--model", default="mock-model")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--key-only", action="store_true", help="send the key only as the SDK does (no DIAL Api-Key header)"
    )
    parser.add_argument("--max-retries", type=int, default=0, help="the SDK's retries (0: one request)")
    args = parser.parse_args()

    client = openai.OpenAI(
        base_url=args.base_url,
        api_key=args.api_key,
        default_headers=({} if args.key_only else {"Api-Key": args.api_key}) | common.headers(args.header),
        timeout=args.timeout,
        # By default a test that asks for a 503 must see one request and the 503, not retries.
        max_retries=args.max_retries,
    )
    release = common.Release(args.release_url if args.stream else None)
    text, events = (responses if args.responses else chat)(client, args, release)
    return {"text": text, "events": events, "report": common.report_of(text), **release.fields()}


if __name__ == "__main__":
    common.run(main)

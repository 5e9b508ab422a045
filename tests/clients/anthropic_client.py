"""Calls a deployment with the official `anthropic` SDK; prints one JSON line.

    python tests/clients/anthropic_client.py --base-url URL --api-key KEY --message TEXT
        [--stream] [--release-url URL] [--header NAME=VALUE ...] [--model NAME]
        [--max-tokens N] [--timeout SECONDS] [--key-only] [--max-retries N]

Success (exit 0): {"text": <assistant text>, "events": <raw stream events received, 0 unless
--stream>, "report": <the text parsed as JSON, or null>, "first_before_release": <bool, only with
--release-url>}. Failure (exit 1): {"error", "status", "body", "type"}.

The SDK appends `/v1/messages` to the base URL and (in this version) sends the key as
`Authorization: Bearer KEY`, not `x-api-key`, plus `anthropic-version`; the key also goes as
`Api-Key`, DIAL's header. Streaming uses
`messages.stream`, whose accumulated final message must equal the deltas.
"""

from __future__ import annotations

import argparse
from typing import Any

import anthropic

import common

# The events on the wire; `messages.stream` also yields ones it derives (`text`, ...), not counted.
RAW_EVENTS = {
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--message", required=True)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--release-url", help="POSTed after the first text delta (with --stream)")
    parser.add_argument("--header", action="append", default=[], help="an extra request header, NAME=VALUE")
    parser.add_argument("--model", default="mock-model")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--key-only", action="store_true", help="send the key only as the SDK does (no DIAL Api-Key header)"
    )
    parser.add_argument("--max-retries", type=int, default=0, help="the SDK's retries (0: one request)")
    args = parser.parse_args()

    client = anthropic.Anthropic(
        base_url=args.base_url,
        api_key=args.api_key,
        default_headers=({} if args.key_only else {"Api-Key": args.api_key}) | common.headers(args.header),
        timeout=args.timeout,
        # By default a test that asks for a 503 must see one request and the 503, not retries.
        max_retries=args.max_retries,
    )
    request: dict[str, Any] = {
        "model": args.model,
        "max_tokens": args.max_tokens,
        "messages": [{"role": "user", "content": args.message}],
    }
    release = common.Release(args.release_url if args.stream else None)
    if not args.stream:
        message = client.messages.create(**request)
        text = "".join(block.text for block in message.content if block.type == "text")
        return {"text": text, "events": 0, "report": common.report_of(text)}

    text, events = "", 0
    with client.messages.stream(**request) as stream:
        for event in stream:
            if event.type not in RAW_EVENTS:
                continue
            events += 1
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text
                release.on_delta()
        final = "".join(block.text for block in stream.get_final_message().content if block.type == "text")
    if final != text:
        common.fail("the accumulated message disagrees with the deltas", body=final)
    return {"text": text, "events": events, "report": common.report_of(text), **release.fields()}


if __name__ == "__main__":
    common.run(main)

"""Calls dial-host with EPAM's aidial-client (the `Dial` client); prints one JSON line.

    python tests/clients/dial_client.py --base-url URL (--api-key KEY | --bearer-token JWT) SCENARIO ...

Scenarios:
    listings --deployment ID    deployments.list(), .get(ID), .list_names() and .list_names(["model"]),
                                application.list(), application.get(ID), user.info(): each parsed into
                                aidial-client's models, printed as their dumps
    chat --deployment ID --message TEXT [--stream] [--attachment URL ...] [--temperature T]
         [--configuration JSON] [--header NAME=VALUE ...]
                                chat.completions.create(...): the answer's text (parsed as JSON when it
                                is) and the URLs of its attachments
    configuration --deployment ID
                                deployments.get_configuration_schema(ID)
    call --method M --path PATH [--body JSON]
                                a DIAL route aidial-client has no method for (rate, tokenize,
                                truncate_prompt), through the client's own HTTP client and credentials

Success (exit 0): the scenario's result. Failure (exit 1): {"error", "status", "body", "type"}.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import httpx
from aidial_client import Dial

import common


def dump(model: Any) -> Any:
    if isinstance(model, list):
        return [dump(item) for item in model]
    return model.model_dump(mode="json", exclude_none=True) if hasattr(model, "model_dump") else model


def listings(client: Dial, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "deployments": dump(client.deployments.list()),
        "deployment": dump(client.deployments.get(args.deployment)),
        "names": dump(client.deployments.list_names()),
        "model_names": dump(client.deployments.list_names(["model"])),
        "applications": dump(client.application.list()),
        "application": dump(client.application.get(args.deployment)),
        "user": dump(client.user.info()),
    }


def chat(client: Dial, args: argparse.Namespace) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": args.message}
    custom_content: dict[str, Any] = {}
    if args.attachment:
        custom_content["attachments"] = [{"url": url} for url in args.attachment]
    if args.skill:
        # DIAL Chat's per-message skills (DIAL Core #1956): `{url}` entries.
        custom_content["skills"] = [{"url": url} for url in args.skill]
    if custom_content:
        message["custom_content"] = custom_content
    request: dict[str, Any] = {
        "deployment_name": args.deployment,
        "messages": [message],
        "stream": args.stream,
        "extra_headers": common.headers(args.header),
    }
    if args.temperature is not None:
        request["temperature"] = args.temperature
    if args.configuration:
        request["custom_fields"] = {"configuration": json.loads(args.configuration)}
    text, urls = "", []
    if args.stream:
        for chunk in client.chat.completions.create(**request):
            for choice in chunk.choices:
                delta = choice.delta
                text += (delta.content or "") if delta else ""
                custom = delta.custom_content if delta else None
                urls += [a.url for a in (custom.attachments or []) if a.url] if custom else []
    else:
        completion = client.chat.completions.create(**request)
        message_out = completion.choices[0].message
        text = message_out.content or ""
        custom = message_out.custom_content
        urls = [a.url for a in (custom.attachments or []) if a.url] if custom else []
    return {"text": text, "report": common.report_of(text), "attachments": urls}


def configuration(client: Dial, args: argparse.Namespace) -> dict[str, Any]:
    return {"schema": client.deployments.get_configuration_schema(args.deployment)}


def call(client: Dial, args: argparse.Namespace) -> dict[str, Any]:
    headers = client.auth_headers() | {"Content-Type": "application/json"}
    body = args.body.encode() if args.body is not None else None
    response = httpx.request(args.method, client.base_url.rstrip("/") + args.path, headers=headers, content=body)
    try:
        parsed: Any = response.json()
    except ValueError:
        parsed = response.text
    return {"status": response.status_code, "body": parsed}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key")
    parser.add_argument("--bearer-token")
    parser.add_argument("scenario", choices=["listings", "chat", "configuration", "call"])
    parser.add_argument("--deployment")
    parser.add_argument("--message", default="")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--attachment", action="append", default=[])
    parser.add_argument("--skill", action="append", default=[])
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--configuration")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--method", default="POST")
    parser.add_argument("--path")
    parser.add_argument("--body")
    args = parser.parse_args()
    client = Dial(base_url=args.base_url, api_key=args.api_key, bearer_token=args.bearer_token, max_retries=0)
    return {"listings": listings, "chat": chat, "configuration": configuration, "call": call}[args.scenario](
        client, args
    )


if __name__ == "__main__":
    common.run(main)

"""DIAL applications built with EPAM's aidial-sdk, for dial-host's deployment tests.

    python tests/upstream/dial_sdk_app.py --port P [--dial-url http://127.0.0.1:H]

Prints `ready` on stdout once it accepts connections. One `DIALApp` serves three deployments,
each at `/openai/deployments/<name>/…` as aidial-sdk lays them out (chat/completions, rate,
tokenize, truncate_prompt, configuration), and calls back into the host with EPAM's aidial-client
and the per-request key each request carried:

    echo-sdk   answers with a compact JSON report of what the SDK parsed from the host's request:
               the key, the user's token (`request.bearer_token`), the application id and properties
               (`request_dial_application_properties()`: the header, or the host's
               GET /openai/applications/{id}), the deployment features header, the fields the
               definition's defaults fill in; the last user message's `read:<url>` commands read a
               file with the key; `skills` reads each skill the message picked
               (`custom_content.skills`, DIAL Core #1956) with the key — its ZIP, its SKILL.md, its
               metadata — and `read-skill:<url>` tries the same on a skill it did not pick. The app is
               built with `allow_extra_request_fields=True`: aidial-sdk 0.46 refuses the request field
               otherwise. Its rate, tokenize, truncate_prompt and configuration endpoints
               answer as the SDK's contract says; rates are recorded (GET /rates).
    echo-big   echo-sdk again, for a definition whose properties are too large for a header.
    embed      embeddings (aidial-sdk's `Embeddings`): one vector per input, [token count, key length];
               a `custom_input` attachment is read with the key (its status is the vector's third value).
    maker      writes a file into its appdata folder with its key and answers with it attached.
    chainer    calls other deployments through the host with its key (aidial-client): the last
               user message's commands are
                 chain | chain-stream   call maker (streaming or not), read each attachment of its
                                        answer with chainer's own key, and attach them to its answer
                 grant                  grant each attachment of the user's message to echo-sdk
                                        (per-request-permissions), then ask echo-sdk to read it
                 pass                   ask echo-sdk to read them without granting anything
                 grant-foreign:<url>    try to grant <url>, which chainer does not hold
               and answers with a JSON report of what happened.

`/openai/deployments/echo-sdk/completions` answers a legacy (text) completion with the same kind of
report — aidial-sdk has no completions API, so it is a plain FastAPI route.

`--dial-url` may be set later with POST /dial-url (plain-text body), for a host started after the
app (the host's configuration names the app's port).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import uuid
from typing import Any

import httpx
from aidial_client import AsyncDial
from aidial_sdk import DIALApp
from aidial_sdk.chat_completion import ChatCompletion, Request, Response
from aidial_sdk.deployment.configuration import ConfigurationRequest
from aidial_sdk.deployment.rate import RateRequest
from aidial_sdk.deployment.tokenize import TokenizeRequest, TokenizeResponse, TokenizeSuccess
from aidial_sdk.embeddings import Embeddings
from aidial_sdk.embeddings import Request as EmbeddingsRequest
from aidial_sdk.embeddings import Response as EmbeddingsResponse
from aidial_sdk.deployment.truncate_prompt import (
    TruncatePromptRequest,
    TruncatePromptResponse,
    TruncatePromptSuccess,
)
from fastapi import Request as HttpRequest
from fastapi.responses import JSONResponse, PlainTextResponse

from serving import run

MADE = b"made by the maker application"


class State:
    def __init__(self) -> None:
        self.dial_url: str | None = None
        self.rates: list[dict[str, Any]] = []


state = State()


def dial(request: Any) -> AsyncDial:
    """aidial-client as an application uses it: the host's URL and the request's per-request key."""
    if not state.dial_url:
        raise RuntimeError("no DIAL URL: pass --dial-url or POST /dial-url")
    return AsyncDial(base_url=state.dial_url, api_key=request.api_key, max_retries=0)


def last_user_text(request: Request) -> str:
    users = [m for m in request.messages if m.role == "user"]
    content = users[-1].content if users else ""
    return content if isinstance(content, str) else ""


def user_attachments(request: Request) -> list[str]:
    users = [m for m in request.messages if m.role == "user"]
    return attachment_urls(users[-1].custom_content if users else None)


def attachment_urls(custom_content: Any) -> list[str]:
    """The URLs of aidial-client's parsed `custom_content.attachments`."""
    attachments = (custom_content.attachments if custom_content else None) or []
    return [attachment.url for attachment in attachments if attachment.url]


def picked_skills(request: Request) -> list[str]:
    """The skills the last user message picked: an extra field of aidial-sdk's `CustomContent`."""
    users = [m for m in request.messages if m.role == "user"]
    custom_content = users[-1].custom_content if users else None
    skills = getattr(custom_content, "skills", None) or []
    return [skill["url"] for skill in skills if isinstance(skill, dict) and skill.get("url")]


async def read_skill(request: Request, url: str) -> dict[str, Any]:
    """A skill as an application reads it with its key: the ZIP, its SKILL.md, its metadata."""
    headers = {"Api-Key": request.api_key}
    async with httpx.AsyncClient(base_url=state.dial_url, headers=headers) as http:
        archive = await http.get(f"/v2/{url}")
        skill_md = await http.get(f"/v2/{url}/files/SKILL.md")
        metadata = await http.get(f"/v2/metadata/{url}")
    return {
        "zip": archive.status_code,
        "zip_sha256": hashlib.sha256(archive.content).hexdigest() if archive.status_code == 200 else None,
        "skill_md": skill_md.status_code,
        "skill_md_text": skill_md.text if skill_md.status_code == 200 else None,
        "metadata": metadata.status_code,
        "name": metadata.json().get("metadata", {}).get("name") if metadata.status_code == 200 else None,
    }


def failure(error: Exception) -> dict[str, Any]:
    return {"status": getattr(error, "status_code", None), "error": f"{type(error).__name__}: {error}"}


async def read(client: AsyncDial, url: str) -> dict[str, Any]:
    try:
        downloaded = await client.files.download(url)
        return {"status": 200, "body": downloaded._response.content.decode()}
    except Exception as error:  # noqa: BLE001 - the report says what failed
        return failure(error)


def answer(response: Response, report: dict[str, Any], attachments: list[str] = ()) -> None:
    with response.create_single_choice() as choice:
        choice.append_content(json.dumps(report, separators=(",", ":")))
        for url in attachments:
            choice.add_attachment(url=url, title=url.rsplit("/", 1)[-1], type="text/plain")


class Echo(ChatCompletion):
    async def chat_completion(self, request: Request, response: Response) -> None:
        try:
            properties: Any = await request.request_dial_application_properties()
        except Exception as error:  # noqa: BLE001
            properties = {"error": str(error)}
        features = request.headers.get("x-dial-deployment-features")
        configuration = request.custom_fields.configuration if request.custom_fields else None
        report: dict[str, Any] = {
            "api_key_length": len(request.api_key),
            "bearer_token": request.bearer_token,
            "application_id": request.dial_application_id,
            "header_properties": request.unreliable_dial_application_properties,
            "properties": properties,
            "features": json.loads(features) if features else None,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "configuration": configuration,
            "client_header": request.headers.get("x-client-header"),
            "reads": {},
        }
        client = dial(request)
        for command in last_user_text(request).split():
            if command.startswith("read:"):
                url = command.removeprefix("read:")
                report["reads"][url] = await read(client, url)
            elif command == "skills":
                report["skills"] = {url: await read_skill(request, url) for url in picked_skills(request)}
            elif command.startswith("read-skill:"):
                url = command.removeprefix("read-skill:")
                report.setdefault("unpicked", {})[url] = await read_skill(request, url)
        answer(response, report)

    async def rate_response(self, request: RateRequest) -> None:
        state.rates.append(
            {"response_id": request.response_id, "rate": request.rate, "api_key_length": len(request.api_key)}
        )

    async def tokenize(self, request: TokenizeRequest) -> TokenizeResponse:
        outputs = []
        for item in request.inputs:
            text = item.value if item.type == "string" else json.dumps(item.value.model_dump(exclude_none=True))
            outputs.append(TokenizeSuccess(token_count=len(text.split())))
        return TokenizeResponse(outputs=outputs)

    async def truncate_prompt(self, request: TruncatePromptRequest) -> TruncatePromptResponse:
        # Keeps the last message of each input, discards the others.
        outputs = [TruncatePromptSuccess(discarded_messages=list(range(len(i.messages) - 1))) for i in request.inputs]
        return TruncatePromptResponse(outputs=outputs)

    async def configuration(self, request: ConfigurationRequest) -> dict:
        return {
            "type": "object",
            "properties": {"mode": {"type": "string", "enum": ["brief", "full"]}},
            "api_key_length": len(request.api_key),
        }


class Embed(Embeddings):
    async def embeddings(self, request: EmbeddingsRequest) -> EmbeddingsResponse:
        inputs = [request.input] if isinstance(request.input, str) else list(request.input)
        read_status = 0.0
        for item in request.custom_input or []:
            for part in item if isinstance(item, list) else [item]:
                if not isinstance(part, str) and part.url:
                    read_status = float((await read(dial(request), part.url))["status"] or 0)
        data = [
            {"embedding": [float(len(str(text).split())), float(len(request.api_key)), read_status], "index": i}
            for i, text in enumerate(inputs)
        ]
        return EmbeddingsResponse(data=data, model="embed", usage={"prompt_tokens": 1, "total_tokens": 1})


class Maker(ChatCompletion):
    async def chat_completion(self, request: Request, response: Response) -> None:
        client = dial(request)
        appdata = await client.my_appdata_home()
        if appdata is None:
            raise RuntimeError("maker was called without an appdata folder")
        url = f"files/{appdata}/made-{uuid.uuid4().hex[:8]}.txt"
        await client.files.upload(url, ("made.txt", MADE, "text/plain"))
        answer(response, {"made": url}, [url])


class Chainer(ChatCompletion):
    async def chat_completion(self, request: Request, response: Response) -> None:
        client = dial(request)
        report: dict[str, Any] = {}
        passed_up: list[str] = []
        for command in last_user_text(request).split():
            if command in ("chain", "chain-stream"):
                urls = await self.call_maker(client, stream=command == "chain-stream")
                report[command] = {"urls": urls, "reads": [await read(client, url) for url in urls]}
                passed_up.extend(urls)
            elif command in ("grant", "pass"):
                outcome: dict[str, Any] = {}
                for url in user_attachments(request):
                    if command == "grant":
                        try:
                            await client.resource_permissions.grant(resources=[url], receiver="echo-sdk")
                            outcome["grant"] = 200
                        except Exception as error:  # noqa: BLE001
                            outcome["grant"] = failure(error)
                    outcome["echo"] = await self.ask_echo(client, f"read:{url}")
                report[command] = outcome
            elif command.startswith("grant-foreign:"):
                url = command.removeprefix("grant-foreign:")
                try:
                    await client.resource_permissions.grant(resources=[url], receiver="echo-sdk")
                    report["grant-foreign"] = {"status": 200}
                except Exception as error:  # noqa: BLE001
                    report["grant-foreign"] = failure(error)
        answer(response, report, passed_up)

    async def call_maker(self, client: AsyncDial, stream: bool) -> list[str]:
        messages = [{"role": "user", "content": "make"}]
        urls: list[str] = []
        if stream:
            chunks = await client.chat.completions.create(deployment_name="maker", messages=messages, stream=True)
            async for chunk in chunks:
                for choice in chunk.choices:
                    urls.extend(attachment_urls(choice.delta.custom_content if choice.delta else None))
        else:
            completion = await client.chat.completions.create(deployment_name="maker", messages=messages)
            urls.extend(attachment_urls(completion.choices[0].message.custom_content))
        return urls

    async def ask_echo(self, client: AsyncDial, message: str) -> Any:
        messages = [{"role": "user", "content": message}]
        try:
            completion = await client.chat.completions.create(deployment_name="echo-sdk", messages=messages)
        except Exception as error:  # noqa: BLE001
            return failure(error)
        return json.loads(completion.choices[0].message.content)


def app() -> DIALApp:
    # Per-message skills (`custom_content.skills`) are a field aidial-sdk 0.46 does not know yet.
    dial_app = DIALApp(add_healthcheck=True, allow_extra_request_fields=True)
    dial_app.add_chat_completion("echo-sdk", Echo())
    dial_app.add_chat_completion("echo-big", Echo())
    dial_app.add_embeddings("embed", Embed())
    dial_app.add_chat_completion("maker", Maker())
    dial_app.add_chat_completion("chainer", Chainer())

    async def rates(_: HttpRequest) -> JSONResponse:
        return JSONResponse(state.rates)

    async def dial_url(request: HttpRequest) -> PlainTextResponse:
        state.dial_url = (await request.body()).decode().strip().rstrip("/") or None
        # aidial-sdk's request_dial_application_properties() reads the app's own dial_url.
        dial_app._dial_url = state.dial_url
        return PlainTextResponse("", status_code=204)

    async def completions(request: HttpRequest) -> JSONResponse:
        body = await request.json()
        report = {"api_key_length": len(request.headers.get("api-key", "")), "prompt": body.get("prompt")}
        text = json.dumps(report, separators=(",", ":"))
        choice = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
        return JSONResponse({"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "echo-sdk",
                             "choices": [choice]})

    dial_app.add_api_route("/openai/deployments/echo-sdk/completions", completions, methods=["POST"])
    dial_app.add_api_route("/rates", rates, methods=["GET"])
    dial_app.add_api_route("/dial-url", dial_url, methods=["POST"])
    return dial_app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dial-url", help="the dial-host under test, e.g. http://127.0.0.1:8080")
    args = parser.parse_args()
    served = app()
    if args.dial_url:
        state.dial_url = args.dial_url.rstrip("/")
        served._dial_url = state.dial_url
    run(served, args.port)


if __name__ == "__main__":
    main()

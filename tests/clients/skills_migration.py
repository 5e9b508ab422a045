"""A team moving its skills from Anthropic's and OpenAI's hosted stores (issue 40), with the official SDKs.

    python tests/clients/skills_migration.py SCENARIO --host URL --key KEY [--dial-name FOLDER --dial-title NAME]

The SDKs are built as their READMEs say (`skills_sdk.py`): a base URL and a key, `max_retries=0` except where a
scenario loses answers on purpose. Each scenario runs the vendors' documented recipes and checks what they give.

  recipes      Anthropic's documented delete (every version newest first, then the skill; GA ids and beta
               numbers), a rollback by deleting a bad latest version, OpenAI deleting its default version and
               then its last
  renamed      a skill the Rust side PUT through /v2 under the folder --dial-name whose SKILL.md says
               --dial-title gets versions under either name, and from the zip the SDK downloaded
  rooted       a zip with SKILL.md at its root makes a skill and a version
  retries      answers lost on the way back, the SDK retrying: versions.create makes one version,
               skills.delete and versions.delete succeed once (both APIs)
  request-ids  request ids on answers and errors (`_request_id`, `e.request_id`)
  errors       unknown routes in each API's error shape, a 3 000-character id not echoed whole,
               update(default_version=1) as a number
  warnings     the skill handler's warnings and the hosted services' rules in both APIs' create answers
               (`warnings`); with --refuse (a host with skills_api.vendor_names = "refuse") such names refused
  walk         every skill (--count of them) through both SDKs' auto-paging, each once
  retention    the host keeps 3 versions (the Rust side configures it): a fourth is refused with a 409
               naming keep_versions and sent once, every id made still answers; after a delete it is taken

Success (exit 0): the facts the Rust side checks through DIAL's /v2 routes. Failure (exit 1): what differed.
"""

from __future__ import annotations

import argparse
import io
import re
import zipfile
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import openai

import common
from skills_sdk import (
    BETA,
    Files,
    anthropic_client,
    anthropic_download,
    check,
    expect,
    expect_error,
    expect_zip,
    not_retryable,
    openai_client,
    raw,
    skill_md,
)


def skill(name: str, description: str, *, extra: bytes = b"") -> Files:
    """A skill's files under its top folder, as `files_from_dir` gives them."""
    return sorted(
        [(f"{name}/SKILL.md", skill_md(name, description)), (f"{name}/scripts/run.py", b"print(1)\n" + extra)]
    )


def rooted_zip(files: Files) -> bytes:
    """`files` zipped without their top folder: SKILL.md at the root, as a zip made inside the folder."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, content in files:
            archive.writestr(path.split("/", 1)[1], content)
    return buffer.getvalue()


def openai_zip(name: str, data: bytes) -> Any:
    """OpenAI's one-zip upload: the `files` part."""
    return (f"{name}.zip", data, "application/zip")


# --- recipes --------------------------------------------------------------------------------------


def anthropic_delete_recipe(a: anthropic.Anthropic, name: str, *, beta: bool) -> str:
    """Anthropic's documented delete: every version (newest first, as the list gives them), then the skill."""
    created = a.skills.create(files=skill(name, "One."))
    for description in ("Two.", "Three."):
        a.skills.versions.create(created.id, files=skill(name, description))
    if beta:
        betas = {"betas": [BETA]}
        listed = raw(a.beta.skills.versions.with_raw_response.list(skill_id=created.id, **betas))
        numbers = [version["version"] for version in listed["data"]]
        expect(f"{name}: beta versions listed", 3, len(numbers))
        for number in numbers:
            a.beta.skills.versions.delete(number, skill_id=created.id, **betas)
        a.beta.skills.delete(created.id, **betas)
    else:
        ids = [version.id for version in a.skills.versions.list(created.id)]
        expect(f"{name}: versions listed", 3, len(ids))
        for version_id in ids:
            a.skills.versions.delete(version_id, skill_id=created.id)
        deleted = a.skills.delete(created.id)
        expect(f"{name}: skills.delete", (created.id, "skill_deleted"), (deleted.id, deleted.type))
    expect_error(f"{name}: retrieve after the recipe", anthropic.NotFoundError, lambda: a.skills.retrieve(created.id))
    return created.id


def rollback(a: anthropic.Anthropic) -> dict[str, Any]:
    """A bad latest version deleted: the one before is current and served again."""
    good, bad = skill("rollback", "Good."), skill("rollback", "Bad.")
    created = a.skills.create(files=good)
    first = a.skills.retrieve(created.id).latest_version_id
    second = a.skills.versions.create(created.id, files=bad)
    a.skills.versions.delete(second.id, skill_id=created.id)
    after = a.skills.retrieve(created.id)
    expect("rollback: latest_version_id after deleting the latest", first, after.latest_version_id)
    expect_zip("rollback: latest downloaded", good, anthropic_download(a, created.id, "latest"))
    return {"rollback_id": created.id}


def openai_default_deletes(o: openai.OpenAI) -> dict[str, Any]:
    """OpenAI: deleting the default version makes the newest remaining one the default; deleting the last
    one leaves nothing for the skill delete but to say it is done."""
    one, two = skill("default-delete", "One."), skill("default-delete", "Two.")
    created = o.skills.create(files=one)
    o.skills.versions.create(created.id, files=two, default=True)
    deleted = o.skills.versions.delete("2", skill_id=created.id)
    expect("versions.delete of the default: (deleted, version)", (True, "2"), (deleted.deleted, deleted.version))
    now = o.skills.retrieve(created.id)
    expect("after deleting the default: (default, latest)", ("1", "1"), (now.default_version, now.latest_version))
    expect_zip("content after deleting the default", one, o.skills.content.retrieve(created.id).read())
    o.skills.versions.delete("1", skill_id=created.id)
    expect_error("retrieve after its last version", openai.NotFoundError, lambda: o.skills.retrieve(created.id))
    gone = o.skills.delete(created.id)
    expect("skills.delete after the last version", (created.id, True), (gone.id, gone.deleted))
    return {"default_delete_id": created.id}


def dial_made(a: anthropic.Anthropic, o: openai.OpenAI, folder: str, title: str) -> dict[str, Any]:
    """A skill PUT through /v2 under `folder` whose SKILL.md names `title` (DIAL only warns) takes versions
    under either name and from the zip the SDK downloaded."""
    listed = {s.name: s for s in o.skills.list(limit=100)}
    check(title in listed, f"OpenAI list: expected {title!r} among {sorted(listed)}")
    skill_id = listed[title].id
    by_name = a.skills.versions.create(skill_id, files=skill(title, "Under its name."))
    by_folder = o.skills.versions.create(skill_id, files=[(f"{folder}/SKILL.md", skill_md(title, "Under its folder."))])
    expect("versions under the name, then the folder", "3", by_folder.version)
    downloaded = o.skills.content.retrieve(skill_id).read()
    again = o.skills.versions.create(skill_id, files=openai_zip(folder, downloaded), default=True)
    latest = o.skills.retrieve(skill_id)
    expect("the downloaded zip uploaded again: (version, latest)", ("4", "4"), (again.version, latest.latest_version))
    return {"dial_skill_id": skill_id, "by_name": by_name.id, "versions": latest.latest_version}


def rooted(o: openai.OpenAI) -> dict[str, Any]:
    """A zip with SKILL.md at its root: the skill named by its frontmatter, then a version of it."""
    one, two = skill("rooted", "One."), skill("rooted", "Two.")
    created = o.skills.create(files=openai_zip("rooted", rooted_zip(one)))
    expect("a rooted zip's skill: (name, description)", ("rooted", "One."), (created.name, created.description))
    expect_zip("a rooted zip's skill downloaded", one, o.skills.content.retrieve(created.id).read())
    version = o.skills.versions.create(created.id, files=openai_zip("rooted", rooted_zip(two)), default=True)
    expect("a rooted zip's version", "2", version.version)
    expect_zip("the rooted version downloaded", two, o.skills.content.retrieve(created.id).read())
    return {"rooted_id": created.id}


def scenario_recipes(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    out = {
        "recipe_ga_id": anthropic_delete_recipe(a, "recipe-ga", beta=False),
        "recipe_beta_id": anthropic_delete_recipe(a, "recipe-beta", beta=True),
    }
    return out | rollback(a) | openai_default_deletes(o)


def scenario_renamed(args: argparse.Namespace) -> dict[str, Any]:
    return dial_made(anthropic_client(args), openai_client(args), args.dial_name, args.dial_title)


def scenario_rooted(args: argparse.Namespace) -> dict[str, Any]:
    return rooted(openai_client(args))


# --- retries --------------------------------------------------------------------------------------


class LosingTransport(httpx2.HTTPTransport):
    """Forwards every request and counts the `method` requests whose path matches `path`; with `lose`, the
    first answer to one is read and dropped, as a broken connection would lose it, so the SDK sends the
    request again."""

    def __init__(self, method: str, path: str, lose: bool = True) -> None:
        super().__init__()
        self.method, self.path, self.lose = method, re.compile(path), lose
        self.sent = 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        matches = request.method == self.method and self.path.search(request.url.path) is not None
        self.sent += matches
        response = super().handle_request(request)
        if matches and self.lose and self.sent == 1:
            response.read()
            response.close()
            raise httpx2.ReadError("the answer was lost on its way back (test transport)", request=request)
        return response


def losing(make: Callable[..., Any], args: argparse.Namespace, method: str, path: str) -> tuple[Any, LosingTransport]:
    transport = LosingTransport(method, path)
    return make(args, max_retries=2, http_client=httpx2.Client(transport=transport, timeout=60)), transport


def scenario_retries(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    out: dict[str, Any] = {}
    for api, make in (("anthropic", anthropic_client), ("openai", openai_client)):
        name = f"retried-{api}"
        created = a.skills.create(files=skill(name, "One."))

        client, lossy = losing(make, args, "POST", r"/skills/[^/]+/versions$")
        made = client.skills.versions.create(created.id, files=skill(name, "Two."))
        expect(f"{api}: versions.create sent (the lost one and its retry)", 2, lossy.sent)
        versions = [v.id for v in a.skills.versions.list(created.id)]
        expect(f"{api}: versions after a retried versions.create", 2, len(versions))
        expect(f"{api}: the retried answer names the new version", versions[0], made.id)

        older = versions[1] if api == "anthropic" else "1"
        client, lossy = losing(make, args, "DELETE", r"/versions/[^/]+$")
        client.skills.versions.delete(older, skill_id=created.id)
        expect(f"{api}: versions.delete sent", 2, lossy.sent)
        expect(f"{api}: versions after a retried delete", [versions[0]], [v.id for v in a.skills.versions.list(created.id)])

        client, lossy = losing(make, args, "DELETE", r"/skills/[^/]+$")
        client.skills.delete(created.id)
        expect(f"{api}: skills.delete sent", 2, lossy.sent)
        expect_error(f"{api}: retrieve after a retried delete", openai.NotFoundError, lambda: o.skills.retrieve(created.id))

        # Deleting a skill's only version deletes the skill: its retry is done too.
        last = a.skills.create(files=skill(f"{name}-last", "Only."))
        only = [v.id for v in a.skills.versions.list(last.id)][0] if api == "anthropic" else "1"
        client, lossy = losing(make, args, "DELETE", r"/versions/[^/]+$")
        client.skills.versions.delete(only, skill_id=last.id)
        expect(f"{api}: the last version's versions.delete sent", 2, lossy.sent)
        expect_error(
            f"{api}: retrieve after a retried delete of the last version",
            openai.NotFoundError,
            lambda: o.skills.retrieve(last.id),
        )
        out[api] = created.id
    return out


# --- errors ---------------------------------------------------------------------------------------


def scenario_request_ids(args: argparse.Namespace) -> dict[str, Any]:
    """Request ids on answers (the SDKs' `_request_id`) and on errors (`e.request_id`)."""
    a, o = anthropic_client(args), openai_client(args)
    created = o.skills.create(files=skill("request-ids", "One."))
    listed = a.skills.with_raw_response.list()
    anthropic_id = listed.headers.get("request-id")
    check(bool(anthropic_id), f"Anthropic list: no request-id header in {dict(listed.headers)}")
    check(bool(o.skills.retrieve(created.id)._request_id), "OpenAI retrieve: no _request_id")
    missing = expect_error("Anthropic retrieve('skill_nope')", anthropic.NotFoundError, lambda: a.skills.retrieve("skill_nope"))
    check(bool(missing.request_id), "Anthropic NotFoundError: request_id is None")
    missing = expect_error("OpenAI retrieve('skill_nope')", openai.NotFoundError, lambda: o.skills.retrieve("skill_nope"))
    check(bool(missing.request_id), "OpenAI NotFoundError: request_id is None")
    return {"anthropic_request_id": anthropic_id}


def scenario_errors(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    created = o.skills.create(files=skill("errors", "One."))
    o.skills.versions.create(created.id, files=skill("errors", "Two."), default=True)

    # Routes the host does not serve, in each API's shape.
    unknown = expect_error(
        "OpenAI responses.create",
        openai.NotFoundError,
        lambda: o.responses.create(model="gpt-x", input="hello"),
        code="not_found",
    )
    check("skills" in str(unknown.message), f"OpenAI unknown route: the message names no skills route: {unknown.message}")
    unknown = expect_error(
        "Anthropic messages.create",
        anthropic.NotFoundError,
        lambda: a.messages.create(model="claude-x", max_tokens=1, messages=[{"role": "user", "content": "hi"}]),
        error_type="not_found_error",
    )
    check("skills" in str(unknown.message), f"Anthropic unknown route: the message names no skills route: {unknown.message}")

    # An id of 3 000 characters is not echoed whole.
    long_id = "skill_" + "x" * 3000
    for what, kind, call in (
        ("Anthropic", anthropic.NotFoundError, lambda: a.skills.retrieve(long_id)),
        ("OpenAI", openai.NotFoundError, lambda: o.skills.retrieve(long_id)),
    ):
        error = expect_error(f"{what} retrieve of a 3 000-character id", kind, call)
        check(len(str(error.body)) < 600, f"{what}: the 404 echoes {len(str(error.body))} characters")

    # default_version as a number, as JSON allows.
    moved = o.skills.update(created.id, default_version=1)  # type: ignore[arg-type]
    expect("update(default_version=1): (default, latest)", ("1", "2"), (moved.default_version, moved.latest_version))
    return {"skill_id": created.id}


# --- retention ------------------------------------------------------------------------------------


def scenario_retention(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    created = a.skills.create(files=skill("kept", "One."))
    made = [a.skills.retrieve(created.id).latest_version_id]
    made.append(a.skills.versions.create(created.id, files=skill("kept", "Two.")).id)
    made.append(o.skills.versions.create(created.id, files=skill("kept", "Three."), default=True).id)
    for api, make, kind in (
        ("anthropic", anthropic_client, anthropic.ConflictError),
        ("openai", openai_client, openai.ConflictError),
    ):
        counting = LosingTransport("POST", r"/versions$", lose=False)
        client = make(args, max_retries=2, http_client=httpx2.Client(transport=counting, timeout=60))
        error = expect_error(
            f"{api}: a fourth version past keep_versions = 3",
            kind,
            lambda client=client: client.skills.versions.create(created.id, files=skill("kept", "Four.")),
        )
        not_retryable(f"{api}: 409 on a full skill", error)
        expect(f"{api}: requests sent for a full skill with max_retries=2", 1, counting.sent)
        check("keep_versions" in str(error.message), f"{api}: the refusal names no setting: {error.message}")
    for version_id in made:
        expect("a version made before the refusal still answers", version_id, a.skills.versions.retrieve(version_id, skill_id=created.id).id)
    a.skills.versions.delete(made[0], skill_id=created.id)
    fourth = o.skills.versions.create(created.id, files=skill("kept", "Four."))
    expect("the fourth version after a delete", "4", fourth.version)
    return {"skill_id": created.id, "versions": [v.id for v in a.skills.versions.list(created.id)]}


# --- warnings -------------------------------------------------------------------------------------


def warnings_of(what: str, answer: Any) -> list[str]:
    """The `warnings` of an SDK object (an extra field both SDKs keep), as messages."""
    warnings = getattr(answer, "warnings", None)
    check(isinstance(warnings, list) and bool(warnings), f"{what}: no warnings in {answer!r}")
    return [warning["message"] for warning in warnings]


def scenario_warnings(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    vendor_bad = skill("claude-notes", "Uses <b>bold</b> text.")
    if args.refuse:
        for api, create, kind in (
            ("Anthropic", lambda: a.skills.create(files=vendor_bad), anthropic.BadRequestError),
            ("OpenAI", lambda: o.skills.create(files=vendor_bad), openai.BadRequestError),
        ):
            error = expect_error(f"{api}: a name the hosted services refuse", kind, create)
            for fragment in ("reserved word", "XML tag", "vendor_names"):
                check(fragment in str(error.message), f"{api}: the refusal does not say {fragment!r}: {error.message}")
        expect("skills after the refusals", [], [s.id for s in o.skills.list()])
        fine = o.skills.create(files=skill("fine-notes", "Plain."))
        expect("a skill the services take: warnings", None, getattr(fine, "warnings", None))
        return {"refused": True}

    created = a.skills.create(files=vendor_bad)
    messages = warnings_of("Anthropic create of claude-notes", created)
    check(any("reserved word" in m for m in messages), f"no reserved-word warning in {messages}")
    check(any("XML tag" in m for m in messages), f"no XML warning in {messages}")
    made = o.skills.create(files=skill("Upper-Notes", "Plain."))
    messages = warnings_of("OpenAI create of Upper-Notes", made)
    check(any("Agent Skills spec" in m for m in messages), f"the handler's warning is missing: {messages}")
    version = o.skills.versions.create(made.id, files=skill("Upper-Notes", "Plain again."))
    warnings_of("OpenAI versions.create of Upper-Notes", version)
    anthropic_version = a.skills.versions.create(created.id, files=skill("claude-notes", "Still <i>XML</i>."))
    warnings_of("Anthropic versions.create of claude-notes", anthropic_version)
    fine = o.skills.create(files=skill("fine-notes", "Plain."))
    expect("a skill the services take: warnings", None, getattr(fine, "warnings", None))
    return {"warned": created.id}


# --- scale ----------------------------------------------------------------------------------------


def scenario_walk(args: argparse.Namespace) -> dict[str, Any]:
    """Every skill of the caller through both SDKs' auto-paging (100 a page), each once, in each API's order."""
    a, o = anthropic_client(args), openai_client(args)
    newest = [s.id for s in o.skills.list(limit=100)]
    oldest = [s.id for s in o.skills.list(limit=100, order="asc")]
    anthropic_ids = [s.id for s in a.skills.list(limit=100)]
    for what, ids in (("OpenAI desc", newest), ("OpenAI asc", oldest), ("Anthropic", anthropic_ids)):
        expect(f"{what}: skills listed", args.count, len(ids))
        expect(f"{what}: each once", len(ids), len(set(ids)))
    expect("Anthropic and OpenAI list one order", newest, anthropic_ids)
    expect("asc is desc reversed (distinct creation times)", set(newest), set(oldest))
    return {"listed": len(newest), "newest": newest[:3], "oldest": oldest[:3]}


SCENARIOS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "recipes": scenario_recipes,
    "renamed": scenario_renamed,
    "rooted": scenario_rooted,
    "request-ids": scenario_request_ids,
    "retries": scenario_retries,
    "errors": scenario_errors,
    "retention": scenario_retention,
    "warnings": scenario_warnings,
    "walk": scenario_walk,
}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--host", required=True, help="the host's root URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--key", required=True, help="a project API key or a user's JWT (without 'Bearer ')")
    parser.add_argument("--dial-name", help="renamed: the folder of the skill the Rust side PUT through /v2")
    parser.add_argument("--dial-title", help="renamed: the name its SKILL.md gives")
    parser.add_argument("--count", type=int, help="walk: the skills the caller has")
    parser.add_argument("--refuse", action="store_true", help="warnings: the host has vendor_names = refuse")
    args = parser.parse_args()
    args.host = args.host.rstrip("/")
    return SCENARIOS[args.scenario](args)


if __name__ == "__main__":
    common.run(main)

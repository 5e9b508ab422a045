"""Drives Anthropic's and OpenAI's skills APIs on the host with the official SDKs; prints one JSON line.

    python tests/clients/skills_sdk.py SCENARIO --host URL --key KEY [--dir DIR] [--id SKILL_ID]
        [--api anthropic|openai] [--as-zip] [--dial-name NAME]

The SDKs are built as their READMEs say, with nothing but a base URL and a key:
`anthropic.Anthropic(base_url=HOST/anthropic, api_key=KEY)` and
`openai.OpenAI(base_url=HOST/openai/v1, api_key=KEY)`, `max_retries=0` except in `retry`. KEY is a
project API key or a user's JWT (both SDKs send it as `Authorization: Bearer KEY`).

--dir is a folder the Rust side wrote: `v1/NAME/…` (the files of a skill's first version) and, for
the scenarios that make versions, `v2/NAME/…`; `cross` also reads `dial/NAME/…` (what it PUT
through /v2). SKILL.md frontmatter is `name:` and `description:` lines; later versions are made
here by changing the description.

Scenarios, each a run of SDK calls with checks:

  anthropic       GA shapes: create (display_name given / defaulted), bad layouts (400), a taken name
                  (409, not to be retried), list paging and `source`, retrieve, unknown id (404),
                  versions (create, list, `latest`, download, delete), bad key
  anthropic-beta  the `skills-2025-10-02` beta header: display_title, 16-digit `version`, `directory`,
                  versions addressed by that number; the same skill without the header in GA shape
  openai          create (files[] parts, one zip), versions "1", "2", …, the movable default and the
                  content it serves, numbers never reused, version/skill deletes, paging, errors
  roundtrip       create the v1 skill through --api (--as-zip: OpenAI's one-zip upload) and download it
                  back through both APIs
  delete          delete --id through --api; the id then answers 404
  retrieve        --id through both APIs (their shapes of it)
  cross           one skill through both APIs (ids, versions, `latest`); a skill PUT through /v2
                  (--dial-name) listed and served by both
  shared-grantee  --id is another user's skill shared with the caller: readable and downloadable, not
                  in the caller's lists, a new version 403
  stranger        --id is another user's skill not shared with the caller: 404 through both APIs
  retry           a create whose answer is lost, retried by the SDK, leaves one skill; a create refused
                  as a conflict is sent once although the SDK may retry twice

Success (exit 0): the facts the Rust side checks through DIAL's /v2 routes (ids, names, versions).
Failure (exit 1): {"error": "<what differed: expected X, got Y>", "status", "body", "type"}.
"""

from __future__ import annotations

import argparse
import io
import pathlib
import re
import time
import zipfile
from collections.abc import Callable
from datetime import datetime
from typing import Any

import anthropic
import httpx2
import openai
from anthropic.lib import files_from_dir

import common

BETA = "skills-2025-10-02"
Files = list[tuple[str, bytes]]


# --- checks -------------------------------------------------------------------------------------


def check(condition: bool, message: str) -> None:
    if not condition:
        common.fail(message)


def expect(what: str, expected: Any, got: Any) -> None:
    if expected != got:
        common.fail(f"{what}: expected {expected!r}, got {got!r}")


def expect_error(
    what: str,
    kind: type[BaseException] | tuple[type[BaseException], ...],
    call: Callable[[], Any],
    *,
    error_type: str | None = None,
    code: str | None = None,
) -> Any:
    """Runs `call`, which must raise `kind` (an SDK status error); checks `e.type` / `e.code` when given."""
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    try:
        result = call()
    except kind as error:
        if error_type is not None:
            expect(f"{what}: the error's type", error_type, getattr(error, "type", None))
        if code is not None:
            expect(f"{what}: the error's code", code, getattr(error, "code", None))
        return error
    except Exception as error:  # noqa: BLE001 - reported as what differed
        status = getattr(error, "status_code", None)
        common.fail(
            f"{what}: expected {names}, got {type(error).__name__} ({status}): {error}",
            status if isinstance(status, int) else None,
            getattr(error, "body", None),
            type(error).__name__,
        )
    common.fail(f"{what}: expected {names}, got success: {result!r}")


def not_retryable(what: str, error: Any) -> None:
    expect(f"{what}: x-should-retry", "false", error.response.headers.get("x-should-retry"))


# --- files ----------------------------------------------------------------------------------------


def skill_md(name: str, description: str) -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n".encode()


def description_of(files: Files) -> str:
    text = next(content for path, content in files if path.endswith("/SKILL.md")).decode()
    match = re.search(r"^description: (.*)$", text, re.MULTILINE)
    check(match is not None, f"the test's SKILL.md has no description line: {text!r}")
    return match.group(1)


def with_description(files: Files, name: str, description: str) -> Files:
    """The same files with another SKILL.md description: the next version of a skill."""
    return sorted(
        (path, skill_md(name, description) if path == f"{name}/SKILL.md" else content) for path, content in files
    )


def skill_dir(root: str, version: str) -> pathlib.Path:
    folders = [entry for entry in (pathlib.Path(root) / version).iterdir() if entry.is_dir()]
    check(len(folders) == 1, f"{root}/{version} should hold one skill folder, holds {folders}")
    return folders[0]


def read_skill(root: str, version: str = "v1") -> tuple[str, Files]:
    """The skill folder's name and its files as the SDK recipe uploads them: `files_from_dir`."""
    folder = skill_dir(root, version)
    return folder.name, sorted(files_from_dir(folder))  # type: ignore[arg-type]


def make_zip(files: Files) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, content in files:
            archive.writestr(path, content)
    return buffer.getvalue()


def zip_entries(data: bytes) -> Files:
    """The archive's files (directory entries, if any, left out), sorted by path."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return sorted((info.filename, archive.read(info)) for info in archive.infolist() if not info.is_dir())


def expect_zip(what: str, expected: Files, data: bytes) -> None:
    try:
        got = zip_entries(data)
    except zipfile.BadZipFile as error:
        common.fail(f"{what}: expected a zip, got {len(data)} bytes that are not one ({error}): {data[:200]!r}")
    expected = sorted(expected)
    if [path for path, _ in got] != [path for path, _ in expected]:
        common.fail(f"{what}: expected the entries {[p for p, _ in expected]}, got {[p for p, _ in got]}")
    for (path, want), (_, have) in zip(expected, got, strict=True):
        if want != have:
            common.fail(
                f"{what}: {path} differs: expected {len(want)} bytes {want[:60]!r}…, got {len(have)} {have[:60]!r}…"
            )


def bad_layouts(v1: pathlib.Path) -> list[tuple[str, Any]]:
    """Uploads both APIs refuse with 400, each for one reason."""
    return [
        ("SKILL.md not under a top folder", [("SKILL.md", skill_md("flat", "Flat."))]),
        # The SDK sends a Path's basename only (anthropic-sdk-python#1575): SKILL.md at the root again.
        ("a pathlib.Path of SKILL.md", [v1 / "SKILL.md"]),
        ("a top folder other than the frontmatter name", [("other/SKILL.md", skill_md("named", "Named."))]),
        ("two top folders", [("two/SKILL.md", skill_md("two", "Two.")), ("extra/notes.txt", b"x\n")]),
        ("no SKILL.md", [("nomd/README.md", b"# no skill here\n")]),
        ("a backslash in a path", [("bs/SKILL.md", skill_md("bs", "Bs.")), ("bs/scripts\\run.py", b"print(1)\n")]),
    ]


# --- clients --------------------------------------------------------------------------------------


def anthropic_client(args: argparse.Namespace, key: str | None = None, **extra: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=f"{args.host}/anthropic", api_key=key or args.key, max_retries=extra.pop("max_retries", 0), **extra
    )


def openai_client(args: argparse.Namespace, key: str | None = None, **extra: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{args.host}/openai/v1", api_key=key or args.key, max_retries=extra.pop("max_retries", 0), **extra
    )


def raw(response: Any) -> Any:
    """The JSON body of a `with_raw_response` call (the beta shapes do not fit the SDK's GA models)."""
    return response.http_response.json()


def anthropic_download(a: anthropic.Anthropic, skill_id: str, version: str, **beta: Any) -> bytes:
    return a.beta.skills.versions.download(version, skill_id=skill_id, **beta).read()


def is_time(value: Any) -> bool:
    """An ISO 8601 string in the JSON, which the SDK parses into a datetime."""
    return isinstance(value, datetime)


# --- scenarios ------------------------------------------------------------------------------------


def scenario_anthropic(args: argparse.Namespace) -> dict[str, Any]:
    a = anthropic_client(args)
    name, v1 = read_skill(args.dir, "v1")
    _, v2 = read_skill(args.dir, "v2")
    before = {skill.id for skill in a.skills.list(limit=100)}

    # Create, with and without a display name.
    created = a.skills.create(files=files_from_dir(skill_dir(args.dir, "v1")), display_name="My Skill")
    expect("create: type", "skill", created.type)
    check(created.id.startswith("skill_"), f"create: expected an id skill_…, got {created.id!r}")
    expect("create: display_name", "My Skill", created.display_name)
    check(
        created.latest_version_id.startswith("skillver_"),
        f"create: expected latest_version_id skillver_…, got {created.latest_version_id!r}",
    )
    expect("create: source.type", "custom", created.source.type)
    check(is_time(created.created_at) and is_time(created.updated_at), f"create: times {created!r}")
    expect("retrieve(id)", created.model_dump(), a.skills.retrieve(created.id).model_dump())
    first = a.skills.versions.retrieve("latest", skill_id=created.id)
    expect(
        "versions.retrieve('latest') after create",
        ("skill_version", created.latest_version_id, created.id, name, description_of(v1)),
        (first.type, first.id, first.skill_id, first.name, first.description),
    )
    expect_zip("the first version downloaded", v1, anthropic_download(a, created.id, first.id))
    defaulted = a.skills.create(files=[("defaulted/SKILL.md", skill_md("defaulted", "No display name."))])
    expect("create without display_name: display_name", "defaulted", defaulted.display_name)

    # Refusals: bad layouts, a taken name, an unknown id, a bad key.
    for reason, files in bad_layouts(skill_dir(args.dir, "v1")):
        expect_error(
            f"create with {reason}",
            anthropic.BadRequestError,
            lambda files=files: a.skills.create(files=files),
            error_type="invalid_request_error",
        )
    taken = expect_error(
        "create of a name taken (other content)",
        anthropic.ConflictError,
        lambda: a.skills.create(files=v2),
        error_type="conflict_error",
    )
    not_retryable("409 on a taken name", taken)
    expect_error(
        "retrieve('skill_nope')",
        anthropic.NotFoundError,
        lambda: a.skills.retrieve("skill_nope"),
        error_type="not_found_error",
    )
    bad = anthropic_client(args, key="not-a-key")
    expect_error(
        "list with a bad key",
        anthropic.AuthenticationError,
        lambda: bad.skills.list(),
        error_type="authentication_error",
    )

    # Listing: newest first, page by page with limit=1; `source`.
    newest = a.skills.create(files=[("newest/SKILL.md", skill_md("newest", "Made last."))])
    listed = [skill.id for skill in a.skills.list(limit=1)]
    expect("list(limit=1) walked: distinct ids", len(listed), len(set(listed)))
    expect(
        "list(limit=1) walked, newest first",
        [newest.id, defaulted.id, created.id],
        [i for i in listed if i not in before],
    )
    expect("list(source='custom')", set(listed), {skill.id for skill in a.skills.list(source="custom", limit=100)})
    expect("list(source='anthropic').data", [], a.skills.list(source="anthropic").data)

    # A second version.
    time.sleep(1.1)  # so updated_at advances even at a second's precision
    second = a.skills.versions.create(created.id, files=files_from_dir(skill_dir(args.dir, "v2")))
    expect(
        "versions.create",
        ("skill_version", created.id, name, description_of(v2)),
        (second.type, second.skill_id, second.name, second.description),
    )
    check(second.id.startswith("skillver_") and second.id != first.id, f"versions.create: id {second.id!r}")
    skill = a.skills.retrieve(created.id)
    expect("latest_version_id after versions.create", second.id, skill.latest_version_id)
    expect("created_at after versions.create", created.created_at, skill.created_at)
    check(
        skill.updated_at > created.updated_at, f"updated_at did not advance: {created.updated_at} → {skill.updated_at}"
    )
    for reason, files in [
        ("another top folder and name", [("renamed/SKILL.md", skill_md("renamed", "Renamed."))]),
        ("another frontmatter name", [(f"{name}/SKILL.md", skill_md("renamed", "Renamed."))]),
    ]:
        expect_error(
            f"versions.create with {reason}",
            anthropic.BadRequestError,
            lambda files=files: a.skills.versions.create(created.id, files=files),
            error_type="invalid_request_error",
        )
    expect(
        "versions.list(limit=1) walked",
        [second.id, first.id],
        [v.id for v in a.skills.versions.list(created.id, limit=1)],
    )
    expect("versions.retrieve('latest')", second.id, a.skills.versions.retrieve("latest", skill_id=created.id).id)
    old = a.skills.versions.retrieve(first.id, skill_id=created.id)
    expect("versions.retrieve(first id)", (first.id, description_of(v1)), (old.id, old.description))
    expect_zip("the first version downloaded after the second", v1, anthropic_download(a, created.id, first.id))
    expect_zip("the second version downloaded", v2, anthropic_download(a, created.id, second.id))

    # Deleting a version: it is gone (deleting the current one: skills_migration.py).
    deleted = a.skills.versions.delete(first.id, skill_id=created.id)
    expect("versions.delete", ("skill_version_deleted", first.id), (deleted.type, deleted.id))
    expect_error(
        "versions.retrieve of a deleted version",
        anthropic.NotFoundError,
        lambda: a.skills.versions.retrieve(first.id, skill_id=created.id),
        error_type="not_found_error",
    )
    expect("versions after the delete", [second.id], [v.id for v in a.skills.versions.list(created.id)])
    return {
        "skill_id": created.id,
        "name": name,
        "version_id": second.id,
        "defaulted_id": defaulted.id,
        "newest_id": newest.id,
    }


def scenario_anthropic_beta(args: argparse.Namespace) -> dict[str, Any]:
    a = anthropic_client(args)
    beta = {"betas": [BETA]}
    name, v1 = read_skill(args.dir, "v1")
    _, v2 = read_skill(args.dir, "v2")
    digits = re.compile(r"\d{16}")

    created = raw(a.beta.skills.with_raw_response.create(files=v1, **beta))
    expect("beta create: type", "skill", created.get("type"))
    check(str(created.get("id")).startswith("skill_"), f"beta create: id {created}")
    check(digits.fullmatch(str(created.get("latest_version"))) is not None, f"beta create: latest_version {created}")
    expect("beta create: source", "custom", created.get("source"))
    # Nullable in the beta schema; when set, the default is the skill's name, as GA's display_name.
    check("display_title" in created, f"beta create: no display_title in {created}")
    check(created["display_title"] in (name, None), f"beta create: display_title {created['display_title']!r}")
    skill_id, first = created["id"], created["latest_version"]

    # Without the header, the same skill in GA shape: the shape follows the header only.
    ga = raw(a.beta.skills.with_raw_response.retrieve(skill_id))
    expect("retrieve without the beta header: display_name", name, ga.get("display_name"))
    expect("retrieve without the beta header: source", {"type": "custom"}, ga.get("source"))
    check(str(ga.get("latest_version_id")).startswith("skillver_"), f"retrieve without the beta header: {ga}")

    second_version = raw(a.beta.skills.versions.with_raw_response.create(skill_id, files=v2, **beta))
    expect(
        "beta versions.create",
        ("skill_version", skill_id, name, name, description_of(v2)),
        tuple(second_version.get(k) for k in ("type", "skill_id", "name", "directory", "description")),
    )
    second = str(second_version.get("version"))
    check(
        digits.fullmatch(second) is not None and second > first,
        f"beta versions.create: version {second!r} after {first!r}",
    )
    expect(
        "beta retrieve: latest_version",
        second,
        raw(a.beta.skills.with_raw_response.retrieve(skill_id, **beta)).get("latest_version"),
    )

    listed = raw(a.beta.skills.versions.with_raw_response.list(skill_id, **beta))["data"]
    expect("beta versions.list: versions, newest first", [second, first], [v.get("version") for v in listed])
    expect("beta versions.list: directories", [name, name], [v.get("directory") for v in listed])
    ga_ids = [v.id for v in a.skills.versions.list(skill_id)]
    expect("GA versions.list: as many versions as the beta one", 2, len(ga_ids))

    old = raw(a.beta.skills.versions.with_raw_response.retrieve(first, skill_id=skill_id, **beta))
    expect(
        "beta versions.retrieve(first)",
        (first, description_of(v1), name),
        (old.get("version"), old.get("description"), old.get("directory")),
    )
    expect_zip("beta download of the first version", v1, anthropic_download(a, skill_id, first, **beta))
    expect_zip("beta download of the second version", v2, anthropic_download(a, skill_id, second, **beta))

    deleted = raw(a.beta.skills.versions.with_raw_response.delete(first, skill_id=skill_id, **beta))
    expect("beta versions.delete: type", "skill_version_deleted", deleted.get("type"))
    # The beta answers with the number it was given; the GA id of that version is accepted too.
    check(
        deleted.get("id") in (first, ga_ids[1]), f"beta versions.delete: id {deleted.get('id')!r}, expected {first!r}"
    )
    expect_error(
        "beta versions.retrieve of a deleted version",
        anthropic.NotFoundError,
        lambda: a.beta.skills.versions.retrieve(first, skill_id=skill_id, **beta),
    )
    return {"skill_id": skill_id, "name": name, "version": second}


def scenario_openai(args: argparse.Namespace) -> dict[str, Any]:
    o = openai_client(args)
    name, v1 = read_skill(args.dir, "v1")
    _, v2 = read_skill(args.dir, "v2")
    v3, v4 = with_description(v2, name, "Third."), with_description(v2, name, "Fourth.")
    before = {skill.id for skill in o.skills.list(limit=100)}

    skill = o.skills.create(files=v1)
    expect(
        "create",
        ("skill", name, description_of(v1), "1", "1"),
        (skill.object, skill.name, skill.description, skill.default_version, skill.latest_version),
    )
    check(skill.id.startswith("skill_") and isinstance(skill.created_at, int), f"create: {skill!r}")
    expect("retrieve(id)", skill.model_dump(), o.skills.retrieve(skill.id).model_dump())
    expect_zip("content of a new skill", v1, o.skills.content.retrieve(skill.id).read())

    time.sleep(1.1)  # created_at is in seconds: the list order below is then unambiguous
    zipped_files = [("zipped/SKILL.md", skill_md("zipped", "Uploaded as a zip.")), ("zipped/notes/a.txt", b"a\n")]
    zipped = o.skills.create(files=("zipped.zip", make_zip(zipped_files), "application/zip"))
    expect("create from one zip", ("zipped", "1", "1"), (zipped.name, zipped.default_version, zipped.latest_version))
    expect_zip("content of the zip-made skill", zipped_files, o.skills.content.retrieve(zipped.id).read())

    # Refusals.
    expect_error("create() without files", openai.BadRequestError, lambda: o.skills.create())
    for reason, files in bad_layouts(skill_dir(args.dir, "v1")):
        expect_error(f"create with {reason}", openai.BadRequestError, lambda files=files: o.skills.create(files=files))
    two = make_zip([("two/SKILL.md", skill_md("two", "Two.")), ("extra/x.txt", b"x")])
    expect_error(
        "create from a zip with two top folders",
        openai.BadRequestError,
        lambda: o.skills.create(files=("two.zip", two, "application/zip")),
    )
    taken = expect_error("create of a name taken", openai.ConflictError, lambda: o.skills.create(files=v2))
    not_retryable("409 on a taken name", taken)
    missing = expect_error(
        "retrieve('skill_nope')", openai.NotFoundError, lambda: o.skills.retrieve("skill_nope"), code="not_found"
    )
    check(isinstance(missing.type, str) and missing.type != "", f"404: no error type in {missing.body!r}")
    bad = openai_client(args, key="not-a-key")
    expect_error("list with a bad key", openai.AuthenticationError, lambda: bad.skills.list())

    # Versions and the default pointer.
    version2 = o.skills.versions.create(skill.id, files=v2)
    expect(
        "versions.create",
        ("skill.version", skill.id, "2", name, description_of(v2)),
        (version2.object, version2.skill_id, version2.version, version2.name, version2.description),
    )
    check(isinstance(version2.created_at, int) and version2.id, f"versions.create: {version2!r}")
    now = o.skills.retrieve(skill.id)
    expect("after versions.create: (default, latest)", ("1", "2"), (now.default_version, now.latest_version))
    expect_zip("content keeps serving the default", v1, o.skills.content.retrieve(skill.id).read())
    expect_zip("versions.content('2')", v2, o.skills.versions.content.retrieve("2", skill_id=skill.id).read())
    version3 = o.skills.versions.create(skill.id, files=v3, default=True)
    expect("versions.create(default=True): version", "3", version3.version)
    now = o.skills.retrieve(skill.id)
    expect("after default=True: (default, latest)", ("3", "3"), (now.default_version, now.latest_version))
    expect_zip("content follows default=True", v3, o.skills.content.retrieve(skill.id).read())
    moved = o.skills.update(skill.id, default_version="2")
    expect("update(default_version='2'): (default, latest)", ("2", "3"), (moved.default_version, moved.latest_version))
    expect_zip("content after update to 2", v2, o.skills.content.retrieve(skill.id).read())
    expect_error(
        "update to version 99",
        (openai.BadRequestError, openai.NotFoundError),
        lambda: o.skills.update(skill.id, default_version="99"),
    )
    expect(
        "versions after update (no new one)",
        ["3", "2", "1"],
        [v.version for v in o.skills.versions.list(skill.id, limit=1, order="desc")],
    )
    expect(
        "versions.list(order='asc') walked",
        ["1", "2", "3"],
        [v.version for v in o.skills.versions.list(skill.id, limit=1, order="asc")],
    )
    expect(
        "versions.retrieve('2')", version2.model_dump(), o.skills.versions.retrieve("2", skill_id=skill.id).model_dump()
    )

    # Version deletes: numbers are not reused (deleting the default: skills_migration.py).
    deleted = o.skills.versions.delete("3", skill_id=skill.id)
    expect(
        "versions.delete('3')",
        (version3.id, "skill.version.deleted", True, "3"),
        (deleted.id, deleted.object, deleted.deleted, deleted.version),
    )
    expect_error(
        "versions.retrieve of a deleted version",
        openai.NotFoundError,
        lambda: o.skills.versions.retrieve("3", skill_id=skill.id),
    )
    version4 = o.skills.versions.create(skill.id, files=v4)
    expect("a version after deleting 3: version", "4", version4.version)
    now = o.skills.retrieve(skill.id)
    expect("after version 4: (default, latest)", ("2", "4"), (now.default_version, now.latest_version))
    expect_error(
        "update to the deleted version 3",
        (openai.BadRequestError, openai.NotFoundError),
        lambda: o.skills.update(skill.id, default_version="3"),
    )
    back = o.skills.update(skill.id, default_version="1")
    expect("update(default_version='1')", ("1", "4"), (back.default_version, back.latest_version))
    expect_zip("content after update to 1", v1, o.skills.content.retrieve(skill.id).read())
    expect("versions at the end", ["4", "2", "1"], [v.version for v in o.skills.versions.list(skill.id, order="desc")])

    # The skills list: paged with `after`, both orders, first_id / last_id / has_more.
    desc = [s.id for s in o.skills.list(limit=1) if s.id not in before]
    expect("list(limit=1) walked (default order desc)", [zipped.id, skill.id], desc)
    asc = [s.id for s in o.skills.list(limit=1, order="asc") if s.id not in before]
    expect("list(limit=1, order='asc') walked", [skill.id, zipped.id], asc)
    page = raw(o.skills.with_raw_response.list(limit=1))
    expect("a first page of 1: object", "list", page.get("object"))
    ids = [item["id"] for item in page["data"]]
    expect(
        "a first page of 1: (first_id, last_id, has_more)",
        (ids[0], ids[0], True),
        (page.get("first_id"), page.get("last_id"), page.get("has_more")),
    )
    page = raw(o.skills.with_raw_response.list(limit=100))
    ids = [item["id"] for item in page["data"]]
    expect(
        "one page of all: (first_id, last_id, has_more)",
        (ids[0], ids[-1], False),
        (page.get("first_id"), page.get("last_id"), page.get("has_more")),
    )
    created_at = [item["created_at"] for item in page["data"]]
    expect("created_at newest first", sorted(created_at, reverse=True), created_at)

    # Deleting a skill.
    gone = o.skills.delete(zipped.id)
    expect("delete", (zipped.id, "skill.deleted", True), (gone.id, gone.object, gone.deleted))
    expect_error(
        "retrieve of a deleted skill", openai.NotFoundError, lambda: o.skills.retrieve(zipped.id), code="not_found"
    )
    check(zipped.id not in {s.id for s in o.skills.list(limit=100)}, "a deleted skill is still listed")
    return {
        "skill_id": skill.id,
        "name": name,
        "default_version": "1",
        "versions": ["4", "2", "1"],
        "deleted": "zipped",
    }


def scenario_roundtrip(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    name, files = read_skill(args.dir, "v1")
    if args.api == "anthropic":
        skill_id = a.skills.create(files=files_from_dir(skill_dir(args.dir, "v1"))).id
    elif args.as_zip:
        skill_id = o.skills.create(files=(f"{name}.zip", make_zip(files), "application/zip")).id
    else:
        skill_id = o.skills.create(files=files).id
    latest = a.skills.retrieve(skill_id).latest_version_id
    expect_zip("Anthropic download", files, anthropic_download(a, skill_id, latest))
    expect_zip("OpenAI content", files, o.skills.content.retrieve(skill_id).read())
    expect_zip("OpenAI versions.content('1')", files, o.skills.versions.content.retrieve("1", skill_id=skill_id).read())
    return {"skill_id": skill_id, "name": name, "version_id": latest}


def scenario_delete(args: argparse.Namespace) -> dict[str, Any]:
    if args.api == "anthropic":
        a = anthropic_client(args)
        deleted = a.skills.delete(args.id)
        expect("delete", ("skill_deleted", args.id), (deleted.type, deleted.id))
        expect_error(
            "retrieve after delete",
            anthropic.NotFoundError,
            lambda: a.skills.retrieve(args.id),
            error_type="not_found_error",
        )
    else:
        o = openai_client(args)
        gone = o.skills.delete(args.id)
        expect("delete", (args.id, "skill.deleted", True), (gone.id, gone.object, gone.deleted))
        expect_error(
            "retrieve after delete", openai.NotFoundError, lambda: o.skills.retrieve(args.id), code="not_found"
        )
    return {"skill_id": args.id}


def scenario_retrieve(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    return {
        "anthropic": a.skills.retrieve(args.id).model_dump(mode="json"),
        "openai": o.skills.retrieve(args.id).model_dump(mode="json"),
    }


def scenario_cross(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    name, v1 = read_skill(args.dir, "v1")
    _, v2 = read_skill(args.dir, "v2")
    v3 = with_description(v2, name, "Third.")

    # Made through Anthropic, seen through OpenAI under the same id.
    created = a.skills.create(files=v1)
    seen = o.skills.retrieve(created.id)
    expect(
        "OpenAI retrieve of an Anthropic-made skill",
        (created.id, name, description_of(v1), "1", "1"),
        (seen.id, seen.name, seen.description, seen.default_version, seen.latest_version),
    )
    expect_zip("OpenAI content of an Anthropic-made skill", v1, o.skills.content.retrieve(created.id).read())

    # A version made through one API is the latest in the other.
    by_openai = o.skills.versions.create(created.id, files=v2)
    expect("OpenAI versions.create: version", "2", by_openai.version)
    expect(
        "Anthropic latest_version_id after an OpenAI version",
        by_openai.id,
        a.skills.retrieve(created.id).latest_version_id,
    )
    latest = a.skills.versions.retrieve("latest", skill_id=created.id)
    expect(
        "Anthropic 'latest' after an OpenAI version",
        (by_openai.id, description_of(v2)),
        (latest.id, latest.description),
    )
    by_anthropic = a.skills.versions.create(created.id, files=v3)
    expect("OpenAI latest_version after an Anthropic version", "3", o.skills.retrieve(created.id).latest_version)
    expect("OpenAI versions.retrieve('3').id", by_anthropic.id, o.skills.versions.retrieve("3", skill_id=created.id).id)
    anthropic_ids = [v.id for v in a.skills.versions.list(created.id)]
    openai_ids = [v.id for v in o.skills.versions.list(created.id, order="desc")]
    expect("the version ids of both APIs, newest first", anthropic_ids, openai_ids)
    check(len(openai_ids) == 3, f"expected 3 versions, got {openai_ids}")
    expect_zip(
        "OpenAI versions.content('2') of the OpenAI version",
        v2,
        o.skills.versions.content.retrieve("2", skill_id=created.id).read(),
    )
    expect_zip("Anthropic download of the Anthropic version", v3, anthropic_download(a, created.id, by_anthropic.id))

    # A skill PUT through /v2 is in both lists and served by both.
    dial_name = args.dial_name
    dial_files = sorted(files_from_dir(pathlib.Path(args.dir) / "dial" / dial_name))  # type: ignore[arg-type]
    by_name = {s.name: s for s in o.skills.list(limit=100)}
    check(dial_name in by_name, f"OpenAI list: expected {dial_name!r} among {sorted(by_name)}")
    dial = by_name[dial_name]
    expect("OpenAI: the /v2 skill's (default, latest)", ("1", "1"), (dial.default_version, dial.latest_version))
    check(dial.id in {s.id for s in a.skills.list(limit=100)}, f"Anthropic list: expected {dial.id!r}")
    anthropic_view = a.skills.retrieve(dial.id)
    expect(
        "Anthropic: the /v2 skill's (id, display_name)",
        (dial.id, dial_name),
        (anthropic_view.id, anthropic_view.display_name),
    )
    expect_zip("OpenAI content of the /v2 skill", dial_files, o.skills.content.retrieve(dial.id).read())
    expect_zip(
        "Anthropic download of the /v2 skill",
        dial_files,
        anthropic_download(a, dial.id, anthropic_view.latest_version_id),
    )
    return {"skill_id": created.id, "name": name, "versions": openai_ids, "dial_skill_id": dial.id}


def scenario_shared_grantee(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    name, files = read_skill(args.dir, "v1")
    skill = a.skills.retrieve(args.id)
    expect("Anthropic retrieve of a shared skill: id", args.id, skill.id)
    expect_zip("Anthropic download of a shared skill", files, anthropic_download(a, args.id, skill.latest_version_id))
    seen = o.skills.retrieve(args.id)
    expect("OpenAI retrieve of a shared skill: (id, name)", (args.id, name), (seen.id, seen.name))
    expect_zip("OpenAI content of a shared skill", files, o.skills.content.retrieve(args.id).read())
    check(
        args.id not in {s.id for s in a.skills.list(limit=100)},
        "a skill shared with the caller is in its Anthropic list",
    )
    check(
        args.id not in {s.id for s in o.skills.list(limit=100)}, "a skill shared with the caller is in its OpenAI list"
    )
    expect_error(
        "Anthropic versions.create on a read-only share",
        anthropic.PermissionDeniedError,
        lambda: a.skills.versions.create(args.id, files=files),
    )
    expect_error(
        "OpenAI versions.create on a read-only share",
        openai.PermissionDeniedError,
        lambda: o.skills.versions.create(args.id, files=files),
    )
    expect("versions after the refused creates", 1, len(list(o.skills.versions.list(args.id))))
    return {"skill_id": args.id, "name": name}


def scenario_stranger(args: argparse.Namespace) -> dict[str, Any]:
    a, o = anthropic_client(args), openai_client(args)
    expect_error(
        "Anthropic retrieve of another's skill",
        anthropic.NotFoundError,
        lambda: a.skills.retrieve(args.id),
        error_type="not_found_error",
    )
    expect_error(
        "OpenAI retrieve of another's skill", openai.NotFoundError, lambda: o.skills.retrieve(args.id), code="not_found"
    )
    expect_error("OpenAI content of another's skill", openai.NotFoundError, lambda: o.skills.content.retrieve(args.id))
    return {"skill_id": args.id}


class CountingTransport(httpx2.HTTPTransport):
    """Counts the creates (`POST …/skills`) it forwards; with `lose_first`, forwards the first one
    and then raises a read error instead of handing its answer back, as a dropped connection would."""

    def __init__(self, lose_first: bool) -> None:
        super().__init__()
        self.lose_first = lose_first
        self.creates = 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        is_create = request.method == "POST" and request.url.path.endswith("/skills")
        self.creates += is_create
        response = super().handle_request(request)
        if is_create and self.lose_first and self.creates == 1:
            response.read()
            response.close()
            raise httpx2.ReadError("the answer was lost on its way back (test transport)", request=request)
        return response


def scenario_retry(args: argparse.Namespace) -> dict[str, Any]:
    outcomes = {}
    for api in ("anthropic", "openai"):
        sdk = anthropic if api == "anthropic" else openai
        make = anthropic_client if api == "anthropic" else openai_client
        name = f"retried-{api}"
        files = [(f"{name}/SKILL.md", skill_md(name, "Sent twice.")), (f"{name}/run.py", b"print('once')\n")]

        # The first answer is lost; the SDK (max_retries=2, its default) sends the create again.
        lossy = CountingTransport(lose_first=True)
        client = make(args, max_retries=2, http_client=httpx2.Client(transport=lossy, timeout=60))
        try:
            outcomes[api] = {"created": client.skills.create(files=files).id}
        except sdk.ConflictError as error:
            not_retryable(f"{api}: 409 on the retried create", error)
            outcomes[api] = {"conflict": error.status_code}
        expect(f"{api}: creates sent (the lost one and one retry)", 2, lossy.creates)
        if api == "anthropic":
            same = [s.id for s in anthropic_client(args).skills.list(limit=100) if s.display_name == name]
        else:
            same = [s.id for s in openai_client(args).skills.list(limit=100) if s.name == name]
        expect(f"{api}: skills named {name} after the retried create", 1, len(same))
        if "created" in outcomes[api]:
            expect(f"{api}: the retried create's answer", same[0], outcomes[api]["created"])
        outcomes[api]["skill_id"] = same[0]

        # The same name with other content: 409 marked final, so sent once despite max_retries=2.
        counting = CountingTransport(lose_first=False)
        client = make(args, max_retries=2, http_client=httpx2.Client(transport=counting, timeout=60))
        other = [(f"{name}/SKILL.md", skill_md(name, "Other content."))]
        conflict = expect_error(
            f"{api}: a create conflicting with {name}",
            sdk.ConflictError,
            lambda client=client, other=other: client.skills.create(files=other),
        )
        not_retryable(f"{api}: 409 on a conflicting create", conflict)
        expect(f"{api}: requests sent for a conflicting create with max_retries=2", 1, counting.creates)
    return outcomes


SCENARIOS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "anthropic": scenario_anthropic,
    "anthropic-beta": scenario_anthropic_beta,
    "openai": scenario_openai,
    "roundtrip": scenario_roundtrip,
    "delete": scenario_delete,
    "retrieve": scenario_retrieve,
    "cross": scenario_cross,
    "shared-grantee": scenario_shared_grantee,
    "stranger": scenario_stranger,
    "retry": scenario_retry,
}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--host", required=True, help="the host's root URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--key", required=True, help="a project API key or a user's JWT (without 'Bearer ')")
    parser.add_argument("--dir", help="the skill files: v1/NAME/…, v2/NAME/…, dial/NAME/…")
    parser.add_argument("--id", help="a skill id (delete, retrieve, shared-grantee, stranger)")
    parser.add_argument("--api", choices=["anthropic", "openai"], default="anthropic", help="roundtrip, delete")
    parser.add_argument("--as-zip", action="store_true", help="roundtrip through OpenAI as one zip part")
    parser.add_argument("--dial-name", help="cross: the skill the Rust side PUT through /v2 (files in DIR/dial/NAME)")
    args = parser.parse_args()
    args.host = args.host.rstrip("/")
    return SCENARIOS[args.scenario](args)


if __name__ == "__main__":
    common.run(main)

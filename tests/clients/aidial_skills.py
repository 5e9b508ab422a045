"""Lists and reads skills with EPAM's own DIAL client, `aidial-client` (run by .venv-dial-sdk); prints one JSON line.

    python tests/clients/aidial_skills.py --base-url URL --api-key KEY --folder NAME --skill NAME --dir DIR

`--folder` is a folder of skills in the caller's bucket, `--skill` a skill in it with a directory of files
`--dir`. The client parses every answer into its own models (`SkillMetadata`, `SkillFileMetadata`), which
require what DIAL Core sends (`resourceType` on every node, for one).

Success (exit 0): {"root", "folder", "recursive", "files", "dir", "deep": <listings, each {"url", "name",
"parentPath", "nodeType", "resourceType", "items": [the same for each item], "nextToken"}>, "paged": [<file
names, one page of one at a time, following nextToken>], "skill_md": <SKILL.md's text>, "zip_bytes": <size of
the skill's ZIP>}. Failure (exit 1): {"error", "status", "body", "type"}.
"""

from __future__ import annotations

import argparse
from typing import Any

from aidial_client import Dial

import common


def node(listed: Any) -> dict[str, Any]:
    return {
        "url": listed.url,
        "name": listed.name,
        "parentPath": listed.parent_path,
        "nodeType": listed.node_type,
        "resourceType": listed.resource_type,
    }


def listing(listed: Any) -> dict[str, Any]:
    return node(listed) | {"items": [node(item) for item in listed.items or []], "nextToken": listed.next_token}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--skill", required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()

    client = Dial(base_url=args.base_url, api_key=args.api_key, max_retries=0)
    folder = client.skills / args.folder
    skill = folder / args.skill

    paged: list[str] = []
    token = None
    for _ in range(100):
        page = skill.files.list(limit=1, token=token)
        paged.extend(item.name for item in page.items or [])
        token = page.next_token
        if token is None:
            break

    return {
        "root": listing(client.skills.list()),
        "folder": listing(folder.list()),
        "recursive": listing(folder.list(recursive=True)),
        "files": listing(skill.files.list()),
        "dir": listing((skill.files / args.dir).list()),
        "deep": listing(skill.files.list(recursive=True)),
        "paged": paged,
        "skill_md": (skill.files / "SKILL.md").read().get_content().decode(),
        "zip_bytes": len(skill.download().get_content()),
    }


if __name__ == "__main__":
    common.run(main)

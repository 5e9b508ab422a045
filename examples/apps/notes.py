"""What both example applications do with the per-request key the host hands them: keep a user's
notes as skills in the folder the application declares, `skills/{current-user}/notes/`.

The key is the application's `Api-Key` for this one call. It reaches the user's bucket only where
the declaration, an admin's consent and the user's own rights all allow, and dies when the call
ends. `GET /v1/bucket` with it answers the application's appdata folder in the user's bucket,
`<user bucket>/appdata/<app>`: the user's bucket is the part before `/appdata/`.
"""

from __future__ import annotations

import re

import httpx2


class Notes:
    def __init__(self, host_url: str, key: str) -> None:
        self.host_url = host_url.rstrip("/")
        self.headers = {"Api-Key": key}

    async def _bucket(self, http: httpx2.AsyncClient) -> str:
        reply = await http.get(f"{self.host_url}/v1/bucket", headers=self.headers)
        reply.raise_for_status()
        return reply.json()["appdata"].split("/appdata/", 1)[0]

    async def save(self, name: str, text: str) -> int:
        """Writes the note `name` as a skill (a SKILL.md): the status the host answered."""
        name = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "note"
        skill_md = f"---\nname: {name}\ndescription: {text}\n---\n# {name}\n\n{text}\n"
        async with httpx2.AsyncClient(timeout=30) as http:
            bucket = await self._bucket(http)
            reply = await http.put(
                f"{self.host_url}/v2/skills/{bucket}/notes/{name}",
                headers=self.headers,
                files=[("file", ("SKILL.md", skill_md.encode(), "text/markdown"))],
            )
        return reply.status_code

    async def names(self) -> list[str]:
        """The notes kept so far (their skills' names), sorted."""
        async with httpx2.AsyncClient(timeout=30) as http:
            bucket = await self._bucket(http)
            reply = await http.get(f"{self.host_url}/v2/metadata/skills/{bucket}/notes/", headers=self.headers)
        if reply.status_code == 404:
            return []
        reply.raise_for_status()
        return sorted(item["name"] for item in reply.json().get("items", []))

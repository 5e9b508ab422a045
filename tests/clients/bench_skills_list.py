"""Benchmark (not a test): what a page of the skills list and a skill create cost at scale (issue 40).

    .venv-clients/bin/python tests/clients/bench_skills_list.py --base-url URL [URL ...] --api-key KEY
        [--skills 10000] [--rounds 41] [--seeded] [--no-create]

Each server (say the build before the creation index, then this one, each on its own fresh local store) gets
--skills skills through `PUT /v2/skills/{bucket}/s-NNNNN` (16 at a time). Then, alternating between the servers
round by round, one keep-alive client times:
  * `page`: `GET /openai/v1/skills?limit=20` (the first page, warm: one page before the rounds);
  * `after`: `GET /openai/v1/skills?limit=20&after=<the 5 000th id>` (a page in the middle);
  * `create`: `POST /anthropic/v1/skills` of a fresh one-file skill (what the index adds to a create).
Prints one JSON line: per server, the median and p90 of each in milliseconds.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import time

import httpx2


def skill_md(name: str) -> bytes:
    return f"---\nname: {name}\ndescription: Seeded for the list benchmark.\n---\n# {name}\n".encode()


def seed(client: httpx2.Client, base: str, key: str, bucket: str, count: int) -> None:
    def put(i: int) -> None:
        name = f"s-{i:05}"
        reply = client.put(
            f"{base}/v2/skills/{bucket}/{name}", headers={"Api-Key": key}, files=[("file", ("SKILL.md", skill_md(name)))]
        )
        reply.raise_for_status()

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(count)))


def timed_ms(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", nargs="+", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--seeded", action="store_true", help="the servers hold the skills already")
    parser.add_argument("--no-create", action="store_true", help="time the pages alone (no write between them)")
    args = parser.parse_args()
    headers = {"Api-Key": args.api_key}
    client = httpx2.Client(timeout=600, limits=httpx2.Limits(max_connections=32))
    middles = {}
    for base in args.base_url:
        bucket = client.get(f"{base}/v1/bucket", headers=headers).json()["bucket"]
        if not args.seeded:
            seed(client, base, args.api_key, bucket, args.skills)
        ids = []
        after = None
        while len(ids) < args.skills // 2:
            page = client.get(f"{base}/openai/v1/skills", headers=headers, params={"limit": 100, **({"after": after} if after else {})}).json()
            ids += [skill["id"] for skill in page["data"]]
            after = ids[-1]
        middles[base] = ids[args.skills // 2 - 1]
    kinds = ["page", "after"] + ([] if args.no_create else ["create"])
    times: dict[str, dict[str, list[float]]] = {base: {kind: [] for kind in kinds} for base in args.base_url}
    for round_ in range(args.rounds):
        for base in args.base_url:
            page = f"{base}/openai/v1/skills"
            times[base]["page"].append(timed_ms(lambda: client.get(page, headers=headers, params={"limit": 20}).raise_for_status()))
            middle = {"limit": 20, "after": middles[base]}
            times[base]["after"].append(timed_ms(lambda: client.get(page, headers=headers, params=middle).raise_for_status()))
            if args.no_create:
                continue
            name = f"bench-{round_:03}"
            files = [("files[]", (f"{name}/SKILL.md", skill_md(name)))]
            create = f"{base}/anthropic/v1/skills"
            times[base]["create"].append(timed_ms(lambda: client.post(create, headers=headers, files=files).raise_for_status()))
    report = {
        base: {
            what: {"median_ms": round(statistics.median(values), 2), "p90_ms": round(sorted(values)[int(len(values) * 0.9)], 2)}
            for what, values in kinds.items()
        }
        for base, kinds in times.items()
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()

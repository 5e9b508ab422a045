"""Benchmark (not a test): what the hosted skills APIs add over /v2 (issue 27).

    .venv-clients/bin/python tests/clients/bench_skills_api.py --base-url URL --api-key KEY [--rounds N]

Each round, for a fresh 10-file skill (~120 KiB: SKILL.md, nine files of 1–24 KiB, one binary):
  * `v2`: PUT /v2/skills/{bucket}/{name} (multipart), GET /v2/metadata/… , GET /v2/… (the ZIP);
  * `facade`: POST /anthropic/v1/skills (multipart files[]), GET /anthropic/v1/skills/{id},
    GET …/versions/latest/content (the ZIP) — the same bytes on the wire, through one HTTP client
    (httpx2, keep-alive), so the difference is the server's;
  * `anthropic-sdk` and `openai-sdk`: the same three calls through the official SDKs (their own
    client and parsing included).
Rounds alternate the four so drift hits all alike. Prints one JSON line: the median and p90 of a
round (create + retrieve + download) in milliseconds for each, each one's ratio to `v2`, and the
median CPU time the Python client itself spent per round (what the SDKs add on the client side).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import anthropic
import httpx2
import openai


def skill_files(name: str) -> list[tuple[str, bytes]]:
    md = f"---\nname: {name}\ndescription: A benchmark skill with ten files.\n---\n# {name}\n".encode()
    files = [("SKILL.md", md)]
    for n in range(1, 9):
        files.append((f"docs/part-{n}.md", (f"Part {n} of the reference. " * (40 * n)).encode()))
    files.append(("assets/blob.bin", os.urandom(16 << 10)))
    return files


def timed(run) -> tuple[float, float]:
    """Wall time and this client's own CPU time of `run`, in milliseconds."""
    start, cpu = time.perf_counter(), time.process_time()
    run()
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    base, key = args.base_url.rstrip("/"), args.api_key
    http = httpx2.Client(base_url=base, headers={"Api-Key": key}, timeout=60)
    bucket = http.get("/v1/bucket").json()["bucket"]
    sdk_a = anthropic.Anthropic(base_url=f"{base}/anthropic", api_key=key, max_retries=0)
    sdk_o = openai.OpenAI(base_url=f"{base}/openai/v1", api_key=key, max_retries=0)
    run_id = int(time.time())

    def v2(name: str) -> None:
        files = [("files", (path, content)) for path, content in skill_files(name)]
        http.put(f"/v2/skills/{bucket}/{name}", files=files).raise_for_status()
        http.get(f"/v2/metadata/skills/{bucket}/{name}").raise_for_status()
        assert len(http.get(f"/v2/skills/{bucket}/{name}").content) > 0

    def facade(name: str) -> None:
        files = [("files[]", (f"{name}/{path}", content)) for path, content in skill_files(name)]
        created = http.post("/anthropic/v1/skills", files=files)
        created.raise_for_status()
        skill_id = created.json()["id"]
        http.get(f"/anthropic/v1/skills/{skill_id}").raise_for_status()
        assert len(http.get(f"/anthropic/v1/skills/{skill_id}/versions/latest/content").content) > 0

    def anthropic_sdk(name: str) -> None:
        skill = sdk_a.skills.create(files=[(f"{name}/{path}", content) for path, content in skill_files(name)])
        sdk_a.skills.retrieve(skill.id)
        assert len(sdk_a.beta.skills.versions.download("latest", skill_id=skill.id).read()) > 0

    def openai_sdk(name: str) -> None:
        skill = sdk_o.skills.create(files=[(f"{name}/{path}", content) for path, content in skill_files(name)])
        sdk_o.skills.retrieve(skill.id)
        assert len(sdk_o.skills.content.retrieve(skill.id).read()) > 0

    ways = {"v2": v2, "facade": facade, "anthropic-sdk": anthropic_sdk, "openai-sdk": openai_sdk}
    samples: dict[str, list[float]] = {way: [] for way in ways}
    client_cpu: dict[str, list[float]] = {way: [] for way in ways}
    for warmup in range(3):
        for way, run in ways.items():
            run(f"warm-{run_id}-{way}-{warmup}")
    for round_ in range(args.rounds):
        for way, run in ways.items():
            wall, cpu = timed(lambda: run(f"b-{run_id}-{way}-{round_}"))
            samples[way].append(wall)
            client_cpu[way].append(cpu)
    baseline = statistics.median(samples["v2"])
    result = {}
    for way, times in samples.items():
        median = statistics.median(times)
        result[way] = {
            "median_ms": round(median, 2),
            "p90_ms": round(statistics.quantiles(times, n=10)[-1], 2),
            "ratio_to_v2": round(median / baseline, 3),
            "client_cpu_ms": round(statistics.median(client_cpu[way]), 2),
        }
    print(json.dumps({"rounds": args.rounds, "files": 10} | result))


if __name__ == "__main__":
    main()

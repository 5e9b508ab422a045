"""Checks HTTP exchanges recorded against the running server with the OpenAPI document it serves.

    openapi_conformance.py DOCUMENT.json EXCHANGES.json

Each exchange is {"method", "path" (the documented template), "status", "contentType", "request" (the JSON
body sent, or null), "response" (the JSON body answered, or null)}. The operation must be documented; a JSON
request must match the operation's JSON request body schema; the status must be documented (errors may fall
to `default`); a non-empty answer's media type must be one the status documents, and a JSON answer must
match its schema, with no field the schema does not name. Prints every mismatch and exits 1, or prints "OK <n> exchanges".
"""

import json
import sys

from jsonschema import Draft202012Validator


def close(schema):
    """The schema with every object that lists its properties closed to others: an answer carrying a field the
    document does not name is a mismatch. (Requests stay open: the server ignores fields it does not know.)"""
    if isinstance(schema, list):
        return [close(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: close(value) for key, value in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema and "unevaluatedProperties" not in schema:
        closed["unevaluatedProperties"] = False
    return closed


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        document = json.load(f)
    with open(sys.argv[2], encoding="utf-8") as f:
        exchanges = json.load(f)
    problems: list[str] = []

    def check(schema: dict, instance, what: str, closed: bool) -> None:
        # The schema is checked as a root that carries the document's components, so `#/components/...`
        # references resolve as they do in the document.
        root = {**schema, "components": document.get("components", {})}
        if closed:
            root = close(root)
        for error in Draft202012Validator(root).iter_errors(instance):
            at = "/".join(str(part) for part in error.absolute_path) or "(the body)"
            problems.append(f"{what}: {error.message} at {at}")

    for exchange in exchanges:
        method, path, status = exchange["method"].lower(), exchange["path"], exchange["status"]
        name = f"{method.upper()} {path} -> {status}"
        operation = document["paths"].get(path, {}).get(method)
        if operation is None:
            problems.append(f"{name}: the operation is not documented")
            continue

        if exchange.get("request") is not None:
            schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if schema is None:
                problems.append(f"{name}: a JSON body was sent, none is documented")
            else:
                check(schema, exchange["request"], f"{name}, request", closed=False)

        responses = operation["responses"]
        response = responses.get(str(status))
        if response is None and status >= 400:
            response = responses.get("default")
        if response is None:
            problems.append(f"{name}: the status is not documented (documented: {sorted(responses)})")
            continue
        content = response.get("content", {})
        media_type = (exchange.get("contentType") or "").split(";")[0].strip()
        if not media_type:
            continue  # an empty answer (`?accept=true`, a 304): nothing to check against a schema
        documented = {key.split(";")[0].strip(): value for key, value in content.items()}
        # The most specific documented range that covers the answer: `type/sub`, `type/*`, `*/*`.
        ranges = [media_type, media_type.split("/")[0] + "/*", "*/*"]
        matched = next((r for r in ranges if r in documented), None)
        if matched is None:
            problems.append(f"{name}: answered {media_type}, documented: {sorted(documented) or 'no body'}")
            continue
        if matched == "application/json":
            schema = documented[matched].get("schema")
            if schema is not None:
                check(schema, exchange["response"], f"{name}, response", closed=True)

    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"OK {len(exchanges)} exchanges")
    return 0


if __name__ == "__main__":
    sys.exit(main())

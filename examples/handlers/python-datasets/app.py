"""The `datasets` type: a folder holding a dataset card and JSON Lines data.

    my-dataset/
      dataset.json        the card: name, description, license, columns
      README.md           optional
      data/*.jsonl        one JSON object per line, with the card's columns

`dataset.json`:

    {
      "name": "support-tickets",
      "description": "Tickets the support team closed in 2026.",
      "license": "CC-BY-4.0",
      "columns": [
        {"name": "id", "type": "integer"},
        {"name": "text", "type": "string"},
        {"name": "tags", "type": "array", "required": false}
      ]
    }

A resource is valid when the card is well-formed and every line of every
`data/**.jsonl` file is a JSON object with every required column, of its
type. Listings show the card's name, description and license, the row count,
the columns and the number of data files. `dataset.json` cannot be deleted.
"""

import json

import wit_world
from componentize_py_types import Err
from dial_handler import FileError, FileSet, Problems
from wit_world.imports.types import Description, Limits, Mutation, Problem

VERSION = "0.1.0"
CARD = "dataset.json"
CARD_MAX_BYTES = 64 << 10
# One row; a longer line is a mistake (a whole file on one line).
LINE_MAX_BYTES = 256 << 10
MAX_COLUMNS = 200
# Problems about one data file before the rest of it is skipped.
MAX_PROBLEMS_PER_FILE = 10
TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def type_matches(value, column_type):
    # JSON's true/false are Python bools, which are also ints.
    if isinstance(value, bool):
        return column_type == "boolean"
    return isinstance(value, TYPES[column_type])


def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    for name, kinds in (("number", (float,)), ("string", (str,)), ("object", (dict,)), ("array", (list,))):
        if isinstance(value, kinds):
            return name
    return type(value).__name__


def is_data_file(path):
    return path.startswith("data/") and path.endswith(".jsonl")


def read_card(files, problems):
    """The card's fields, or None after reporting why there is none."""
    if files.entry(CARD) is None:
        nested = [path for path in files.paths() if path.endswith("/" + CARD)]
        hint = f" (found {nested[0]}: upload the folder's contents, not the folder)" if nested else ""
        problems.error(f"{CARD} is missing: every dataset has a card at its root{hint}", CARD)
        return None
    try:
        card = files.read_json(CARD, CARD_MAX_BYTES)
    except FileError as error:
        problems.error(error.problem.message, error.problem.path)
        return None
    if not isinstance(card, dict):
        problems.error(f"{CARD} must hold a JSON object, not {json_type(card)}", CARD)
        return None
    for field, limit in (("name", 128), ("description", 1024), ("license", 64)):
        value = card.get(field)
        if not isinstance(value, str) or not value.strip():
            problems.error(f"`{field}` must be a non-empty string", CARD)
        elif len(value) > limit:
            problems.error(f"`{field}` is {len(value)} characters; at most {limit} are allowed", CARD)
    columns = card.get("columns")
    if not isinstance(columns, list) or not columns:
        problems.error(f'`columns` must be a non-empty list of {{"name": …, "type": …}} objects', CARD)
        return None
    if len(columns) > MAX_COLUMNS:
        problems.error(f"{len(columns)} columns; at most {MAX_COLUMNS} are allowed", CARD)
        return None
    checked = []
    seen = set()
    for index, column in enumerate(columns):
        where = f"columns[{index}]"
        if not isinstance(column, dict):
            problems.error(f"{where} must be an object with `name` and `type`", CARD)
            continue
        name = column.get("name")
        column_type = column.get("type")
        required = column.get("required", True)
        if not isinstance(name, str) or not name:
            problems.error(f"{where}: `name` must be a non-empty string", CARD)
            continue
        if name in seen:
            problems.error(f"{where}: the column `{name}` is declared twice", CARD)
        seen.add(name)
        if column_type not in TYPES:
            problems.error(f"{where} (`{name}`): `type` must be one of {', '.join(TYPES)}, not {column_type!r}", CARD)
            continue
        if not isinstance(required, bool):
            problems.error(f"{where} (`{name}`): `required` must be true or false", CARD)
            continue
        checked.append((name, column_type, required))
    card["columns"] = checked
    return card


def check_rows(files, path, columns, problems):
    """Checks every line of one data file; returns its row count."""
    declared = {name for name, _, _ in columns}
    found = 0
    rows = 0
    extra_reported = False

    def report(message):
        nonlocal found
        found += 1
        problems.error(message, path)

    try:
        for number, raw in files.lines(path, LINE_MAX_BYTES):
            if found >= MAX_PROBLEMS_PER_FILE:
                problems.error(f"more problems after line {number}; fix the ones above first", path)
                break
            if not raw.strip():
                report(f"line {number} is blank; JSON Lines holds one object per line")
                continue
            try:
                row = json.loads(raw)
            except UnicodeDecodeError:
                report(f"line {number} is not valid UTF-8")
                continue
            except RecursionError:
                report(f"line {number} nests too deeply")
                continue
            except json.JSONDecodeError as error:
                report(f"line {number} is not valid JSON: {error.msg} at column {error.colno}")
                continue
            if not isinstance(row, dict):
                report(f"line {number} must be a JSON object, not {json_type(row)}")
                continue
            rows += 1
            for name, column_type, required in columns:
                value = row.get(name)
                if value is None:
                    if required:
                        report(f"line {number} has no `{name}`, a required column")
                elif not type_matches(value, column_type):
                    report(f"line {number}: `{name}` must be {column_type}, not {json_type(value)}")
            if not extra_reported:
                extra = sorted(key for key in row if key not in declared)
                if extra:
                    extra_reported = True
                    problems.warning(
                        f"line {number} has columns the card does not declare ({', '.join(extra[:5])}); "
                        f"add them to {CARD}",
                        path,
                    )
            if problems.full():
                break
    except FileError as error:
        problems.error(error.problem.message, error.problem.path)
    return rows


def inspect(files):
    """The problems and the metadata of a whole file set: one read, one parse."""
    problems = Problems()
    card = read_card(files, problems)
    data = sorted(path for path in files.paths() if is_data_file(path))
    for path in files.paths():
        if path != CARD and path != "README.md" and not is_data_file(path):
            problems.warning(f"{path} is not part of a dataset (dataset.json, README.md, data/*.jsonl) and is not checked", path)
    if not data:
        problems.error("a dataset needs at least one data file: data/<name>.jsonl", None)
    rows = 0
    if card is not None and card["columns"] and not problems.errors:
        for path in data:
            rows += check_rows(files, path, card["columns"], problems)
            if problems.full():
                break
    metadata = []
    if card is not None:
        names = ", ".join(name for name, _, _ in card["columns"])
        metadata = [
            ("name", card.get("name")),
            ("description", card.get("description")),
            ("license", card.get("license")),
            ("rows", rows),
            ("columns", names if len(names) <= 200 else names[:199] + "…"),
            ("files", len(data)),
        ]
    return card, problems, metadata


class WitWorld(wit_world.WitWorld):
    def describe(self):
        return Description(
            type_name="dataset",
            group="datasets",
            display_name="Dataset",
            handler_version=VERSION,
            # Every byte is read and parsed on each commit, within the host's
            # CPU deadline (200 ms by default: about 10 000 short rows, see
            # docs/benchmarks.md). An operator who raises `cpu_deadline_ms`
            # raises `[handlers.types.datasets] max_total_bytes` with it.
            limits=Limits(max_file_bytes=1 << 20, max_files=1000, max_total_bytes=1 << 20),
        )

    def check(self, resource, entries):
        card, problems, metadata = inspect(FileSet(entries))
        if card is not None and isinstance(card.get("name"), str) and card["name"] != resource.name:
            problems.warning(
                f"{CARD} names the dataset `{card['name']}` but it is stored as `{resource.name}`", CARD
            )
        return problems.checked(metadata)

    def validate(self, resource, entries):
        warnings, _ = self.check(resource, entries)
        return warnings

    def build_marker_metadata(self, resource, entries):
        _, metadata = self.check(resource, entries)
        return metadata

    def validate_file_mutation(self, path, op):
        if op == Mutation.DELETE and path == CARD:
            raise Err(Problem(path=CARD, message=f"{CARD} cannot be deleted: it describes the dataset; replace it instead"))

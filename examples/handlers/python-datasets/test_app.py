"""The datasets rules, natively: CPython with the generated bindings and an
in-memory `files.read` standing in for the host (as the Rust SDK's
`MemoryFiles` does).

    componentize-py -d ../../../wit -w handler bindings /tmp/dial-bindings
    PYTHONPATH=/tmp/dial-bindings python3 -m unittest test_app
"""

import unittest

from componentize_py_types import Err
from wit_world.imports import files as host_files
from wit_world.imports.types import FileEntry, Mutation, ReadError_BudgetExceeded, ReadError_NotFound, ResourceInfo

import app

CARD = b"""{"name": "tickets", "description": "Support tickets.", "license": "CC-BY-4.0",
  "columns": [{"name": "id", "type": "integer"}, {"name": "text", "type": "string"},
              {"name": "score", "type": "number", "required": false}]}"""


class MemoryFiles:
    """A file set in memory that answers like the host's `files.read`: at
    most 1 MiB a read, `not-found`, and a read budget."""

    def __init__(self, files, budget=16 << 20):
        self.files = files
        self.budget = budget
        self.bytes_read = 0
        self.reads = 0

    def entries(self):
        return [FileEntry(path=path, size=len(data)) for path, data in self.files.items()]

    def read(self, path, offset, length):
        if path not in self.files:
            raise Err(ReadError_NotFound())
        chunk = self.files[path][offset : offset + min(length, 1 << 20)]
        if self.bytes_read + len(chunk) > self.budget:
            raise Err(ReadError_BudgetExceeded(self.budget))
        self.bytes_read += len(chunk)
        self.reads += 1
        return chunk


def check(files, name="tickets"):
    """`(warnings, metadata)` or `("invalid", problems)`."""
    host_files.read = files.read
    try:
        return app.WitWorld().check(ResourceInfo(name=name, path=f"team/{name}"), files.entries())
    except Err as refusal:
        return "invalid", [(problem.path, problem.message) for problem in refusal.value]


class DatasetRules(unittest.TestCase):
    def test_a_valid_dataset_gives_its_metadata(self):
        files = MemoryFiles({"dataset.json": CARD, "data/a.jsonl": b'{"id": 1, "text": "x", "score": 0.5}\n{"id": 2, "text": "y"}\n'})
        warnings, metadata = check(files)
        self.assertEqual(warnings, [])
        self.assertEqual(
            metadata,
            [("name", "tickets"), ("description", "Support tickets."), ("license", "CC-BY-4.0"), ("rows", "2"),
             ("columns", "id, text, score"), ("files", "1")],
        )

    def test_every_bad_line_is_named(self):
        data = b'{"id": 1, "text": "x"}\n{"id": true, "text": "x"}\n\n{"id": 3}\n{"id": 4, "text": "x", "score": "high"}\n'
        verdict, problems = check(MemoryFiles({"dataset.json": CARD, "data/a.jsonl": data}))
        self.assertEqual(verdict, "invalid")
        self.assertEqual(
            problems,
            [
                ("data/a.jsonl", "line 2: `id` must be integer, not boolean"),
                ("data/a.jsonl", "line 3 is blank; JSON Lines holds one object per line"),
                ("data/a.jsonl", "line 4 has no `text`, a required column"),
                ("data/a.jsonl", "line 5: `score` must be number, not string"),
            ],
        )

    def test_a_bad_card_is_reported_field_by_field(self):
        card = b'{"name": "", "license": 3, "columns": [{"name": "id", "type": "int"}, {"name": "id", "type": "string"}]}'
        verdict, problems = check(MemoryFiles({"dataset.json": card, "data/a.jsonl": b"{}\n"}))
        self.assertEqual(verdict, "invalid")
        messages = [message for _, message in problems]
        self.assertIn("`name` must be a non-empty string", messages)
        self.assertIn("`description` must be a non-empty string", messages)
        self.assertIn("`license` must be a non-empty string", messages)
        self.assertIn("columns[0] (`id`): `type` must be one of string, integer, number, boolean, object, array, not 'int'", messages)
        self.assertIn("columns[1]: the column `id` is declared twice", messages)

    def test_lines_are_read_in_chunks_across_boundaries(self):
        rows = b"".join(b'{"id": %d, "text": "%s"}\n' % (i, b"x" * 50) for i in range(40_000))
        files = MemoryFiles({"dataset.json": CARD, "data/big.jsonl": rows})
        _, metadata = check(files)
        self.assertIn(("rows", "40000"), metadata)
        self.assertGreater(files.reads, 2, "read in 1 MiB chunks")
        self.assertEqual(files.bytes_read, len(CARD) + len(rows), "each byte read once")

    def test_a_line_longer_than_the_cap_stops_the_file(self):
        line = b'{"id": 1, "text": "' + b"x" * (300 << 10) + b'"}\n'
        verdict, problems = check(MemoryFiles({"dataset.json": CARD, "data/a.jsonl": line}))
        self.assertEqual(verdict, "invalid")
        self.assertEqual(problems, [("data/a.jsonl", "line 1 is longer than 256.0 KiB; split it or shorten it")])

    def test_the_read_budget_is_a_problem_not_a_crash(self):
        rows = b'{"id": 1, "text": "x"}\n' * 1000
        verdict, problems = check(MemoryFiles({"dataset.json": CARD, "data/a.jsonl": rows}, budget=len(CARD) + 100))
        self.assertEqual(verdict, "invalid")
        self.assertIn("read budget of", problems[0][1])

    def test_no_card_and_no_data_are_said(self):
        verdict, problems = check(MemoryFiles({"tickets/dataset.json": CARD}))
        self.assertEqual(verdict, "invalid")
        self.assertIn("found tickets/dataset.json", problems[0][1])
        self.assertIn("at least one data file", problems[1][1])

    def test_the_card_cannot_be_deleted(self):
        with self.assertRaises(Err) as refused:
            app.WitWorld().validate_file_mutation("dataset.json", Mutation.DELETE)
        self.assertIn("dataset.json cannot be deleted", refused.exception.value.message)
        self.assertIsNone(app.WitWorld().validate_file_mutation("dataset.json", Mutation.PUT))
        self.assertIsNone(app.WitWorld().validate_file_mutation("data/a.jsonl", Mutation.DELETE))


if __name__ == "__main__":
    unittest.main()

"""What the Rust `dial-handler-sdk` gives a handler, for Python handlers.

Copy this file next to your `app.py`. It uses only the standard library and
the bindings `componentize-py` generates for `wit/handler.wit` (the
`wit_world` package), so it builds into any handler:

- `Problems`: errors and warnings with paths, capped (50 of each plus one
  "more problems" note), turned into what an export returns or raises.
- `FileSet`: the listing (`entries`, `entry`, `paths`) plus reads through the
  `files` import in chunks of at most 1 MiB (the host's cap per read):
  `read_all`, `read_text`, `read_json` (size-capped, UTF-8-checked, errors as
  problems with line and column) and `lines` (a JSONL/CSV file streamed line
  by line, each line capped, never the whole file in memory).
- `frontmatter`: the `---` block at the top of a Markdown file, as flat
  `key: value` pairs (no YAML library in the standard library; see
  docs/handlers.md for a full YAML parser).
- `log`: `debug`, `info`, `warn` over the `log` import.

Every helper raises `FileError`, whose `.problem` names the file and says
what to do; nothing here reads a byte the rules do not ask for.
"""

import json

from componentize_py_types import Err
from wit_world.imports import files as _files
from wit_world.imports import log as _log
from wit_world.imports.types import (
    Problem,
    ReadError_BudgetExceeded,
    ReadError_NotFound,
)

# The host shortens any read to 1 MiB.
CHUNK = 1 << 20
MAX_PROBLEMS = 50


class Problems:
    """Collects errors and warnings; report every problem at once."""

    def __init__(self, cap=MAX_PROBLEMS):
        self.errors = []
        self.warnings = []
        self._cap = cap
        self._dropped_errors = 0
        self._dropped_warnings = 0

    def error(self, message, path=None):
        if len(self.errors) < self._cap:
            self.errors.append(Problem(path=path, message=message))
        else:
            self._dropped_errors += 1

    def warning(self, message, path=None):
        if len(self.warnings) < self._cap:
            self.warnings.append(Problem(path=path, message=message))
        else:
            self._dropped_warnings += 1

    def full(self):
        """True once errors are capped: stop looking for more."""
        return len(self.errors) >= self._cap

    def _all_errors(self):
        errors = list(self.errors)
        if self._dropped_errors:
            errors.append(Problem(path=None, message=f"… and {self._dropped_errors} more problems"))
        return errors

    def _all_warnings(self):
        warnings = list(self.warnings)
        if self._dropped_warnings:
            warnings.append(Problem(path=None, message=f"… and {self._dropped_warnings} more warnings"))
        return warnings

    def verdict(self):
        """What `validate` returns: the warnings, or raises `Err(errors + warnings)`."""
        if self.errors:
            raise Err(self._all_errors() + self._all_warnings())
        return self._all_warnings()

    def metadata(self, pairs):
        """What `build_marker_metadata` returns: the pairs, or raises `Err`."""
        if self.errors:
            raise Err(self._all_errors() + self._all_warnings())
        return [(key, str(value)) for key, value in pairs]

    def checked(self, pairs):
        """What `check` returns: `(warnings, metadata)`, or raises `Err`."""
        if self.errors:
            raise Err(self._all_errors() + self._all_warnings())
        return (self._all_warnings(), [(key, str(value)) for key, value in pairs])


class FileError(Exception):
    """A file that could not be read as asked; `.problem` says why."""

    def __init__(self, path, message):
        super().__init__(message)
        self.problem = Problem(path=path, message=message)


def human_size(size):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} bytes"


class FileSet:
    """The files of one call: the host's listing and `files.read`."""

    def __init__(self, entries):
        self._entries = {entry.path: entry.size for entry in entries}

    def paths(self):
        return list(self._entries)

    def entry(self, path):
        """The listed size of `path`, or None."""
        return self._entries.get(path)

    def read(self, path, offset, length):
        """One read (at most 1 MiB); `FileError` on a host refusal."""
        try:
            return _files.read(path, offset, min(length, CHUNK))
        except Err as refusal:
            error = refusal.value
            if isinstance(error, ReadError_NotFound):
                raise FileError(path, f"{path} is missing") from None
            if isinstance(error, ReadError_BudgetExceeded):
                raise FileError(
                    path,
                    f"{path} could not be read: the handler's read budget of {error.value} bytes is used up",
                ) from None
            raise FileError(path, f"{path} could not be read: {error.value}") from None

    def read_all(self, path, max_bytes):
        """The whole file, refused before a byte is read when it is listed larger than `max_bytes`."""
        size = self.entry(path)
        if size is None:
            raise FileError(path, f"{path} is missing")
        if size > max_bytes:
            raise FileError(path, f"{path} is {human_size(size)}; at most {human_size(max_bytes)} is allowed")
        parts = []
        offset = 0
        while offset < size:
            chunk = self.read(path, offset, size - offset)
            if not chunk:
                break
            parts.append(chunk)
            offset += len(chunk)
        return b"".join(parts)

    def read_text(self, path, max_bytes):
        data = self.read_all(path, max_bytes)
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            line = data[: error.start].count(b"\n") + 1
            raise FileError(
                path,
                f"{path} is not valid UTF-8 text: the first invalid byte is at byte offset {error.start} (line {line})",
            ) from None

    def read_json(self, path, max_bytes):
        """The parsed JSON of `path`; syntax errors name the line and column."""
        text = self.read_text(path, max_bytes)
        try:
            return json.loads(text)
        except RecursionError:
            raise FileError(path, f"{path} nests too deeply") from None
        except json.JSONDecodeError as error:
            raise FileError(
                path, f"{path} is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}"
            ) from None

    @staticmethod
    def _long_line(path, number, max_line_bytes):
        return FileError(path, f"line {number} is longer than {human_size(max_line_bytes)}; split it or shorten it")

    def lines(self, path, max_line_bytes, chunk=CHUNK):
        """Yields `(line_number, bytes)` for each line of `path`, read in
        chunks; a line longer than `max_line_bytes` raises `FileError`. Only
        one chunk and one line are held at a time."""
        size = self.entry(path)
        if size is None:
            raise FileError(path, f"{path} is missing")
        offset = 0
        pending = b""
        number = 0
        while offset < size:
            data = self.read(path, offset, min(chunk, size - offset))
            if not data:
                break
            offset += len(data)
            pending += data
            start = 0
            while True:
                end = pending.find(b"\n", start)
                if end < 0:
                    break
                number += 1
                if end - start > max_line_bytes:
                    raise self._long_line(path, number, max_line_bytes)
                yield number, pending[start:end]
                start = end + 1
            pending = pending[start:]
            if len(pending) > max_line_bytes:
                raise self._long_line(path, number + 1, max_line_bytes)
        if pending:
            number += 1
            yield number, pending


def frontmatter(text, path):
    """The `key: value` pairs between the leading `---` lines of a Markdown
    file (flat scalars only; quotes stripped). Raises `FileError`."""
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        raise FileError(path, f"{path} must start with frontmatter: a line `---`, `key: value` lines, a line `---`")
    fields = {}
    for number, line in enumerate(lines[1:], start=2):
        if line.strip() == "---":
            return fields
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, colon, value = line.partition(":")
        if not colon or not key.strip() or key != key.strip():
            raise FileError(path, f"{path}: line {number} is not `key: value`")
        if key in fields:
            raise FileError(path, f"{path}: line {number}: `{key}` is given twice")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        fields[key] = value
    raise FileError(path, f"{path}: the frontmatter has no closing `---` line")


def debug(message):
    _log.emit(_log.Level.DEBUG, message)


def info(message):
    _log.emit(_log.Level.INFO, message)


def warn(message):
    _log.emit(_log.Level.WARN, message)

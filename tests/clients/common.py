"""What the client scripts share: the one-JSON-line output contract and the hold/release helper."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from collections.abc import Callable
from typing import Any, NoReturn

# When the first text delta has not arrived after this long, the script releases the upstream
# anyway: a host that buffers the stream then gives `first_before_release: false` instead of a hang.
RELEASE_FALLBACK_SECONDS = 10.0


def headers(pairs: list[str]) -> dict[str, str]:
    """`--header NAME=VALUE` arguments as a dict."""
    parsed = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            fail(f"--header wants NAME=VALUE, got {pair!r}")
        parsed[name] = value
    return parsed


def report_of(text: str) -> Any:
    """The mock app's report when the text is one (None otherwise): saves every test a parse."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def succeed(result: dict[str, Any]) -> NoReturn:
    print(json.dumps(result), flush=True)
    sys.exit(0)


def fail(message: str, status: int | None = None, body: Any = None, kind: str | None = None) -> NoReturn:
    print(json.dumps({"error": message, "status": status, "body": body, "type": kind}), flush=True)
    sys.exit(1)


class Release:
    """POSTs the mock app's release URL once: on the first text delta, or after the fallback delay."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.released = False
        self.first_before_release: bool | None = None if url is None else False
        self._lock = threading.Lock()
        self._timer = threading.Timer(RELEASE_FALLBACK_SECONDS, self._post) if url else None
        if self._timer:
            self._timer.daemon = True
            self._timer.start()

    def on_delta(self) -> None:
        if self.url is None or self.released:
            return
        with self._lock:
            if not self.released:
                self.first_before_release = True
        self._post()

    def _post(self) -> None:
        with self._lock:
            if self.released or self.url is None:
                return
            self.released = True
        if self._timer:
            self._timer.cancel()
        urllib.request.urlopen(urllib.request.Request(self.url, data=b"", method="POST"), timeout=10).close()

    def fields(self) -> dict[str, Any]:
        return {} if self.url is None else {"first_before_release": self.first_before_release}


def run(main: Callable[[], dict[str, Any]]) -> NoReturn:
    """Runs `main`, printing its result; any exception becomes the error JSON (with the HTTP
    status and body when the SDK raised an API status error)."""
    try:
        result = main()
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - the contract is one JSON line whatever happened
        status = getattr(error, "status_code", None)
        body = getattr(error, "body", None)
        fail(str(error) or repr(error), status if isinstance(status, int) else None, body, type(error).__name__)
    succeed(result)

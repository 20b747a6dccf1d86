"""A loopback side-effect server: the downstream of the chaos run's effects processor.

It stands for what a processor's effect calls (a payment API, a mailer) and counts,
per key, every call it gets (``deliveries``) and every effect it carries out
(``applied``), so the run can check what happened downstream without asking the
project's code:

- ``keyed``: it honours the ``Idempotency-Key`` header, as payment APIs do: a key seen
  before is not applied again, the call is answered with the key's first response
  (and counted as a delivery);
- ``plain``: it applies every call.

``POST /effect`` with an ``Idempotency-Key`` applies (or not) and answers JSON
``{"key", "receipt", "applied"}``; ``GET /health`` answers 200 (the processor's probe).
A stdlib ``ThreadingHTTPServer`` on 127.0.0.1, on an ephemeral port, in a daemon thread;
:meth:`SideEffectServer.stop` closes the port, so a later call is refused. The counts
are kept in a :class:`Ledger`, which several servers (addresses) may share.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Behaviour = Literal["keyed", "plain"]


class Ledger:
    """What the downstream did: calls and applied effects per key, under a lock."""

    def __init__(self, behaviour: Behaviour) -> None:
        if behaviour not in ("keyed", "plain"):
            raise ValueError(f"behaviour is keyed or plain, not {behaviour!r}")
        self.behaviour: Behaviour = behaviour
        self.deliveries: Counter[str] = Counter()
        """Calls per key, applied or not."""
        self.applied: Counter[str] = Counter()
        """Effects carried out per key."""
        self.unkeyed = 0
        """Calls without an Idempotency-Key (refused with 400: a processor bug)."""
        self._first: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def call(self, key: str | None) -> tuple[int, dict[str, Any]]:
        """One call for ``key``: (status, answer)."""
        with self._lock:
            if not key:
                self.unkeyed += 1
                return 400, {"error": "no Idempotency-Key"}
            self.deliveries[key] += 1
            if self.behaviour == "keyed" and key in self._first:
                return 200, self._first[key]
            self.applied[key] += 1
            answer = {"key": key, "receipt": f"r-{key}-{self.applied[key]}", "applied": True}
            self._first.setdefault(key, answer)
            return 200, answer

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        """Copies of (deliveries, applied)."""
        with self._lock:
            return Counter(self.deliveries), Counter(self.applied)


class SideEffectServer:
    """One address of the downstream, counting into ``ledger`` (a new one for
    ``behaviour`` when none is given: several servers on one ledger are one downstream
    reached at several addresses, of which one can go away)."""

    def __init__(self, behaviour: Behaviour = "keyed", ledger: Ledger | None = None) -> None:
        self.ledger = ledger or Ledger(behaviour)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.ledger))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._stopped = False

    @property
    def url(self) -> str:
        """Where the effect is posted: ``<url>/effect``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> SideEffectServer:
        """Serve in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (later calls are refused)."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> SideEffectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(ledger: Ledger) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self._answer(200, {"ok": True})
            else:
                self._answer(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if self.path != "/effect":
                self._answer(404, {"error": "not found"})
                return
            self._answer(*ledger.call(self.headers.get("Idempotency-Key")))

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: the run counts instead

    return Handler

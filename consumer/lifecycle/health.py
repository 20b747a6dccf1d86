"""``/metrics``, ``/healthz`` and ``/readyz`` on one small asyncio HTTP server.

A worker serves them when ``LANDER_METRICS_PORT`` is set (0 picks a free port, which is
logged). The server runs on the worker's event loop, so an answer from ``/healthz``
also proves the loop is not stalled. Under board coordination it also takes ``POST
/wake`` from other workers (:mod:`consumer.leases.wake`): the worker beats at once.
Requests are tiny and answered with ``Connection: close``; anything slow or malformed
is dropped after a short timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from consumer.leases.wake import WAKE_PATH

if TYPE_CHECKING:
    from consumer.lifecycle.worker import Health
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.lifecycle.health")

_READ_TIMEOUT = 5.0
_REASONS = {
    200: "OK",
    202: "Accepted",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


class HealthServer:
    """Serves one worker's metrics registry and health checks."""

    def __init__(
        self,
        metrics: LanderMetrics,
        health: Callable[[], Health],
        host: str,
        port: int,
        wake: Callable[[], None] | None = None,
    ) -> None:
        self.metrics = metrics
        self.health = health
        self.wake = wake
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Listen; returns the bound port."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics and health endpoints listening", host=self.host, port=self.port)
        return self.port

    async def stop(self) -> None:
        """Stop listening and close open connections."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """Status, content type and body for one request (pure: testable alone)."""
        path = path.split("?", 1)[0]
        if path == WAKE_PATH and self.wake is not None:
            if method != "POST":
                return 405, "text/plain; charset=utf-8", b"method not allowed: POST /wake\n"
            self.wake()
            return 202, "text/plain; charset=utf-8", b"woken\n"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)
        if path in ("/healthz", "/readyz"):
            health = self.health()
            ok = health.alive if path == "/healthz" else health.ready
            body = {"status": "ok" if ok else "unavailable", **health.detail}
            return 200 if ok else 503, "application/json", json.dumps(body).encode() + b"\n"
        return 404, "text/plain; charset=utf-8", b"not found: try /metrics, /healthz, /readyz\n"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_READ_TIMEOUT):
                request = await reader.readuntil(b"\r\n\r\n")
            parts = request.split(b"\r\n", 1)[0].decode("latin-1").split()
            if len(parts) != 3:
                return
            method, path, _version = parts
            status, content_type, body = self.respond(method, path)
            head = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                f"Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            ).encode("latin-1")
            writer.write(head if method == "HEAD" else head + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

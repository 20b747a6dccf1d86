"""A fault-injecting HTTP proxy on loopback, in front of one emulator.

Workers point ``AWS_ENDPOINT_URL_<SERVICE>`` at the proxy; the proxy forwards each
request to the emulator unless a seeded draw picks a fault:

- ``throttle``: the service's own throttling error (Kinesis and DynamoDB JSON errors,
  S3 ``503 SlowDown``), without forwarding;
- ``error``: a 500/503 without forwarding;
- ``reset``: the connection is aborted before forwarding (a TCP reset to the client);
- ``lost``: the request is forwarded and executed, then the connection is aborted, so
  the client never learns that its write happened (the fault conditional writes must
  survive: a retried PutObject finds its key taken, a retried UpdateItem its counter
  moved);
- ``slow``: forwarded after a delay of up to ``slow_seconds``;
- ``hang``: nothing is answered for ``hang_seconds`` (past the client's read timeout),
  then the connection is closed.

An event stream (SubscribeToShard, the efo read mode) is relayed chunk by chunk; it is
cut (the connection aborted mid-stream) after its first chunk on ``lost``, and after
any chunk with the ``reset`` probability.

Everything it does is counted, so a run reports the faults it survived.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
import threading
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "content-length",
    "host",
}


EVENT_STREAM = "application/vnd.amazon.eventstream"
"""SubscribeToShard's content type: relayed as it streams, and cut as a fault."""


@dataclass(frozen=True, slots=True)
class FaultRates:
    """Probability of each fault per request (the rest are forwarded untouched)."""

    throttle: float = 0.0
    error: float = 0.0
    reset: float = 0.0
    lost: float = 0.0
    slow: float = 0.0
    hang: float = 0.0
    slow_seconds: float = 1.5
    hang_seconds: float = 12.0

    def pick(self, rng: random.Random) -> str | None:
        """One draw: a fault name, or None to forward."""
        draw = rng.random()
        for name in ("throttle", "error", "reset", "lost", "slow", "hang"):
            rate: float = getattr(self, name)
            if draw < rate:
                return name
            draw -= rate
        return None


@dataclass
class FaultProxy:
    """One proxy: ``service`` (kinesis, dynamodb or s3) in front of ``upstream``."""

    service: str
    upstream: str
    rates: FaultRates
    seed: int
    counts: Counter[str] = field(default_factory=Counter)
    enabled: bool = True
    port: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The endpoint clients use."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen on an ephemeral loopback port."""
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=60), auto_decompress=False
        )
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        """Stop listening and close the upstream session."""
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _pick(self) -> str | None:
        with self._lock:
            fault = self.rates.pick(self._rng) if self.enabled else None
            self.counts["requests"] += 1
            if fault is not None:
                self.counts[fault] += 1
            return fault

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        fault = self._pick()
        if fault == "throttle":
            return self._throttled()
        if fault == "error":
            status = 503 if self.service == "s3" else 500
            return self._error(status, "InternalFailure", "injected server error")
        if fault == "reset":
            return self._abort(request)
        if fault == "hang":
            await asyncio.sleep(self.rates.hang_seconds)
            return self._abort(request)
        if fault == "slow":
            await asyncio.sleep(random.uniform(0.2, self.rates.slow_seconds))
        return await self._forward(request, body, lost=fault == "lost")

    async def _forward(
        self, request: web.Request, body: bytes, *, lost: bool
    ) -> web.StreamResponse:
        """Forward, and answer with the upstream's reply (or abort it, when ``lost``).
        An event stream (SubscribeToShard) is relayed as it comes, not read whole."""
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with self._session.request(
            request.method,
            self.upstream + request.rel_url.raw_path_qs,
            headers=headers,
            data=body,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_read=60),
        ) as reply:
            out = {k: v for k, v in reply.headers.items() if k.lower() not in _HOP_BY_HOP}
            if reply.headers.get("Content-Type", "").startswith(EVENT_STREAM):
                return await self._relay(request, reply, out, lost=lost)
            payload = await reply.read()
        if lost:
            return self._abort(request)
        return web.Response(status=reply.status, headers=out, body=payload)

    async def _relay(
        self,
        request: web.Request,
        reply: aiohttp.ClientResponse,
        headers: dict[str, str],
        *,
        lost: bool,
    ) -> web.StreamResponse:
        """Relay an event stream chunk by chunk. ``lost`` cuts it after the first chunk
        (a subscription dropped mid-stream), as does a ``reset`` drawn per chunk."""
        response = web.StreamResponse(status=reply.status, headers=headers)
        await response.prepare(request)
        async for chunk in reply.content.iter_any():
            await response.write(chunk)
            with self._lock:
                self.counts["stream_chunks"] += 1
                cut = lost or self.rates.reset > self._rng.random()
                if cut:
                    self.counts["stream_cut"] += 1
            if cut:
                return self._abort(request)
        await response.write_eof()
        return response

    @staticmethod
    def _abort(request: web.Request) -> web.StreamResponse:
        transport = request.transport
        if transport is not None:
            transport.abort()
        raise asyncio.CancelledError

    def _throttled(self) -> web.Response:
        if self.service == "s3":
            return self._error(503, "SlowDown", "Please reduce your request rate.")
        code = (
            "ProvisionedThroughputExceededException"
            if self.service == "kinesis"
            else "ThrottlingException"
        )
        return self._error(400, code, "Rate exceeded (injected)")

    def _error(self, status: int, code: str, message: str) -> web.Response:
        if self.service == "s3":
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?>'
                f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
            )
            return web.Response(status=status, body=xml.encode(), content_type="application/xml")
        prefix = "com.amazonaws.dynamodb.v20120810#" if self.service == "dynamodb" else ""
        body = f'{{"__type":"{prefix}{code}","message":"{message}"}}'
        return web.Response(
            status=status,
            body=body.encode(),
            headers={"x-amzn-ErrorType": code, "Content-Type": "application/x-amz-json-1.1"},
        )


class ProxyThread:
    """Runs proxies on an event loop of their own, in a daemon thread."""

    def __init__(self, proxies: list[FaultProxy]) -> None:
        self.proxies = proxies
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ProxyThread:
        self._thread.start()
        for proxy in self.proxies:
            asyncio.run_coroutine_threadsafe(proxy.start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        # A 'hang' fault may still be sleeping in a handler: give cleanup longer than
        # that, and never let a slow cleanup turn a finished run into an error.
        for proxy in self.proxies:
            proxy.enabled = False
            future = asyncio.run_coroutine_threadsafe(proxy.stop(), self._loop)
            with contextlib.suppress(TimeoutError, concurrent.futures.TimeoutError):
                future.result(timeout=proxy.rates.hang_seconds + 10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def counts(self) -> dict[str, dict[str, int]]:
        """Faults and requests per service."""
        return {proxy.service: dict(proxy.counts) for proxy in self.proxies}

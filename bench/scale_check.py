"""The scale simulation checked on the emulators: 64 shards, 8 worker processes.

The simulation (:mod:`bench.scale`) counts what the lease protocol would send, on
in-memory stores in simulated time. Here the same protocol runs for real: 8 ``lander
run`` processes on a 64-shard stream of the embedded stack, their DynamoDB traffic
through a counting proxy on loopback that labels each request the way
:class:`bench.billing.BilledLeaseStore` labels its calls (slot beats, the leader item,
Scans strong or eventual, ...). After the fleet is balanced, a steady window is
counted and divided by shard-minutes, beside :func:`bench.scale.simulate` at the same
size. The stream is empty, as in the simulation: no checkpoints, only what
coordination itself costs. Then 2 and 8 workers on 16 shards: the largest item of each
table, which must not grow with the fleet.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import uuid
from collections import Counter
from typing import Any

import aiohttp
from aiohttp import web

from bench.cluster import LeaseTable, Workers
from bench.local_aws import LocalAws, boto3_client, create_stream
from bench.report import RESULTS, progress
from bench.scale import simulate
from bench.units import dynamo_item_bytes
from consumer.cli.harness import wait_until
from consumer.leases.board_item import KEY, LEADER_KEY
from consumer.leases.dynamo_table import WORKERS_SUFFIX

SHARDS, WORKERS = 64, 8
ITEM_SHARDS = 16
"""The largest-item check: 2 and then 8 workers on this many shards."""
STEADY_SECONDS = 60.0
_SKIP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def label(operation: str, body: dict[str, Any], failed: bool) -> str:
    """The request's label, as the billed in-memory store names the same call."""
    if str(body.get("TableName", "")).endswith(WORKERS_SUFFIX):
        name = _workers_call(operation, body)
    else:
        name = _lease_call(operation, body)
    return f"{name} (condition failed)" if failed else name


def _lease_call(operation: str, body: dict[str, Any]) -> str:
    key = body.get("Key", {}).get("leaseKey", {}).get("S", "")
    strong = "strong" if body.get("ConsistentRead") else "eventual"
    if operation == "GetItem":
        return f"GetItem ({strong})"
    if operation == "Scan":
        return f"Scan ({strong})"
    if operation == "Query":
        return "Query owner index"
    if operation == "PutItem":
        return "PutItem create"
    if operation == "UpdateItem":
        return "UpdateItem " + _lease_write(str(body.get("UpdateExpression", "")), key)
    return operation


def _workers_call(operation: str, body: dict[str, Any]) -> str:
    key = str(body.get("Key", body.get("Item", {})).get(KEY, {}).get("S", ""))
    leader = key == LEADER_KEY
    if operation == "Scan":
        return "Scan workers (eventual)"
    if operation == "GetItem":
        return "GetItem leader (eventual)" if leader else "GetItem slot (strong)"
    if operation == "PutItem" and leader:
        condition = str(body.get("ConditionExpression", ""))
        return "PutItem leader renew" if "w = :me" in condition else "PutItem leader claim"
    if operation == "PutItem":
        return "PutItem slot join"
    if operation == "DeleteItem":
        return "DeleteItem leader" if leader else "DeleteItem slot"
    if operation == "UpdateItem":
        expression = str(body.get("UpdateExpression", ""))
        for marker, name in (
            ("c = :next", "beat"),
            ("f = :true", "fence"),
            ("list_append", "deliver"),
            ("g + :one", "notice"),
        ):
            if marker in expression:
                return "UpdateItem slot " + name
    return operation


def _lease_write(expression: str, key: str) -> str:
    for marker, name in (
        ("checkpoint = :cp", "checkpoint"),
        ("leaseOwner = :me", "take"),
        ("leaseOwner = :to", "transfer"),
        ("REMOVE leaseOwner", "release"),
        ("handoffAck = :to", "hand-off ack"),
        ("handoffTo = :to", "hand-off request"),
    ):
        if marker in expression:
            return name
    return "renew (worker id)" if key.startswith("lander-worker:") else "renew"


class CountingProxy:
    """Forwards DynamoDB requests to the emulator and counts them by label."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.counts: Counter[str] = Counter()
        self.port = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.Response:
        assert self._session is not None
        body = await request.read()
        operation = request.headers.get("X-Amz-Target", "").rsplit(".", 1)[-1]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP}
        async with self._session.request(
            request.method, self.upstream + request.rel_url.raw_path_qs, headers=headers, data=body
        ) as reply:
            payload = await reply.read()
            out = {k: v for k, v in reply.headers.items() if k.lower() not in _SKIP}
            status = reply.status
        failed = status == 400 and b"ConditionalCheckFailed" in payload
        try:
            params = json.loads(body) if body else {}
        except ValueError:
            params = {}
        with self._lock:
            self.counts[label(operation, params, failed)] += 1
        return web.Response(status=status, headers=out, body=payload)


def _balanced(table: LeaseTable, workers: list[str], shards: int = SHARDS) -> bool:
    load = table.load()
    counts = [load.get(name, 0) for name in workers]
    return sum(counts) == shards and max(counts) - min(counts) <= 1


def measure(aws: LocalAws) -> dict[str, Any]:
    """8 processes on 64 shards; calls per shard-minute of a steady window."""
    suffix = uuid.uuid4().hex[:8]
    stream, lease_table = f"bench-scale-{suffix}", f"bench-scale-leases-{suffix}"
    create_stream(boto3_client(aws.env, "kinesis"), stream, SHARDS)
    workdir = RESULTS / "scale-work" / "board"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    table = LeaseTable(boto3_client(aws.env, "dynamodb"), lease_table)
    with CountingProxy(aws.env["AWS_ENDPOINT_URL_DYNAMODB"]) as proxy:
        workers = Workers(
            workdir,
            stream,
            lease_table,
            {"AWS_ENDPOINT_URL_DYNAMODB": proxy.url},
        )
        names = [f"w{n}" for n in range(1, WORKERS + 1)]
        try:
            started = time.monotonic()
            for name in names:
                workers.start(name)
            wait_until(lambda: _balanced(table, names), 180, "8 workers balanced on 64 shards")
            balanced = time.monotonic() - started
            time.sleep(10)  # hand-offs under way settle
            before = proxy.snapshot()
            time.sleep(STEADY_SECONDS)
            steady = proxy.snapshot() - before
        finally:
            codes = workers.stop_all()
    scale = 60.0 / (SHARDS * STEADY_SECONDS)
    return {
        "coordination": "board",
        "seconds_to_balance": round(balanced, 1),
        "calls": {name: round(n * scale, 3) for name, n in sorted(steady.items())},
        "exit_codes": codes,
    }


def largest_item(aws: LocalAws, workers: int) -> dict[str, Any]:
    """``workers`` processes on a 16-shard stream, balanced: the largest item of the
    lease table and of the workers table, in bytes."""
    suffix = uuid.uuid4().hex[:8]
    stream, lease_table = f"bench-items-{suffix}", f"bench-items-leases-{suffix}"
    create_stream(boto3_client(aws.env, "kinesis"), stream, ITEM_SHARDS)
    workdir = RESULTS / "scale-work" / f"items-{workers}"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    dynamodb = boto3_client(aws.env, "dynamodb")
    table = LeaseTable(dynamodb, lease_table)
    fleet = Workers(workdir, stream, lease_table, {})
    names = [f"w{n}" for n in range(1, workers + 1)]
    sizes: dict[str, int] = {}
    try:
        for name in names:
            fleet.start(name)
        wait_until(lambda: _balanced(table, names, ITEM_SHARDS), 120, f"{workers} workers balanced")
        time.sleep(5)  # a beat of every worker after the last hand-off
        for kind, name in (("lease", lease_table), ("workers", lease_table + WORKERS_SUFFIX)):
            items = dynamodb.scan(TableName=name, ConsistentRead=True)["Items"]
            sizes[kind] = max(dynamo_item_bytes(item) for item in items)
    finally:
        fleet.stop_all()
    return {"workers": workers, "shards": ITEM_SHARDS, "largest_bytes": sizes}


def run_check(aws: LocalAws) -> dict[str, Any]:
    """The fleet on the emulators, beside the simulation at the same size; then the
    largest items of 2 and of 8 workers on 16 shards."""
    progress(f"scale check: {SHARDS} shards x {WORKERS} processes")
    measured = measure(aws)
    simulated = simulate(SHARDS, WORKERS)
    measured["simulated_calls"] = simulated.get("steady", {}).get("calls", {})
    found = [measured]
    progress(f"scale check: largest items, 2 then 8 workers on {ITEM_SHARDS} shards")
    items = [largest_item(aws, 2), largest_item(aws, 8)]
    return {
        "shards": SHARDS,
        "workers": WORKERS,
        "steady_seconds": STEADY_SECONDS,
        "modes": found,
        "items": items,
    }


def render_check(result: dict[str, Any]) -> str:
    """Calls per shard-minute, emulators against the simulation, by label."""
    lines = [
        f"{result['shards']} shards x {result['workers']} worker processes on the emulators "
        f"(a counting proxy before DynamoDB), steady {result['steady_seconds']:.0f} s, "
        "calls per shard-minute:"
    ]
    for mode in result["modes"]:
        lines.append(
            f"  {mode['coordination']} (balanced {mode['seconds_to_balance']:.1f} s after start)"
        )
        measured, simulated = mode["calls"], mode["simulated_calls"]
        for name in sorted(set(measured) | set(simulated)):
            lines.append(
                f"    {name:<34}{measured.get(name, 0):>9.3f} emulators"
                f"{simulated.get(name, 0):>9.3f} simulated"
            )
    items = result.get("items") or []
    if len(items) == 2:
        few, many = (item["largest_bytes"] for item in items)
        lines.append(
            f"largest item, {items[0]['shards']} shards, {items[0]['workers']} then "
            f"{items[1]['workers']} workers: lease table {few['lease']} B, {many['lease']} B "
            f"({many['lease'] / few['lease']:.2f}x); workers table {few['workers']} B, "
            f"{many['workers']} B ({many['workers'] / few['workers']:.2f}x)"
        )
    return "\n".join(lines)

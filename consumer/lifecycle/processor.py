"""The record processor contract users implement, as in KCL: five calls.

One processor instance per shard lease. The worker calls, in order::

    initialize ─► process_records* ─┬─► shard_ended          (shard read to its end)
                                    ├─► shutdown_requested   (graceful stop or hand-off)
                                    └─► lease_lost           (another worker owns it now)

``process_records`` may receive an empty list (a quiet shard): that lets a processor
flush by time. Checkpoints are fenced by the lease: once the lease is lost,
:meth:`Checkpointer.checkpoint` raises :class:`~consumer.leases.model.LeaseLostError`
and nothing more may be written for the shard. ``lease_lost`` gets no checkpointer
for that reason. After ``shard_ended`` returns the worker checkpoints SHARD_END
itself, so a processor only has to finish (land, flush) what it holds.

An exception from a processor call is logged with the shard and worker ids, and the
shard restarts from its last checkpoint after a backoff: records after the checkpoint
are delivered again, none is skipped.

The contract imports nothing of the worker at run time: :class:`Checkpointer` is a
Protocol (the worker's lease-fenced one is
:class:`consumer.lifecycle.shard_consumer.LeaseCheckpointer`), so a processor and its tests
need only this module, :mod:`consumer.stream.records` and :mod:`consumer.sequence`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from consumer.sequence import Checkpoint, Position
from consumer.stream.records import Record

if TYPE_CHECKING:
    from consumer.aws import Clients
    from consumer.config import Settings
    from consumer.metrics import LanderMetrics


class Checkpointer(Protocol):
    """Records a shard's progress in its lease, fenced by the lease counter.

    The worker passes one to every call that may checkpoint; tests pass their own.
    """

    async def checkpoint(self, position: Position | None = None) -> None:
        """Checkpoint ``position`` (default: the last record delivered to the processor).

        Raises ``ValueError`` for a position beyond what was delivered, and
        ``LeaseLostError`` when the lease is no longer ours.
        """

    async def ensure_lease(self) -> None:
        """Raise ``LeaseLostError`` unless the lease is certainly ours right now.

        Call it right before a side effect that must not happen twice (an S3 put):
        after a pause it renews first, so a woken zombie learns it lost the lease.
        """


@dataclass(frozen=True, slots=True)
class InitializationInput:
    """Given to :meth:`RecordProcessor.initialize`."""

    shard_id: str
    worker_id: str
    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class ProcessRecordsInput:
    """Given to :meth:`RecordProcessor.process_records`."""

    records: list[Record]
    checkpointer: Checkpointer
    millis_behind_latest: int | None


@runtime_checkable
class RecordProcessor(Protocol):
    """What a user implements to consume a stream."""

    async def initialize(self, init: InitializationInput) -> None:
        """A lease was taken: the shard's records follow, from ``init.checkpoint``."""

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        """Handle records in order; checkpoint when they are safely done."""

    async def lease_lost(self) -> None:
        """Another worker owns the shard now; drop buffered work, write nothing."""

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        """Every record of the closed shard was delivered; finish what is buffered."""

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        """The worker is stopping or handing the lease off; finish and checkpoint."""


ProcessorFactory = Callable[[], RecordProcessor]
Probe = Callable[[], Awaitable[None]]
"""Proves the worker can do its processors' work (the lander: write to the archive);
raises when it cannot."""


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What a worker offers a processor class that asks for it (see load_processor)."""

    settings: Settings
    clients: Clients
    metrics: LanderMetrics


@dataclass(frozen=True, slots=True)
class LoadedProcessor:
    """A processor factory and, if the class offers one, its worker probe."""

    factory: ProcessorFactory
    probe: Probe | None = None


def load_processor(spec: str, context: WorkerContext) -> LoadedProcessor:
    """Resolve ``module:Class`` (or ``module:factory``) to a processor factory.

    The module is imported like ``python -m`` would: from the current directory first,
    then ``PYTHONPATH`` and the installed packages, so ``lander run --processor
    mypackage.processors:PrintProcessor`` works from the folder holding ``mypackage``.

    A class with a ``for_worker(context)`` class method is asked for its factory, so
    it can share clients and metrics across its per-shard instances (the built-in
    lander does); anything else callable is called with no arguments per shard. A class
    with a ``probe_for_worker(context)`` class method gives the worker a probe: it runs
    at start (a failure stops start-up) and when a shard keeps failing, to tell a
    worker that cannot work (it gives its shards back) from a shard that cannot be
    processed (retried in place).
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"processor must look like module:Class, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    module = importlib.import_module(module_name)
    target = getattr(module, attribute, None)
    if target is None or not callable(target):
        raise ValueError(f"{spec!r}: {module_name} has no callable {attribute}")
    for_worker = getattr(target, "for_worker", None)
    factory: ProcessorFactory = for_worker(context) if for_worker is not None else target
    probe_for_worker = getattr(target, "probe_for_worker", None)
    probe: Probe | None = probe_for_worker(context) if probe_for_worker is not None else None
    return LoadedProcessor(factory, probe)

"""The lander: the built-in record processor that archives a stream exactly once.

Per run: (dead letters, then) the data object with ``If-None-Match: *``, then a
checkpoint at the run's last position, fenced by the lease. Before every put the lease
is proven valid (after a pause the worker renews first), and on a takeover the
:class:`~consumer.landing.reconcile.Reconciler` drops what some owner already landed.
Together with runs cut by the records themselves (same records, same keys, same
bytes), crashes, failovers, a lost lease table and paused zombies add no duplicates.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

import structlog

from consumer.archive.layout import bound, dead_letter_key, object_key
from consumer.aws import aws_session, backoff, client_config, region
from consumer.config import ConfigError, Settings
from consumer.landing.archive import open_archive
from consumer.landing.batcher import Batcher, LandedRun
from consumer.landing.deflate import CONTENT_DIGEST, gzip_bytes, resolve, sha256
from consumer.landing.envelope import DeadLetter, Encoder, EventIdPointer
from consumer.landing.objects import ObjectStore, ObjectStoreError, PutOutcome, probe
from consumer.landing.protection import ObjectProtection, check_kms_key
from consumer.landing.reconcile import Reconciler
from consumer.landing.watermarks import NumberPointer, SequenceWatermarks
from consumer.leases.model import LeaseLostError
from consumer.lifecycle.processor import (
    Checkpointer,
    InitializationInput,
    Probe,
    ProcessorFactory,
    ProcessRecordsInput,
    WorkerContext,
)
from consumer.metrics import LanderMetrics
from consumer.stream.records import Record

log = structlog.get_logger("consumer.landing")

PUT_ATTEMPTS = 8


class RecentEventIds:
    """A bounded memory of recently landed event ids (oldest forgotten first)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def seen(self, event_id: str) -> bool:
        """True if ``event_id`` was seen recently; remembers it either way."""
        if event_id in self._ids:
            self._ids.move_to_end(event_id)
            return True
        self._ids[event_id] = None
        if len(self._ids) > self.size:
            self._ids.popitem(last=False)
        return False


class Lander:
    """Lands one shard's records as minute-partitioned gzipped JSON Lines."""

    def __init__(
        self,
        settings: Settings,
        store: ObjectStore,
        prefix: str,
        metrics: LanderMetrics,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.prefix = prefix
        self.metrics = metrics
        # Looked up now, not at import: a simulation's clock (bench/virtual_time.py) holds.
        self.clock = clock or time.monotonic
        pointer = settings.event_id_pointer
        self.encoder = Encoder(
            settings.stream, settings.payload_format, EventIdPointer(pointer) if pointer else None
        )
        self.shard_id = "?"
        self.batcher: Batcher | None = None
        self.reconciler: Reconciler | None = None
        self.recent = RecentEventIds(settings.dedup_window) if settings.dedup_window else None
        self.watermarks: SequenceWatermarks | None = None
        self.numbers: NumberPointer | None = None
        if settings.dedup_keys and settings.sequence_pointer is not None:
            self.watermarks = SequenceWatermarks(settings.dedup_keys)
            self.numbers = NumberPointer(settings.sequence_pointer)
        self._replayed = 0
        self._log = log

    @classmethod
    def for_worker(cls, context: WorkerContext) -> ProcessorFactory:
        """One archive connection and one set of metrics for every shard of a worker."""
        store, prefix = cls.archive(context)
        return lambda: cls(context.settings, store, prefix, context.metrics)

    @classmethod
    def probe_for_worker(cls, context: WorkerContext) -> Probe:
        """The archive probe: the KMS key described (when one is set), then the reserved
        probe object created (or found) with the objects' encryption, tags and owner."""
        store, prefix = cls.archive(context)
        protection = ObjectProtection.from_settings(context.settings)

        async def check() -> None:
            if protection.kms_key is not None:
                async with aws_session().create_client(
                    "kms", region_name=region(), config=client_config()
                ) as kms:
                    await check_kms_key(kms, protection.kms_key)
            await probe(store, prefix)

        return check

    @classmethod
    def archive(cls, context: WorkerContext) -> tuple[ObjectStore, str]:
        """The archive LANDER_ARCHIVE names (a subclass may wrap it)."""
        if context.settings.archive is None:
            raise ConfigError(
                "LANDER_ARCHIVE is required by the lander: s3://bucket/prefix or file:///path"
            )
        protection = ObjectProtection.from_settings(context.settings)
        return open_archive(context.settings.archive, context.clients.s3, protection)

    async def initialize(self, init: InitializationInput) -> None:
        """Start a shard: a fresh batcher, and reconciliation against the archive."""
        self.shard_id = init.shard_id
        self.batcher = Batcher(
            init.shard_id,
            self.settings.max_records_per_file,
            self.settings.max_bytes_per_file,
            self.settings.flush_seconds,
            self.settings.gzip_level,
            codec=resolve(self.settings.gzip_codec),
        )
        self.reconciler = Reconciler(self.store, self.prefix, self.settings.stream, init.shard_id)
        self._log = log.bind(shard_id=init.shard_id, worker_id=init.worker_id)

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        """Batch records into runs and land every run that closes."""
        assert self.batcher is not None
        assert self.reconciler is not None
        now = self.clock()
        skipped: Record | None = None
        reconciling = self.reconciler.active
        for record in batch.records:
            if self.reconciler.active:
                listed = len(self.reconciler.listed)
                landed = await self.reconciler.already_landed(record)
                if len(self.reconciler.listed) > listed:
                    self.metrics.reconcile_listings.labels(
                        self.settings.stream, self.shard_id
                    ).inc()
                if landed:
                    self.metrics.duplicates_dropped.labels(
                        self.settings.stream, self.shard_id, "replay"
                    ).inc()
                    self._replayed += 1
                    skipped = record
                    continue
            skipped = None
            closed = self._add(record, now)
            if closed is not None:
                await self._land(closed, batch.checkpointer)
        if reconciling and not self.reconciler.active:
            self._log.info(
                "reconciled with the archive",
                dropped_already_landed=self._replayed,
                minutes_listed=len(self.reconciler.listed),
            )
        closed = self.batcher.due(now)
        if closed is not None:
            await self._land(closed, batch.checkpointer)
        if skipped is not None and not self.batcher.open:
            # The batch ended in records landed already: move the checkpoint past them.
            await self._checkpoint(batch.checkpointer, skipped)

    def _add(self, record: Record, now: float) -> LandedRun | None:
        assert self.batcher is not None
        encoded = self.encoder.encode(record)
        if isinstance(encoded, DeadLetter):
            return self.batcher.add_dead(encoded, now)
        line, event_id = encoded
        if self.recent is not None and event_id is not None and self.recent.seen(event_id):
            self.metrics.duplicates_dropped.labels(
                self.settings.stream, self.shard_id, "producer"
            ).inc()
            return self.batcher.add_dropped(record, now)
        if event_id is None and self.watermarks is not None and self._seen_number(record):
            self.metrics.duplicates_dropped.labels(
                self.settings.stream, self.shard_id, "sequence"
            ).inc()
            return self.batcher.add_dropped(record, now)
        return self.batcher.add_line(record, line, now)

    def _seen_number(self, record: Record) -> bool:
        """Whether the record's producer number was seen for its partition key (its
        payload parsed a second time: the filter is opt-in, the encoder stays lean)."""
        assert self.watermarks is not None
        assert self.numbers is not None
        number = self.numbers.number(record.data)
        return number is not None and self.watermarks.seen(record.partition_key, number)

    async def _land(self, run: LandedRun, checkpointer: Checkpointer) -> None:
        minute, first, last = run.minute, run.first, run.last
        stream = self.settings.stream
        for dead in run.dead_letters:
            # One object per dead letter, keyed by its position: however a replay cuts
            # its runs, the same record always meets the same key.
            position = dead.record.position
            key = dead_letter_key(
                self.prefix, stream, self.shard_id, minute, first=position, last=position
            )
            line = dead.line(stream)
            await self._put(
                key,
                gzip_bytes(line, self.settings.gzip_level, resolve(self.settings.gzip_codec)),
                {"reason": dead.reason[:200], CONTENT_DIGEST: sha256(line)},
                checkpointer,
            )
            self.metrics.dead_letters.labels(self.settings.stream, self.shard_id).inc()
            self._log.warning(
                "record dead-lettered", position=str(position), reason=dead.reason, key=key
            )
        key = object_key(self.prefix, stream, self.shard_id, minute, first=first, last=last)
        metadata = {
            "records": str(run.lines),
            "first": bound(first),
            "last": bound(last),
            "dead-letters": str(len(run.dead_letters)),
            "producer-duplicates": str(run.dropped),
            CONTENT_DIGEST: run.content_sha256,
        }
        outcome = await self._put(key, run.body, metadata, checkpointer)
        if outcome is PutOutcome.CREATED:
            self.metrics.files_landed.labels(self.settings.stream, self.shard_id).inc()
            self.metrics.records_landed.labels(self.settings.stream, self.shard_id).inc(run.lines)
            self.metrics.bytes_landed.labels(self.settings.stream, self.shard_id).inc(run.raw_bytes)
        elif outcome is PutOutcome.REPLAYED:
            self.metrics.replayed_puts.labels(self.settings.stream, self.shard_id).inc()
            self._log.info("landed object already present (replay)", key=key)
        else:
            self.metrics.conflicts.labels(self.settings.stream, self.shard_id).inc()
            self._log.error("landed object conflict; existing object kept", key=key)
        await self._checkpoint(checkpointer, run)

    async def _put(
        self, key: str, body: bytes, metadata: dict[str, str], checkpointer: Checkpointer
    ) -> PutOutcome:
        for attempt in range(1, PUT_ATTEMPTS + 1):
            # Never write for a shard that may be someone else's by now.
            await checkpointer.ensure_lease()
            try:
                return await self.store.put_if_absent(key, body, metadata)
            except ObjectStoreError as exc:
                self.metrics.landing_failures.labels(
                    self.settings.stream, self.shard_id, exc.kind
                ).inc()
                if not exc.retriable or attempt == PUT_ATTEMPTS:
                    raise
                delay = backoff(attempt, base=0.2, cap=10.0)
                self._log.warning("put failed; retrying", key=key, error=str(exc), delay=delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _checkpoint(self, checkpointer: Checkpointer, upto: LandedRun | Record) -> None:
        position = upto.last if isinstance(upto, LandedRun) else upto.position
        try:
            await checkpointer.checkpoint(position)
        except LeaseLostError:
            self.metrics.checkpoint_failures.labels(self.settings.stream, self.shard_id).inc()
            raise

    async def _flush(self, checkpointer: Checkpointer) -> None:
        assert self.batcher is not None
        closed = self.batcher.close()
        if closed is not None:
            await self._land(closed, checkpointer)

    async def lease_lost(self) -> None:
        """Drop the open run: it must not land under a lease we no longer hold."""
        if self.batcher is not None:
            self.batcher.discard()

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        """Land the last run of a closed shard."""
        await self._flush(checkpointer)

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        """Land what is buffered and checkpoint it before the lease is given up."""
        await self._flush(checkpointer)

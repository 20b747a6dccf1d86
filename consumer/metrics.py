"""Prometheus metrics of one worker, in a registry of its own.

Served on ``/metrics`` by :mod:`consumer.lifecycle.health` when ``LANDER_METRICS_PORT`` is set,
and read directly by tests. Series are per shard where an operator acts per shard
(lag, throttles, what landed), labelled ``stream`` and ``shard_id`` (a worker of
several streams holds shards of the same id in each); lease events are per worker.
"""

from __future__ import annotations

import contextlib
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

# GetRecords answers in tens of milliseconds when healthy and seconds when throttled
# or far behind; the buckets cover both ends.
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def version() -> str:
    """The installed package version ("unknown" when run from a bare checkout)."""
    try:
        return metadata.version("kinesis-lander")
    except metadata.PackageNotFoundError:
        return "unknown"


class LanderMetrics:
    """The series a user watches: lag, leases, what landed, what was dropped and why."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.stream = ""
        """The ``stream`` label of a single-stream worker's shards (set by the worker)."""
        r = self.registry
        # -- worker and leases --------------------------------------------------------
        self.worker_info = Gauge(
            "lander_worker_info",
            "Always 1; labels name the worker.",
            ["worker_id", "version"],
            registry=r,
        )
        self.leases_held = Gauge("lander_leases_held", "Leases this worker holds.", registry=r)
        self.leases_taken = Counter(
            "lander_leases_taken",
            "Leases taken, by how: assigned (given to this worker by the leader, free or "
            "handed over by its owner).",
            ["how"],
            registry=r,
        )
        self.leases_stolen = Counter(
            "lander_leases_stolen",
            "Hand-offs this worker, as the leader, asked of a live owner to balance the "
            "load, for any receiver.",
            registry=r,
        )
        self.leases_lost = Counter(
            "lander_leases_lost",
            "Leases taken from this worker without its release (expired or fenced out).",
            registry=r,
        )
        self.leases_released = Counter(
            "lander_leases_released",
            "Leases this worker gave up, by why: shutdown, handoff, shard_end, unfit (it "
            "cannot land).",
            ["why"],
            registry=r,
        )
        # -- reading ------------------------------------------------------------------
        self.records_read = Counter(
            "lander_records_read",
            "User records read from the stream (after de-aggregation).",
            ["stream", "shard_id"],
            registry=r,
        )
        self.behind_latest = Gauge(
            "lander_behind_latest_seconds",
            "How far behind the tip of the stream the shard's last read was, in seconds: "
            "Kinesis' MillisBehindLatest of the last GetRecords or subscription event / "
            "1000 (0: caught up).",
            ["stream", "shard_id"],
            registry=r,
        )
        self.getrecords_seconds = Histogram(
            "lander_getrecords_seconds",
            "GetRecords latency, successful or not.",
            ["stream", "shard_id"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.getrecords_throttles = Counter(
            "lander_getrecords_throttles",
            "GetRecords calls refused for throughput (ProvisionedThroughputExceeded).",
            ["stream", "shard_id"],
            registry=r,
        )
        self.getrecords_errors = Counter(
            "lander_getrecords_errors",
            "GetRecords calls that failed otherwise, by error class.",
            ["stream", "shard_id", "error"],
            registry=r,
        )
        # -- landing ------------------------------------------------------------------
        self.records_landed = Counter(
            "lander_records_landed", "User records landed.", ["stream", "shard_id"], registry=r
        )
        self.bytes_landed = Counter(
            "lander_bytes_landed",
            "Uncompressed JSON bytes landed.",
            ["stream", "shard_id"],
            registry=r,
        )
        self.files_landed = Counter(
            "lander_files_landed",
            "Objects created by this worker.",
            ["stream", "shard_id"],
            registry=r,
        )
        self.replayed_puts = Counter(
            "lander_replayed_puts",
            "Puts that found the same object already landed (a replay).",
            ["stream", "shard_id"],
            registry=r,
        )
        self.conflicts = Counter(
            "lander_conflicts",
            "Puts that found a different object under the key; the existing one is kept.",
            ["stream", "shard_id"],
            registry=r,
        )
        self.duplicates_dropped = Counter(
            "lander_duplicates_dropped",
            "Records not landed again, by cause (replay: already landed; producer: event id "
            "seen recently; sequence: producer number seen for the partition key).",
            ["stream", "shard_id", "cause"],
            registry=r,
        )
        self.dead_letters = Counter(
            "lander_dead_letters",
            "Records sent to the dead-letter prefix.",
            ["stream", "shard_id"],
            registry=r,
        )
        self.checkpoint_failures = Counter(
            "lander_checkpoint_failures",
            "Checkpoints refused or failed.",
            ["stream", "shard_id"],
            registry=r,
        )
        self.landing_failures = Counter(
            "lander_landing_failures",
            "Failed attempts to put an object into the archive, by error.",
            ["stream", "shard_id", "error"],
            registry=r,
        )
        # -- stalls and health ----------------------------------------------------------
        self.checkpoint_age = Gauge(
            "lander_checkpoint_age_seconds",
            "Seconds since the shard's checkpoint last moved on this worker (since the "
            "lease was taken if it has not moved yet); 0 while no record waits.",
            ["stream", "shard_id"],
            registry=r,
        )
        self.records_pending = Gauge(
            "lander_records_pending",
            "Records delivered to the processor and not yet covered by a checkpoint.",
            ["stream", "shard_id"],
            registry=r,
        )
        self.shard_restarts = Counter(
            "lander_shard_restarts",
            "Times the shard's processor failed and the shard restarted from its checkpoint.",
            ["stream", "shard_id"],
            registry=r,
        )
        self.landing_healthy = Gauge(
            "lander_landing_healthy",
            "1 while this worker can land (its archive probe passes), 0 while it cannot "
            "and gives its shards back.",
            registry=r,
        )
        self.landing_agreed = Gauge(
            "lander_landing_agreed",
            "1 while the fleet lands every stream of this worker as it would, 0 while a "
            "stream's landing record says otherwise (a change adopted by newer workers) "
            "and this worker gives its shards back.",
            registry=r,
        )
        self.effects = Counter(
            "lander_effects",
            "Side effects of processors run under a key (consumer.effects), by outcome: "
            "done, repeat (its stored result returned), taken_over (run again under its "
            "key after its claimant was gone), unknown (not run again: a person must find "
            "out whether it happened), reused (the key was recorded for another payload), "
            "no_key (the record carries no event id: not run), not_done (the effect said "
            "it did not happen).",
            ["outcome"],
            registry=r,
        )
        self.ready = Gauge("lander_ready", "1 while /readyz answers 200, else 0.", registry=r)
        # process_cpu_seconds_total, process_resident_memory_bytes, open fds (Linux).
        ProcessCollector(registry=r)
        self.wakeups = Counter(
            "lander_board_wakeups",
            "Board coordination wake-ups: sent (answered), failed (not answered: that "
            "worker acts at its next beat instead), received, refused (over the budget "
            "of early beats).",
            ["outcome"],
            registry=r,
        )
        self.reconcile_listings = Counter(
            "lander_reconcile_listings",
            "Listings of landed objects made to reconcile after a takeover.",
            ["stream", "shard_id"],
            registry=r,
        )

    def value(self, name: str, **labels: str) -> float:
        """A counter's current value, summed over the labels not given (0 if never
        incremented)."""
        total = 0.0
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name == f"{name}_total" and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    total += sample.value
        return total

    def shard(self, key: str) -> tuple[str, str]:
        """The ``stream`` and ``shard_id`` labels of a lease key: a multi-stream key
        names its stream; a shard id alone belongs to :attr:`stream`."""
        # Imported here: deploy/validate.py lists this module's series with
        # prometheus_client alone, and the leases package needs the daemon's dependencies.
        from consumer.leases.keys import split_key  # noqa: PLC0415

        try:
            stream, shard_id = split_key(key)
        except ValueError:
            return self.stream, key
        return (self.stream if stream is None else stream.name), shard_id

    def behind(self, stream: str, shard_id: str, millis: int | None) -> None:
        """The shard's lag as Kinesis reported it (milliseconds; nothing if None)."""
        if millis is not None:
            self.behind_latest.labels(stream, shard_id).set(millis / 1000)

    def forget_shard(self, key: str) -> None:
        """Drop the shard's gauge once this worker no longer reads it, so a lag
        reported by a worker that lost the shard does not linger as a flat line."""
        labels = self.shard(key)
        for gauge in (self.behind_latest, self.checkpoint_age, self.records_pending):
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)

"""Prometheus metrics of one worker, in a registry of its own (served by issue 5's
endpoint, read directly by tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class LanderMetrics:
    """Counters a user watches: what landed, what was dropped and why, what failed."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.records_landed = Counter(
            "lander_records_landed", "User records landed.", ["shard_id"], registry=r
        )
        self.bytes_landed = Counter(
            "lander_bytes_landed", "Uncompressed JSON bytes landed.", ["shard_id"], registry=r
        )
        self.files_landed = Counter(
            "lander_files_landed", "Objects created by this worker.", ["shard_id"], registry=r
        )
        self.replayed_puts = Counter(
            "lander_replayed_puts",
            "Puts that found the same object already landed (a replay).",
            ["shard_id"],
            registry=r,
        )
        self.conflicts = Counter(
            "lander_conflicts",
            "Puts that found a different object under the key; the existing one is kept.",
            ["shard_id"],
            registry=r,
        )
        self.duplicates_dropped = Counter(
            "lander_duplicates_dropped",
            "Records not landed again, by cause (replay: already landed; producer: event id "
            "seen recently).",
            ["shard_id", "cause"],
            registry=r,
        )
        self.dead_letters = Counter(
            "lander_dead_letters",
            "Records sent to the dead-letter prefix.",
            ["shard_id"],
            registry=r,
        )
        self.checkpoint_failures = Counter(
            "lander_checkpoint_failures", "Checkpoints refused or failed.", ["shard_id"], registry=r
        )
        self.reconcile_listings = Counter(
            "lander_reconcile_listings",
            "Listings of landed objects made to reconcile after a takeover.",
            ["shard_id"],
            registry=r,
        )

    def value(self, name: str, **labels: str) -> float:
        """A counter's current value (0 if never incremented)."""
        return self.registry.get_sample_value(f"{name}_total", labels) or 0.0

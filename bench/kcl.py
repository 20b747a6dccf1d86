"""What KCL 2.x and 3.x cost under their defaults, in DynamoDB's units (the same units
as :class:`bench.billing.BilledLeaseStore`). Used by :mod:`bench.scale` and
:mod:`bench.aws_requests`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.units import READ_UNIT, WRITE_UNIT


@dataclass(frozen=True)
class KclDefaults:
    """KCL 2.x's default timings (milliseconds), as its config classes declare them."""

    failover_ms: float = 10_000
    epsilon_ms: float = 25
    shard_sync_ms: float = 60_000
    idle_between_reads_ms: float = 1_000
    max_records: int = 10_000

    @property
    def renew_ms(self) -> float:
        """DynamoDBLeaseCoordinator: renewerIntervalMillis = failover / 3 - epsilon."""
        return self.failover_ms / 3 - self.epsilon_ms

    @property
    def taker_ms(self) -> float:
        """DynamoDBLeaseCoordinator: takerIntervalMillis = (failover + epsilon) * 2."""
        return (self.failover_ms + self.epsilon_ms) * 2


KCL_ITEM_BYTES = 300
"""The issue's assumption for a KCL lease item."""
KCL_KEY_BYTES = 40
"""What a KEYS_ONLY GSI entry holds: the lease key (and the owner it is keyed on)."""


def kcl_costs(
    shards: int, workers: int, kcl: KclDefaults | None = None
) -> dict[str, dict[str, float]]:
    """Read and write units per shard-minute of KCL 2.x and 3.x under their defaults.

    Both renew every held lease every ``failover / 3 - epsilon`` (one write each).
    KCL 2.x: every worker's lease taker Scans the whole table, eventually consistent,
    every ``2 x (failover + epsilon)``. KCL 3.x: a leader Scans every 20 s (eventually
    consistent); every worker Queries the KEYS_ONLY GSI on ``leaseOwner`` every 10 s for
    its own leases; the GSI is written only when an owner changes (none in a steady
    state).
    """
    kcl = kcl or KclDefaults()
    scan = math.ceil(shards * KCL_ITEM_BYTES / READ_UNIT) * 0.5
    renewals = shards / (kcl.renew_ms / 1000) * math.ceil(KCL_ITEM_BYTES / WRITE_UNIT)
    kcl2_reads = workers * scan / (kcl.taker_ms / 1000)
    own = math.ceil(shards / workers * KCL_KEY_BYTES / READ_UNIT) * 0.5
    kcl3_reads = scan / 20.0 + workers * own / 10.0
    per_shard_minute = 60.0 / shards
    return {
        "kcl2": {
            "read_units": round(kcl2_reads * per_shard_minute, 3),
            "write_units": round(renewals * per_shard_minute, 3),
        },
        "kcl3": {
            "read_units": round(kcl3_reads * per_shard_minute, 3),
            "write_units": round(renewals * per_shard_minute, 3),
        },
    }

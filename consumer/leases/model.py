"""What a lease is: one item of the lease table, one per shard."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace

from consumer.errors import LanderError
from consumer.sequence import Checkpoint, Sentinel


@dataclass(frozen=True, slots=True)
class Lease:
    """A snapshot of one lease item, as last read from or written to the table.

    Attribute names in the table are KCL's (``leaseKey``, ``leaseOwner``,
    ``leaseCounter``, ``checkpoint``, ...), so a table left by a KCL application can be
    adopted. ``handoff_to`` is the lander's own: a worker that wants to steal this lease
    writes its id there and the owner hands the lease over after a checkpoint.
    ``updated_ms`` and ``lag_ms`` (``lastUpdateMs``, ``millisBehindLatest``) are for
    people reading the table; no decision uses them.
    """

    key: str
    owner: str | None = None
    counter: int = 0
    checkpoint: Checkpoint = Sentinel.TRIM_HORIZON
    owner_switches: int = 0
    parents: frozenset[str] = field(default_factory=frozenset)
    handoff_to: str | None = None
    handoff_ack: str | None = None
    """Board coordination: the receiver named in ``handoff_to`` is ready for the lease
    (it polls for it), so the owner may stop reading and transfer it."""
    updated_ms: int | None = field(default=None, compare=False)
    """Wall-clock time (epoch ms) of the last write, for ``lander status`` only: expiry
    never reads it (workers judge expiry by counters on their own monotonic clocks)."""
    lag_ms: int | None = field(default=None, compare=False)
    """MillisBehindLatest the owner last reported with a heartbeat (informational)."""
    report: ShardReport | None = field(default=None, compare=False)
    """How the owner's processing went, as of its last heartbeat (informational)."""
    load: ShardLoad | None = field(default=None, compare=False)
    """The shard's throughput as its owner last measured it (written with checkpoints;
    board coordination balances by it)."""
    incarnation: str | None = None
    """A random id the lander writes when it creates the item (``leaseIncarnation``).
    A lease made again (the table deleted and created anew) has another one, so a
    worker still holding the earlier lease cannot mistake the new one for it where the
    counters agree: every fenced write requires it, and a worker reading its leases
    compares it. None for a lease a KCL application created."""

    @property
    def finished(self) -> bool:
        """True once the shard was read to its end and SHARD_END checkpointed."""
        return self.checkpoint is Sentinel.SHARD_END

    def evolve(self, **changes: object) -> Lease:
        """A copy with some fields changed (what a successful write produced)."""
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ShardReport:
    """What an owner says about a shard with each heartbeat, for people and alerts.

    Durations, never timestamps: the owner measures them on its own monotonic clock,
    so no clock is compared across machines. No lease decision reads them.
    """

    pending: int = 0
    """Records delivered to the processor and not yet covered by a checkpoint."""
    checkpoint_age_ms: int = 0
    """How long the checkpoint has not moved while records waited (0: none waits)."""
    failures: int = 0
    """Processor failures since the checkpoint last moved."""
    last_error: str | None = None
    """The latest of those failures, shortened."""


RESERVED_PREFIX = "lander-"
"""Lease-table items whose key starts with this are the lander's own (each stream's
landing record; the board and worker-id claims earlier releases wrote), not shard
leases; shard ids never start with it."""


@dataclass(frozen=True, slots=True)
class ShardLoad:
    """A shard's throughput, measured by its owner over the last heartbeats."""

    records_per_second: float = 0.0
    kb_per_second: float = 0.0
    """Payload kilobytes a second: KCL 3.x's ``throughputKBps``."""


WORKER_KEY_PREFIX = "lander-worker:"
"""Worker-id claims that releases with scan coordination wrote; a table they used may
still hold some (skipped as :data:`RESERVED_PREFIX` items; safe to delete)."""


LANDING_KEY_PREFIX = "lander-landing:"
"""Each stream's landing record (:class:`LandingRecord`) is keyed by this and the
stream's name."""


def landing_key(stream: str) -> str:
    """The lease-table key of ``stream``'s landing record."""
    return LANDING_KEY_PREFIX + stream


@dataclass(frozen=True, slots=True)
class LandingRecord:
    """The landing a fleet lands one stream with (:mod:`consumer.landing.fingerprint`):
    its digest, its canonical form, and which worker wrote it when."""

    digest: str
    settings: str
    worker: str
    written_ms: int


def wall_ms() -> int:
    """The wall clock in epoch milliseconds: what ``updated_ms`` holds."""
    return time.time_ns() // 1_000_000


def new_incarnation() -> str:
    """A fresh :attr:`Lease.incarnation`: 64 random bits, hex."""
    return secrets.token_hex(8)


class LeaseError(LanderError):
    """The lease table refused or failed a call."""


TABLE_GONE = "lease table does not exist"
"""The reason a lease write gives when the lease table was deleted under the workers."""


class LeaseLostError(LeaseError):
    """A conditional write on a lease failed: another worker owns it now.

    The worker that sees this stops the shard at once; nothing more is processed
    or checkpointed under the lease it thought it held. Not retriable.
    """

    retriable = False

    def __init__(self, key: str, reason: str = "condition failed") -> None:
        super().__init__(f"lease {key} lost: {reason}")
        self.key = key
        self.reason = reason

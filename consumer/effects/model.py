"""What an effect record is and what a worker does on meeting one: pure decisions.

A processor runs a side effect (a charge, an e-mail, an API call) under a key: the
record's event id, or a key of its own. The effects table holds one record per key:

- ``IN_PROGRESS``: claimed by one tenure of a shard lease (:class:`Tenure`), the effect
  may be under way;
- ``COMPLETED``: done, with its small JSON result, returned on every repeat;
- ``UNKNOWN``: a claim was found in progress after its claimant was gone (a crash, a
  failover, a lease lost mid-effect) and the effect does not honour an idempotency
  key, so it was not run again: whether it happened is for a person to find out.

Every record expires (:attr:`Effect.expires`, DynamoDB TTL's attribute), and an
expired record counts as none, as TTL deletes late. :func:`decide` is the whole
decision; the stores only write what it says, conditionally.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass


class State(enum.Enum):
    """An effect record's state."""

    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class Tenure:
    """Who claims: one processor's run under one holding of a shard lease. ``claim``
    is random per run, so a shard restarted in place (the same lease) is a new tenure."""

    lease: str
    owner: str
    claim: str


@dataclass(frozen=True, slots=True)
class Effect:
    """One effect record."""

    key: str
    state: State
    tenure: Tenure
    payload_hash: str
    """What the effect was run for (a hash of the record's payload or the caller's
    ``payload``): the same key with another payload is a reused key, refused."""
    expires: int
    """Epoch seconds after which the record counts as absent (DynamoDB TTL's)."""
    result: str | None = None
    """The effect's result as JSON text (COMPLETED only)."""
    written_ms: int = 0
    covers: str | None = None
    """For an effect on a group of records (:mod:`.groups`), the group's last position,
    written with the claim: a delivery after a crash cuts the same group."""


def payload_hash(payload: bytes) -> str:
    """The SHA-256 of a payload, hex, cut to 32 characters."""
    return hashlib.sha256(payload).hexdigest()[:32]


class Mode(enum.Enum):
    """What the downstream offers, chosen per call."""

    KEYED = "keyed"
    """It honours an idempotency key (payment APIs' ``Idempotency-Key``): an effect
    whose outcome is unknown is run again under the same key: exactly once."""
    AT_MOST_ONCE = "at-most-once"
    """It does not: an effect whose outcome is unknown is never run again, but
    recorded as UNKNOWN and reported: at most once."""


class Action(enum.Enum):
    """What to do about a key."""

    CLAIM = "claim"
    """No live record: claim it (over ``existing``, if expired) and run the effect."""
    RESUME = "resume"
    """The claim in progress is this run's own and its effect has not started (the
    claim's write went through though its answer was lost, and was retried): run it."""
    TAKE_OVER = "take-over"
    """A claim of another tenure is in progress and the downstream honours the key:
    claim over it and run the effect again under the same key."""
    MARK_UNKNOWN = "mark-unknown"
    """A claim of another tenure is in progress and the downstream does not honour the
    key: record UNKNOWN over it, report it, and do not run the effect."""
    RETURN = "return"
    """COMPLETED: return the stored result without running the effect."""
    UNKNOWN = "unknown"
    """Already UNKNOWN: report it (again) without running the effect."""
    REUSED = "reused"
    """The record is for another payload: the key was reused; refuse."""


def decide(
    existing: Effect | None, payload: str, mode: Mode, now: int, unstarted: str | None = None
) -> Action:
    """What to do about a key whose record is ``existing`` (None: none), for an effect
    on ``payload`` (its hash), at ``now`` (epoch seconds); ``unstarted`` is the claim id
    of this run when it has not started the key's effect. Only the current tenure of
    the shard's lease may write at all (every write is fenced by it), so a claim in
    progress that is not this call's own is always a claimant that is gone."""
    if existing is None or existing.expires <= now:
        return Action.CLAIM
    if existing.payload_hash != payload:
        return Action.REUSED
    if existing.state is State.COMPLETED:
        return Action.RETURN
    if existing.state is State.UNKNOWN:
        return Action.UNKNOWN
    if existing.tenure.claim == unstarted:
        return Action.RESUME
    return Action.TAKE_OVER if mode is Mode.KEYED else Action.MARK_UNKNOWN

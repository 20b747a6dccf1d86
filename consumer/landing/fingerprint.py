"""The landing settings a fleet's workers must share, per stream, and how one worker's
compare with the fleet's record of them.

Two workers that land one stream differently split its archive: a shard that moves
between them lands under two prefixes, in two payload formats, or with and without
producer event ids, and takeover's reconciliation, which looks only where its own
worker lands, lands the records after the last checkpoint a second time. What decides
where and how a stream lands is :class:`Landing`: the archive, the payload format, the
event-id pointer and the key layout (fixed by the release:
:data:`consumer.archive.layout.TEMPLATE`). Settings that only tune how fast or how
small (file sizes, gzip, dedupe windows, the start position) may differ, and so may
the processor class: a fleet moving from one class to another (a subclass of the
lander, a release's rename) lands the same way, and a processor that lands elsewhere
names its own archive.

Each stream's record in the lease table (:class:`~consumer.leases.model.LandingRecord`)
holds the landing the fleet lands it with, first written by the first worker to start.
:func:`judge` is the whole decision: agree, record (there is none yet), adopt (this
worker's landing replaces the fleet's: a change on purpose, named by its digest in
``LANDER_LANDING_ADOPT``), or refuse.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Set
from dataclasses import asdict, dataclass, fields

from consumer.archive.layout import TEMPLATE

DIGEST_CHARS = 12
"""A digest is this many hex characters of the SHA-256 of the canonical form (48 bits:
telling a handful of landings of one stream apart, not a security boundary)."""


@dataclass(frozen=True, slots=True)
class Landing:
    """Where and how one stream lands."""

    archive: str | None
    payload_format: str
    event_id_pointer: str | None
    layout: str = TEMPLATE

    @property
    def canonical(self) -> str:
        """Sorted compact JSON: what the digest is of, and what the record keeps."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @property
    def digest(self) -> str:
        """The first :data:`DIGEST_CHARS` hex characters of the canonical form's SHA-256."""
        return hashlib.sha256(self.canonical.encode()).hexdigest()[:DIGEST_CHARS]

    @classmethod
    def parse(cls, text: str) -> Landing | None:
        """A record's canonical form read back; None for anything else (a newer release's
        record with fields this one does not know is shown by its digest alone)."""
        try:
            values = json.loads(text)
            names = {f.name for f in fields(cls)}
            if not isinstance(values, dict) or set(values) != names:
                return None
            return cls(**values)
        except (ValueError, TypeError):
            return None

    def describe(self) -> str:
        """One phrase: ``s3://lake/orders, json, event id /event_id``, and the key
        layout where it is not this release's."""
        parts = [self.archive or "no archive", self.payload_format]
        parts.append(f"event id {self.event_id_pointer or 'none'}")
        if self.layout != TEMPLATE:
            parts.append(f"keys {self.layout}")
        return ", ".join(parts)


_NAMES = {
    "archive": "archive",
    "payload_format": "payload format",
    "event_id_pointer": "event-id pointer",
    "layout": "key layout",
}


def differences(ours: Landing, theirs: Landing) -> list[str]:
    """What differs, one phrase per setting: ``archive s3://b here, s3://a in the fleet``."""
    found = []
    for name, label in _NAMES.items():
        mine, other = getattr(ours, name), getattr(theirs, name)
        if mine != other:
            found.append(f"{label} {mine or 'none'} here, {other or 'none'} in the fleet")
    return found


class Verdict(enum.Enum):
    """What a worker does about one stream's record."""

    AGREE = "agree"
    """The record is this worker's landing."""
    RECORD = "record"
    """There is no record: write this worker's landing as the fleet's."""
    ADOPT = "adopt"
    """The record differs and LANDER_LANDING_ADOPT names this worker's digest: replace it."""
    REFUSE = "refuse"
    """The record differs: this worker must not land the stream."""


def judge(ours: Landing, recorded: str | None, adopt: Set[str]) -> Verdict:
    """The verdict for this worker's landing ``ours`` against the recorded digest
    (None: no record)."""
    if recorded is None:
        return Verdict.RECORD
    if recorded == ours.digest:
        return Verdict.AGREE
    return Verdict.ADOPT if ours.digest in adopt else Verdict.REFUSE


def check_digests(text: str | None) -> frozenset[str]:
    """``LANDER_LANDING_ADOPT`` read: digests separated by commas; ValueError otherwise."""
    if text is None or not text.strip():
        return frozenset()
    digests = {part.strip().lower() for part in text.split(",") if part.strip()}
    bad = sorted(d for d in digests if len(d) != DIGEST_CHARS or not _is_hex(d))
    if bad:
        raise ValueError(
            f"{', '.join(bad)}: each must be a landing digest of {DIGEST_CHARS} hex characters, "
            "as `lander run --check` prints it"
        )
    return frozenset(digests)


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)

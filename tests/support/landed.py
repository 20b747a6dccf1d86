"""Landed objects written by hand, as docs/landing.md lays them out, not by the lander.

Tests of the compaction job build their archives here so the job is held to the
documented format rather than to whatever the lander's encoder happens to write:
string formatting and gzip, nothing imported from ``consumer``.
"""

from __future__ import annotations

import gzip
from pathlib import Path

STREAM = "orders"


def line(
    shard: str, seq: int, arrival: str, event_id: str | None, data: bytes, *, stream: str = STREAM
) -> bytes:
    """One landed line (``data`` last); ``arrival`` as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    head = (
        f'{{"stream":"{stream}","shard_id":"{shard}","sequence_number":"{seq}",'
        f'"subsequence_number":0,"partition_key":"pk-{seq % 7}","arrival_ts":"{arrival}",'
    )
    event = "null" if event_id is None else f'"{event_id}"'
    return head.encode() + b'"event_id":' + event.encode() + b',"data":' + data + b"}\n"


def write_object(
    root: Path, minute: str, shard: str, lines: list[bytes], *, cut: int = 0, stream: str = STREAM
) -> Path:
    """An object of ``lines`` under ``root`` for ``minute`` (``YYYY-MM-DDTHH:MM``), named
    after the sequence numbers of its first and last lines; ``cut`` bytes chopped off
    its gzip (a truncated object)."""
    day, hour, mm = minute[:10], minute[11:13], minute[14:16]
    first, last = (_sequence(lines[0]), _sequence(lines[-1]))
    folder = root / f"stream={stream}/dt={day}/hour={hour}/minute={mm}/shard={shard}"
    folder.mkdir(parents=True, exist_ok=True)
    body = gzip.compress(b"".join(lines), compresslevel=1)
    path = folder / f"{first}-{last}.jsonl.gz"
    path.write_bytes(body[: len(body) - cut] if cut else body)
    return path


def _sequence(text: bytes) -> str:
    parts = text.split(b'"sequence_number":"', 1)
    return parts[1].split(b'"', 1)[0].decode() if len(parts) == 2 else "0"


def malformed_variants(good: bytes) -> list[bytes]:
    """Lines that are not landed records, each made from a ``good`` line (whose stream
    is ``orders``, sequence number ``"7"``, arrival 05:00:00.000 and event id null)."""
    return [
        b"not json",
        good.replace(b'"orders"', b'"other"'),
        good.replace(b'"7"', b'"7a"'),
        good.replace(b"05:00:00.000Z", b"25:00:00.000Z"),
        good.replace(b'"subsequence_number":0', b'"subsequence_number":"0"'),
        good.replace(b'"event_id":null', b'"event_id":42'),
        good[: good.index(b',"data":')] + b',"data":}',
        good + b"x",
    ]

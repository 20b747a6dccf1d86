"""A small landed object written with the format's reference encoder.

For runs that need an archive and not its contents: the Spark image's class-data
archive (deploy/docker/class_archive.py compacts it once at build) and the compaction
benchmark's fixed cost (bench/compaction.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from consumer.archive import codec, layout
from consumer.archive.envelope import encode_line, format_ts
from consumer.sequence import Position


def write_sample(root: Path, stream: str, shard: str, minute: datetime, lines: int = 3) -> Path:
    """One object of ``lines`` records (sequence numbers and event ids 1..lines, one a
    second from ``minute``, payload ``{"n":N}``) under the archive folder ``root``."""
    body = b"".join(
        encode_line(
            stream=stream,
            shard_id=shard,
            sequence_number=n,
            subsequence_number=0,
            partition_key="p",
            arrival_ts=format_ts(minute + timedelta(seconds=n)),
            event_id=f"e{n}",
            with_event_id=True,
            data=b'{"n":%d}' % n,
        )
        for n in range(1, lines + 1)
    )
    key = layout.object_key(
        "", stream, shard, minute, first=Position(1, 0), last=Position(lines, 0)
    )
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(codec.compress(body))
    return path

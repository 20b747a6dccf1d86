"""Which write task each file of a run is written by: one task per file.

A run writes hour ``h`` as ``files[h]`` Parquet files
(:func:`sparkjobs.compaction.plan.files_per_hour`). Spark's writer writes one file per
hour per task, so each of those files needs a task of its own: two shares of one hour
in one task would make one file of twice the size. ``repartition(n, column)`` sends a
row to task ``pmod(murmur3(column, seed 42), n)``: hashing the (hour, share) pair
itself, shares collide as hash values do (about a third of the tasks of a day end up
with two or more groups). Instead each group is given an integer key chosen so that its
hash lands on the group's own task: :func:`task_keys`.

Pure (no pyspark): :func:`spark_hash_int` is Spark's ``Murmur3Hash`` of one integer
(MurmurHash3 x86 32-bit of 4 bytes), checked against Spark's ``hash()`` in the tests.
"""

from __future__ import annotations

from collections.abc import Sequence

SEED = 42
"""Spark's seed for ``hash()`` and hash partitioning."""
MASK = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & MASK


def spark_hash_int(value: int, seed: int = SEED) -> int:
    """Spark's ``hash()`` of an ``int`` column holding ``value`` (signed 32-bit)."""
    k = (value & MASK) * 0xCC9E2D51 & MASK
    k = _rotl(k, 15) * 0x1B873593 & MASK
    h = _rotl((seed & MASK) ^ k, 13)
    h = (h * 5 + 0xE6546B64) & MASK
    h ^= 4  # the input's length in bytes
    h ^= h >> 16
    h = h * 0x85EBCA6B & MASK
    h ^= h >> 13
    h = h * 0xC2B2AE35 & MASK
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def task_of(key: int, tasks: int) -> int:
    """The task ``repartition(tasks, column)`` sends a row with ``key`` to."""
    return spark_hash_int(key) % tasks  # Python's % of a positive divisor is pmod


def task_keys(tasks: int) -> list[int]:
    """For each task ``i`` of ``tasks``, the smallest non-negative key sent to it."""
    keys: dict[int, int] = {}
    candidate = 0
    while len(keys) < tasks:
        keys.setdefault(task_of(candidate, tasks), candidate)
        candidate += 1
    return [keys[i] for i in range(tasks)]


def first_groups(files: Sequence[int]) -> list[int]:
    """The first group (task) of each hour, given each hour's number of files: hour
    ``i``'s shares are groups ``first_groups[i]`` to ``first_groups[i] + files[i] - 1``."""
    firsts, total = [], 0
    for count in files:
        firsts.append(total)
        total += count
    return firsts

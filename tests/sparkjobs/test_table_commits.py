"""The table's own changes (sparkjobs/table/commits.py) against a real embedded catalog:
a commit that lost a race is made again from the table as the other writer left it;
one that always loses gives up in one line (no Spark: fast)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyiceberg.types import StringType

from sparkjobs.catalog import table_ref
from sparkjobs.table import commits
from sparkjobs.table.payload import INT, LONG, STRING, Field, Struct
from sparkjobs.table.table import COMMIT_ATTEMPTS, CommitConflictError, open_table, payload_schema

if TYPE_CHECKING:
    from pyiceberg.table import Table

    Change = Callable[[Table], Callable[[], None] | None]


def _race(uri: str, rounds: int) -> tuple[Change, list[int]]:
    """A change that adds the column ``mine``; before each of its first ``rounds``
    commits another writer adds a column of its own, so those commits lose the race
    (Iceberg's schema commits assert the schema they started from)."""
    ref = table_ref(uri, "s")
    calls: list[int] = []

    def change(table: Table) -> Callable[[], None] | None:
        calls.append(1)
        if "mine" in {f.name for f in table.schema().fields}:
            return None

        def commit() -> None:
            if len(calls) <= rounds:
                other = open_table(ref)
                assert other is not None
                with other.update_schema() as update:
                    update.add_column(f"theirs_{len(calls)}", StringType())
            with table.update_schema() as update:
                update.add_column("mine", StringType())

        return commit

    return change, calls


def _names(uri: str) -> list[str]:
    table = open_table(table_ref(uri, "s"))
    assert table is not None
    return [f.name for f in table.schema().fields]


def test_a_commit_that_lost_a_race_is_made_again_on_the_table_as_left(tmp_path: Path) -> None:
    uri = tmp_path.as_uri()
    change, calls = _race(uri, rounds=2)
    assert commits._until_committed(table_ref(uri, "s"), None, "test", change) is True
    assert _names(uri)[-3:] == ["theirs_1", "theirs_2", "mine"]
    assert len(calls) == 3
    # Nothing left to change: no commit.
    again, _ = _race(uri, rounds=0)
    assert commits._until_committed(table_ref(uri, "s"), None, "test", again) is False


def test_a_commit_that_always_loses_gives_up_in_one_line(tmp_path: Path) -> None:
    uri = tmp_path.as_uri()
    change, _ = _race(uri, rounds=COMMIT_ATTEMPTS)
    with pytest.raises(CommitConflictError) as refused:
        commits._until_committed(table_ref(uri, "s"), None, "test", change)
    assert str(refused.value) == (
        f"table lander.s: {COMMIT_ATTEMPTS} test commits conflicted with other writers"
    )


def test_required_columns_become_optional_once(tmp_path: Path) -> None:
    ref = table_ref(tmp_path.as_uri(), "s")
    table = open_table(ref)
    assert table is not None
    assert [f.name for f in table.schema().fields if f.required] == [
        "stream",
        "shard_id",
        "sequence_number",
        "subsequence_number",
        "arrival_ts",
    ]
    assert commits.relax_required(ref) is True
    table = open_table(ref)
    assert table is not None
    assert not [f.name for f in table.schema().fields if f.required]
    assert commits.relax_required(ref) is False


def test_payload_columns_are_required_only_where_the_table_agrees(tmp_path: Path) -> None:
    """The run that makes the payload column sets its required fields; a run that made
    it at the same time (its own required set) adds its other fields optional, relaxes
    what it saw left out, and never tightens an optional one."""
    ref = table_ref(tmp_path.as_uri(), "s")
    first = Struct((Field("a", LONG, True), Field("b", STRING, False)))
    assert commits.evolve_payload(ref, first) is True
    other = Struct((Field("a", LONG, False), Field("b", STRING, True), Field("z", INT, True)))
    assert commits.evolve_payload(ref, other) is True
    table = open_table(ref)
    assert table is not None
    assert payload_schema(table) == Struct(
        (Field("a", LONG, False), Field("b", STRING, False), Field("z", INT, False))
    )
    assert commits.evolve_payload(ref, other) is False  # nothing left to change

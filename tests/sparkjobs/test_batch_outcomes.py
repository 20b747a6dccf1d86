"""What a batch run tells its scheduler, without a JVM.

`lander maintain` on a table that does not exist exits 3 with one line naming the
table and its catalog.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sparkjobs.test_batch_cli import (  # _no_spark: autouse here as there
    STREAM,
    _maintain,
    _no_spark,  # noqa: F401
    _publish,
)

# -- maintain ----------------------------------------------------------------------------


def test_maintain_of_a_table_that_does_not_exist_exits_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No catalog at all, then a catalog without the second stream's table: one line
    naming the table and the catalog; the table that exists is still maintained."""
    compacted = (tmp_path / "compacted").as_uri()
    assert _maintain(tmp_path) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"lander maintain: lander.{STREAM}: no such table in catalog 'lander' (output "
        f"{compacted}): run lander compact first"
    ]
    assert not (tmp_path / "compacted").exists(), "maintain made something"

    _publish(tmp_path, rows=10)
    assert _maintain(tmp_path, "--stream", f"{STREAM},payments") == 3
    out, err = capsys.readouterr()
    (done,) = [line for line in out.splitlines() if line.startswith("lander.")]
    assert done.startswith(f"lander.{STREAM}: snapshots expired 0, kept 1;")
    assert err.splitlines() == [
        "lander maintain: lander.payments: no such table in catalog 'lander' (output "
        f"{compacted}): run lander compact first"
    ]

"""The pure parts of the benchmarks: doc blocks, the summary table, the KCL arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from bench.aws_requests import classify, kcl_per_minute, lander_model_per_minute
from bench.docs import replace_block, summary_table, update_text
from bench.kcl import KclDefaults

PAGE = """# Benchmarks

Hand-written introduction.

<!-- bench:summary -->
old summary
<!-- /bench:summary -->

## drain

Hand-written explanation.

<!-- bench:drain -->
old drain
<!-- /bench:drain -->

<!-- bench:hotpath -->
old hotpath
<!-- /bench:hotpath -->
"""

MACHINE = {
    "nproc": 2,
    "cpu_model": "Some CPU",
    "memory_gib": 23.5,
    "platform": "Linux",
    "python": "3.11.7",
    "node": "v20",
    "kinesalite": "3.3.3",
    "java": None,
    "packages": {"aiobotocore": "3.10.0"},
}


def _side(rate: float, ratio: float, baseline: str = "bare") -> dict[str, Any]:
    return {
        "median_rate": rate,
        "median_steady_rate": rate * 1.5,
        "ratio_to_bare": ratio,
        "steady_ratio_to_bare": ratio,
        "baseline": baseline,
        "ratio_to_baseline": ratio,
        "steady_ratio_to_baseline": ratio,
    }


def _drain(quick: bool = False) -> dict[str, Any]:
    return {
        "quick": quick,
        "command": "python -m bench drain",
        "started": "2026-11-22T10:00:00+0000",
        "wall_seconds": 60.0,
        "machine": MACHINE,
        "config": {"shards": 4, "records_per_shard": 20_000},
        "target_ratio": 0.9,
        "summary": {
            "bare": _side(20_000, 1.0),
            "worker": _side(17_000, 0.85),
            "async-kinesis": _side(8_000, 0.4),
        },
        "async_kinesis": {"versions": {"async-kinesis": "3.0.1"}},
    }


def _hotpath(quick: bool = False) -> dict[str, Any]:
    return {
        "quick": quick,
        "command": "python -m bench hotpath",
        "started": "2026-11-22T09:00:00+0000",
        "wall_seconds": 20.0,
        "machine": MACHINE,
        "bare_records_per_cpu_second": 230_000,
        "target_records_per_cpu_second": 150_000,
        "variants": {
            "plain": {"records_per_cpu_second": 160_000, "ratio_to_bare": 0.7, "meets_target": True}
        },
    }


def test_replace_block_keeps_everything_outside_the_markers() -> None:
    text, found = replace_block(PAGE, "drain", "new drain\n")
    assert found
    assert "new drain" in text
    assert "old drain" not in text
    assert "Hand-written explanation." in text
    assert text.count("<!-- bench:drain -->") == text.count("<!-- /bench:drain -->") == 1
    again, _ = replace_block(text, "drain", "new drain")
    assert again == text  # idempotent


def test_replace_block_reports_a_missing_block() -> None:
    text, found = replace_block(PAGE, "latency", "anything")
    assert not found
    assert text == PAGE


def test_summary_gives_every_figure_a_ratio_and_a_verdict() -> None:
    table = summary_table({"drain": _drain(), "hotpath": _hotpath()})
    lines = table.splitlines()
    assert lines[0].startswith("| benchmark |")
    drain = next(line for line in lines if line.startswith("| drain, one worker"))
    assert "**0.85x**" in drain
    assert "**missed**" in drain  # 0.85 < 0.9
    peer = next(line for line in lines if "async-kinesis 3.0.1" in line)
    assert "worker = 2.12x async-kinesis" in peer
    hot = next(line for line in lines if line.startswith("| landing hot path"))
    assert "0.70x" in hot
    assert ": met" in hot


def test_a_quick_result_never_replaces_a_block() -> None:
    renderers = {"drain": lambda r: "DRAIN REPORT", "hotpath": lambda r: "HOT REPORT"}
    results = {"drain": _drain(), "hotpath": _hotpath(quick=True)}
    text, notes = update_text(PAGE, results, renderers)
    assert "DRAIN REPORT" in text
    assert "old hotpath" in text
    assert "HOT REPORT" not in text
    assert any("hotpath" in note and "--quick" in note for note in notes)
    assert any(note.startswith("machine:") for note in notes)  # no machine block here
    summary = text.split("<!-- bench:summary -->")[1].split("<!-- /bench:summary -->")[0]
    assert "landing hot path" not in summary  # the quick figures stay out of the summary


def test_a_local_path_is_never_written() -> None:
    renderers = {"drain": lambda r: "wrote /home/someone/drain.prof"}
    with pytest.raises(ValueError, match="local path"):
        update_text(PAGE, {"drain": _drain()}, renderers)


def test_kcl_defaults_give_the_documented_intervals() -> None:
    kcl = KclDefaults()
    assert kcl.renew_ms == pytest.approx(10_000 / 3 - 25)
    assert kcl.taker_ms == 20_050
    per_minute = kcl_per_minute(shards=4, workers=3, checkpoints_per_shard_minute=1.0, kcl=kcl)
    assert per_minute["dynamodb UpdateItem (renew)"] / 4 == pytest.approx(18.14, abs=0.01)
    assert per_minute["dynamodb UpdateItem (checkpoint)"] == 4.0
    # Lease taker every ~20 s plus one shard sync a minute, per worker.
    assert per_minute["dynamodb Scan"] == pytest.approx(3 * (60_000 / 20_050 + 1))
    assert per_minute["kinesis GetRecords"] == 240.0
    assert per_minute["kinesis ListShards"] == 3.0


def test_lander_model_matches_the_operations_page() -> None:
    model = lander_model_per_minute(
        4, 3, 6.0, renew_seconds=10 / 3, sweep_seconds=60.0, shard_sync_seconds=30.0
    )
    # docs/operations.md, worked example: 54 beats (each worker every 3.3 s), 60 writes
    # of the leader item, 24 checkpoints; 91 Scans (the leader's of the workers table
    # every second, the deputy's every 2 s, the sweep); 62 GetItems of the leader item
    # (the deputy every second, the third worker every 30 s); 2 ListShards.
    assert model["dynamodb UpdateItem (renew)"] == pytest.approx(54)
    assert model["dynamodb PutItem"] == pytest.approx(60)
    assert model["dynamodb UpdateItem (checkpoint)"] == 24
    assert model["dynamodb Scan"] == pytest.approx(91)
    assert model["dynamodb GetItem"] == pytest.approx(62)
    assert model["kinesis ListShards"] == pytest.approx(2)


@pytest.mark.parametrize(
    ("expression", "kind"),
    [
        ("SET lastUpdateMs = :now, leaseCounter = :next", "renew"),
        ("SET lastUpdateMs = :now, leaseCounter = :next, millisBehindLatest = :lag", "renew"),
        (
            "SET lastUpdateMs = :now, leaseCounter = :next, checkpoint = :cp, "
            "checkpointSubSequenceNumber = :sub, ownerSwitchesSinceCheckpoint = :zero",
            "checkpoint",
        ),
        (
            "SET lastUpdateMs = :now, leaseOwner = :me, leaseCounter = :next REMOVE handoffTo",
            "take, hand-off, release",
        ),
        (
            "SET lastUpdateMs = :now, leaseCounter = :next REMOVE leaseOwner, handoffTo",
            "take, hand-off, release",
        ),
        ("SET handoffTo = :to", "take, hand-off, release"),
    ],
)
def test_lease_writes_are_told_apart(expression: str, kind: str) -> None:
    assert classify("dynamodb", "UpdateItem", {"UpdateExpression": expression}) == (
        f"dynamodb UpdateItem ({kind})"
    )
    assert classify("kinesis", "GetRecords", {}) == "kinesis GetRecords"


def test_a_run_of_one_benchmark_keeps_the_other_benchmarks_summary_rows() -> None:
    """The rows of benchmarks with no result at hand stay as the page had them."""
    page = PAGE.replace(
        "old summary",
        "| benchmark | project | baseline / bound | result | target |\n"
        "|---|---|---|---|---|\n"
        "| drain, stale row | 1 | 2 | 3 | 4 |\n"
        "| compaction of a 200k day | 30 CPU-s | DuckDB 5 | **6x** | met |\n"
        "| landing hot path, stale | 1 | 2 | 3 | 4 |",
    )
    text, _ = update_text(page, {"drain": _drain()}, {"drain": lambda r: "DRAIN REPORT"})
    summary = text.split("<!-- bench:summary -->")[1].split("<!-- /bench:summary -->")[0]
    rows = [row for row in summary.splitlines() if row.startswith("| ")][2:]
    assert "drain, stale row" not in summary  # replaced by the new result's rows
    assert rows[0].startswith("| drain")
    assert rows[-2:] == [
        "| landing hot path, stale | 1 | 2 | 3 | 4 |",
        "| compaction of a 200k day | 30 CPU-s | DuckDB 5 | **6x** | met |",
    ]  # kept, in the benchmarks' usual order


def test_hotpath_rows_from_the_response_compare_kpl_with_plain() -> None:
    """The rows from GetRecords' responses: the parse against aiobotocore's, and
    KPL-100 held to at least plain records' rate."""
    result = _hotpath()
    result["responses"] = {
        "codec": "isal",
        "parse_us_per_record": {"botocore": 9.0, "lander": 6.0},
        "variants": {
            "plain isal": {"records_per_cpu_second": 80_000},
            "kpl_100 isal": {"records_per_cpu_second": 120_000},
        },
    }
    result["compiled_responses"] = {
        **result["responses"],
        "variants": {
            "plain isal": {"records_per_cpu_second": 100_000},
            "kpl_100 isal": {"records_per_cpu_second": 90_000},
        },
    }
    lines = summary_table({"hotpath": result}).splitlines()
    parse = next(line for line in lines if "response parsed, plain records |" in line)
    assert "6.00 us/record" in parse
    assert "1.50x faster" in parse
    kpl = [line for line in lines if "from the GetRecords response, KPL" in line]
    assert len(kpl) == 2
    assert "1.50x" in kpl[0]
    assert ">= plain: met" in kpl[0]
    assert "0.90x" in kpl[1]
    assert "**missed**" in kpl[1]
    # A run of another benchmark keeps every one of these rows.
    kept = summary_table({}, "\n".join(lines)).splitlines()
    assert [line for line in kept if line.startswith("| ")] == [
        line for line in lines if line.startswith("| ")
    ]

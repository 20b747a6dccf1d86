"""Tables on stdout and JSON files in ``bench/results``."""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = (
    "drain",
    "failover",
    "hotpath",
    "latency",
    "requests",
    "scale",
    "compaction",
    "effects",
)
"""Every benchmark, in the order `python -m bench` runs them and the page shows them."""
RESULTS = Path(__file__).resolve().parent / "results"


def median(values: Sequence[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")


def fmt(value: object, digits: int = 2) -> str:
    """A number with ``digits`` decimals (integers and big numbers without), or str."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else ("yes" if value else "NO")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 2) -> str:
    """A plain fixed-width table, numbers right-aligned (``digits`` decimals)."""
    cells = [[fmt(value, digits) for value in row] for row in rows]
    widths = [
        max(len(header), *(len(row[i]) for row in cells)) if cells else len(header)
        for i, header in enumerate(headers)
    ]
    numeric = [
        all(isinstance(row[i], int | float) or row[i] is None for row in rows) and bool(rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            value.rjust(width) if is_number else value.ljust(width)
            for value, width, is_number in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in cells)])


def heading(text: str) -> None:
    """Print a section heading."""
    print(f"\n== {text} ==", flush=True)


def progress(text: str) -> None:
    """Print a progress line (to stderr, so stdout stays the report)."""
    sys.stdout.flush()
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def write_results(name: str, payload: dict[str, Any], directory: Path = RESULTS) -> Path:
    """Write ``<directory>/<name>.json`` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    return path

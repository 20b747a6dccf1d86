"""Write the measured parts of docs/benchmarks.md from ``bench/results/*.json``.

The page keeps its hand-written sections. What is measured sits between markers::

    <!-- bench:NAME -->
    ... generated, replaced on every write ...
    <!-- /bench:NAME -->

``summary`` is the table of every figure with its ratio to its baseline, ``machine`` the
machine facts and versions, and each benchmark's block is its report as printed. A
result from a ``--quick`` run never replaces a block: the page keeps the last full run
(``python -m bench --docs-only`` rewrites the page from the JSON files alone).

Long module: every benchmark's summary rows sit beside the table they fill and the
blocks they are written into, so a benchmark's figures are added in one place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.report import BENCHMARKS, RESULTS

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HANDOFF_TARGET = 1.0
"""Seconds from SIGTERM to the survivor delivering (issue 13)."""
BLOCKS = ("summary", "machine", *BENCHMARKS)
# Anything that looks like a path of the machine the benchmarks ran on.
_LOCAL_PATH = re.compile(r"(?<![\w.])/(?:work|tmp|root|home|opt|var|usr)/")

Row = tuple[str, str, str, str, str]


def load_results(directory: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """Every ``<benchmark>.json`` there is, by benchmark name."""
    results: dict[str, dict[str, Any]] = {}
    for name in BENCHMARKS:
        path = directory / f"{name}.json"
        if path.exists():
            results[name] = json.loads(path.read_text())
    return results


def replace_block(text: str, name: str, content: str) -> tuple[str, bool]:
    """``text`` with the block ``name`` holding ``content``; False if it has no such block."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if i < 0 or j < 0:
        return text, False
    return text[: i + len(start)] + "\n" + content.strip("\n") + "\n" + text[j:], True


def _x(value: float) -> str:
    return f"{value:.2f}x"


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def drain_rows(result: Mapping[str, Any]) -> list[Row]:
    """The worker against bare; the proposed parser; async-kinesis."""
    summary = result["summary"]
    config = result["config"]
    shape = f"{config['shards']} shards x {config['records_per_shard']:,}"
    bare, worker = summary["bare"], summary["worker"]
    target = result["target_ratio"]
    rows: list[Row] = [
        (
            f"drain, one worker, {shape}",
            f"{_rate(worker['median_rate'])} rec/s (steady {_rate(worker['median_steady_rate'])})",
            f"bare GetRecords loop {_rate(bare['median_rate'])} "
            f"(steady {_rate(bare['median_steady_rate'])})",
            f"**{_x(worker['ratio_to_bare'])}** (steady {_x(worker['steady_ratio_to_bare'])})",
            f">= {target}x: {_met(worker['ratio_to_bare'] >= target)}",
        )
    ]
    epoch_bare = summary.get("bare, epoch timestamps")
    if epoch_bare:
        rows.append(
            (
                "drain, worker against a bare loop with the worker's timestamp parser",
                f"{_rate(worker['median_rate'])} rec/s "
                f"(steady {_rate(worker['median_steady_rate'])})",
                f"bare, same parser {_rate(epoch_bare['median_rate'])} "
                f"(steady {_rate(epoch_bare['median_steady_rate'])})",
                f"**{_x(worker['median_rate'] / epoch_bare['median_rate'])}** "
                f"(steady {_x(worker['median_steady_rate'] / epoch_bare['median_steady_rate'])})",
                "like for like",
            )
        )
    peer = summary.get("async-kinesis")
    if peer:
        version = result.get("async_kinesis", {}).get("versions", {}).get("async-kinesis", "?")
        rows.append(
            (
                f"drain, async-kinesis {version} (in-memory checkpoints, no leases)",
                f"{_rate(peer['median_rate'])} rec/s (steady {_rate(peer['median_steady_rate'])})",
                f"bare GetRecords loop {_rate(bare['median_rate'])}",
                f"**{_x(peer['ratio_to_bare'])}** (steady {_x(peer['steady_ratio_to_bare'])})",
                f"worker = {_x(worker['median_rate'] / peer['median_rate'])} async-kinesis",
            )
        )
    elif result.get("async_kinesis", {}).get("skipped"):
        rows.append(
            (
                "drain, async-kinesis",
                "not run",
                "-",
                "-",
                str(result["async_kinesis"]["skipped"]).splitlines()[0],
            )
        )
    return rows


def _handoff_target(term: Mapping[str, Any]) -> str:
    """Issue 13: a graceful hand-off under a second, with nothing delivered twice."""
    if term.get("redelivered") is None:  # a result from before the count existed
        return f"< {term['bound_seconds']:.2f} s: {_met(term['bound_met'])}"
    met = term["max_deliver_seconds"] < HANDOFF_TARGET and term["redelivered"] == 0
    return f"< {HANDOFF_TARGET:g} s, none redelivered: {_met(met)}"


def failover_rows(result: Mapping[str, Any]) -> list[Row]:
    """kill -9 against failover + renew; SIGTERM against the failover time."""
    rows: list[Row] = []
    for setting in result["settings"]:
        failover = setting["failover_seconds"]
        mode = setting.get("coordination", "scan")
        kill, term = setting["summary"]["kill"], setting["summary"]["sigterm"]
        if kill["rounds"]:
            rows.append(
                (
                    f"failover, kill -9, {mode}, failover {failover:g} s ({kill['rounds']} rounds)",
                    f"median {kill['median_deliver_seconds']:.2f} s, "
                    f"max {kill['max_deliver_seconds']:.2f} s",
                    f"failover + renew = {kill['bound_seconds']:.2f} s",
                    f"max = {_x(kill['max_over_bound'])} bound",
                    f"<= {kill['bound_seconds']:.2f} s: {_met(kill['bound_met'])}",
                )
            )
        if term["rounds"]:
            rows.append(
                (
                    f"graceful hand-off (SIGTERM), {mode}, failover {failover:g} s "
                    f"({term['rounds']} rounds)",
                    f"median {term['median_deliver_seconds']:.2f} s, "
                    f"max {term['max_deliver_seconds']:.2f} s"
                    + (
                        f" (unread gap median {term['median_gap_seconds']:.2f} s, "
                        f"max {term['max_gap_seconds']:.2f} s)"
                        if term.get("median_gap_seconds") is not None
                        else ""
                    )
                    + (
                        f", {term['redelivered']} redelivered"
                        if term.get("redelivered") is not None
                        else ""
                    ),
                    f"expiry = {term['bound_seconds']:.2f} s",
                    f"max = {_x(term['max_over_bound'])} expiry "
                    f"({term['bound_seconds'] / term['median_deliver_seconds']:.0f}x faster "
                    "at the median)",
                    _handoff_target(term),
                )
            )
    return rows


def hotpath_rows(result: Mapping[str, Any]) -> list[Row]:
    """Records per CPU-second against the fair baseline (orjson + zlib-1, or json.loads
    + gzip in results from before it), and the target."""
    baselines = result.get("baselines", {})
    fair = baselines.get("orjson + zlib-1")
    base_name = "orjson + zlib-1" if fair else "json.loads + gzip"
    base = fair or result["bare_records_per_cpu_second"]
    target = result["target_records_per_cpu_second"]
    names = {"plain": "plain records", "kpl_100": "KPL aggregates of 100"}

    def label(name: str) -> str:
        shape, _, codec = name.partition(" ")
        return names.get(shape, shape) + (f", {codec}" if codec else "")

    rows = [
        (
            f"landing hot path, {label(name)}",
            f"{_rate(variant['records_per_cpu_second'])} rec/CPU-s",
            f"{base_name} {_rate(variant.get('baseline', base))}",
            _x(variant.get("ratio_to_orjson", variant["ratio_to_bare"])),
            f">= {target:,}/s and "
            f"{result.get('target_ratio_to_orjson', 0.6)}x: {_met(variant['meets_target'])}",
        )
        for name, variant in result["variants"].items()
    ]
    for key, mode in (("responses", ""), ("compiled_responses", " compiled")):
        if key in result:
            rows += _response_rows(result[key], mode)
    return rows


def _response_rows(found: Mapping[str, Any], mode: str) -> list[Row]:
    """From GetRecords' responses: the parse, and KPL-100 against plain records."""
    parse, codec = found["parse_us_per_record"], found["codec"]
    plain = found["variants"][f"plain {codec}"]["records_per_cpu_second"]
    kpl = found["variants"][f"kpl_100 {codec}"]["records_per_cpu_second"]
    return [
        (
            # The parse is not compiled code; "compiled" names the run it was timed in.
            f"GetRecords response parsed, plain records{' (compiled run)' if mode else ''}",
            f"{parse['lander']:.2f} us/record",
            f"aiobotocore's parser {parse['botocore']:.2f} us",
            _x(parse["botocore"] / parse["lander"]) + " faster",
            "(reported)",
        ),
        (
            f"landing from the GetRecords response, KPL aggregates of 100, {codec}{mode}",
            f"{_rate(kpl)} rec/CPU-s",
            f"plain records {_rate(plain)}",
            _x(kpl / plain),
            f">= plain: {_met(kpl >= plain)}",
        ),
    ]


def latency_rows(result: Mapping[str, Any]) -> list[Row]:
    """put -> delivered and put -> landed, efo against polling in the same run."""
    if "efo" not in result:  # a result from before the read modes
        return []
    polling, efo = result["polling"], result["efo"]
    rows: list[Row] = []
    for what, key in (("delivered", "put_to_delivered"), ("landed in S3", "put_to_landed")):
        mine, base = efo[key], polling[key]
        rows.append(
            (
                f"put -> {what}, efo ({result.get('emulator', '?')}, flush "
                f"{result['flush_seconds']} s)",
                f"p50 {mine['p50']:.2f} s, p99 {mine['p99']:.2f} s",
                f"polling p50 {base['p50']:.2f} s, p99 {base['p99']:.2f} s",
                f"{_x(mine['p50'] / base['p50'])} / {_x(mine['p99'] / base['p99'])}",
                "(reported)",
            )
        )
    return rows


def requests_rows(result: Mapping[str, Any]) -> list[Row]:
    """Requests per shard-minute by service against KCL 2.x's defaults."""
    rows: list[Row] = []
    shape = f"{result['workers']} workers, {result['shards']} shards"
    for service, label in (("dynamodb", "DynamoDB"), ("kinesis", "Kinesis"), ("s3", "S3")):
        values = result["services"][service]
        ratio = values["ratio_to_kcl"]
        rows.append(
            (
                f"{label} requests per shard-minute ({shape})",
                f"{values['per_shard_minute']:.1f}",
                f"KCL 2.x defaults {values['kcl_per_shard_minute']:.1f}",
                "-" if ratio is None else f"**{_x(ratio)}**",
                "(reported)",
            )
        )
    return rows


def compaction_rows(result: Mapping[str, Any]) -> list[Row]:
    """Spark's CPU against DuckDB's: the fixed cost, then each day in a fresh process."""
    fixed = result["fixed"]
    rows: list[Row] = [
        (
            "compaction fixed cost (a fresh lander compact of one object)",
            f"{fixed['spark']['cpu_seconds']:.1f} CPU-s",
            f"DuckDB {fixed['duckdb']['cpu_seconds']:.2f} CPU-s",
            "-",
            "(reported)",
        )
    ]
    for size, found in result["sizes"].items():
        spark, duck, ratio = found["spark"], found["duckdb"], found["cpu_ratio"]
        target = result["target_cpu_ratio"]
        rows.append(
            (
                f"compaction of a {size} day ({found['archive']['lines'] / 1e6:.2f}M lines), "
                "fresh process",
                f"{spark['cpu_seconds']:.1f} CPU-s, {spark['per_row_us']:.1f} us/row",
                f"DuckDB {duck['cpu_seconds']:.1f} CPU-s, {duck['per_row_us']:.1f} us/row",
                f"**{_x(ratio)}** CPU",
                f"<= {target}x: {_met(ratio <= target)}" if size == "200k" else "(reported)",
            )
        )
        commit = found.get("commit")
        if commit and commit.get("share_of_job") is not None:
            share, most = commit["share_of_job"], result.get("target_commit_share", 0.05)
            rows.append(
                (
                    f"compaction, {size}: the Iceberg commit (pyiceberg) in that run",
                    f"{commit['cpu_seconds']:.2f} CPU-s",
                    f"the run {spark['cpu_seconds']:.1f} CPU-s",
                    f"**{share:.1%}** of it",
                    f"<= {most:.0%}: {_met(share <= most)}",
                )
            )
        readers = found.get("readers")
        if readers:
            rows.append(
                (
                    f"compaction, {size}: objects read whole (the object reader), fresh process",
                    f"{min(readers['objects_cpu_seconds']):.1f} CPU-s",
                    f"Spark's text reader {min(readers['text_cpu_seconds']):.1f} CPU-s",
                    f"**{_x(readers['ratio'])}** CPU",
                    "(reported)",
                )
            )
        two = found.get("two_days")
        if two:
            limit = result.get("target_marginal_ratio", 1.5)
            marginal = two["marginal_ratio"]
            rows.append(
                (
                    f"compaction, {size}: a second day in the same run, per row",
                    f"{two['spark']['marginal_per_row_us']:.1f} us/row",
                    f"DuckDB {two['duckdb']['marginal_per_row_us']:.1f} us/row",
                    f"**{_x(marginal)}** CPU",
                    f"<= {limit}x: {_met(marginal <= limit)}",
                )
            )
        streams = found.get("streams")
        if streams:
            most = result.get("target_streams_ratio", 2.5)
            rows.append(
                (
                    f"compaction, {size}: {len(streams['streams'])} streams in one lander compact",
                    f"{min(streams['cpu_seconds']):.1f} CPU-s",
                    f"one stream alone {min(streams['one_stream_cpu_seconds']):.1f} CPU-s",
                    f"**{_x(streams['ratio'])}** CPU",
                    f"<= {most}x: {_met(streams['ratio'] <= most)}",
                )
            )
    return rows


def scale_rows(result: Mapping[str, Any]) -> list[Row]:
    """Read units per shard-minute against KCL 3.x, flatness over the number of workers,
    and the times to balance, per coordination mode."""
    rows: list[Row] = []
    renew = result.get("renew_seconds", 10 / 3)
    for size in result["sizes"]:
        steady, kcl3 = size.get("steady"), size["kcl"]["kcl3"]["read_units"]
        mode = size.get("coordination", "scan")
        name = f"{size['shards']:,} shards x {size['workers']} workers, {mode}"
        if steady is None:
            rows.append((f"lease table, {name}", "never balanced", "-", "-", "(reported)"))
            continue
        ratio = steady["read_units"] / kcl3
        rows.append(
            (
                f"lease table read units per shard-minute, {name} (simulated)",
                f"{steady['read_units']:,.3f}",
                f"KCL 3.x defaults {kcl3:.3f} (KCL 2.x {size['kcl']['kcl2']['read_units']:.2f})",
                f"**{_x(ratio)}**",
                f"<= KCL 3.x: {_met(ratio <= 1.0)}",
            )
        )
        times = ", ".join(
            f"{phase} {'-' if value is None else f'{value:.1f} s ({value / renew:.1f} renew)'}"
            for phase, value in (
                ("cold start", size["cold_start"]["seconds_to_balance"]),
                ("10 % die", size.get("die", {}).get("seconds_to_balance")),
                ("10 % join", size.get("join", {}).get("seconds_to_balance")),
            )
        )
        rows.append((f"lease table balance, {name} (simulated)", times, "-", "-", "(reported)"))
    for mode in result.get("emulators", {}).get("modes", []):
        measured = sum(mode["calls"].values())
        simulated = sum(mode["simulated_calls"].values())
        rows.append(
            (
                f"lease table calls per shard-minute on the emulators, "
                f"{result['emulators']['shards']} shards x {result['emulators']['workers']} "
                f"processes, {mode['coordination']}",
                f"{measured:,.2f}",
                f"simulated {simulated:,.2f}",
                f"**{_x(measured / simulated if simulated else float('nan'))}**",
                "(check of the simulation)",
            )
        )
    for mode in sorted({size.get("coordination", "scan") for size in result["sizes"]}):
        units = {
            size["workers"]: size["steady"]["read_units"]
            for size in result["sizes"]
            if size.get("coordination", "scan") == mode and size.get("steady")
        }
        if len(units) < 2:
            continue
        low, high = min(units), max(units)
        spread = units[high] / units[low]
        rows.append(
            (
                f"lease table read units, {high} against {low} workers, {mode} (simulated)",
                f"{units[high]:,.3f}",
                f"{low} workers {units[low]:,.3f}",
                f"**{_x(spread)}**",
                f"flat within 10 %: {_met(0.9 <= spread <= 1.1)}",
            )
        )
    return rows


def _per_record(side: Mapping[str, Any]) -> str:
    per = side["per_record"]
    return (
        f"{per['requests']:.3f} requests, {per['read_units']:.3f} RRU, {per['write_units']:.3f} WRU"
    )


def _slow_rate(value: float) -> str:
    """A rate, with a decimal under 100/s."""
    return f"{value:.1f}" if value < 100 else _rate(value)


def effects_rows(result: Mapping[str, Any]) -> list[Row]:
    """Records per second and DynamoDB per record through consumer.effects, against the
    same processor without the store; a redelivery (every record a repeat)."""
    config, summary = result["config"], result["summary"]
    shape = f"{config['shards']} shards x {config['records_per_shard']:,}"
    base = summary["baseline"]
    rows: list[Row] = []
    for side, what in (("effects", "new keys, Mode.KEYED"), ("redelivery", "every key a repeat")):
        found = summary.get(side)
        if found is None:
            continue
        rows.append(
            (
                f"effects, one worker, {shape}, {what}: records/s (emulator)",
                f"{_slow_rate(found['median_steady_rate'])} rec/s (from the start "
                f"{_slow_rate(found['median_rate'])})",
                f"no store {_rate(base['median_steady_rate'])} "
                f"(from the start {_rate(base['median_rate'])})",
                f"**{found['steady_ratio_to_baseline']:.2g}x** "
                f"(from the start {found['ratio_to_baseline']:.2g}x)",
                "(reported)",
            )
        )
        rows.append(
            (
                f"effects, {what}: DynamoDB per record (counted)",
                _per_record(found),
                f"no store {_per_record(base)}",
                "-",
                "(reported)",
            )
        )
    return rows


SUMMARY_ROWS: dict[str, Callable[[Mapping[str, Any]], list[Row]]] = {
    "drain": drain_rows,
    "failover": failover_rows,
    "hotpath": hotpath_rows,
    "latency": latency_rows,
    "requests": requests_rows,
    "scale": scale_rows,
    "compaction": compaction_rows,
    "effects": effects_rows,
}


ROW_PREFIXES: dict[str, tuple[str, ...]] = {
    "drain": ("drain",),
    "failover": ("failover", "graceful hand-off"),
    "hotpath": (
        "landing hot path",
        "GetRecords response parsed",
        "landing from the GetRecords response",
    ),
    "latency": ("put -> landed", "put -> delivered"),
    "requests": ("DynamoDB requests", "Kinesis requests", "S3 requests"),
    "scale": ("lease table",),
    "compaction": ("compaction",),
    "effects": ("effects",),
}
"""How each benchmark's summary rows begin: rows of a benchmark with no result at hand
are kept from the page as they were."""


def summary_table(results: Mapping[str, Mapping[str, Any]], previous: str = "") -> str:
    """The summary as a Markdown table, benchmarks in their usual order.

    A benchmark without a result here keeps its rows from ``previous`` (the block as the
    page has it), so running one benchmark does not drop the others' figures.
    """
    lines = [
        "| benchmark | project | baseline / bound | result | target |",
        "|---|---|---|---|---|",
    ]
    old_rows = [row for row in previous.splitlines() if row.startswith("| ")][1:]
    for name in BENCHMARKS:
        if name in results:
            for row in SUMMARY_ROWS[name](results[name]):
                lines.append("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
        else:
            lines += [row for row in old_rows if row[2:].startswith(ROW_PREFIXES[name])]
    return "\n".join(lines)


def block_of(text: str, name: str) -> str:
    """What the page's block ``name`` holds now ("" when it has none)."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    return text[i + len(start) : j] if i >= 0 and j >= 0 else ""


def machine_text(results: Mapping[str, Mapping[str, Any]], previous: str = "") -> str:
    """Machine facts and versions, from the most recent result that has them; when each
    benchmark ran (those without a result here: as ``previous`` said)."""
    latest = max(
        (r for r in results.values() if "machine" in r),
        key=lambda r: str(r.get("started", "")),
        default=None,
    )
    if latest is None:
        return "(no results yet)"
    facts = latest["machine"]
    packages = ", ".join(f"{name} {version}" for name, version in facts["packages"].items())
    text = (
        f"{facts['nproc']} CPUs ({facts['cpu_model']}), {facts['memory_gib']} GiB, "
        f"{facts['platform']}; Python {facts['python']}, Node {facts['node']}, "
        f"kinesalite {facts['kinesalite']}, {packages}"
    )
    if facts.get("java"):
        text += f", Java {facts['java']}"
    peer = results.get("drain", {}).get("async_kinesis", {}).get("versions")
    if peer:
        text += "; in .venv-peers: " + ", ".join(f"{k} {v}" for k, v in peer.items())
    elif kept := re.search(r"(; in \.venv-peers: .*?)\.\s*\n\s*\nRuns", previous, re.DOTALL):
        text += kept[1]  # the drain's peers, as the page had them
    earlier = dict(
        re.findall(
            r"(\w+) (\d{4}-\d\d-\d\d \d\d:\d\d)", previous.rsplit("Runs (UTC):", maxsplit=1)[-1]
        )
    )
    when = {
        name: results[name].get("started", "?")[:16].replace("T", " ")
        if name in results
        else earlier.get(name)
        for name in BENCHMARKS
    }
    runs = ", ".join(f"{name} {stamp}" for name, stamp in when.items() if stamp)
    return f"{text}.\n\nRuns (UTC): {runs}."


def block_text(name: str, result: Mapping[str, Any], render: Callable[[Any], str]) -> str:
    """A benchmark's generated block: its report, and how it was run."""
    return (
        "```\n"
        f"{render(result).rstrip()}\n"
        "```\n"
        f"Generated from `bench/results/{name}.json`: `{result.get('command', '?')}`, "
        f"{result.get('started', '?')}, {result.get('wall_seconds', '?')} s."
    )


def renderers() -> dict[str, Callable[[Any], str]]:
    """Each benchmark's report renderer (imported late: some pull in heavy modules)."""
    from bench import aws_requests, compaction, effects, hotpath, latency, scale
    from bench.drain import render_drain
    from bench.failover import render_failover

    return {
        "drain": render_drain,
        "failover": render_failover,
        "hotpath": hotpath.render,
        "latency": latency.render,
        "requests": aws_requests.render,
        "scale": scale.render,
        "compaction": compaction.render,
        "effects": effects.render,
    }


def update_text(
    text: str,
    results: Mapping[str, Mapping[str, Any]],
    render: Mapping[str, Callable[[Any], str]],
) -> tuple[str, list[str]]:
    """The page with every block regenerated that has a full result; notes of what not."""
    notes: list[str] = []
    full = {name: r for name, r in results.items() if not r.get("quick")}
    for name in sorted(set(results) - set(full)):
        notes.append(f"{name}: the last result is from a --quick run; its block is kept")
    blocks: dict[str, str] = {
        "summary": summary_table(full, block_of(text, "summary")),
        "machine": machine_text(full, block_of(text, "machine")),
    }
    for name, result in full.items():
        blocks[name] = block_text(name, result, render[name])
    for name, content in blocks.items():
        if _LOCAL_PATH.search(content):
            raise ValueError(f"block {name} names a local path; refusing to write it")
        text, found = replace_block(text, name, content)
        if not found:
            notes.append(f"{name}: no <!-- bench:{name} --> block in the page")
    return text, notes


def write_docs(directory: Path = RESULTS, doc: Path = DOC) -> list[str]:
    """Regenerate the page's blocks from the results; returns notes on what was left."""
    text, notes = update_text(doc.read_text(), load_results(directory), renderers())
    doc.write_text(text)
    return notes

"""``python -m bench [NAME ...] [--quick]``: run benchmarks, print, save JSON, write docs.

``drain`` and ``failover`` live in this package's modules of those names and share one
local stack per benchmark started here; ``hotpath``, ``latency``, ``requests``
(:mod:`bench.aws_requests`), ``scale``, ``compaction`` and ``effects`` are modules with
``run(quick) -> dict``
and ``render(dict) -> str`` that manage their own setup. After a run that is not
``--quick``, the generated blocks of docs/benchmarks.md are rewritten from
``bench/results/*.json`` (:mod:`bench.docs`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.machine import describe, machine_facts
from bench.report import BENCHMARKS, RESULTS, progress, write_results

# Modules that expose run(quick) -> dict and render(result) -> str.
SELF_CONTAINED = ("hotpath", "latency", "requests", "scale", "compaction", "effects")
# Where a benchmark's module is not named after it (bench/requests.py would shadow the
# requests package for anything run from inside bench/).
MODULES = {"requests": "aws_requests"}


def build_parser() -> argparse.ArgumentParser:
    """Arguments: which benchmarks, and how big."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks against a baseline measured in the same run, on the "
        "embedded local AWS stack (127.0.0.1 only).",
    )
    parser.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCHMARK",
        help=f"which to run: {', '.join(BENCHMARKS)} (default: all, in that order)",
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke version")
    parser.add_argument(
        "--no-docs",
        action="store_true",
        help="do not rewrite docs/benchmarks.md (by default a run that is not --quick "
        "rewrites its generated blocks from bench/results/*.json)",
    )
    parser.add_argument(
        "--docs-only",
        action="store_true",
        help="run nothing: rewrite docs/benchmarks.md from bench/results/*.json",
    )
    parser.add_argument(
        "--no-peers",
        action="store_true",
        help="drain: leave out async-kinesis (which needs .venv-peers, installed on demand)",
    )
    parser.add_argument(
        "--records-per-shard", type=int, help="drain: records per shard (default 20000)"
    )
    parser.add_argument("--rounds", type=int, help="drain: alternating rounds (default 3)")
    parser.add_argument(
        "--profile", action="store_true", help="drain: cProfile the worker runs, print the top"
    )
    parser.add_argument(
        "--failover",
        type=float,
        action="append",
        help="failover: LANDER_FAILOVER_SECONDS to measure, repeatable (default 10 and 3)",
    )
    parser.add_argument("--kills", type=int, help="failover: kill -9 rounds per setting")
    parser.add_argument("--graceful", type=int, help="failover: SIGTERM rounds per setting")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen benchmarks, each on its own fresh local stack (if it needs one)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    unknown = sorted(set(args.benchmarks) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    chosen = [name for name in BENCHMARKS if name in (args.benchmarks or BENCHMARKS)]
    if args.docs_only:
        return _write_docs()
    facts = machine_facts()
    command = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    print(describe(facts))
    print(f"command: {command.strip()}")
    for name in chosen:
        began = time.monotonic()
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        result = _run(name, args)
        result = {
            "command": command.strip(),
            "quick": args.quick,
            "machine": facts,
            "started": started,
            "wall_seconds": round(time.monotonic() - began, 1),
            **result,
        }
        path = write_results(name, result)
        print(f"results: {path.relative_to(RESULTS.parent.parent)}")
        progress(f"{name}: done in {result['wall_seconds']} s")
    if args.quick or args.no_docs:
        return 0
    return _write_docs()


def _write_docs() -> int:
    from bench.docs import DOC, write_docs

    for note in write_docs():
        progress(f"docs: {note}")
    progress(f"docs: wrote {DOC.relative_to(DOC.parent.parent)}")
    return 0


def _run(name: str, args: argparse.Namespace) -> dict[str, Any]:
    if name in SELF_CONTAINED:
        module = importlib.import_module(f"bench.{MODULES.get(name, name)}")
        result: dict[str, Any] = module.run(quick=args.quick)
        print(f"\n== {name} ==\n{module.render(result)}", flush=True)
        return {"benchmark": name, **result}

    from bench.local_aws import local_aws

    with local_aws() as aws:
        if name == "drain":
            from bench.drain import DrainConfig, run_drain
            from consumer.telemetry import configure_logging

            # The worker runs in this process: keep its info lines out of the report.
            configure_logging("console", "warning")

            drain = DrainConfig(
                records_per_shard=args.records_per_shard or (2_000 if args.quick else 20_000),
                rounds=args.rounds or (1 if args.quick else 3),
                profile=args.profile,
                peers=not args.no_peers,
            )
            return asyncio.run(run_drain(aws, drain))
        from bench.failover import FailoverConfig, run_failover

        failover = FailoverConfig(
            failover_seconds=tuple(args.failover or ((3.0,) if args.quick else (10.0, 3.0))),
            kills=args.kills or (2 if args.quick else 5),
            graceful=args.graceful or (2 if args.quick else 5),
        )
        return run_failover(aws, failover)


if __name__ == "__main__":
    sys.exit(main())

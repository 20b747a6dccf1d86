"""``python -m tests.chaos [--profile short|soak] [--minutes M] [--seed N]
[--read-mode polling|efo] [--streams 1|3] [--effects keyed|plain]``."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from tests.chaos.effects_run import EFFECTS_SHORT, run_effects
from tests.chaos.scenario import SHORT, Outcome, run, soak


def build_parser() -> argparse.ArgumentParser:
    """The arguments (``make chaos CHAOS_ARGS=…`` passes them; tests/test_doc_commands.py
    checks the docs' against this parser)."""
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--profile", choices=("short", "soak"), default="short")
    parser.add_argument("--minutes", type=float, default=30.0, help="soak length (default 30)")
    parser.add_argument(
        "--rate", type=float, default=None, help="soak records/s (default 650; 20 with --effects)"
    )
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: random)")
    parser.add_argument("--workdir", default=None, help="keep logs and archive here")
    parser.add_argument("--read-mode", choices=("polling", "efo"), default="polling")
    parser.add_argument(
        "--streams", type=int, choices=(1, 3), default=1, help="3: one fleet, three streams"
    )
    parser.add_argument(
        "--effects",
        choices=("keyed", "plain"),
        default=None,
        help="run a processor of side effects (consumer.effects) against a loopback "
        "downstream instead of the lander: keyed (it honours Idempotency-Key; exactly "
        "once) or plain (at most once, unknown outcomes reported)",
    )
    return parser


def main() -> int:
    """Run a chaos profile and print its counts; exit 0 only if exactly once held."""
    parser = build_parser()
    args = parser.parse_args()
    if args.effects and args.streams != 1:
        parser.error("--effects reads one stream (--streams 1)")
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    short = EFFECTS_SHORT if args.effects else SHORT
    rate = args.rate or (EFFECTS_SHORT.rate if args.effects else 650.0)
    profile = replace(
        short if args.profile == "short" else soak(args.minutes, rate),
        read_mode=args.read_mode,
        streams=args.streams,
    )
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="lander-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    outcome: Outcome = (
        run_effects(profile, seed, workdir, args.effects)
        if args.effects
        else run(profile, seed, workdir)
    )
    print(outcome.report())
    print(f"  logs          {workdir}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())

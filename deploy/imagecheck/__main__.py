"""``python -m deploy.imagecheck`` (``make image-check``): build every image and run it.

See :mod:`deploy.imagecheck` for what is checked. Exit status 0 when every check
passed, 1 with one line naming the first that failed, 2 when the tools are missing and
cannot be installed.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from consumer.cli.emulators import LocalStack

from . import compose, smoke
from .engine import CheckError, Engine, Say, base_image, install_tools

REPO = Path(__file__).resolve().parents[2]
# (Dockerfile target, tag the check gives it, tag docker-compose.yml uses, build args)
TARGETS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("runtime", "kinesis-lander:check", "kinesis-lander:local", ()),
    ("bootstrap", "kinesis-lander-bootstrap:check", "kinesis-lander-bootstrap:local", ()),
    # The S3A jars are not a pip package (deploy/README.md): file:// archives only here.
    (
        "spark",
        "kinesis-lander-spark:check",
        "kinesis-lander-spark:local",
        ("S3A_JARS_REQUIRED=false",),
    ),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.imagecheck", description=__doc__)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=REPO / ".cache" / "image-check",
        help="container storage, the stand-in base and logs (default .cache/image-check)",
    )
    parser.add_argument("--build-only", action="store_true", help="build, do not run")
    parser.add_argument("--no-smoke", action="store_true", help="skip the images' smoke test")
    parser.add_argument("--no-compose", action="store_true", help="skip the compose stack")
    args = parser.parse_args(argv)
    say = Say()
    try:
        install_tools(say)
    except CheckError as exc:
        print(f"image check: {exc}", file=sys.stderr)
        return 2
    args.workdir.mkdir(parents=True, exist_ok=True)
    engine = Engine(args.workdir, say)
    say(
        "storage: the kernel's overlay"
        if engine.native
        else "storage: fuse-overlayfs (this process may not mount an overlay)"
    )
    try:
        engine.standin(base_image(REPO / "Dockerfile"))
        build_all(engine, say)
        if not (args.build_only or args.no_smoke):
            run_smoke(engine, args.workdir)
        if not (args.build_only or args.no_compose):
            run_compose(engine, args.workdir)
    except CheckError as exc:
        say(f"image check FAILED: {exc}")
        say(f"container logs and work files: {args.workdir}")
        return 1
    finally:
        left = engine.release()
    if left:
        say("image check FAILED: still running from its storage:\n  " + "\n  ".join(left))
        return 1
    print_summary(engine)
    return 0


def build_all(engine: Engine, say: Say) -> None:
    """The first target alone, then the others at once.

    Every target starts from the wheel stage (the mypyc compile), so the first build
    leaves it in the layer cache and the others reuse it instead of compiling it again
    side by side. Built one after another the targets kept one of the 2 cores idle."""

    def one(target: str, tag: str, compose_tag: str, build_args: tuple[str, ...]) -> None:
        took = engine.build(REPO, target, tag, *build_args)
        engine.podman("tag", tag, compose_tag)
        say(f"built {target} as {tag} in {took:.0f} s ({engine.size_mb(tag):.0f} MB)")

    started = time.monotonic()
    first, *rest = TARGETS
    one(*first)
    with ThreadPoolExecutor(max_workers=len(rest)) as pool:
        for done in [pool.submit(one, *target) for target in rest]:
            done.result()
    engine.timings["builds"] = time.monotonic() - started


def run_smoke(engine: Engine, workdir: Path) -> None:
    """The embedded local stack on loopback, the images against it."""
    started = time.monotonic()
    with LocalStack() as stack:
        images = smoke.Images(*(tag for _, tag, _, _ in TARGETS))
        smoke.run(engine, images, stack.env(), workdir / "smoke")
    engine.timings["smoke run"] = time.monotonic() - started


def run_compose(engine: Engine, workdir: Path) -> None:
    """docker-compose.yml under podman-compose, on a fresh embedded stack."""
    started = time.monotonic()
    with LocalStack() as stack:
        compose.run(engine, REPO, stack.env(), workdir / "compose")
    engine.timings["compose run"] = time.monotonic() - started


def print_summary(engine: Engine) -> None:
    """Sizes and times, as the issue asks the run to print."""
    print("\nimage                             size MB   build s")
    for target, tag, _, _ in TARGETS:
        print(f"{tag:32} {engine.size_mb(tag):8.0f} {engine.timings.get(target, 0):9.0f}")
    for what in ("stand-in base", "builds", "smoke run", "compose run"):
        if what in engine.timings:
            print(f"{what:32} {'':8} {engine.timings[what]:9.0f}")
    print("image check passed")


if __name__ == "__main__":
    sys.exit(main())

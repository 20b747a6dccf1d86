"""Facts about the machine and the software a benchmark ran on."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from consumer.cli.emulators.stack import NODE_MODULES

PACKAGES = (
    "aiobotocore",
    "botocore",
    "boto3",
    "moto",
    "structlog",
    "pydantic-settings",
    "orjson",
    "duckdb",
    "pyspark",
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _node_version() -> str:
    node = shutil.which("node")
    if node is None:
        return "not found"
    done = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def _java_version() -> str | None:
    java = shutil.which("java")
    if java is None:
        return None
    done = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0].strip() if lines else None


def _kinesalite_version() -> str:
    try:
        package = json.loads((NODE_MODULES / "kinesalite" / "package.json").read_text())
    except (OSError, ValueError):
        return "not installed"
    return str(package.get("version", "unknown"))


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)


def machine_facts() -> dict[str, Any]:
    """CPU count, memory, Python, Node and the versions that shape the numbers."""
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "nproc": len(affinity) if affinity is not None else os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "node": _node_version(),
        "kinesalite": _kinesalite_version(),
        "java": _java_version(),
        "packages": {name: _version(name) for name in PACKAGES},
    }


def describe(facts: dict[str, Any]) -> str:
    """One readable paragraph of the facts, for the top of a report."""
    packages = ", ".join(f"{name} {version}" for name, version in facts["packages"].items())
    return (
        f"machine: {facts['nproc']} CPUs ({facts['cpu_model']}), {facts['memory_gib']} GiB, "
        f"{facts['platform']}\n"
        f"software: Python {facts['python']}, Node {facts['node']}, "
        f"kinesalite {facts['kinesalite']}, {packages}"
        + (f", Java {facts['java']}" if facts.get("java") else "")
    )

"""What a compaction run tells Prometheus: its series, pushed to a Pushgateway.

A nightly job is gone before any scrape, so ``lander compact`` pushes instead, once at
the end of a run, when ``LANDER_PUSHGATEWAY`` names a gateway: one group per stream
(``job="lander_compact"``, ``stream=S``) with the series :func:`registry_for` makes.
The alerts in ``deploy/monitoring/alerts.yml`` watch them (docs/operations.md).

The push is a POST (``pushadd``): the gateway replaces the series of the names pushed
and keeps the others. So :data:`LAST_SUCCESS` keeps the time of the stream's last good
run while later runs fail, which is what the staleness alert measures; and every name
that is pushed at all is pushed whole (each window's three kinds of bad input, zeros
included), so a clean night replaces what a bad one pushed. A window that failed, had
no input or was already up to date has no window series (nothing was counted: a retry
of a published window must not clear the counts its first run pushed); when no window
of a stream has any, the previous run's stay, and only the run's exit code and times
change.

A failed push is one warning line and changes nothing else: the job's exit code is its
windows'. Pure but for :func:`push_runs`. ``prometheus_client`` is imported only to
push (a cluster that runs the jobs from their zip may not have it: a push is then the
one warning), and nothing else of the project's dependencies, so ``deploy/validate.py``
can list the series names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from sparkjobs.table.manifest import RunManifest

JOB = "lander_compact"
"""The Pushgateway's ``job`` of every push (a grouping key, with ``stream``)."""
KINDS = ("truncated", "corrupt", "malformed")
"""The kinds of bad input (docs/sparkjobs.md, Bad input): each window pushes all three."""
SUCCEEDED = frozenset({0, 4})
"""Exit codes of a stream whose every window was published or up to date (4: with bad
input, which its own alert reports): those set :data:`LAST_SUCCESS`."""
TIMEOUT_S = 10.0

BAD_FILES = "lander_compact_bad_input_files"
BAD_LINES = "lander_compact_bad_input_lines"
ROWS_READ = "lander_compact_rows_read"
ROWS_PUBLISHED = "lander_compact_rows_published"
EXIT_CODE = "lander_compact_last_exit_code"
LAST_FINISH = "lander_compact_last_finish_timestamp_seconds"
LAST_SUCCESS = "lander_compact_last_success_timestamp_seconds"

_HELP = {
    BAD_FILES: "Bad input objects of the window's last run, by kind (a file with "
    "malformed lines counts once).",
    BAD_LINES: "Lines of the bad input of the window's last run, by kind: truncated, the "
    "complete lines recovered (published); corrupt, those decoded before the damage (left "
    "out); malformed, the lines left out.",
    ROWS_READ: "Rows the window's last run read in the hours it rewrote.",
    ROWS_PUBLISHED: "Rows the window's last run published in the hours it rewrote.",
    EXIT_CODE: "Exit code of the stream's last lander compact run, the worst of its "
    "windows: 1 failed, 4 bad input, 3 no input, 0 done.",
    LAST_FINISH: "When the stream's last lander compact run ended (Unix time).",
    LAST_SUCCESS: "When a lander compact run last published, or found up to date, every "
    "window of the stream (Unix time).",
}


@dataclass(frozen=True, slots=True)
class WindowRun:
    """One window of a run: its stream, label, exit code and manifest (None when it
    failed or had no input)."""

    stream: str
    window: str
    code: int
    manifest: RunManifest | None = None


def registry_for(
    stream: str, windows: Sequence[WindowRun], code: int, finished: float
) -> CollectorRegistry:
    """The series one stream's group gets: each counted window's bad input by kind and
    rows, and the run's exit code (the worst of its windows), finish time, and, if it
    succeeded, the time again as its last success."""
    from prometheus_client import CollectorRegistry, Gauge  # noqa: PLC0415 - see above

    registry = CollectorRegistry()
    counted = [w for w in windows if w.stream == stream and _counted(w.manifest)]
    if counted:
        by_kind = ["window", "kind"]
        files = Gauge(BAD_FILES, _HELP[BAD_FILES], by_kind, registry=registry)
        lines = Gauge(BAD_LINES, _HELP[BAD_LINES], by_kind, registry=registry)
        read = Gauge(ROWS_READ, _HELP[ROWS_READ], ["window"], registry=registry)
        published = Gauge(ROWS_PUBLISHED, _HELP[ROWS_PUBLISHED], ["window"], registry=registry)
        for run in counted:
            assert run.manifest is not None
            for kind in KINDS:
                bad = [b for b in run.manifest.bad_files if b.kind == kind]
                files.labels(run.window, kind).set(len(bad))
                lines.labels(run.window, kind).set(sum(b.lines for b in bad))
            read.labels(run.window).set(run.manifest.total("input_rows"))
            published.labels(run.window).set(run.manifest.total("output_rows"))
    Gauge(EXIT_CODE, _HELP[EXIT_CODE], registry=registry).set(code)
    Gauge(LAST_FINISH, _HELP[LAST_FINISH], registry=registry).set(finished)
    if code in SUCCEEDED:
        Gauge(LAST_SUCCESS, _HELP[LAST_SUCCESS], registry=registry).set(finished)
    return registry


def _counted(manifest: RunManifest | None) -> bool:
    """Whether a window's run counted anything: it read and rewrote hours. One that
    failed, had no input or found every hour up to date (a retry of a published
    window) did not, and pushes no window series: the last counts stay."""
    return manifest is not None and manifest.status != "up-to-date"


def push_runs(
    gateway: str,
    windows: Sequence[WindowRun],
    codes: Mapping[str, int],
    finished: float,
    *,
    timeout: float = TIMEOUT_S,
) -> str | None:
    """Push each stream's group (``codes``: each stream's exit code) to ``gateway``; what
    failed, in one line, or None. The streams after a failure are not tried: they go to
    the same gateway."""
    try:
        from prometheus_client import pushadd_to_gateway  # noqa: PLC0415 - see above
    except ImportError:
        return "prometheus_client is not installed (pip install prometheus-client)"
    for stream, code in codes.items():
        registry = registry_for(stream, windows, code, finished)
        try:
            pushadd_to_gateway(
                gateway, JOB, registry, grouping_key={"stream": stream}, timeout=timeout
            )
        except Exception as exc:  # deliberately any: a push never fails the job
            return " ".join(f"stream {stream}: {type(exc).__name__}: {exc}".split())[:300]
    return None


def series_names() -> Iterable[str]:
    """Every series name a push can carry (deploy/validate.py holds the rules to them)."""
    return tuple(_HELP)

"""The alerting rules of deploy/monitoring, held to the code, the docs and a real stall.

Without promtool: the PrometheusRule of the kustomize base is the rendering of
alerts.yml, every alert has a severity and a runbook section in docs/operations.md and
unit tests that see it fire and stay quiet, and recorded ``/metrics`` pages convert to
promtool input as expected. With promtool (the one ``make validate-deploy`` put in
.venv-deploy, else installed the same way into .cache/promtool by the first test that
needs it, so a fresh clone runs these too): the rules fire on the series recorded from an
in-process worker whose archive bucket is missing, and stay quiet on a healthy one
(tests/support/stall_recording.py; time in those recordings is scaled, see there).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from prometheus_client import generate_latest

from consumer.metrics import LanderMetrics
from tests.support.stall_recording import (
    SHARDS,
    UNHEALTHY_PAGES,
    WORKER_ID,
    Recording,
    record_healthy_worker,
    record_stalled_worker,
    unhealthy_for_a_while,
)

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "deploy" / "monitoring"
ALERTS = MONITORING / "alerts.yml"
ALERTS_TEST = MONITORING / "alerts_test.yml"
PROMETHEUS_RULE = REPO / "deploy" / "k8s" / "base" / "prometheusrule.yaml"
OPERATIONS = REPO / "docs" / "operations.md"
VALIDATED_PROMTOOL = REPO / ".venv-deploy" / "bin" / "promtool"
PROMTOOL_CACHE = REPO / ".cache" / "promtool"
SEVERITIES = {"critical", "warning", "info"}


def _module(name: str, folder: Path = MONITORING) -> ModuleType:
    """A script of deploy/monitoring (or of ``folder``), imported from its file."""
    spec = importlib.util.spec_from_file_location(
        f"lander_{folder.name}_{name}", folder / f"{name}.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


render = _module("render")
recorded = _module("recorded")


def _rules() -> list[dict[str, Any]]:
    return [
        rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]
    ]


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


# -- without promtool ----------------------------------------------------------------------


def test_prometheus_rule_is_the_rendering_of_alerts_yml() -> None:
    """The PrometheusRule is generated from alerts.yml, never edited on its own."""
    assert PROMETHEUS_RULE.read_text() == render.render(ALERTS.read_text()), (
        "deploy/k8s/base/prometheusrule.yaml is stale: run "
        ".venv/bin/python deploy/monitoring/render.py"
    )
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert rule["spec"]["groups"] == yaml.safe_load(ALERTS.read_text())["groups"]
    kustomization = yaml.safe_load((PROMETHEUS_RULE.parent / "kustomization.yaml").read_text())
    assert PROMETHEUS_RULE.name in kustomization["resources"]


def test_render_refuses_what_is_not_a_rules_file() -> None:
    with pytest.raises(render.RulesError):
        render.render("groups: []\n")
    with pytest.raises(render.RulesError):
        render.render("spec:\n  groups: [{name: g, rules: [{alert: A, expr: up}]}]\n")


def test_every_alert_has_a_severity_a_runbook_section_and_unit_tests() -> None:
    """Severity and texts for the operator, a runbook anchor that exists, and a unit test
    in alerts_test.yml that sees the alert fire and one that sees it stay quiet."""
    anchors = _anchors(OPERATIONS.read_text())
    tests = yaml.safe_load(ALERTS_TEST.read_text())["tests"]
    cases = [case for test in tests for case in test.get("alert_rule_test", [])]
    names = []
    for rule in _rules():
        name = rule["alert"]
        names.append(name)
        assert rule["labels"]["severity"] in SEVERITIES, name
        annotations = rule["annotations"]
        assert annotations["summary"], name
        assert annotations["description"], name
        page, _, anchor = annotations["runbook_url"].partition("#")
        assert page == "docs/operations.md", name
        assert anchor in anchors, f"{name}: no section #{anchor} in docs/operations.md"
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case["exp_alerts"] for case in mine), f"{name}: no test sees it fire"
        assert any(not case["exp_alerts"] for case in mine), f"{name}: no test sees it quiet"
    assert len(names) == len(set(names))
    assert {"LanderShardStalled", "LanderWorkerCannotLand", "LanderWorkerNotReady"} <= set(names)


def test_recorded_pages_become_promtool_input_series() -> None:
    """One series per sample name with the scrape's instance, one value per page, `_`
    where a page lacks it, durations scaled, `_created` left out."""
    metrics = LanderMetrics()
    metrics.stream = "s"
    pages = []
    metrics.landing_healthy.set(1)
    pages.append(generate_latest(metrics.registry).decode())
    metrics.checkpoint_age.labels("s", "s0").set(2.5)
    metrics.records_pending.labels("s", "s0").set(7)
    metrics.shard_restarts.labels("s", "s0").inc()
    pages.append(generate_latest(metrics.registry).decode())
    metrics.landing_healthy.set(0)
    metrics.forget_shard("s0")
    metrics.landing_failures.labels("s", 's"1', "NoSuchBucket").inc(3)
    pages.append(generate_latest(metrics.registry).decode())

    series = {
        s["series"]: s["values"]
        for s in recorded.input_series(pages, instance="w1", time_scale=120)
    }

    assert series['lander_landing_healthy{instance="w1"}'] == "1 1 0"
    shard = 'instance="w1",shard_id="s0",stream="s"'
    assert series[f"lander_checkpoint_age_seconds{{{shard}}}"] == "_ 300 _"
    assert series[f"lander_records_pending{{{shard}}}"] == "_ 7 _"
    assert series[f"lander_shard_restarts_total{{{shard}}}"] == "_ 1 1"
    failures = (
        'lander_landing_failures_total{error="NoSuchBucket",instance="w1",shard_id="s\\"1",'
        'stream="s"}'
    )
    assert series[failures] == "_ _ 3"
    assert series['lander_leases_held{instance="w1"}'] == "0 0 0"
    assert not [name for name in series if "_created" in name or not name.startswith("lander_")]
    assert recorded.series_name("up", {}) == "up"


# -- with promtool -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> Path:
    """validate-deploy's promtool, else the same pinned one installed into .cache/promtool
    (apt-get download, as validate-deploy does; one installer at a time under xdist)."""
    if VALIDATED_PROMTOOL.is_file():
        return VALIDATED_PROMTOOL
    installed = PROMTOOL_CACHE / "bin" / "promtool"
    PROMTOOL_CACHE.mkdir(parents=True, exist_ok=True)
    with (PROMTOOL_CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed.is_file():
            validate = _module("validate", REPO / "deploy")
            try:
                validate.install_promtool(installed.parent)
            except validate.ToolError as exc:
                pytest.fail(f"promtool could not be installed: {exc}", pytrace=False)
    return installed


def _promtool_test(
    promtool: Path,
    tmp_path: Path,
    recording: Recording,
    expr: str,
    expected: list[str],
    *,
    context: str = "",
) -> str:
    """Replay the recording (one page per 1m interval) through alerts.yml and check that
    ``expr`` at the last page gives exactly ``expected`` (label sets, each value 1)."""
    scale = 60.0 / recording.period
    document = {
        "rule_files": [str(ALERTS)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": "recorded worker",
                "interval": "1m",
                "input_series": recorded.input_series(
                    recording.pages, instance=WORKER_ID, time_scale=scale
                ),
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": f"{len(recording.pages) - 1}m",
                        "exp_samples": [{"labels": labels, "value": 1} for labels in expected],
                    }
                ],
            }
        ],
    }
    test_file = tmp_path / "recorded_test.yml"
    test_file.write_text(json.dumps(document, indent=1))
    done = subprocess.run(
        [str(promtool), "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, f"promtool test rules:\n{done.stdout}{done.stderr}{context}"
    return done.stdout


def _fired(alerts: str) -> str:
    """Which of ``alerts`` fired at any time of the replay (ALERTS as the rules wrote it)."""
    return (
        "group by (alertname, shard_id, instance) (max_over_time("
        f'ALERTS{{alertstate="firing",alertname=~"{alerts}"}}[1d]))'
    )


@pytest.mark.processes  # promtool
async def test_alerts_fire_on_a_recorded_stalled_worker(promtool: Path, tmp_path: Path) -> None:
    """A worker whose bucket is missing: its shards stall (LanderShardStalled, once per
    shard), then it cannot land and gives them back (LanderWorkerCannotLand)."""
    recording = await record_stalled_worker()
    shards = [f"shardId-{n:012d}" for n in range(SHARDS)]
    ages = [
        v for s in shards for v in recording.values("lander_checkpoint_age_seconds", shard_id=s)
    ]
    pending = [v for s in shards for v in recording.values("lander_records_pending", shard_id=s)]
    healthy = recording.values("lander_landing_healthy")
    waiting = "waiting for the worker's stall series"
    assert any(v for v in ages), f"{waiting}: no lander_checkpoint_age_seconds above 0"
    assert any(v for v in pending), f"{waiting}: no lander_records_pending above 0"
    assert unhealthy_for_a_while(recording), (
        f"{waiting}: lander_landing_healthy not 0 on the last {UNHEALTHY_PAGES} of "
        f"{len(healthy)} pages: {healthy[-8:]}"
    )

    _promtool_test(
        promtool,
        tmp_path,
        recording,
        _fired("LanderShardStalled|LanderWorkerCannotLand"),
        [
            *(
                f'{{alertname="LanderShardStalled",instance="{WORKER_ID}",shard_id="{s}"}}'
                for s in shards
            ),
            f'{{alertname="LanderWorkerCannotLand",instance="{WORKER_ID}"}}',
        ],
        context=f"\nlander_landing_healthy by page: {healthy}",
    )


@pytest.mark.processes  # promtool
async def test_stall_alerts_stay_quiet_on_a_recorded_healthy_worker(
    promtool: Path, tmp_path: Path
) -> None:
    """The same worker with a working archive: checkpoints move, nothing fires."""
    recording = await record_healthy_worker()
    landed = recording.values("lander_records_landed_total", shard_id="shardId-000000000000")
    assert (landed[-1] or 0) > 0, "the healthy worker landed nothing"
    ages = recording.values("lander_checkpoint_age_seconds", shard_id="shardId-000000000000")
    assert any(v is not None for v in ages), "no checkpoint age reported: nothing to be quiet on"
    _promtool_test(
        promtool, tmp_path, recording, _fired("LanderShardStalled|LanderWorkerCannotLand"), []
    )

"""Render the alerting rules (alerts.yml) as the Prometheus Operator's PrometheusRule.

``deploy/monitoring/alerts.yml`` is the one source of the rules: a plain Prometheus
rules file, checked and unit-tested with promtool. The kustomize base ships the same
groups as ``deploy/k8s/base/prometheusrule.yaml``, which this script writes::

    .venv/bin/python deploy/monitoring/render.py           # rewrite the PrometheusRule
    .venv/bin/python deploy/monitoring/render.py --check   # exit 1 if it is out of date

``--check`` runs in ``make validate-deploy`` and tests/deploy/test_alert_rules.py does the same
comparison, so a rule edited in one file only fails both. Needs PyYAML.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "monitoring" / "alerts.yml"
PROMETHEUS_RULE = ROOT / "deploy" / "k8s" / "base" / "prometheusrule.yaml"
NAME = "lander-worker"

HEADER = """\
# GENERATED from deploy/monitoring/alerts.yml by deploy/monitoring/render.py: do not edit
# (edit alerts.yml, then run the script; a stale copy fails make validate-deploy).
#
# The workers' alerting rules for the Prometheus Operator (CRD monitoring.coreos.com/v1),
# explained in docs/operations.md ("Alerts and dashboard"). Drop this resource from the
# kustomization if the cluster has no Prometheus Operator. The Prometheus resource's
# ruleSelector must match these labels (kube-prometheus-stack, for one, selects
# `release: <its release name>` by default: add that label in the overlay).
"""


class RulesError(ValueError):
    """alerts.yml is not a rules file this script can render."""


def _groups(rules: Any) -> list[dict[str, Any]]:
    """The ``groups`` of a rules file, checked for the shape a PrometheusRule takes."""
    if not isinstance(rules, dict) or set(rules) != {"groups"}:
        raise RulesError("a rules file has exactly one top-level key: groups")
    groups = rules["groups"]
    if not isinstance(groups, list) or not groups:
        raise RulesError("groups must be a non-empty list")
    for group in groups:
        if not isinstance(group, dict) or not group.get("name") or not group.get("rules"):
            raise RulesError(f"every group needs a name and rules: {group!r}")
    return groups


def render(alerts_text: str) -> str:
    """The PrometheusRule manifest (YAML text) holding the groups of ``alerts_text``."""
    groups = _groups(yaml.safe_load(alerts_text))
    manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": NAME, "labels": {"app.kubernetes.io/name": NAME}},
        "spec": {"groups": groups},
    }
    body: str = yaml.safe_dump(manifest, sort_keys=False, width=88, allow_unicode=False)
    return HEADER + body


def main(argv: Sequence[str] | None = None) -> int:
    """Write the PrometheusRule, or with ``--check`` compare it; 0 when up to date."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else "")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    args = parser.parse_args(argv)
    try:
        wanted = render(ALERTS.read_text())
    except (RulesError, yaml.YAMLError) as exc:
        print(f"render: {ALERTS.relative_to(ROOT)}: {exc}", file=sys.stderr)
        return 2
    current = PROMETHEUS_RULE.read_text() if PROMETHEUS_RULE.is_file() else None
    target = PROMETHEUS_RULE.relative_to(ROOT)
    if args.check:
        if current != wanted:
            print(f"render: {target} is stale: run deploy/monitoring/render.py", file=sys.stderr)
            return 1
        print(f"{target} is up to date")
        return 0
    if current != wanted:
        PROMETHEUS_RULE.write_text(wanted)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

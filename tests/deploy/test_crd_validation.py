"""The custom-resource check of ``make validate-deploy`` (deploy/validate-npm/validate-crds.mjs)
passes the kustomize base's custom resources and fails broken ones.

deploy/validate.py sends every resource of a custom API group to that node script, which
validates it with the CRD schemas compiled into the @kubernetes-models packages: the
Prometheus Operator's (ServiceMonitor, PrometheusRule) and KEDA's (ScaledObject,
TriggerAuthentication). These tests run the script on the base's files and on broken
copies of them: a field of the wrong type, a misspelt field (the compiled schemas accept
unknown fields; the script catches them), a value outside an enum, a kind without a
schema; and on the several-streams example of docs/operations.md. The script's packages
are validate-deploy's (.venv-deploy/npm) when that copy is current, else installed the
same way into .cache/validate-npm by the first test here.
"""

from __future__ import annotations

import copy
import fcntl
import filecmp
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "deploy" / "k8s" / "base"
VALIDATED_NPM = REPO / ".venv-deploy" / "npm"
NPM_CACHE = REPO / ".cache" / "validate-npm"


def _validate_module() -> ModuleType:
    """deploy/validate.py, imported from its file (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location(
        "lander_deploy_validate", REPO / "deploy" / "validate.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


validate = _validate_module()


def _current(npm_dir: Path) -> bool:
    """Whether ``npm_dir`` holds an installed copy of deploy/validate-npm as it is now."""
    return (npm_dir / "node_modules").is_dir() and all(
        (npm_dir / name).is_file() and filecmp.cmp(validate.NPM_DIR / name, npm_dir / name, False)
        for name in validate.NPM_FILES
    )


@pytest.fixture(scope="module")
def crd_validator() -> Path:
    """validate-crds.mjs with its packages installed (one installer at a time under xdist)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed (as for make validate-deploy)", pytrace=False)
    if _current(VALIDATED_NPM):
        return VALIDATED_NPM / "validate-crds.mjs"
    NPM_CACHE.mkdir(parents=True, exist_ok=True)
    with (NPM_CACHE.parent / ".validate-npm.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _current(NPM_CACHE):
            try:
                validate.install_crd_validator(NPM_CACHE)
            except validate.ToolError as exc:
                pytest.fail(f"the CRD validator could not be installed: {exc}", pytrace=False)
    return NPM_CACHE / "validate-crds.mjs"


def _base_custom_resources() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    found = []
    for file in kustomization["resources"]:
        for document in yaml.safe_load_all((BASE / file).read_text()):
            if document and validate._is_custom(document):
                found.append(document)
    return found


def _resource(kind: str) -> dict[str, Any]:
    (found,) = [d for d in _base_custom_resources() if d["kind"] == kind]
    return copy.deepcopy(found)


def _check(script: Path, *documents: dict[str, Any]) -> tuple[int, str]:
    """Run the script as validate.py does; its exit status and output."""
    payload = json.dumps([{"source": "test", "doc": d} for d in documents])
    done = subprocess.run(
        ["node", str(script)],
        input=payload,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def test_keda_and_prometheus_groups_are_custom() -> None:
    """validate.py sends these groups to the CRD check, and core groups to the schemas."""
    assert validate._is_custom({"apiVersion": "keda.sh/v1alpha1"})
    assert validate._is_custom({"apiVersion": "monitoring.coreos.com/v1"})
    assert not validate._is_custom({"apiVersion": "apps/v1"})
    assert not validate._is_custom({"apiVersion": "policy/v1"})
    assert not validate._is_custom({"apiVersion": "networking.k8s.io/v1"})


@pytest.mark.processes  # node
def test_the_base_custom_resources_pass(crd_validator: Path) -> None:
    documents = _base_custom_resources()
    kinds = {d["kind"] for d in documents}
    assert {"ScaledObject", "TriggerAuthentication", "ServiceMonitor", "PrometheusRule"} <= kinds
    status, output = _check(crd_validator, *documents)
    assert status == 0, output
    passed = [line for line in output.splitlines() if line.startswith("ok ")]
    assert len(passed) == len(documents), output


@pytest.mark.processes  # node
def test_a_scaled_object_with_a_wrong_field_type_fails(crd_validator: Path) -> None:
    """Trigger metadata is a map of strings (KEDA parses them): `shardCount: 4` unquoted
    is refused by the API server, and so here; replica counts are integers."""
    scaled = _resource("ScaledObject")
    scaled["spec"]["triggers"][0]["metadata"]["shardCount"] = 4
    status, output = _check(crd_validator, scaled)
    assert status == 1, output
    assert "FAIL test: ScaledObject/lander-worker" in output
    assert "triggers/0/metadata/shardCount must be string" in output

    scaled = _resource("ScaledObject")
    scaled["spec"]["minReplicaCount"] = "2"
    status, output = _check(crd_validator, scaled)
    assert status == 1, output
    assert "spec/minReplicaCount must be integer" in output


@pytest.mark.processes  # node
def test_a_misspelt_field_fails(crd_validator: Path) -> None:
    """An HPA's `maxReplicas` in a ScaledObject (which spells it `maxReplicaCount`) would be
    pruned by the API server, leaving KEDA's default ceiling of 100: the check refuses it."""
    scaled = _resource("ScaledObject")
    scaled["spec"]["maxReplicas"] = scaled["spec"].pop("maxReplicaCount")
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    behavior["scaleDown"]["stabilizationWindow"] = 300
    status, output = _check(crd_validator, scaled)
    assert status == 1, output
    assert "FAIL test: ScaledObject/lander-worker: unknown fields" in output
    assert "/spec/maxReplicas" in output
    assert (
        "/spec/advanced/horizontalPodAutoscalerConfig/behavior/scaleDown/stabilizationWindow"
        in (output)
    )

    monitor = _resource("ServiceMonitor")
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    status, output = _check(crd_validator, monitor)
    assert status == 1, output
    assert "unknown fields /spec/endpoints/0/intervall" in output


@pytest.mark.processes  # node
def test_a_trigger_authentication_with_an_unknown_provider_fails(crd_validator: Path) -> None:
    auth = _resource("TriggerAuthentication")
    auth["spec"]["podIdentity"]["provider"] = "aws-irsa"
    status, output = _check(crd_validator, auth)
    assert status == 1, output
    assert "podIdentity/provider must be equal to one of the allowed values" in output


@pytest.mark.processes  # node
def test_a_custom_kind_without_a_schema_fails(crd_validator: Path) -> None:
    """Nothing passes unchecked: an unknown group, or a kind the package does not have."""
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    status, output = _check(crd_validator, widget)
    assert status == 1, output
    assert "no schema for apiVersion example.com/v1" in output
    scaled = _resource("ScaledObject")
    scaled["kind"] = "ScaledThing"
    status, output = _check(crd_validator, scaled)
    assert status == 1, output
    assert "no schema for keda.sh/v1alpha1 ScaledThing" in output


def _docs_multi_stream_example() -> dict[str, Any]:
    """The ScaledObject fragment (advanced, triggers) of docs/operations.md's Autoscaling
    section for a fleet of several streams."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("\n## Autoscaling\n", 1)[1].split("\n## ", 1)[0]
    (block,) = [b for b in section.split("```yaml\n")[1:] if "scalingModifiers" in b]
    fragment: dict[str, Any] = yaml.safe_load(block.split("```", 1)[0])
    return fragment


@pytest.mark.processes  # node
def test_the_docs_multi_stream_example_is_a_valid_scaled_object(crd_validator: Path) -> None:
    """One named trigger per stream and their sum as the formula (an HPA would take the
    largest of several metrics): the base's ScaledObject with the example's triggers and
    scalingModifiers passes the check."""
    example = _docs_multi_stream_example()
    scaled = _resource("ScaledObject")
    scaled["spec"]["advanced"]["scalingModifiers"] = example["advanced"]["scalingModifiers"]
    scaled["spec"]["triggers"] = example["triggers"]
    names = [t["name"] for t in example["triggers"]]
    assert len(names) >= 2
    assert example["advanced"]["scalingModifiers"]["formula"] == " + ".join(names)
    status, output = _check(crd_validator, scaled)
    assert status == 0, output

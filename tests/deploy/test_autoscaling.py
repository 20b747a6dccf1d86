"""The fleet's autoscaling, held to the workers it scales and to docs/operations.md.

KEDA's ScaledObject (deploy/k8s/base/scaledobject.yaml) must scale the worker Deployment
and read the stream the workers read; the ECS scalable target must scale the worker
service. Their numbers (fewest and most workers, shards a worker, how long a new count
must hold, the pace of scale-down) are stated once for the operator, in the table of
docs/operations.md "Autoscaling", and the manifests must say the same. Scale-down must
leave each leaver's SIGTERM hand-off time to finish before the next one goes. Schema
checks of the same files: test_crd_validation.py and ``make validate-deploy``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from tests.deploy.test_deploy_files import (
    CORE_TEMPLATE,
    ECS_TEMPLATE,
    K8S,
    OVERLAYS,
    REPO,
    base_resource,
    k8s_config,
    load_cfn,
    load_yaml,
)

OPERATIONS = REPO / "docs" / "operations.md"
SCALED_OBJECT = "scaledobject.yaml"
MIN_WORKERS = 2
"""At least two workers, so a crashed worker's leases move to a live one."""


# -- the docs' table -----------------------------------------------------------------------


def docs_table() -> dict[str, tuple[str, str]]:
    """The Autoscaling section's table: row name -> (Kubernetes cell, ECS cell)."""
    section = OPERATIONS.read_text().split("\n## Autoscaling\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("setting", "---"):
            rows[cells[0]] = (cells[1], cells[2])
    assert {"fewest workers", "most workers", "scale down by"} <= rows.keys(), section
    return rows


# A number, then words without digits, then the setting it is: "60 s at the new count
# (`scaleUp.stabilizationWindowSeconds`)".
NUMBER_OF_SETTING = re.compile(r"(\d+)(?:(?!\d)[^(|])*\(`([^`]+)`")


def docs_numbers(column: int) -> dict[str, int]:
    """Every ``N ... (`setting`)`` of one column of the table: setting -> N."""
    found: dict[str, int] = {}
    for cells in docs_table().values():
        for number, setting in NUMBER_OF_SETTING.findall(cells[column]):
            assert setting not in found, setting
            found[setting] = int(number)
    return found


def docs_overlay_numbers() -> dict[tuple[str, str], int]:
    """``prod overlay 3`` in the Kubernetes column: (overlay, setting) -> N."""
    found: dict[tuple[str, str], int] = {}
    for cells in docs_table().values():
        cell = cells[0]
        setting = NUMBER_OF_SETTING.search(cell)
        for overlay, number in re.findall(r"(\w+) overlay (\d+)", cell):
            assert setting is not None, cell
            found[(overlay, setting[2])] = int(number)
    return found


# -- the manifests -------------------------------------------------------------------------


def _pointer(document: Any, path: str) -> tuple[Any, Any]:
    """The container and key a JSON pointer names."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]
    for part in parts[:-1]:
        document = document[int(part)] if isinstance(document, list) else document[part]
    last = parts[-1]
    return document, int(last) if isinstance(document, list) else last


def rendered(overlay: str, kind: str) -> dict[str, Any]:
    """A resource of scaledobject.yaml with the overlay's JSON patches applied (replace
    and add: what the overlays use)."""
    resource = copy.deepcopy(base_resource(SCALED_OBJECT, kind))
    kustomization = load_yaml(K8S / "overlays" / overlay / "kustomization.yaml")
    for patch in kustomization.get("patches", []):
        target = patch["target"]
        if target["kind"] != kind or target["name"] != resource["metadata"]["name"]:
            continue
        for operation in yaml.safe_load(patch["patch"]):
            assert operation["op"] in ("replace", "add"), operation
            container, key = _pointer(resource, operation["path"])
            if operation["op"] == "replace":
                exists = key < len(container) if isinstance(container, list) else key in container
                assert exists, f"{overlay}: nothing to replace at {operation['path']}"
            container[key] = operation["value"]
    return resource


def behavior(scaled: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    return found


def k8s_numbers(scaled: dict[str, Any]) -> dict[str, int]:
    """The settings the docs' Kubernetes column names, as the ScaledObject sets them."""
    (trigger,) = scaled["spec"]["triggers"]
    (down,) = behavior(scaled)["scaleDown"]["policies"]
    assert down["type"] == "Pods"
    return {
        "minReplicaCount": scaled["spec"]["minReplicaCount"],
        "maxReplicaCount": scaled["spec"]["maxReplicaCount"],
        "shardCount": int(trigger["metadata"]["shardCount"]),
        "scaleUp.stabilizationWindowSeconds": behavior(scaled)["scaleUp"][
            "stabilizationWindowSeconds"
        ],
        "scaleDown.stabilizationWindowSeconds": behavior(scaled)["scaleDown"][
            "stabilizationWindowSeconds"
        ],
        "scaleDown.policies": down["value"],
    }


def ecs_resources() -> dict[str, Any]:
    resources: dict[str, Any] = load_cfn(ECS_TEMPLATE)["Resources"]
    return resources


def ecs_parameters() -> dict[str, Any]:
    parameters: dict[str, Any] = load_cfn(ECS_TEMPLATE)["Parameters"]
    return parameters


def ecs_policy() -> dict[str, Any]:
    (policy,) = [
        r
        for r in ecs_resources().values()
        if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"
    ]
    found: dict[str, Any] = policy["Properties"]
    return found


def ecs_numbers() -> dict[str, int]:
    """The settings the docs' ECS column names, as the template sets them."""
    tracking = ecs_policy()["TargetTrackingScalingPolicyConfiguration"]
    return {
        "MinWorkers": ecs_parameters()["MinWorkers"]["Default"],
        "MaxWorkers": ecs_parameters()["MaxWorkers"]["Default"],
        "TargetValue": tracking["TargetValue"],
        "ScaleOutCooldown": tracking["ScaleOutCooldown"],
        "ScaleInCooldown": tracking["ScaleInCooldown"],
    }


# -- Kubernetes ----------------------------------------------------------------------------


def test_the_scaled_object_scales_the_worker_deployment() -> None:
    """scaleTargetRef names the Deployment, which leaves its count to KEDA's HPA."""
    kustomization = load_yaml(K8S / "base" / "kustomization.yaml")
    assert SCALED_OBJECT in kustomization["resources"]
    deployment = base_resource("deployment.yaml", "Deployment")
    scaled = base_resource(SCALED_OBJECT, "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": deployment["apiVersion"],
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert "replicas" not in deployment["spec"], "a count in the manifest fights the HPA"
    for overlay in OVERLAYS:
        overlay_kustomization = load_yaml(K8S / "overlays" / overlay / "kustomization.yaml")
        assert "replicas" not in overlay_kustomization, overlay


def test_the_trigger_signs_with_the_scaler_role() -> None:
    auth = base_resource(SCALED_OBJECT, "TriggerAuthentication")
    for trigger in base_resource(SCALED_OBJECT, "ScaledObject")["spec"]["triggers"]:
        assert trigger["type"] == "aws-kinesis-stream"
        assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
        assert trigger["useCachedMetrics"] is True
        assert "identityOwner" not in trigger["metadata"], "deprecated: podIdentity decides"
    assert auth["spec"]["podIdentity"]["provider"] == "aws"
    assert set(auth["spec"]["podIdentity"]) == {"provider", "roleArn"}
    core = load_cfn(CORE_TEMPLATE)
    (statement,) = core["Resources"]["ScalerRole"]["Properties"]["Policies"][0]["PolicyDocument"][
        "Statement"
    ]
    assert statement["Action"] == ["kinesis:DescribeStreamSummary"]
    assert core["Outputs"]["ScalerRoleArn"]["Value"] == {"Fn::GetAtt": ["ScalerRole", "Arn"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_scales_on_the_stream_its_workers_read(overlay: str) -> None:
    """KEDA cannot read the ConfigMap: the trigger repeats LANDER_STREAM and AWS_REGION,
    and the overlay's TriggerAuthentication names its account's scaler role."""
    config = k8s_config(overlay, "lander-worker")
    scaled = rendered(overlay, "ScaledObject")
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["metadata"]["streamName"] == config["LANDER_STREAM"]
    assert trigger["metadata"]["awsRegion"] == config["AWS_REGION"]
    role = rendered(overlay, "TriggerAuthentication")["spec"]["podIdentity"]["roleArn"]
    assert re.fullmatch(r"arn:aws:iam::\d{12}:role/lander-\w+-scaler", role), role
    kustomization = load_yaml(K8S / "overlays" / overlay / "kustomization.yaml")
    worker_role = next(
        p["patch"] for p in kustomization["patches"] if p["target"]["name"] == "lander-worker"
    )
    account = role.split(":")[4]
    assert f"arn:aws:iam::{account}:role/" in worker_role, "the workers' account"


def test_the_docs_state_the_kubernetes_numbers() -> None:
    assert docs_numbers(0) == k8s_numbers(base_resource(SCALED_OBJECT, "ScaledObject"))
    for (overlay, setting), number in docs_overlay_numbers().items():
        assert k8s_numbers(rendered(overlay, "ScaledObject"))[setting] == number
    assert "1 worker a minute" in docs_table()["scale down by"][0]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_fleet_stays_between_two_and_the_ceiling(overlay: str) -> None:
    numbers = k8s_numbers(rendered(overlay, "ScaledObject"))
    assert numbers["minReplicaCount"] >= MIN_WORKERS
    assert numbers["maxReplicaCount"] >= numbers["minReplicaCount"]
    assert numbers["shardCount"] >= 1, "more workers than shards hold nothing"


def test_scale_down_leaves_time_for_each_hand_off() -> None:
    """One worker a period, the period longer than a worker's whole stop; a lower count
    must hold longer than a higher one before the fleet follows it."""
    scaled = base_resource(SCALED_OBJECT, "ScaledObject")
    (down,) = behavior(scaled)["scaleDown"]["policies"]
    assert down == {"type": "Pods", "value": 1, "periodSeconds": 60}
    grace = base_resource("deployment.yaml", "Deployment")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    shutdown = float(k8s_config(OVERLAYS[0], "lander-worker")["LANDER_SHUTDOWN_SECONDS"])
    assert down["periodSeconds"] > grace > shutdown
    up = behavior(scaled)["scaleUp"]["stabilizationWindowSeconds"]
    assert behavior(scaled)["scaleDown"]["stabilizationWindowSeconds"] >= 5 * up
    # KEDA's cooldownPeriod applies only to scaling to zero, which this never does.
    assert "cooldownPeriod" not in scaled["spec"]


# -- ECS -----------------------------------------------------------------------------------


def test_the_scalable_target_scales_the_worker_service() -> None:
    resources = ecs_resources()
    (name,) = [
        n
        for n, r in resources.items()
        if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"
    ]
    target = resources[name]["Properties"]
    assert resources["Service"]["Type"] == "AWS::ECS::Service"
    assert target["ResourceId"] == {"Fn::Sub": "service/${ClusterName}/${Service.Name}"}
    assert target["ServiceNamespace"] == "ecs"
    assert target["ScalableDimension"] == "ecs:service:DesiredCount"
    assert target["MinCapacity"] == {"Ref": "MinWorkers"}
    assert target["MaxCapacity"] == {"Ref": "MaxWorkers"}
    assert ecs_policy()["ScalingTargetId"] == {"Ref": name}
    assert "DesiredCount" not in resources["Service"]["Properties"], "the target owns it"
    assert "DesiredCount" not in ecs_parameters()


def test_the_docs_state_the_ecs_numbers() -> None:
    numbers = ecs_numbers()
    assert docs_numbers(1) == numbers
    assert ecs_parameters()["MinWorkers"]["MinValue"] == MIN_WORKERS
    assert numbers["MaxWorkers"] == load_cfn(CORE_TEMPLATE)["Parameters"]["ShardCount"]["Default"]
    tracking = ecs_policy()["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "ECSServiceAverageCPUUtilization"
    }
    # As gentle as Kubernetes: the same wait before a smaller fleet.
    scaled = base_resource(SCALED_OBJECT, "ScaledObject")
    assert numbers["ScaleInCooldown"] == behavior(scaled)["scaleDown"]["stabilizationWindowSeconds"]

"""Cross-file contracts of the deploy files (Dockerfile, compose, Kubernetes, ECS, IAM).

Each deploy file repeats a few facts about the daemon: the names of its settings, the
port and paths of its health endpoints, how long its graceful hand-off may take, and the
AWS calls it makes. These tests read the files as data and hold them to the code, so a
renamed setting or a new DynamoDB call fails here rather than in a cluster. Schema and
lint checks of the same files are `make validate-deploy` (deploy/validate.py).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from consumer.leases.board_item import KEY
from consumer.leases.dynamo_table import WORKERS_SUFFIX, owner_index

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if p.is_dir())
CORE_TEMPLATE = DEPLOY / "cloudformation" / "lander.yaml"
ECS_TEMPLATE = DEPLOY / "ecs" / "lander-service.yaml"
IAM = DEPLOY / "iam"
METRICS_PORT = 9400


# -- reading the files -------------------------------------------------------------------


def _cfn_tag(loader: Any, suffix: str, node: Any) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = str(value).split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


# A SafeLoader that reads CloudFormation's short tags (!Ref, !Sub, ...) as data.
_CfnLoader: Any = type("_CfnLoader", (yaml.SafeLoader,), {})
_CfnLoader.add_multi_constructor("!", _cfn_tag)


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_all(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def load_cfn(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_CfnLoader)  # a SafeLoader subclass


def literals(generator: dict[str, Any]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in generator.get("literals", []))


def k8s_config(overlay: str, name: str) -> dict[str, str]:
    """A generated ConfigMap's data as the overlay renders it: base, then merges."""
    data: dict[str, str] = {}
    for folder in (K8S / "base", K8S / "overlays" / overlay):
        kustomization = load_yaml(folder / "kustomization.yaml")
        for generator in kustomization.get("configMapGenerator", []):
            if generator["name"] == name:
                data.update(literals(generator))
    return data


def base_resource(file: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in load_all(K8S / "base" / file) if d["kind"] == kind]
    resource: dict[str, Any] = found
    return resource


def compose() -> dict[str, Any]:
    document: dict[str, Any] = load_yaml(REPO / "docker-compose.yml")  # resolves << merges
    return document


def ecs_container() -> dict[str, Any]:
    task = load_cfn(ECS_TEMPLATE)["Resources"]["TaskDefinition"]["Properties"]
    (container,) = task["ContainerDefinitions"]
    return dict(container)


def ecs_env() -> dict[str, Any]:
    """The container's variables; those set only with a parameter (``!If [Cond, {Name,
    Value}, !Ref AWS::NoValue]``) as they are when it is given."""
    items = [
        item["Fn::If"][1] if set(item) == {"Fn::If"} else item
        for item in ecs_container()["Environment"]
    ]
    return {item["Name"]: item["Value"] for item in items}


def seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)?", text)
    assert match, text
    return int(match[1]) * (60 if match[2] == "m" else 1)


# -- the settings the code reads ---------------------------------------------------------


def _subclasses(cls: type[BaseSettings]) -> Iterator[type[BaseSettings]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def known_env_names() -> set[str]:
    """Every LANDER_* variable the code reads: settings fields (with aliases) + os.environ."""
    for module in ("consumer.config", "sparkjobs.settings"):
        importlib.import_module(module)
    names: set[str] = set()
    classes = [
        cls
        for cls in _subclasses(BaseSettings)
        if cls.__module__.split(".")[0] in ("consumer", "sparkjobs")
    ]
    assert {"Settings", "CompactSettings", "AnalyseSettings"} <= {c.__name__ for c in classes}
    for cls in classes:
        prefix = str(cls.model_config.get("env_prefix", ""))
        for field_name, info in cls.model_fields.items():
            alias = info.validation_alias or info.alias
            if isinstance(alias, str):
                names.add(alias.upper())
            elif isinstance(alias, AliasChoices):
                names.update(c.upper() for c in alias.choices if isinstance(c, str))
            else:
                names.add(f"{prefix}{field_name}".upper())
    read = re.compile(r"""environ(?:\.get\(|\[)\s*["'](LANDER_[A-Z0-9_]+)["']""")
    for folder in ("consumer", "sparkjobs"):
        for path in (REPO / folder).rglob("*.py"):
            names.update(read.findall(path.read_text()))
    return names


def deploy_env_names() -> dict[str, set[str]]:
    """LANDER_* names each deploy file sets, by file."""
    found: dict[str, set[str]] = {}

    def add(where: str, keys: Any) -> None:
        found.setdefault(where, set()).update(k for k in keys if str(k).startswith("LANDER_"))

    for name, service in compose()["services"].items():
        add(f"docker-compose.yml:{name}", (service.get("environment") or {}).keys())
    for folder in [K8S / "base", *(K8S / "overlays" / o for o in OVERLAYS)]:
        for generator in load_yaml(folder / "kustomization.yaml").get("configMapGenerator", []):
            add(f"{folder.relative_to(REPO)}:{generator['name']}", literals(generator))
    for file in ("deployment.yaml", "cronjob.yaml"):
        text = (K8S / "base" / file).read_text()
        add(f"deploy/k8s/base/{file}", re.findall(r"name:\s*(LANDER_[A-Z0-9_]+)", text))
    add("deploy/ecs/lander-service.yaml", ecs_env())
    dockerfile = (REPO / "Dockerfile").read_text()
    add("Dockerfile", re.findall(r"\b(LANDER_[A-Z0-9_]+)=", dockerfile))
    return found


# -- the contracts ------------------------------------------------------------------------


def test_every_lander_variable_in_a_deploy_file_is_a_real_setting() -> None:
    known = known_env_names()
    assert {"LANDER_STREAM", "LANDER_METRICS_PORT", "LANDER_COMPACTED"} <= known
    unknown = {
        where: sorted(names - known) for where, names in deploy_env_names().items() if names - known
    }
    assert not unknown, f"settings no code reads (typo or renamed?): {unknown}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_an_object_store_output_names_a_catalog(overlay: str) -> None:
    """The embedded catalog serves only a local output: an s3a:// output without a
    configured catalog would fail the nightly job at start."""
    config = k8s_config(overlay, "lander-compaction")
    assert config["LANDER_COMPACTED"].startswith("s3a://")
    catalog = config.get("LANDER_CATALOG", "lander").upper()
    assert config[f"PYICEBERG_CATALOG__{catalog}__TYPE"] == "glue"
    env = compose()["services"]["compaction"]["environment"]
    assert env["LANDER_COMPACTED"].startswith("s3a://")
    assert env["PYICEBERG_CATALOG__LANDER__TYPE"] == "sql"
    assert env["PYICEBERG_CATALOG__LANDER__URI"].startswith("sqlite:////home/lander/")
    assert "compaction-home:/home/lander" in compose()["services"]["compaction"]["volumes"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_k8s_grace_period_outlasts_the_hand_off(overlay: str) -> None:
    config = k8s_config(overlay, "lander-worker")
    shutdown = float(config["LANDER_SHUTDOWN_SECONDS"])
    grace = base_resource("deployment.yaml", "Deployment")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    assert grace > shutdown, f"{overlay}: SIGKILL at {grace}s cuts a {shutdown}s hand-off"
    assert grace >= shutdown + 10, "leave room for the process to exit after the hand-off"


def test_compose_and_ecs_stop_timeouts_outlast_the_hand_off() -> None:
    services = compose()["services"]
    workers = [s for name, s in services.items() if name.startswith("worker-")]
    assert len(workers) == 3
    for worker in workers:
        shutdown = float(worker["environment"]["LANDER_SHUTDOWN_SECONDS"])
        assert seconds(worker["stop_grace_period"]) > shutdown
        assert worker["stop_signal"] == "SIGTERM"
    container = ecs_container()
    assert container["StopTimeout"] > float(ecs_env()["LANDER_SHUTDOWN_SECONDS"])
    assert container["StopTimeout"] <= 120, "Fargate's maximum stopTimeout"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_k8s_probes_hit_health_endpoints_on_the_metrics_port(overlay: str) -> None:
    config = k8s_config(overlay, "lander-worker")
    assert config["LANDER_METRICS_HOST"] == "0.0.0.0"
    port = int(config["LANDER_METRICS_PORT"])
    assert port == METRICS_PORT
    (container,) = base_resource("deployment.yaml", "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": port}
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        get = container[probe]["httpGet"]
        assert get["path"] == path, probe
        assert ports.get(get["port"], get["port"]) == port, probe


def test_metrics_service_and_service_monitor_agree() -> None:
    service = base_resource("service.yaml", "Service")
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == "metrics"
    assert service_port["port"] == METRICS_PORT
    monitor = base_resource("servicemonitor.yaml", "ServiceMonitor")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service_port["name"]
    assert endpoint["path"] == "/metrics"
    deployment = base_resource("deployment.yaml", "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    budget = base_resource("poddisruptionbudget.yaml", "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_image_compose_and_ecs_serve_health_on_the_metrics_port() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f"EXPOSE {METRICS_PORT}" in dockerfile
    assert "LANDER_METRICS_HOST=0.0.0.0" in dockerfile
    assert "/healthz" in dockerfile.split("HEALTHCHECK --", 1)[1].split("\n", 2)[1]
    assert 'ENTRYPOINT ["lander"]' in dockerfile
    assert 'CMD ["run"]' in dockerfile
    for name, service in compose()["services"].items():
        if name.startswith("worker-"):
            env = service["environment"]
            assert env["LANDER_METRICS_HOST"] == "0.0.0.0"
            assert int(env["LANDER_METRICS_PORT"]) == METRICS_PORT
            assert service["ports"][0].endswith(f":{METRICS_PORT}")
    env = ecs_env()
    assert env["LANDER_METRICS_HOST"] == "0.0.0.0"
    assert int(env["LANDER_METRICS_PORT"]) == METRICS_PORT
    container = ecs_container()
    assert container["PortMappings"][0]["ContainerPort"] == METRICS_PORT
    assert f"127.0.0.1:{METRICS_PORT}/healthz" in " ".join(container["HealthCheck"]["Command"])


def test_compose_depends_on_waits_for_health_and_bootstrap() -> None:
    services = compose()["services"]
    assert services["bootstrap"]["depends_on"]["localstack"]["condition"] == "service_healthy"
    for name in ("worker-1", "worker-2", "worker-3", "producer"):
        condition = services[name]["depends_on"]["bootstrap"]["condition"]
        assert condition == "service_completed_successfully", name
    assert services["compaction"]["profiles"] == ["batch"]
    assert services["localstack"]["image"].split(":")[1] != "latest", "pin LocalStack"


def test_cronjob_compacts_analyses_and_maintains_one_window() -> None:
    cron = base_resource("cronjob.yaml", "CronJob")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    script = " ".join(container["args"])
    assert script.index("lander compact") < script.index("lander analyse")
    assert script.index("lander analyse") < script.index("lander maintain")
    assert "export LANDER_WINDOW=" in script, "both jobs must see the same window"
    assert pod["serviceAccountName"] == "lander-compaction"


@pytest.mark.processes  # /bin/sh, with a stand-in lander
@pytest.mark.parametrize(("compact", "ran", "status"), [
    (0, ["compact", "analyse", "maintain"], 0),
    (4, ["compact", "analyse", "maintain"], 4),
    (1, ["compact"], 1),
    (3, ["compact"], 3),
])  # fmt: skip
def test_the_cronjob_goes_on_after_bad_input_and_exits_with_compacts_code(
    tmp_path: Path, compact: int, ran: list[str], status: int
) -> None:
    """Exit 4 (bad input left out, the rest published): the window is still analysed
    and maintained, and the pod exits 4; any other failure stops there with its code.
    Only exit 1 is retried: a retry of 4 would find the window up to date and exit 0."""
    import os
    import subprocess

    cron = base_resource("cronjob.yaml", "CronJob")
    job = cron["spec"]["jobTemplate"]["spec"]
    (rule,) = job["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"] == {
        "containerName": "compaction", "operator": "In", "values": [2, 3, 4]
    }  # fmt: skip
    (script,) = job["template"]["spec"]["containers"][0]["args"]
    lander = tmp_path / "lander"
    lander.write_text(
        f'#!/bin/sh\necho "$1" >> {tmp_path}/ran\n[ "$1" != compact ] || exit {compact}\n'
    )
    lander.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "LANDER_WINDOW": "2026-11-21"}
    done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, check=False)
    assert done.returncode == status
    assert (tmp_path / "ran").read_text().split() == ran


def test_ecs_service_keeps_the_stream_consumed_during_deploys() -> None:
    service = load_cfn(ECS_TEMPLATE)["Resources"]["Service"]["Properties"]
    deployment = service["DeploymentConfiguration"]
    assert deployment["MinimumHealthyPercent"] == 100
    assert deployment["MaximumPercent"] >= 200


# -- IAM against the code's AWS calls ------------------------------------------------------


def client_calls(path: str) -> set[str]:
    """``self._client.<op>(`` calls of one module, or of every module in a folder."""
    target = REPO / path
    files = sorted(target.glob("*.py")) if target.is_dir() else [target]
    return {
        call for file in files for call in re.findall(r"self\._client\.(\w+)\(", file.read_text())
    }


def camel(operation: str) -> str:
    return "".join(part.capitalize() for part in operation.split("_"))


def granted_when_set(statement: dict[str, Any]) -> dict[str, Any]:
    """A statement, or the one a condition grants when its parameter is set (``!If
    [HasArchiveKey, statement, !Ref AWS::NoValue]``): the JSON policies list it, and
    deploy/iam/README.md says to drop it when the parameter is not used."""
    if set(statement) != {"Fn::If"}:
        return statement
    condition, granted, otherwise = statement["Fn::If"]
    assert condition in {"HasArchiveKey"}, condition
    assert otherwise == {"Ref": "AWS::NoValue"}
    found: dict[str, Any] = granted
    return found


def policy_statements(role: str) -> list[dict[str, Any]]:
    (policy,) = load_cfn(CORE_TEMPLATE)["Resources"][role]["Properties"]["Policies"]
    return [granted_when_set(s) for s in policy["PolicyDocument"]["Statement"]]


def policy_actions(role: str) -> set[str]:
    actions: set[str] = set()
    for statement in policy_statements(role):
        assert statement["Effect"] == "Allow"
        listed = statement["Action"]
        actions.update([listed] if isinstance(listed, str) else listed)
    assert not any("*" in action for action in actions), "least privilege: no wildcards"
    return actions


# The S3 operations whose IAM action is not the operation's own name.
S3_ACTIONS = {
    "head_object": "s3:GetObject",
    "list_objects_v2": "s3:ListBucket",
    "create_multipart_upload": "s3:PutObject",
    "upload_part": "s3:PutObject",
    "complete_multipart_upload": "s3:PutObject",
}


def test_worker_role_covers_every_dynamodb_call_of_the_lease_store() -> None:
    """Every DynamoDB operation is its own IAM action (``get_item`` needs
    ``dynamodb:GetItem``); the workers read single lease items with GetItem."""
    calls = client_calls("consumer/leases")
    assert {"update_item", "scan", "put_item", "create_table"} <= calls
    needed = {f"dynamodb:{camel(call)}" for call in calls} | {"dynamodb:GetItem"}
    granted = policy_actions("WorkerRole")
    assert needed <= granted, f"missing: {sorted(needed - granted)}"


def test_worker_role_covers_the_kinesis_and_s3_calls() -> None:
    granted = policy_actions("WorkerRole")
    kinesis = {
        f"kinesis:{camel(call)}"
        for module in ("kinesis.py", "kinesis_fanout.py")
        for call in client_calls(f"consumer/stream/{module}")
    }
    assert {"kinesis:GetRecords", "kinesis:SubscribeToShard"} <= kinesis
    assert kinesis <= granted, f"missing: {sorted(kinesis - granted)}"
    s3 = {
        S3_ACTIONS.get(call, f"s3:{camel(call)}") for call in client_calls("consumer/landing/s3.py")
    }
    assert s3 <= granted, f"missing: {sorted(s3 - granted)}"
    assert "s3:DeleteObject" not in granted, "workers never delete landed objects"
    # Tags on a put need their own action; an SSE-KMS put, read and start-up check theirs.
    assert {"s3:PutObjectTagging", "kms:GenerateDataKey", "kms:Decrypt", "kms:DescribeKey"} <= (
        granted
    )


def test_spark_role_reads_the_archive_and_touches_nothing_else() -> None:
    granted = policy_actions("SparkJobRole")
    assert {"s3:GetObject", "s3:PutObject", "s3:ListBucket", "glue:UpdateTable"} <= granted
    others = {a for a in granted if not a.startswith(("s3:", "glue:", "kms:"))}
    assert not others, "no Kinesis, no DynamoDB"
    assert "glue:DeleteTable" not in granted
    statements = {s["Sid"]: s for s in policy_statements("SparkJobRole")}
    assert statements["ReadTheArchive"]["Action"] == "s3:GetObject"


def test_more_streams_reach_every_stream_grant_and_the_streams_output() -> None:
    """MoreStreams (a fleet of several streams): the workers may read those streams and
    subscribe to them, and the LanderStreams output is a LANDER_STREAMS they accept."""
    from consumer.stream.streams import StreamChoice

    template = load_cfn(CORE_TEMPLATE)
    granted = {s["Sid"]: s for s in policy_statements("WorkerRole")}
    more = "arn:aws:kinesis:${Region}:${AccountId}:stream/${MoreStreams}"
    assert more in placeholders(granted["ReadTheStream"]["Resource"])
    assert f"{more}/consumer/*" in placeholders(granted["EnhancedFanOut"]["Resource"])
    output = template["Outputs"]["LanderStreams"]
    assert output["Condition"] == "HasMoreStreams"
    value = output["Value"]["Fn::Sub"]
    value = value.replace("${StreamName}", "orders").replace("${MoreStreams}", "orders-*")
    choice = StreamChoice.parse(value)
    assert choice.may_match("orders")
    assert choice.may_match("orders-eu")
    assert not choice.may_match("clicks")
    allowed = template["Parameters"]["MoreStreams"]["AllowedPattern"]
    assert re.fullmatch(allowed, "orders-*")
    assert re.fullmatch(allowed, "")
    assert not re.fullmatch(allowed, "orders-[ab]"), "IAM matches * and ? only"


# -- the same policies as plain IAM JSON (deploy/iam/) ---------------------------------

IAM_POLICIES = {
    "worker-policy.json": "WorkerRole",
    "compaction-policy.json": "SparkJobRole",
    "scaler-policy.json": "ScalerRole",
}

# What the template's references become in deploy/iam/*.json (placeholders that
# deploy/iam/README.md explains).
CFN_TO_PLACEHOLDER = {
    "Stream.Arn": "arn:aws:kinesis:${Region}:${AccountId}:stream/${StreamName}",
    "LeaseTable.Arn": "arn:aws:dynamodb:${Region}:${AccountId}:table/${LeaseTable}",
    "WorkersTable.Arn": "arn:aws:dynamodb:${Region}:${AccountId}:table/${LeaseTable}-workers",
    "Bucket.Arn": "arn:aws:s3:::${Bucket}",
    "ArchivePrefix": "${Prefix}",
    "CompactedPrefix": "${CompactedPrefix}",
    "ReportsPrefix": "${ReportsPrefix}",
    "AWS::Region": "${Region}",
    "AWS::AccountId": "${AccountId}",
    "ArchiveKmsKeyArn": "${KmsKeyArn}",
    "MoreStreams": "${MoreStreams}",
}

CONDITIONAL_RESOURCES = {"HasMoreStreams"}
"""Conditions of a resource in a list (``!If [HasMoreStreams, arn, !Ref AWS::NoValue]``):
the JSON lists the resource, and deploy/iam/README.md says when to drop it."""


def placeholders(value: Any) -> Any:
    """A CloudFormation policy value (``!GetAtt``, ``!Ref``, ``!Sub``, lists, maps) as
    deploy/iam/*.json spells it; lists sorted, so that order does not matter."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return sorted(placeholders(item) for item in value)
    if set(value) == {"Fn::GetAtt"}:
        return CFN_TO_PLACEHOLDER[".".join(value["Fn::GetAtt"])]
    if set(value) == {"Ref"}:
        return CFN_TO_PLACEHOLDER[value["Ref"]]
    if set(value) == {"Fn::Sub"}:
        return re.sub(r"\$\{([^}]+)\}", lambda m: CFN_TO_PLACEHOLDER[m[1]], value["Fn::Sub"])
    if set(value) == {"Fn::If"}:
        condition, granted, otherwise = value["Fn::If"]
        assert condition in CONDITIONAL_RESOURCES, condition
        assert otherwise == {"Ref": "AWS::NoValue"}
        return placeholders(granted)
    return {key: placeholders(item) for key, item in value.items()}


def statements(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A policy document's statements by Sid, every value as the JSON spells it and
    every list (actions, resources, condition values) sorted."""
    assert document["Version"] == "2012-10-17"
    found: dict[str, dict[str, Any]] = {}
    for statement in document["Statement"]:
        normal = {key: placeholders(value) for key, value in granted_when_set(statement).items()}
        for key in ("Action", "Resource"):
            if isinstance(normal[key], str):
                normal[key] = [normal[key]]
        sid = normal.pop("Sid")
        assert sid not in found, f"duplicate Sid {sid}"
        found[sid] = normal
    return found


def iam_json(file: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((IAM / file).read_text())
    return document


@pytest.mark.parametrize(("file", "role"), sorted(IAM_POLICIES.items()))
def test_iam_json_grants_exactly_what_the_cloudformation_role_grants(file: str, role: str) -> None:
    """deploy/iam/*.json and the template's roles cannot drift: the same statements,
    actions, resources and conditions, once the template's references are read as the
    JSON's placeholders."""
    (policy,) = load_cfn(CORE_TEMPLATE)["Resources"][role]["Properties"]["Policies"]
    template = statements(policy["PolicyDocument"])
    plain = statements(iam_json(file))
    assert plain == template
    actions = {action for statement in plain.values() for action in statement["Action"]}
    assert actions == policy_actions(role)


def test_iam_placeholders_are_explained() -> None:
    """Every ``${Name}`` in deploy/iam/*.json is explained in deploy/iam/README.md."""
    readme = (IAM / "README.md").read_text()
    used = {
        name
        for file in IAM_POLICIES
        for name in re.findall(r"\$\{(\w+)\}", (IAM / file).read_text())
    }
    assert {"Region", "AccountId", "StreamName", "LeaseTable", "Bucket", "Prefix"} <= used
    unexplained = {name for name in used if f"`${{{name}}}`" not in readme}
    assert not unexplained, f"deploy/iam/README.md does not explain {sorted(unexplained)}"


def test_lease_table_matches_what_the_daemon_creates() -> None:
    table = load_cfn(CORE_TEMPLATE)["Resources"]["LeaseTable"]["Properties"]
    assert table["KeySchema"] == [{"AttributeName": "leaseKey", "KeyType": "HASH"}]
    assert table["AttributeDefinitions"] == [
        {"AttributeName": "leaseKey", "AttributeType": "S"},
        {"AttributeName": "leaseOwner", "AttributeType": "S"},
    ]
    assert table["GlobalSecondaryIndexes"] == [owner_index()]  # KCL 3.x's owner index
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    source = (REPO / "consumer/leases/dynamo.py").read_text()
    assert '"leaseKey",\n            attributes=[{"AttributeName": "leaseOwner"' in source


def test_workers_table_matches_what_the_daemon_creates() -> None:
    """The lease table's name plus -workers, keyed by itemKey, on-demand."""
    table = load_cfn(CORE_TEMPLATE)["Resources"]["WorkersTable"]["Properties"]
    assert table["TableName"] == {"Fn::Sub": "${LeaseTableName}" + WORKERS_SUFFIX}
    assert table["KeySchema"] == [{"AttributeName": KEY, "KeyType": "HASH"}]
    assert table["AttributeDefinitions"] == [{"AttributeName": KEY, "AttributeType": "S"}]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    source = (REPO / "consumer/leases/dynamo_board.py").read_text()
    assert "await self._create(self._workers, KEY)" in source


def test_lifecycle_never_expires_the_compacted_tables() -> None:
    """Only `lander maintain` deletes a table's files: an age rule would take current data."""
    bucket = load_cfn(CORE_TEMPLATE)["Resources"]["Bucket"]["Properties"]
    rules = {r["Id"]: r for r in bucket["LifecycleConfiguration"]["Rules"]}
    assert rules["AbortIncompleteMultipartUploads"]["AbortIncompleteMultipartUpload"]
    for rule in rules.values():
        if "ExpirationInDays" in rule:
            prefix = str(rule.get("Prefix", ""))
            assert prefix, f"{rule['Id']} expires the whole bucket"
            assert "CompactedPrefix" not in prefix, rule["Id"]

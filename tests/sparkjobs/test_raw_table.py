"""`lander raw-table`: the landed JSON Lines as a Glue/Athena table, from the lander's own
field list, registered over HTTP against moto's Glue."""

from __future__ import annotations

import boto3
import pytest

from consumer import cli
from consumer.archive.envelope import FIELDS
from consumer.cli.emulators import LocalStack
from sparkjobs.catalog import table_name
from sparkjobs.table.rawtable import table_input

STREAM = "Orders.EU-1"


def test_the_columns_are_the_landed_fields_and_the_partitions_are_projected() -> None:
    table = table_input("orders_raw", STREAM, "s3a://bucket/kinesis/", 30)
    columns = table["StorageDescriptor"]["Columns"]
    assert [c["Name"] for c in columns] == [f.name for f in FIELDS]
    assert {c["Name"]: c["Type"] for c in columns}["subsequence_number"] == "bigint"
    assert {c["Type"] for c in columns} == {"string", "bigint"}
    location = "s3://bucket/kinesis/stream=Orders.EU-1/"
    assert table["StorageDescriptor"]["Location"] == location
    parameters = table["Parameters"]
    assert parameters["storage.location.template"] == (
        location + "dt=${dt}/hour=${hour}/minute=${minute}/"
    )
    assert [k["Name"] for k in table["PartitionKeys"]] == ["dt", "hour", "minute"]
    for key in ("dt", "hour", "minute"):
        assert f"projection.{key}.type" in parameters
    assert parameters["projection.dt.range"] == "NOW-30DAYS,NOW"
    assert parameters["projection.minute.range"] == "0,59"
    assert table_name("{stream}_raw", STREAM) == "orders_eu_1_raw"


@pytest.mark.emulator
def test_the_table_is_created_then_updated_in_glue(
    local_stack: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in local_stack.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", local_stack.dynamodb_endpoint)
    command = ["raw-table", "--stream", STREAM, "--archive", "s3a://bucket/kinesis"]
    assert cli.main([*command, "--raw-days", "30"]) == 0
    assert cli.main(command) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("lander.")]
    assert [line.split(";")[0] for line in lines] == [
        "lander.orders_eu_1_raw: created",
        "lander.orders_eu_1_raw: updated",
    ]
    glue = boto3.client("glue", endpoint_url=local_stack.dynamodb_endpoint)
    stored = glue.get_table(DatabaseName="lander", Name="orders_eu_1_raw")["Table"]
    assert stored["Parameters"]["projection.enabled"] == "true"
    assert stored["Parameters"]["projection.dt.range"] == "NOW-400DAYS,NOW"  # the update
    assert stored["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"] == (
        "org.openx.data.jsonserde.JsonSerDe"
    )
    assert [c["Name"] for c in stored["StorageDescriptor"]["Columns"]] == [f.name for f in FIELDS]


def test_a_table_name_glue_refuses_is_one_line_at_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = ["raw-table", "--stream", STREAM, "--archive", "s3a://bucket/kinesis"]
    assert cli.main([*command, "--raw-table", "Raw-{stream}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "LANDER_RAW_TABLE" in err[0]

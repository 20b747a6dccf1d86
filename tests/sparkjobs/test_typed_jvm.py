"""The typed columns' two makers give the same rows (issue 48): the JVM function
(:mod:`sparkjobs.compaction.typedjvm`) and Spark's expressions
(:mod:`sparkjobs.compaction.typed`), which a session without the jar uses.

Payloads are drawn from pools of awkward values for every column type (numbers at each
type's edges and in each JSON notation, numbers in strings, wrong kinds, nested lists,
lists of objects with new fields, nulls, non-object payloads, text Spark's parser
refuses), several thousand rows of them, typed by both in one session. Per row they
must agree on the payload struct, on the places rescued and their values (the JVM keeps
a rescued value's own text, Spark writes it again: compared as numbers and strings), and
over the window on the next schema and the untyped fields the run records.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal as Exact
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql import functions as sf

from sparkjobs.compaction import objectreader, typedjvm
from sparkjobs.compaction.payload_plan import PayloadPlan, next_schema, untyped
from sparkjobs.compaction.typed import places_of, typed_frame
from sparkjobs.table.evolve import AddColumn
from sparkjobs.table.payload import (
    BOOLEAN,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    VARIANT,
    Decimal,
    Field,
    ListOf,
    Struct,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.deep]


def _struct(**fields: Any) -> Struct:
    return Struct(tuple(Field(name, kind, False) for name, kind in sorted(fields.items())))


SCHEMA = _struct(
    b=BOOLEAN,
    s=STRING,
    i=INT,
    l=LONG,
    f=FLOAT,
    d=DOUBLE,
    m=Decimal(10, 2),
    big=Decimal(38, 0),
    t=TIMESTAMP,
    ms=TIMESTAMP,
    sec=TIMESTAMP,
    user=_struct(name=STRING, age=INT, home=_struct(city=STRING, zip=LONG)),
    li=ListOf(INT),
    ll=ListOf(LONG),
    ls=ListOf(STRING),
    lb=ListOf(BOOLEAN),
    ld=ListOf(DOUBLE),
    lf=ListOf(FLOAT),
    lm=ListOf(Decimal(6, 3)),
    lt=ListOf(TIMESTAMP),
    items=ListOf(_struct(sku=STRING, qty=LONG, tags=ListOf(STRING))),
    grid=ListOf(ListOf(INT)),
    ctx=_struct(id=LONG),
    lines=ListOf(_struct(sku=STRING)),
)
TIMESTAMPS: dict[tuple[str, ...], str | int] = {
    ("t",): "iso",
    ("ms",): 1000,
    ("sec",): 1,
    ("lt", "element"): "iso",
}

NUMBERS = [
    "0",
    "-0",
    "1",
    "-1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "9007199254740992",
    "9007199254740993",
    "16777216",
    "16777217",
    "123456789012345678901234567890",
    "12345678901234567890123456789",  # an epoch whose micros overflowed decimal(38,6)
    "-98765432109876543210987654321",
    "12345678901234567890123456789012345678",
    "123456789012345678901234567890123456789",
    "1.0",
    "1.50",
    "-0.0",
    "0.00",
    "12.345",
    "12.3450",
    "99999999.99",
    "100000000.00",
    "0.1",
    "0.5",
    "0.25",
    "1.5e0",
    "1E+2",
    "1e-7",
    "1e400",
    "-1e400",
    "3.4028235e38",
    "0.1000000000000000055511151231257827",
    "1.23456789012345678901234567890123456789",
    "100.000",
    "1763683200000",
    "1763683200000.5",
    "1763683200.9999999",
    "5.9999999",
    "1e20",
]
STRINGS = [
    '""',
    '"x"',
    '"12"',
    '"12.50"',
    '"-0"',
    '"007.5"',
    '"1.234"',
    '"1e2"',
    '" 1"',
    '"2026-11-21T03:04:05Z"',
    '"2026-11-21 03:04:05.123456"',
    '"2026-11-21"',
    '"2026-11-21T03:04:05+02:00"',
    '"not a time"',
    '"caf\\u00e9 \\ud83d\\ude00"',
    '"line\\nbreak \\"quoted\\""',
    '"\u00e9\u2028"',
    '"true"',
]
OTHERS = ["true", "false", "null", "{}", "[]", '{"a":1}', "[1,2]"]
SCALARS = NUMBERS + STRINGS + OTHERS


def _value(rng: random.Random, depth: int = 0) -> str:
    """A JSON value's text: mostly scalars, sometimes a list or an object."""
    roll = rng.random()
    if depth < 2 and roll < 0.12:
        return "[" + ",".join(_value(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    if depth < 2 and roll < 0.18:
        keys = rng.sample(["sku", "qty", "tags", "name", "age", "city", "zip", "new"], 3)
        return "{" + ",".join(f'"{k}":{_value(rng, depth + 1)}' for k in keys) + "}"
    return rng.choice(SCALARS)


def _homogeneous(rng: random.Random, pool: list[str]) -> str:
    """A list of the pool's values (a list of one kind fits more often)."""
    return "[" + ",".join(rng.choice([*pool, "null"]) for _ in range(rng.randint(0, 4))) + "]"


INTEGERS = [n for n in NUMBERS if "." not in n and "e" not in n.lower()]
DECIMALS = [n for n in NUMBERS if "e" not in n.lower()]
TIMES = [s for s in STRINGS if s.startswith('"2026')]


def _item(rng: random.Random) -> str:
    parts = {
        "sku": rng.choice(['"s1"', '"s2"', "7", "null"]),
        "qty": rng.choice(["1", "2", "null", "1.5", '"3"']),
        "tags": rng.choice(['["a"]', "[]", "null", '["a",1]']),
    }
    if rng.random() < 0.2:
        parts["colour"] = rng.choice(['"red"', "3", "null"])  # a field with no column
    chosen = {k: v for k, v in parts.items() if rng.random() < 0.8}
    return "{" + ",".join(f'"{k}":{v}' for k, v in chosen.items()) + "}"


REFUSED = [
    '{"a":1,"a":2}',
    '{"s":"\\ud800"}',  # a lone surrogate, escaped: the only way one gets into a string
    '{"\\udc00":1}',  # in a name
    '{"s":"\\ud83d\\ude00\\ude00"}',  # after a pair
    '{"i":01}',
    '{"i":NaN}',
]


def _payload(rng: random.Random) -> str:
    """One payload: an object of the schema's fields (and others), or something else."""
    roll = rng.random()
    if roll < 0.03:
        return rng.choice(['"just text"', "42", "[1,2]", "null", "true", "not json", ""])
    if roll < 0.05:  # what Spark's parser refuses: the row has no typed columns
        return rng.choice(REFUSED)
    fields: dict[str, str] = {}
    for name in ("b", "s", "i", "l", "f", "d", "m", "big", "t", "ms", "sec"):
        if rng.random() < 0.7:
            fields[name] = _value(rng)
    if rng.random() < 0.8:
        home = '{"city":%s,"zip":%s%s}' % (  # noqa: UP031 - JSON braces
            rng.choice([*STRINGS, "3"]),
            rng.choice([*INTEGERS, '"x"']),
            ',"street":"s"' if rng.random() < 0.2 else "",
        )
        user = {"name": rng.choice(STRINGS), "age": rng.choice([*INTEGERS, *STRINGS[:3]])}
        if rng.random() < 0.8:
            user["home"] = home if rng.random() < 0.9 else rng.choice(['"nowhere"', "[]"])
        if rng.random() < 0.2:
            user["nick"] = rng.choice(STRINGS)
        fields["user"] = "{" + ",".join(f'"{k}":{v}' for k, v in user.items()) + "}"
    elif rng.random() < 0.5:
        fields["user"] = _value(rng)
    lists = {
        "li": INTEGERS,
        "ll": INTEGERS,
        "ls": STRINGS,
        "lb": ["true", "false"],
        "ld": NUMBERS,
        "lf": NUMBERS,
        "lm": DECIMALS + STRINGS[:8],
        "lt": TIMES,
    }
    for name, pool in lists.items():
        if rng.random() < 0.5:
            fields[name] = _homogeneous(rng, pool) if rng.random() < 0.8 else _value(rng)
    if rng.random() < 0.6:
        fields["items"] = "[" + ",".join(_item(rng) for _ in range(rng.randint(0, 3))) + "]"
        if rng.random() < 0.1:
            fields["items"] = rng.choice(['[{"sku":"s"},null]', '["s"]', '{"sku":"s"}'])
    if rng.random() < 0.4:
        fields["grid"] = "[" + ",".join(_homogeneous(rng, INTEGERS) for _ in range(2)) + "]"
    if rng.random() < 0.2:
        fields[rng.choice(["extra", "more", 'odd key \\"q\\"'])] = _value(rng)
    # Fields whose kinds never disagree: new ones become columns, inside structs and
    # lists of structs too (a struct column that also sees text gets no new fields).
    if rng.random() < 0.3:
        fields["coupon"] = rng.choice(['"C1"', "null"])
    if rng.random() < 0.5:
        region = ',"region":"eu"' if rng.random() < 0.3 else ""
        fields["ctx"] = '{"id":%s%s}' % (rng.choice(["1", "2"]), region)  # noqa: UP031
    if rng.random() < 0.5:
        colour = ',"colour":"red"' if rng.random() < 0.3 else ""
        fields["lines"] = '[{"sku":"a"},{"sku":"b"%s}]' % colour  # noqa: UP031
    names = list(fields)
    rng.shuffle(names)
    spaced = ", " if rng.random() < 0.1 else ","
    return "{" + spaced.join(f'"{n}":{fields[n]}' for n in names) + "}"


def _number(text: str) -> Any:
    """A number as Spark writes a rescued one again: a double (an infinite one as a
    string)."""
    value = float(Exact(text))
    return value if abs(value) != float("inf") else ("-" if value < 0 else "") + "Infinity"


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    return json.loads(text, parse_float=_number, parse_int=_number)


@pytest.fixture(scope="module")
def both(spark: SparkSession) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Each row's payload, rescued values and rescued places by each maker, and what
    each run would record over the window."""
    rng = random.Random(48)
    texts = [_payload(rng) for _ in range(4000)]
    frame = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "id long, data string")
    frame = frame.union(spark.createDataFrame([(len(texts), None)], "id long, data string"))
    made = typedjvm.typed_frame(frame, sf.col("data"), SCHEMA, TIMESTAMPS)
    if made is None:
        if objectreader.javac() is None:
            pytest.skip("no javac on this machine: the session has no JVM function")
        pytest.fail("the session has the object reader's jar but not the typed function")
    results: list[list[Any]] = []
    outcome: dict[str, Any] = {}
    plain = typed_frame(frame, sf.col("data"), SCHEMA, TIMESTAMPS)
    for name, (rows, typed) in (("jvm", made), ("spark", plain)):
        flags = list(typed.flags.values())
        picked = rows.select(
            "id",
            "data",
            # As JSON: a timestamp may lie past Python's year 9999 (a date in epoch
            # milliseconds read as seconds), and this compares every typed value exactly.
            sf.to_json(typed.payload).alias("payload"),
            typed.rescued.alias("rescued"),
            typed.shape.alias("shape"),
            sf.array(*flags).alias("flags"),
        ).cache()
        results.append(picked.orderBy("id").drop("shape").collect())
        counts = picked.agg(
            sf.schema_of_variant_agg("shape").alias("shape"),
            *(sf.count_if(sf.col("flags")[i]).alias(f"r{i}") for i in range(len(flags))),
        ).first()
        assert counts is not None
        places = [path for path, _ in places_of(SCHEMA)]
        rescued = {path: int(counts[f"r{i}"]) for i, path in enumerate(places)}
        plan = PayloadPlan(SCHEMA, TIMESTAMPS)
        grown = next_schema(plan, counts["shape"], rescued)
        outcome[name] = {
            "rescued": rescued,
            "changes": None if grown is None else grown.changes,
            "schema": None if grown is None else grown.schema,
            "untyped": untyped(plan, counts["shape"]),
        }
        picked.unpersist()
    return results[0], results[1], outcome


def test_both_take_the_same_values(both: tuple[list[Any], list[Any], dict[str, Any]]) -> None:
    jvm, spark_rows, _ = both
    assert len(jvm) == len(spark_rows) == 4001
    taken = 0
    for a, b in zip(jvm, spark_rows, strict=True):
        assert a["payload"] == b["payload"], a["data"]
        taken += a["payload"] is not None
    assert taken > 3500  # most payloads are objects Spark's parser takes


def test_both_rescue_the_same_values(both: tuple[list[Any], list[Any], dict[str, Any]]) -> None:
    jvm, spark_rows, _ = both
    rescued = 0
    for a, b in zip(jvm, spark_rows, strict=True):
        assert a["flags"] == b["flags"], a["data"]
        got, want = _loads(a["rescued"]), _loads(b["rescued"])
        assert got == want, a["data"]
        if got:
            rescued += 1
    assert rescued > 1000  # the pools make most rows rescue something


def test_both_see_the_same_window(both: tuple[list[Any], list[Any], dict[str, Any]]) -> None:
    _, _, outcome = both
    jvm, spark_run = outcome["jvm"], outcome["spark"]
    assert jvm == spark_run
    # The window had fields with no column: both grow the schema the same way.
    assert jvm["changes"], jvm
    added = {"/".join(c.path) for c in jvm["changes"] if isinstance(c, AddColumn)}
    assert added == {"coupon", "ctx/region", "lines/element/colour"}
    assert {("extra",), ("more",)} <= set(jvm["untyped"])  # of many kinds
    assert ("i",) in {p for p, n in jvm["rescued"].items() if n}


def test_the_plan_names_every_place() -> None:
    plan = json.loads(typedjvm.plan_of(SCHEMA, TIMESTAMPS, "UTC"))
    fields = {f["name"]: f for f in plan["type"]["fields"]}
    assert fields["ms"]["type"] == {"kind": "timestamp", "per_second": 1000}
    assert fields["t"]["type"] == {"kind": "timestamp", "per_second": 0}
    assert fields["lt"]["type"]["element"] == {"kind": "timestamp", "per_second": 0}
    home = {f["name"]: f for f in fields["user"]["type"]["fields"]}["home"]
    places = [path for path, _ in places_of(SCHEMA)]
    assert home["place"] == places.index(("user", "home"))
    assert json.loads(home["key"]) == "/user/home"
    with pytest.raises(ValueError, match="no column for variant at /x"):
        typedjvm.plan_of(Struct((Field("x", VARIANT, False),)), {}, "UTC")


def test_a_rescued_value_keeps_its_own_text(spark: SparkSession) -> None:
    """The JVM rescues a value as the producer wrote it (Spark writes it again)."""
    text = '{"i":1.50,"m":"x  y","ld":[1E+2,1e400],"user":{"home":"\\u00e9"}}'
    frame = spark.createDataFrame([(text,)], "data string")
    made = typedjvm.typed_frame(frame, sf.col("data"), SCHEMA, TIMESTAMPS)
    if made is None:
        pytest.skip("no JVM function in this session (see the module's fixture)")
    rows, typed = made
    row = rows.select(typed.rescued.alias("r")).first()
    assert row is not None
    assert row["r"] == ('{"/i":1.50,"/ld":[1E+2,1e400],"/m":"x  y","/user/home":"\\u00e9"}')


def test_place_counts_read_back_per_place() -> None:
    """The aggregate's text has a count up to the highest place seen: the rest are 0."""
    assert typedjvm.counts_of("0,2,0,5", 6) == [0, 2, 0, 5, 0, 0]
    assert typedjvm.counts_of(None, 3) == [0, 0, 0]
    assert typedjvm.counts_of("", 2) == [0, 0]


def test_a_jar_without_the_function_leaves_the_typing_to_spark(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A jar named by LANDER_SPARK_READER_JAR may predate the typed function or its
    aggregate: the session's own refusal to load the class sends the run to Spark's
    expressions, or to a count per place."""
    frame = spark.createDataFrame([('{"i":"x"}',)], "data string")
    if typedjvm.typed_frame(frame, sf.col("data"), SCHEMA, TIMESTAMPS) is None:
        pytest.skip("no JVM function in this session (see the module's fixture)")
    monkeypatch.setattr(typedjvm, "COUNTS_CLASS", "kinesislander.spark.NoSuchCounts")
    made = typedjvm.typed_frame(frame, sf.col("data"), SCHEMA, TIMESTAMPS)
    assert made is not None
    rows, typed = made
    assert typed.places is None  # the places are counted one by one
    flags = rows.select(sf.array(*typed.flags.values()).alias("f")).first()
    assert flags is not None
    assert [path for path, hit in zip(typed.flags, flags["f"], strict=True) if hit] == [("i",)]
    monkeypatch.setattr(typedjvm, "CLASS", "kinesislander.spark.NoSuchPayload")
    assert typedjvm.typed_frame(frame, sf.col("data"), SCHEMA, TIMESTAMPS) is None

"""The counting proxy's labels name each DynamoDB request as the billed in-memory store
names the same call, so the emulator counts and the simulated ones line up."""

from __future__ import annotations

from bench.scale_check import label
from consumer.leases.board import BOARD_KEY


def _board(expression: str) -> dict[str, object]:
    return {"Key": {"leaseKey": {"S": BOARD_KEY}}, "UpdateExpression": expression}


def _lease(key: str, expression: str) -> dict[str, object]:
    return {"Key": {"leaseKey": {"S": key}}, "UpdateExpression": expression}


def test_board_writes_and_reads_are_labelled_as_the_simulation_bills_them() -> None:
    beat = "SET slots.#w.c = :next, slots.#w.n = :held, slots.#w.l = :leaving"
    assert label("UpdateItem", _board(beat), False) == "UpdateItem board beat"
    assert label("UpdateItem", _board("SET slots.#w.f = :true"), True) == (
        "UpdateItem board fence (condition failed)"
    )
    deliver = "SET slots.#w.i = list_append(slots.#w.i, :keys)"
    assert label("UpdateItem", _board(deliver), False) == "UpdateItem board deliver"
    notice = "SET slots.#w.g = slots.#w.g + :one"
    assert label("UpdateItem", _board(notice), False) == "UpdateItem board notice"
    get = {"Key": {"leaseKey": {"S": BOARD_KEY}}, "ConsistentRead": True}
    assert label("GetItem", get, False) == "GetItem board (strong)"
    assert label("Scan", {"ConsistentRead": False}, False) == "Scan (eventual)"
    assert label("Scan", {"ConsistentRead": True}, False) == "Scan (strong)"
    assert label("Query", {}, False) == "Query owner index"


def test_lease_writes_are_told_apart() -> None:
    renew = "SET lastUpdateMs = :now, leaseCounter = :next"
    assert label("UpdateItem", _lease("shardId-1", renew), False) == "UpdateItem renew"
    claim = label("UpdateItem", _lease("lander-worker:w1", renew), False)
    assert claim == "UpdateItem renew (worker id)"
    take = "SET lastUpdateMs = :now, leaseOwner = :me, leaseCounter = :next REMOVE handoffTo"
    assert label("UpdateItem", _lease("shardId-1", take), False) == "UpdateItem take"
    checkpoint = "SET lastUpdateMs = :now, leaseCounter = :next, checkpoint = :cp"
    assert label("UpdateItem", _lease("s", checkpoint), False) == "UpdateItem checkpoint"
    ask = "SET handoffTo = :to REMOVE handoffAck"
    assert label("UpdateItem", _lease("s", ask), False) == "UpdateItem hand-off request"
    ack = "SET handoffAck = :to"
    assert label("UpdateItem", _lease("s", ack), False) == "UpdateItem hand-off ack"

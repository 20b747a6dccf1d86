"""The effects table's contract, on the in-memory fake and on DynamoDB over HTTP: a
write lands only over the record its writer read and only while the writer's lease is
as it holds it; a release deletes only the claim it names."""

from __future__ import annotations

import pytest

from consumer.effects.model import Effect, State, Tenure, payload_hash
from consumer.effects.store import EffectRaceError
from consumer.leases.model import LeaseLostError
from tests.effects.conftest import Bench

NOW = 1_800_000_000


def _effect(claim: str, state: State = State.IN_PROGRESS, result: str | None = None) -> Effect:
    return Effect(
        key="order-1",
        state=state,
        tenure=Tenure("shardId-000000000000", "w1", claim),
        payload_hash=payload_hash(b"{}"),
        expires=NOW + 3600,
        result=result,
        written_ms=1,
    )


async def test_a_claim_then_its_completion(bench: Bench) -> None:
    held = await bench.hold("w1")
    store = bench.effects
    assert await store.read("order-1") is None
    claim = _effect("c1")
    await store.write(claim, held.lease, over=None)
    assert await store.read("order-1") == claim
    with pytest.raises(EffectRaceError):  # a second first claim
        await store.write(_effect("c2"), held.lease, over=None)
    done = _effect("c1", State.COMPLETED, '{"charge":"ch_1"}')
    await store.write(done, held.lease, over=claim)
    assert await store.read("order-1") == done
    with pytest.raises(EffectRaceError):  # over a record that is no longer there
        await store.write(_effect("c1", State.UNKNOWN), held.lease, over=claim)


async def test_the_lease_fences_every_write(bench: Bench) -> None:
    """The holder's own checkpoints move the fence with it; a worker that lost the
    lease can neither claim nor complete, and the new holder takes its claim over."""
    zombie = await bench.hold("w1")
    await zombie.checkpoint()  # its own write: the fence it carries moves with it
    claim = _effect("c1")
    await bench.effects.write(claim, zombie.lease, over=None)
    owner = await bench.hold("w2")
    with pytest.raises(LeaseLostError):
        await bench.effects.write(_effect("c1", State.COMPLETED, "1"), zombie.lease, over=claim)
    with pytest.raises(LeaseLostError):
        await bench.effects.write(_effect("c3"), zombie.lease, over=claim)
    assert await bench.effects.read("order-1") == claim
    taken = Effect(
        "order-1",
        State.IN_PROGRESS,
        Tenure("shardId-000000000000", "w2", "c2"),
        claim.payload_hash,
        NOW + 3600,
        written_ms=2,
    )
    await bench.effects.write(taken, owner.lease, over=claim)
    assert await bench.effects.read("order-1") == taken


async def test_a_release_deletes_only_its_own_claim(bench: Bench) -> None:
    held = await bench.hold("w1")
    claim = _effect("c1")
    await bench.effects.write(claim, held.lease, over=None)
    assert not await bench.effects.release(_effect("c9"))
    assert not await bench.effects.release(_effect("c1", State.COMPLETED))
    assert await bench.effects.release(claim)
    assert await bench.effects.read("order-1") is None
    assert not await bench.effects.release(claim)


async def test_records_are_kept_as_written(bench: Bench) -> None:
    """Keys and results of any text: unicode, JSON, the empty result."""
    held = await bench.hold("w1")
    for i, (key, result) in enumerate([("ключ/1 €", '{"a":[1,2,"ü"]}'), ("k:2", "null")]):
        claim = Effect(
            key, State.IN_PROGRESS, Tenure("s", "w1", f"c{i}"), payload_hash(b"x"), NOW, None, 5
        )
        await bench.effects.write(claim, held.lease, over=None)
        done = Effect(key, State.COMPLETED, claim.tenure, claim.payload_hash, NOW, result, 6)
        await bench.effects.write(done, held.lease, over=claim)
        assert await bench.effects.read(key) == done

"""The decision about an effect's record (consumer.effects.model.decide), as a property
over every record a key can have."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consumer.effects.model import Action, Effect, Mode, State, Tenure, decide, payload_hash

NOW = 1_800_000_000
effects = st.builds(
    Effect,
    key=st.just("k"),
    state=st.sampled_from(State),
    tenure=st.builds(Tenure, st.just("s0"), st.sampled_from(["w1", "w2"]), st.text(min_size=1)),
    payload_hash=st.sampled_from([payload_hash(b"a"), payload_hash(b"b")]),
    expires=st.integers(NOW - 10, NOW + 10),
    result=st.one_of(st.none(), st.just('{"ok":1}')),
)


@given(st.one_of(st.none(), effects), st.sampled_from(Mode))
def test_an_effect_runs_only_where_no_live_record_says_it_did_or_may_have(
    existing: Effect | None, mode: Mode
) -> None:
    action = decide(existing, payload_hash(b"a"), mode, NOW, unstarted="not-a-claim-here")
    live = existing is not None and existing.expires > NOW
    runs = action in (Action.CLAIM, Action.TAKE_OVER)
    if not live:
        assert action is Action.CLAIM  # none, or expired (TTL deletes late)
        return
    assert existing is not None
    if existing.payload_hash != payload_hash(b"a"):
        assert action is Action.REUSED
    elif existing.state is State.COMPLETED:
        assert action is Action.RETURN
    elif existing.state is State.UNKNOWN:
        assert action is Action.UNKNOWN
    # A claim in progress is run again only where the downstream honours the key.
    elif mode is Mode.KEYED:
        assert action is Action.TAKE_OVER
    else:
        assert action is Action.MARK_UNKNOWN
    assert runs == (
        existing.state is State.IN_PROGRESS
        and mode is Mode.KEYED
        and existing.payload_hash == payload_hash(b"a")
    )


def test_payload_hashes_tell_payloads_apart() -> None:
    assert payload_hash(b"a") == payload_hash(b"a") != payload_hash(b"b")
    assert len(payload_hash(b"")) == 32


@given(effects, st.sampled_from(Mode), st.booleans())
def test_a_claim_of_this_run_whose_effect_has_not_started_is_resumed(
    existing: Effect, mode: Mode, started: bool
) -> None:
    """A claim whose write went through though its answer was lost (and was retried)
    is this run's own: its effect is run, never recorded unknown. Once the effect has
    started, the claim is judged as anyone's."""
    unstarted = None if started else existing.tenure.claim
    action = decide(existing, existing.payload_hash, mode, NOW, unstarted)
    live_claim = existing.state is State.IN_PROGRESS and existing.expires > NOW
    if live_claim and not started:
        assert action is Action.RESUME
    else:
        assert action is decide(existing, existing.payload_hash, mode, NOW)

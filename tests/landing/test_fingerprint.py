"""The landing a fleet's workers must share (consumer.landing.fingerprint): the digest
is a function of the settings that decide where and how a stream lands, and the verdict
is the whole decision a worker makes about a stream's record."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.archive.layout import TEMPLATE
from consumer.landing.fingerprint import (
    DIGEST_CHARS,
    Landing,
    Verdict,
    check_digests,
    differences,
    judge,
)

landings = st.builds(
    Landing,
    archive=st.one_of(
        st.none(), st.from_regex(r"s3://[a-z]{3,8}(/[a-z0-9=]{1,8}){0,2}", fullmatch=True)
    ),
    payload_format=st.sampled_from(["json", "raw"]),
    event_id_pointer=st.one_of(st.none(), st.from_regex(r"(/[a-z_]{1,6}){1,2}", fullmatch=True)),
    layout=st.sampled_from([TEMPLATE, "{prefix}/{stream}/{first}-{last}.jsonl.gz"]),
)
digests = st.text("0123456789abcdef", min_size=DIGEST_CHARS, max_size=DIGEST_CHARS)


@given(landings, landings)
def test_equal_landings_have_equal_digests_and_nothing_differs(a: Landing, b: Landing) -> None:
    assert (a.digest == b.digest) == (a == b)  # 48 bits: no collision among a test's few
    assert (differences(a, b) == []) == (a == b)
    assert len(a.digest) == DIGEST_CHARS


@given(landings)
def test_a_record_reads_back_as_the_landing_it_was_written_from(a: Landing) -> None:
    assert Landing.parse(a.canonical) == a


@pytest.mark.parametrize(
    "text", ["", "{}", "[1]", '{"archive": "s3://a"}', '{"archive":1,"x":2}', "not json"]
)
def test_a_record_from_another_release_is_not_misread(text: str) -> None:
    assert Landing.parse(text) is None


@given(landings, st.one_of(st.none(), digests), st.frozensets(digests, max_size=3), st.booleans())
def test_the_verdict(
    ours: Landing, recorded: str | None, others: frozenset[str], named: bool
) -> None:
    adopt = others | {ours.digest} if named else others
    verdict = judge(ours, recorded, adopt)
    if recorded is None:
        assert verdict is Verdict.RECORD
    elif recorded == ours.digest:
        assert verdict is Verdict.AGREE  # whatever LANDER_LANDING_ADOPT says
    elif ours.digest in adopt:
        assert verdict is Verdict.ADOPT
    else:
        assert verdict is Verdict.REFUSE


@given(landings, landings)
def test_a_digest_named_for_adoption_adopts_only_its_own_landing(a: Landing, b: Landing) -> None:
    """LANDER_LANDING_ADOPT left set after a rollout does not wave through a later,
    unplanned difference: it names one landing, not "any"."""
    if a != b:
        assert judge(b, a.digest, {b.digest}) is Verdict.ADOPT
        assert judge(b, a.digest, {a.digest}) is Verdict.REFUSE


def test_differences_name_each_setting_on_both_sides() -> None:
    here = Landing("s3://lake/b", "json", None)
    fleet = Landing("s3://lake/a", "raw", "/event_id")
    assert differences(here, fleet) == [
        "archive s3://lake/b here, s3://lake/a in the fleet",
        "payload format json here, raw in the fleet",
        "event-id pointer none here, /event_id in the fleet",
    ]
    assert here.describe() == "s3://lake/b, json, event id none"
    assert "keys {prefix}/x" in Landing("s3://x", "json", None, "{prefix}/x").describe()


def test_adopt_digests_are_checked() -> None:
    assert check_digests(None) == frozenset()
    assert check_digests(" A1B2C3D4E5F6 , 0123456789ab") == {"a1b2c3d4e5f6", "0123456789ab"}
    with pytest.raises(ValueError, match="xyz: each must be a landing digest of 12 hex"):
        check_digests("a1b2c3d4e5f6,xyz")

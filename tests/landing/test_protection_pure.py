"""The archive-protection settings without AWS: tag parsing, the arguments each S3 call
gets, and the contradictions refused at start with one line."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.config import ConfigError, load_settings
from consumer.landing.protection import MAX_TAGS, ObjectProtection, parse_tags, tagging

_TAG_CHARS = st.sampled_from("abcXYZ019 +-._:/@éß水")
_KEY = (
    st.text(_TAG_CHARS, min_size=1, max_size=20)
    .map(str.strip)
    .filter(lambda k: bool(k) and not k.lower().startswith("aws:"))
)
_VALUE = st.text(st.one_of(_TAG_CHARS, st.just("=")), max_size=30).map(str.strip)


@given(st.dictionaries(_KEY, _VALUE, max_size=MAX_TAGS))
def test_tags_parse_and_reach_the_header_unchanged(tags: dict[str, str]) -> None:
    """Any allowed tags written as the setting come back in order, and the header S3
    receives decodes to exactly them (spaces, '=', '/', '@' and non-ASCII included)."""
    text = ",".join(f"{key}={value}" for key, value in tags.items())
    parsed = parse_tags(text)
    assert parsed == tuple(tags.items())
    assert tuple(parse_qsl(tagging(parsed), keep_blank_values=True)) == parsed


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("team", "is not key=value"),
        ("=x", "is not key=value"),
        ("a=1,a=2", "given twice"),
        ("aws:x=1", "reserved"),
        ("a=b#c", "S3 allows letters"),
        ("k" * 129 + "=v", "keys hold 128"),
        ("k=" + "v" * 257, "values 256"),
        (",".join(f"k{i}=v" for i in range(MAX_TAGS + 1)), "at most 10"),
    ],
)
def test_bad_tags_are_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_tags(text)


def test_each_call_gets_what_was_asked_for() -> None:
    """Creates get encryption and tags, every call the owner; defaults send nothing."""
    assert ObjectProtection().create_args() == {}
    assert ObjectProtection().owner_args() == {}
    assert ObjectProtection("sse-s3").create_args() == {"ServerSideEncryption": "AES256"}
    assert ObjectProtection("sse-kms").create_args() == {"ServerSideEncryption": "aws:kms"}
    full = ObjectProtection("sse-kms", "alias/k", True, (("a", "b c"),), "123456789012")
    assert full.create_args() == {
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "alias/k",
        "BucketKeyEnabled": True,
        "Tagging": "a=b%20c",
        "ExpectedBucketOwner": "123456789012",
    }
    assert full.owner_args() == {"ExpectedBucketOwner": "123456789012"}
    assert "b c" not in str(full.describe())  # tag values may be sensitive: keys only


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"archive_kms_key": "alias/k"},
            "LANDER_ARCHIVE_KMS_KEY needs LANDER_ARCHIVE_SSE=sse-kms",
        ),
        (
            {"archive_sse": "sse-s3", "archive_bucket_key": True},
            "LANDER_ARCHIVE_BUCKET_KEY needs LANDER_ARCHIVE_SSE=sse-kms",
        ),
        (
            {"archive": "file:///srv/archive", "archive_tags": "a=b"},
            "apply to an s3:// archive, not file:///srv/archive",
        ),
        ({"archive_expected_owner": "12345"}, "must be a 12-digit AWS account id"),
        ({"archive_tags": "a=1,a=2"}, "LANDER_ARCHIVE_TAGS tag 'a' is given twice"),
        ({"archive_sse": "kms"}, "LANDER_ARCHIVE_SSE"),
    ],
)
def test_contradicting_settings_fail_at_start_with_one_line(
    settings: dict[str, object], message: str
) -> None:
    given_settings = {"archive": "s3://bucket/landed", **settings}
    with pytest.raises(ConfigError) as caught:
        load_settings(stream="s", lease_table="leases", **given_settings)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_settings_become_the_protection() -> None:
    settings = load_settings(
        stream="s",
        lease_table="leases",
        archive="s3://bucket/landed",
        archive_sse="SSE-KMS",
        archive_kms_key="arn:aws:kms:eu-west-1:123456789012:key/k",
        archive_tags="team=data, class=pii",
    )
    assert ObjectProtection.from_settings(settings) == ObjectProtection(
        "sse-kms",
        "arn:aws:kms:eu-west-1:123456789012:key/k",
        False,
        (("team", "data"), ("class", "pii")),
        None,
    )

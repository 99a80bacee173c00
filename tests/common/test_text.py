"""The one text and integer rule (models.text, common.text) that every request and file passes
(issue 27, finding 3)."""
from __future__ import annotations

import pytest

from common.errors import ApplicationError
from common.text import checked_data, checked_int, checked_text
from models.text import INT32_MAX, INT64_MAX, INT64_MIN, data_problems, text_problem


@pytest.mark.parametrize("value", ["", "plain", "²", "café ☕", "\U0001f600", "tab\tnewline\n", b"caf\xc3\xa9"])
def test_storable_text_passes(value):
    assert text_problem(value) is None
    assert checked_text(value, field="caption") == (value.decode() if isinstance(value, bytes) else value)


@pytest.mark.parametrize("value, words", [
    ("\ud800", "lone surrogate"), ("a\udfffb", "lone surrogate"), ("a\x00b", "NUL"), (b"a\x00", "NUL"),
    (b"\xff", "not valid UTF-8"), (b"\xed\xa0\x80", "not valid UTF-8"),   # a surrogate, UTF-8 encoded
    (b"caf\xc3", "not valid UTF-8"),
])
def test_unstorable_text_is_a_400_naming_the_field(value, words):
    with pytest.raises(ApplicationError) as caught:
        checked_text(value, field="caption")
    error = caught.value
    assert (error.status_code, error.code, error.extra["field"]) == (400, "invalid_text", "caption")
    assert words in error.message and error.message.startswith("caption ")
    error.message.encode("utf-8")   # the answer never echoes the character it refuses


def test_integers_are_bounded_by_their_column():
    assert checked_int(INT64_MAX, field="n") == INT64_MAX
    assert checked_int(INT64_MIN, field="n") == INT64_MIN
    for value, bounds in [(INT64_MAX + 1, {}), (INT64_MIN - 1, {}), (INT32_MAX + 1, {"max_value": INT32_MAX}),
                          (-1, {"min_value": 0})]:
        with pytest.raises(ApplicationError) as caught:
            checked_int(value, field="n", **bounds)
        assert (caught.value.code, caught.value.extra["field"]) == ("out_of_range", "n")


def test_a_document_is_walked_to_any_depth_and_names_the_path():
    assert checked_data({"a": [1, "x", {"b": None, "c": True, "d": 1.5}]}) is not None
    cases = [({"settings": {"fuse_runs": [1, 2**70]}}, "settings.fuse_runs[1]", "out_of_range"),
             ({"stage": "\ud800"}, "stage", "invalid_text"),
             ({"labels": [{"label": "a\x00"}]}, "labels[0].label", "invalid_text"),
             ({"x": {"k\ud800": 1}}, "x (a key)", "invalid_text"),
             ({"confidence": float("inf")}, "confidence", "out_of_range"),
             ([-(2**63) - 1], "[0]", "out_of_range")]
    for data, where, code in cases:
        with pytest.raises(ApplicationError) as caught:
            checked_data(data)
        assert (caught.value.extra["field"], caught.value.code) == (where, code), data


def test_deep_documents_do_not_reach_the_recursion_limit():
    deep: list = ["\x00"]
    for _ in range(100_000):
        deep = [deep]
    assert [p.kind for p in data_problems(deep)] == ["text"]

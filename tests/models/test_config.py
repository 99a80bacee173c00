"""The plain-config base: strict from_dict, nested configs and tuples from the field types, JSON-ready as_dict."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.config import UNKNOWN_NAMED_KEYS, UNKNOWN_SETTINGS, PlainConfig


@dataclass
class Inner(PlainConfig):
    """A nested config."""

    size: int = 3
    span: tuple[float, float] = (0.25, 0.75)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size}")


@dataclass(frozen=True)
class Outer(PlainConfig):
    """A config with a nested config, variable tuples, a mapping of tuples and partial settings."""

    name: str = "outer"
    inner: Inner = field(default_factory=Inner)
    maybe: Inner | None = None
    tags: tuple[str, ...] = ("a",)
    palette: dict[str, tuple[int, int, int]] = field(default_factory=lambda: {"red": (255, 0, 0)})
    overrides: dict = field(default_factory=dict, metadata={"config": Inner})  # partial Inner settings


@dataclass
class Backend(PlainConfig):
    unknown_keys_message = UNKNOWN_SETTINGS

    url: str = ""


@dataclass
class Named(PlainConfig):
    unknown_keys_message = UNKNOWN_NAMED_KEYS

    a: int = 0


def test_unknown_keys_are_refused_with_their_names_and_the_known_ones():
    with pytest.raises(ValueError, match=r"Outer: unknown key\(s\) nmae, tag; known: ") as info:
        Outer.from_dict({"nmae": "x", "tag": ["b"], "name": "y"})
    for known in ("inner", "maybe", "name", "overrides", "palette", "tags"):
        assert known in str(info.value)
    with pytest.raises(ValueError, match=r"Inner: unknown key\(s\) sise"):  # nested dicts are strict too
        Outer.from_dict({"inner": {"sise": 2}})
    with pytest.raises(ValueError, match=r"Inner: unknown key\(s\) sise"):  # and so are partial settings
        Outer.from_dict({"overrides": {"sise": 2}})
    with pytest.raises(ValueError, match=r"Backend: unknown settings ulr; known: url"):
        Backend.from_dict({"ulr": "http://x"})
    with pytest.raises(ValueError, match=r"unknown Named keys: \['b'\] \(known: \['a'\]\)"):
        Named.from_dict({"b": 1})
    with pytest.raises(ValueError, match="Outer needs a dict, got list"):
        Outer.from_dict(["name"])


def test_defaults_nested_configs_and_tuples_are_built_from_the_field_types():
    assert Outer.from_dict(None) == Outer() == Outer.from_dict({})
    config = Outer.from_dict({"inner": {"size": 5, "span": [0.0, 1.0]}, "maybe": {"size": 2}, "tags": ["x", "y"],
                              "palette": {"blue": [0, 0, 255]}, "overrides": {"size": 4}})
    assert config.inner == Inner(size=5, span=(0.0, 1.0)) and isinstance(config.inner.span, tuple)
    assert config.maybe == Inner(size=2)
    assert config.tags == ("x", "y")
    assert config.palette == {"blue": (0, 0, 255)}
    assert config.overrides == {"size": 4}                        # partial settings stay a plain dict
    with pytest.raises(ValueError, match="size must be >= 1"):   # the nested config's own checks run
        Outer.from_dict({"inner": {"size": 0}})
    with pytest.raises(ValueError, match="size must be >= 1"):
        Outer.from_dict({"overrides": {"size": 0}})


def test_as_dict_is_json_ready_and_round_trips():
    config = Outer(inner=Inner(size=7), maybe=Inner(span=(0.1, 0.2)), tags=("p", "q"))
    data = config.as_dict()
    assert data == {"name": "outer", "inner": {"size": 7, "span": [0.25, 0.75]},
                    "maybe": {"size": 3, "span": [0.1, 0.2]}, "tags": ["p", "q"],
                    "palette": {"red": [255, 0, 0]}, "overrides": {}}
    assert json.loads(json.dumps(data)) == data                  # plain JSON: no tuples, no dataclasses
    assert Outer.from_dict(json.loads(json.dumps(data))) == config
    assert config.to_dict() == data


@given(size=st.integers(1, 10_000), span=st.tuples(st.floats(allow_nan=False), st.floats(allow_nan=False)),
       tags=st.lists(st.text(max_size=8), max_size=5).map(tuple),
       palette=st.dictionaries(st.text(max_size=6), st.tuples(*[st.integers(0, 255)] * 3), max_size=4),
       maybe=st.booleans())
def test_any_config_survives_a_json_round_trip(size, span, tags, palette, maybe):
    config = Outer(inner=Inner(size=size, span=span), maybe=Inner(size=size) if maybe else None, tags=tags,
                   palette=palette)
    assert Outer.from_dict(json.loads(json.dumps(config.as_dict()))) == config

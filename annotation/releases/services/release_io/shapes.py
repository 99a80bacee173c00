"""The arrow types of a release's structured JSON columns in Parquet, and how a value takes one.

A shape is declared once per kind of value (a predicate, a writer's proposal, a relation's evidence)
from what the platform writes there. JSON Lines keeps every value whole; Parquet holds it in its
shape, by :func:`conform`:

- a struct keeps its declared fields (a missing one is null) and drops keys it does not declare;
- a list takes a list (a single value becomes a list of one: a within-video relation's adjudication
  is one label, a cross-video pair's a list of labels);
- a string field takes a string, and any other JSON value as its canonical JSON text;
- an integer, float or boolean field takes a value of its type (an integer where a float is
  declared too) and is null for anything else (an integer past 64 bits, or too large for a
  double, included).

The result depends on the value alone, so the streaming writer and the row-at-a-time reference give
the same arrays, and the same records the same bytes.
"""
from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from models.facts import canonical_json

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1

LABEL = pa.int64()                               # 1 match, 0 mismatch, -1 unknown (⊥)
STRINGS = pa.list_(pa.string())
IDS = pa.list_(pa.int64())
LABELS = pa.list_(LABEL)
# a required predicate of a query: a fact name, the value the query requires, the facts it cites
PREDICATE = pa.struct([("name", pa.string()), ("value", pa.string()), ("fact_ids", STRINGS)])
PREDICATES = pa.list_(PREDICATE)
# a writer's (LLM's) proposed relation of a query and a trajectory: label, decisive predicates,
# evidence fact ids, its reason, whether the call failed
PROPOSAL = pa.struct([("label", LABEL), ("predicates", PREDICATES), ("evidence", STRINGS),
                      ("reason", pa.string()), ("failed", pa.bool_())])
# the first review's ratings of a query's wording
RATINGS = pa.struct([("faithful", pa.bool_()), ("natural", pa.int64())])
# why a relation has its label: within a video, the writer's pre-label, the panel's labels and the
# adjudicator's; across videos, the writer's proposal, the reviews, the adjudications and whether
# the label was decided blind; for a pseudo-label, the predicates it contradicts, the similarity and
# the rule's hash
EVIDENCE = pa.struct([("prelabel", PROPOSAL), ("proposal", PROPOSAL), ("reviews", LABELS),
                      ("adjudication", LABELS), ("blind", pa.bool_()), ("contradicted", STRINGS),
                      ("similarity", pa.float64()), ("rule_sha256", pa.string())])


def conform(value, shape: pa.DataType):
    """``value`` (a JSON value) as a Python value of arrow type ``shape`` (rules in the module
    docstring)."""
    if value is None:
        return None
    if pa.types.is_struct(shape):
        if not isinstance(value, dict):
            return None
        return {f.name: conform(value.get(f.name), f.type) for f in shape}
    if pa.types.is_list(shape):
        items = value if isinstance(value, list) else [value]
        return [conform(v, shape.value_type) for v in items]
    if pa.types.is_string(shape):
        return value if isinstance(value, str) else canonical_json(value)
    if pa.types.is_boolean(shape):
        return value if isinstance(value, bool) else None
    if pa.types.is_integer(shape):
        return value if type(value) is int and INT64_MIN <= value <= INT64_MAX else None
    if pa.types.is_floating(shape):
        if type(value) is int:
            return float(value) if abs(value) < 2 ** 1023 else None
        return value if type(value) is float else None
    raise ValueError(f"no rule for arrow type {shape}")


def shaped(values: Sequence, shape: pa.DataType) -> pa.Array:
    """The arrow array of JSON ``values`` (None for null) in ``shape``."""
    return pa.array([conform(v, shape) for v in values], type=shape)

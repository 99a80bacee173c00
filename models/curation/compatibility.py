"""Structured compatibility of a query with a trajectory, for the mining strata (Appendix E.3.2).

Mining combines similarity with a structured check of the query's required predicates ``P(e)``
against the trajectory's approved facts ``D_r^H``. Each pair falls in one class:

- ``definite_conflict``: some predicate is contradicted, ``models.facts.predicate_support``
  returns 0 (a single-valued attribute such as the category or a colour has one known, whole-
  trajectory value and it is another one). Such a pair is an easy-negative candidate and never a
  potential match.
- ``possible_conflict``: nothing is contradicted, but some predicate is not supported while the
  trajectory has known facts of that name with other values only (a multi-coloured or changing
  attribute, an interval-scoped value, an event with another value): the necessary attribute may
  conflict. With high similarity this is a hard-negative candidate.
- ``compatible``: every predicate is supported or about a property the facts do not mention
  (an omission never conflicts). With high similarity this is a potential match.

The check reads predicates without a temporal scope and facts without the covered interval, as
mining has them: an event's absence never conflicts here (it needs the covered interval).

:class:`Compatibility` encodes the predicates and facts once and classifies pairs of positions
as NumPy arrays of any shape (:meth:`Compatibility.classify`); :func:`classify_pair` is the plain
reading of one pair with ``predicate_support`` that the tests hold the encoded one to, and
:meth:`Compatibility.explain` says which predicates conflict, for provenance.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.facts import ATTRIBUTES, EVENTS, Fact, Predicate, predicate_support

COMPATIBLE, POSSIBLE_CONFLICT, DEFINITE_CONFLICT = 0, 1, 2
COMPATIBILITY = ("compatible", "possible_conflict", "definite_conflict")
NAMES = ATTRIBUTES + EVENTS
_MAX_WORDS = 8                   # up to 512 distinct values use bit sets (T·N·8 words at most)
_OTHER_VALUE = "\x00"            # a value no fact holds: asks whether any other value is contradicted


def _fact(f: Fact | dict) -> Fact:
    return f if isinstance(f, Fact) else Fact(**f)


def _name_value(p: Predicate | dict) -> tuple[str, str]:
    return (p.name, p.value) if isinstance(p, Predicate) else (p["name"], p["value"])


def classify_pair(predicates: Sequence[Predicate | dict], facts: Sequence[Fact | dict]) -> int:
    """The class of one (query, trajectory) pair, the plain way: each predicate through
    ``predicate_support``."""
    facts = [_fact(f) for f in facts]
    out = COMPATIBLE
    for p in predicates:
        name, value = _name_value(p)
        support = predicate_support({"name": name, "value": value}, facts)
        if support == 0:
            return DEFINITE_CONFLICT
        if support == -1 and any(f.known and f.name == name for f in facts):
            out = POSSIBLE_CONFLICT
    return out


class Compatibility:
    """Predicates of ``Q`` queries and facts of ``T`` trajectories, encoded for :meth:`classify`.

    ``query_predicates[i]``: the required predicates of query ``i`` (``Predicate`` or dicts with
    ``name`` and ``value``); ``trajectory_facts[j]``: the approved facts of trajectory ``j``
    (``Fact`` or their dicts). Positions follow the order of ``mine``'s ``query_ids`` and
    ``traj_ids``.
    """

    def __init__(self, query_predicates: Sequence[Sequence], trajectory_facts: Sequence[Sequence]):
        self.query_predicates = [list(p) for p in query_predicates]
        self.trajectory_facts = [[_fact(f) for f in facts] for facts in trajectory_facts]
        self.n_queries, self.n_trajectories = len(self.query_predicates), len(self.trajectory_facts)
        values: dict[str, int] = {}
        name_index = {n: i for i, n in enumerate(NAMES)}
        width = max((len(p) for p in self.query_predicates), default=0)
        self.q_name = np.full((self.n_queries, max(width, 1)), -1, np.int64)      # [Q, P], -1 padding
        self.q_value = np.full((self.n_queries, max(width, 1)), -1, np.int64)     # [Q, P]
        for i, preds in enumerate(self.query_predicates):
            for k, p in enumerate(preds):
                name, value = _name_value(p)
                if name not in name_index:
                    raise ValueError(f"query position {i}: unknown predicate name {name!r}")
                self.q_name[i, k] = name_index[name]
                self.q_value[i, k] = values.setdefault(value, len(values))
        n_names = len(NAMES)
        # definite[t, n]: the one value code that every other value of name n conflicts with, else -1
        self.definite = np.full((self.n_trajectories, n_names), -1, np.int64)    # [T, N]
        self.described = np.zeros((self.n_trajectories, n_names), bool)          # [T, N] known facts of n
        keys = []
        for t, facts in enumerate(self.trajectory_facts):
            by_name: dict[str, set[str]] = {}
            for f in facts:
                if f.known:
                    by_name.setdefault(f.name, set()).add(f.value)
            for name, known in by_name.items():
                n = name_index[name]
                self.described[t, n] = True
                codes = [values.setdefault(v, len(values)) for v in sorted(known)]
                keys.extend((c, t * n_names + n) for c in codes)
                if predicate_support({"name": name, "value": _OTHER_VALUE}, facts) == 0:
                    if len(codes) != 1:
                        raise AssertionError(f"trajectory position {t}: {name} contradicts with {len(codes)} values")
                    self.definite[t, n] = codes[0]
        self.n_values = max(len(values), 1)
        pairs = np.array(keys, np.int64).reshape(-1, 2)                           # [K, 2] (value, t·N + n)
        # which values each (trajectory, name) knows: a bit set per 64 values while that stays small,
        # else sorted (t, n, value) keys
        n_words = -(-self.n_values // 64)
        self._bits = None
        if n_words <= _MAX_WORDS:
            self._bits = np.zeros((self.n_trajectories * n_names, n_words), np.uint64)   # [T·N, W]
            np.bitwise_or.at(self._bits, (pairs[:, 1], pairs[:, 0] // 64),
                             np.left_shift(np.uint64(1), (pairs[:, 0] % 64).astype(np.uint64)))
        self._known = np.unique(pairs[:, 1] * self.n_values + pairs[:, 0])

    def _has_value(self, tpos: np.ndarray, name: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Whether trajectory ``tpos`` has a known fact ``name = value`` (arrays of one shape)."""
        if self._known.size == 0:
            return np.zeros(tpos.shape, bool)
        if self._bits is not None:
            word = self._bits[tpos * len(NAMES) + name, value // 64]
            return (word >> (value % 64).astype(np.uint64)) & np.uint64(1) == 1
        key = (tpos * len(NAMES) + name) * self.n_values + value
        at = np.searchsorted(self._known, key).clip(0, self._known.size - 1)
        return self._known[at] == key

    def classify(self, qpos, tpos) -> np.ndarray:
        """int8 classes (``COMPATIBILITY`` indices) of the pairs ``(qpos, tpos)``, broadcast together."""
        qpos, tpos = np.broadcast_arrays(np.asarray(qpos, np.int64), np.asarray(tpos, np.int64))
        name = self.q_name[qpos]                                                  # [..., P]
        value = self.q_value[qpos]                                                # [..., P]
        t = tpos[..., None]                                                       # [..., 1]
        used = name >= 0                                                          # [..., P]
        n = np.where(used, name, 0)
        definite = self.definite[t, n]                                            # [..., P]
        conflict = used & (definite >= 0) & (definite != value)                   # [..., P]
        possible = used & self.described[t, n] & ~self._has_value(np.broadcast_to(t, n.shape), n, value)
        out = np.where(possible.any(axis=-1), POSSIBLE_CONFLICT, COMPATIBLE)
        return np.where(conflict.any(axis=-1), DEFINITE_CONFLICT, out).astype(np.int8)

    def possible_anywhere(self, tpos) -> np.ndarray:
        """bool ``[Q]``: whether any trajectory of ``tpos`` can be a possible conflict of each query.
        A possible conflict needs a predicate whose attribute the trajectory describes without one
        contradicting value; without such a trajectory for any of its names a query has none."""
        tpos = np.asarray(tpos, np.int64)
        open_names = (self.described[tpos] & (self.definite[tpos] < 0)).any(axis=0)   # [N]
        return ((self.q_name >= 0) & open_names[np.maximum(self.q_name, 0)]).any(axis=1)

    def explain(self, qpos: int, tpos: int) -> dict:
        """The class of one pair and the predicates behind it, JSON-ready, e.g. ``{"compatibility":
        "definite_conflict", "definite": [{"name": "upper_colour", "value": "red", "facts": ["blue"]}],
        "possible": []}``."""
        facts = self.trajectory_facts[tpos]
        out: dict = {"compatibility": COMPATIBILITY[int(self.classify(qpos, tpos))], "definite": [], "possible": []}
        for p in self.query_predicates[qpos]:
            name, value = _name_value(p)
            support = predicate_support({"name": name, "value": value}, facts)
            others = sorted({f.value for f in facts if f.known and f.name == name})
            if support == 0:
                out["definite"].append({"name": name, "value": value, "facts": others})
            elif support == -1 and others:
                out["possible"].append({"name": name, "value": value, "facts": others})
        return out

"""How well a describer's facts agree with a rendered video's ground truth, per fact type.

The renderer (``models.world.renderer``) knows what it drew: ``GroundTruth.people[i].facts`` lists the
attributes and events of person ``i`` over half-open frame intervals. A describer run on that
person's track proposes :class:`models.facts.Fact` records. This module counts, per fact type
(``upper_colour``, ``lower_colour``, ``walks``, ``speed``, ``stands``, ``enters``, ``leaves``, and
the scene facts ``ground``, ``near``, ``weather``, ``light``):

- **Matching.** A proposed fact matches a ground-truth fact when both have the same ``name``,
  the same ``value`` (exact string, e.g. ``"red"``, ``"left"``, ``"from the left"``) and
  intervals that overlap (``[a, b)`` and ``[c, d)`` with ``a < d`` and ``c < b``; with
  ``slack = s`` the ground-truth interval is first widened to ``[c - s, d + s)``, for tracks that
  start or end a few frames away from the truth, e.g. when a tracker sees an entering person
  only once half of them is in view). Only *known*
  proposed facts count: an unknown fact claims nothing, so it is neither right nor wrong (it is
  counted separately as ``n_unknown``).
- **Precision** of a type = known proposed facts of that type that match some ground-truth fact,
  divided by the known proposed facts of that type (NaN when there are none).
- **Recall** of a type = ground-truth facts of that type that some known proposed fact matches,
  divided by the ground-truth facts of that type (NaN when there are none).

Counts add up over trajectories (:class:`FactCounts` is additive), so a benchmark sums the counts
of every person of every scene and computes the rates once (micro-averaging).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from models.facts import Fact
from models.world.scene import Fact as TruthFact
from models.world.scene import PersonTruth

FACT_TYPES = ("upper_colour", "lower_colour", "walks", "speed", "stands", "enters", "leaves",
              "ground", "near", "weather", "light")


@dataclass
class TypeCounts:
    """The counts behind one fact type's precision and recall."""

    n_pred: int = 0                              # known proposed facts
    n_pred_matched: int = 0                      # of those, matching some ground-truth fact
    n_truth: int = 0                             # ground-truth facts
    n_truth_matched: int = 0                     # of those, matched by some known proposed fact
    n_unknown: int = 0                           # proposed facts marked unknown

    def __add__(self, other: TypeCounts) -> TypeCounts:
        return TypeCounts(self.n_pred + other.n_pred, self.n_pred_matched + other.n_pred_matched,
                          self.n_truth + other.n_truth, self.n_truth_matched + other.n_truth_matched,
                          self.n_unknown + other.n_unknown)

    @property
    def precision(self) -> float:
        return self.n_pred_matched / self.n_pred if self.n_pred else math.nan

    @property
    def recall(self) -> float:
        return self.n_truth_matched / self.n_truth if self.n_truth else math.nan


@dataclass
class FactCounts:
    """Counts per fact type; add two to pool trajectories."""

    types: dict[str, TypeCounts] = field(default_factory=lambda: {t: TypeCounts() for t in FACT_TYPES})

    def __add__(self, other: FactCounts) -> FactCounts:
        names = list(dict.fromkeys([*self.types, *other.types]))
        return FactCounts({n: self.types.get(n, TypeCounts()) + other.types.get(n, TypeCounts()) for n in names})

    def report(self) -> dict[str, dict]:
        """Per type: precision, recall and the counts (rates rounded to 4 places, NaN as None)."""
        out = {}
        for name, c in self.types.items():
            out[name] = {"precision": _rate(c.precision), "recall": _rate(c.recall), "n_pred": c.n_pred,
                         "n_pred_matched": c.n_pred_matched, "n_truth": c.n_truth,
                         "n_truth_matched": c.n_truth_matched, "n_unknown": c.n_unknown}
        return out


def _rate(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def _overlap(a0: int, a1: int, b0: int, b1: int) -> bool:
    return a0 < b1 and b0 < a1


def compare_facts(predicted: list[Fact], truth: list[TruthFact], types: tuple[str, ...] = FACT_TYPES, *,
                  slack: int = 0) -> FactCounts:
    """Match one trajectory's proposed facts against one person's ground truth (module docstring)."""
    if not all(isinstance(f, Fact) for f in predicted):
        raise ValueError("predicted facts must be models.facts.Fact records")
    if slack < 0:
        raise ValueError(f"slack must be >= 0 frames, got {slack}")
    counts = FactCounts({t: TypeCounts() for t in types})
    for name in types:
        pred = [f for f in predicted if f.name == name]
        known = [f for f in pred if f.known]
        gold = [g for g in truth if g.name == name]
        c = counts.types[name]
        c.n_unknown = len(pred) - len(known)
        c.n_pred = len(known)
        c.n_truth = len(gold)

        def matches(p: Fact, g: TruthFact) -> bool:
            return p.value == g.value and _overlap(p.start_frame, p.end_frame, g.start_frame - slack, g.end_frame + slack)

        c.n_pred_matched = sum(1 for p in known if any(matches(p, g) for g in gold))
        c.n_truth_matched = sum(1 for g in gold if any(matches(p, g) for p in known))
    return counts


def truth_track(person: PersonTruth, *, min_visible: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A ground-truth trajectory for a person: frames with a box whose visible fraction is above
    ``min_visible`` (a tracker sees nothing of a fully hidden person), and those boxes [N, 4]."""
    frames = [f for f, b in enumerate(person.boxes) if b is not None and person.visible[f] > min_visible]
    boxes = np.array([person.boxes[f] for f in frames], np.float64).reshape(-1, 4)
    return np.array(frames, np.int64), boxes

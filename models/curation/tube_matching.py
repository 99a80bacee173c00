"""Matching proposals to annotated tubes (seed 002, Appendix D.1).

For a tube ``b`` with annotated frames ``G_b`` and a proposal ``r``, ``a_t(r)`` is the IoU of
``r``'s box with the tube's box on frame ``t`` (0 where ``r`` has no box)::

    maxIoU_b(r) = max_{t∈G_b} a_t(r)
    C_τ(r)      = |{t ∈ G_b : a_t(r) ≥ τ}| / |G_b|
    meanIoU_b(r) = Σ_{t∈G_b} a_t(r) / |G_b|

A proposal is a *positive candidate* of ``b`` when ``C_τ ≥ min_coverage`` and
``meanIoU ≥ min_mean_iou`` (the mean-IoU screening); a *low-overlap negative candidate* when
``maxIoU < τ_safe = 0.2``; anything between is intermediate and ignored. The seed gives the
definitions and ``τ_safe``; ``τ``, ``min_coverage`` and ``min_mean_iou`` are this platform's
defaults, recorded with every report.

A positive candidate is an *identity-checked raw positive* of ``b`` when it is a positive of no
other tube and never follows another tube better than ``b`` (on no frame is its IoU with another
tube ``≥ τ`` and above its IoU with ``b``): a track that switches identity is not a positive of
either object. A negative candidate that is a possible same-identity fragment of one of ``b``'s
positive candidates (a pair passed in ``same_identity``) is ignored, not proposed as a negative.
Negative candidates are proposals for people to confirm, never confirmed negatives.

A tube is ``matched`` (at least one identity-checked raw positive), ``ambiguous`` (positive
candidates, none identity-checked) or ``unmatched`` (no positive candidate). A matched tracker
trajectory keeps its full extent; the tube's interval only selects the frames compared.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

MATCHED, AMBIGUOUS, UNMATCHED = "matched", "ambiguous", "unmatched"
POSITIVE, LOW_OVERLAP, INTERMEDIATE = "positive", "low_overlap", "intermediate"


@dataclass(frozen=True)
class TubeMatchConfig:
    tau: float = 0.5             # IoU at which an annotated frame counts as covered (C_τ)
    min_coverage: float = 0.5    # C_τ(r) a positive candidate needs
    min_mean_iou: float = 0.4    # meanIoU_b(r) a positive candidate needs (screening)
    tau_safe: float = 0.2        # maxIoU_b(r) below this proposes a low-overlap negative (seed D.1)

    def __post_init__(self):
        for name in ("tau", "min_coverage", "min_mean_iou", "tau_safe"):
            value = getattr(self, name)
            if not (0.0 < value <= 1.0):
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if self.tau_safe > self.min_mean_iou:
            raise ValueError(f"tau_safe ({self.tau_safe}) must not exceed min_mean_iou ({self.min_mean_iou}): "
                             "a proposal cannot be both a positive and a low-overlap negative")

    @classmethod
    def from_dict(cls, data: dict | None) -> TubeMatchConfig:
        data = dict(data or {})
        unknown = set(data) - {"tau", "min_coverage", "min_mean_iou", "tau_safe"}
        if unknown:
            raise ValueError(f"unknown tube-matching setting(s) {sorted(unknown)}")
        return cls(**{k: float(v) for k, v in data.items()})

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Track:
    """A tube or a proposal: its id, frame indices (strictly increasing) and xyxy boxes."""

    id: int
    frames: np.ndarray      # int [N]
    boxes: np.ndarray       # float [N, 4]


@dataclass
class PairOverlap:
    tube: int
    trajectory: int
    max_iou: float
    coverage: float          # C_τ
    mean_iou: float
    relation: str            # positive | low_overlap | intermediate


@dataclass
class TubeOutcome:
    tube: int
    n_frames: int                                   # |G_b|
    status: str                                     # matched | ambiguous | unmatched
    raw_positives: list[int] = field(default_factory=list)        # identity-checked
    positive_candidates: list[int] = field(default_factory=list)  # passed the overlap screening
    negative_candidates: list[int] = field(default_factory=list)  # maxIoU < τ_safe, not excluded
    ignored: list[int] = field(default_factory=list)              # intermediate or excluded fragments
    reasons: dict[str, str] = field(default_factory=dict)         # trajectory id → why not identity-checked


@dataclass
class MatchReport:
    config: dict
    tubes: list[TubeOutcome]
    pairs: list[PairOverlap]

    def counts(self) -> dict[str, int]:
        out = {MATCHED: 0, AMBIGUOUS: 0, UNMATCHED: 0}
        for t in self.tubes:
            out[t.status] += 1
        return out

    def as_dict(self) -> dict:
        return {"config": self.config, "counts": self.counts(), "tubes": [asdict(t) for t in self.tubes],
                "pairs": [asdict(p) for p in self.pairs]}


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise IoU of xyxy boxes ``a`` [N, 4] and ``b`` [N, 4] → [N]."""
    ix = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0, None)   # [N]
    iy = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0, None)   # [N]
    inter = ix * iy                                                                         # [N]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])                                      # [N]
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])                                      # [N]
    union = area_a + area_b - inter                                                         # [N]
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def _lookup(track: Track, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``frames`` the track has a box on ([F] bool) and those boxes ([F, 4], zeros elsewhere)."""
    own = np.asarray(track.frames)
    boxes = np.zeros((len(frames), 4))
    if len(own) == 0:
        return np.zeros(len(frames), bool), boxes
    idx = np.clip(np.searchsorted(own, frames), 0, len(own) - 1)               # [F]
    present = own[idx] == frames                                               # [F]
    boxes[present] = np.asarray(track.boxes, float)[idx[present]]
    return present, boxes


def _ious_on(frames: np.ndarray, a: Track, b: Track) -> np.ndarray:
    """IoU of ``a`` and ``b`` on each of ``frames`` (0 where either has no box) → [F]."""
    has_a, boxes_a = _lookup(a, frames)
    has_b, boxes_b = _lookup(b, frames)
    both = has_a & has_b
    out = np.zeros(len(frames))
    if both.any():
        out[both] = box_iou(boxes_a[both], boxes_b[both])
    return out


def frame_ious(tube: Track, proposal: Track) -> np.ndarray:
    """``a_t(r)`` for every ``t ∈ G_b`` (0 where the proposal has no box) → [|G_b|]."""
    return _ious_on(np.asarray(tube.frames), tube, proposal)


def overlap(tube: Track, proposal: Track, config: TubeMatchConfig) -> PairOverlap:
    a = frame_ious(tube, proposal)                                               # [G]
    if len(a) == 0:
        raise ValueError(f"tube {tube.id} has no annotated frames")
    max_iou, coverage, mean_iou = float(a.max()), float((a >= config.tau).mean()), float(a.mean())
    if coverage >= config.min_coverage and mean_iou >= config.min_mean_iou:
        relation = POSITIVE
    elif max_iou < config.tau_safe:
        relation = LOW_OVERLAP
    else:
        relation = INTERMEDIATE
    return PairOverlap(tube=int(tube.id), trajectory=int(proposal.id), max_iou=max_iou, coverage=coverage,
                       mean_iou=mean_iou, relation=relation)


def _switch_frames(proposal: Track, own: Track, other: Track, tau: float) -> int:
    """Frames on which ``proposal`` overlaps ``other`` by ≥ τ and more than it overlaps ``own``."""
    frames = np.asarray(other.frames)
    on_other = _ious_on(frames, other, proposal)                                 # [|G_other|]
    on_own = _ious_on(frames, own, proposal)                                     # [|G_other|]
    return int(((on_other >= tau) & (on_other > on_own)).sum())


def match_tubes(tubes: list[Track], proposals: list[Track], config: TubeMatchConfig | None = None,
                same_identity: Iterable[tuple[int, int]] = ()) -> MatchReport:
    """Match every tube of one video against every proposal of that video (see the module text)."""
    config = config or TubeMatchConfig()
    if len({t.id for t in tubes}) != len(tubes) or len({p.id for p in proposals}) != len(proposals):
        raise ValueError("tube ids and proposal ids must each be unique")
    linked: dict[int, set[int]] = {}
    for a, b in same_identity:
        linked.setdefault(int(a), set()).add(int(b))
        linked.setdefault(int(b), set()).add(int(a))
    pairs = {(t.id, p.id): overlap(t, p, config) for t in tubes for p in proposals}
    positive_of: dict[int, list[int]] = {}
    for (tube_id, prop_id), pair in pairs.items():
        if pair.relation == POSITIVE:
            positive_of.setdefault(prop_id, []).append(tube_id)
    outcomes = []
    for tube in tubes:
        out = TubeOutcome(tube=int(tube.id), n_frames=len(tube.frames), status=UNMATCHED)
        for prop in proposals:
            pair = pairs[(tube.id, prop.id)]
            if pair.relation == POSITIVE:
                out.positive_candidates.append(int(prop.id))
                others = [b for b in positive_of[prop.id] if b != tube.id]
                if others:
                    out.reasons[str(prop.id)] = f"also a positive candidate of tube(s) {sorted(others)}"
                    continue
                switches = {o.id: _switch_frames(prop, tube, o, config.tau) for o in tubes if o.id != tube.id}
                switched = {k: v for k, v in switches.items() if v}
                if switched:
                    out.reasons[str(prop.id)] = "follows another tube better on " + ", ".join(
                        f"{n} frame(s) of tube {k}" for k, n in sorted(switched.items()))
                    continue
                out.raw_positives.append(int(prop.id))
            elif pair.relation == LOW_OVERLAP:
                out.negative_candidates.append(int(prop.id))
            else:
                out.ignored.append(int(prop.id))
        fragments = [n for n in out.negative_candidates if linked.get(n, set()) & set(out.positive_candidates)]
        for n in fragments:
            out.negative_candidates.remove(n)
            out.ignored.append(n)
            out.reasons[str(n)] = "possible same-identity fragment of a positive candidate"
        out.ignored.sort()
        if out.raw_positives:
            out.status = MATCHED
        elif out.positive_candidates:
            out.status = AMBIGUOUS
        outcomes.append(out)
    return MatchReport(config=config.as_dict(), tubes=outcomes, pairs=list(pairs.values()))

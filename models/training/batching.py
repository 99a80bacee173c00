"""Training groups, the noisy-GT augmentation and relation-aware batches (paper 3.2, B.3, D.1, D.3, E.3.1).

**Groups.** Every training query ``e_b`` makes one group (a row of the batch). A record is
``(trajectory id, variant)``; variant 0 is the stored trajectory, ``k >= 1`` its k-th noisy-GT
variant. The group's own records, in this order (their *slots*):

1. the clean ground truth: the query's target trajectory (``SnapshotQuery.target_id``, or its
   first verified match in its own video when no target is recorded);
2. with the noisy-GT augmentation on (the default): a noisy-GT variant of the target, its index
   drawn uniformly from ``1..noisy_variants``; off: a matched raw positive (below), else the clean
   target again;
3. a matched raw positive: another trajectory of the query's **own video** verified to match it,
   drawn uniformly from those slot 2 left; when there is none, the clean target again
   (``repeat_clean_gt``, the default: the group holds "zero or one noisy GT", as D.1 lists its
   records), or with ``repeat_clean_gt`` off and the augmentation on, a second noisy-GT variant
   (a variant index other than slot 2's, drawn uniformly, when ``noisy_variants >= 2``, else the
   same one). On the demo benchmark (300 steps, batches of 16) the second variant cost T2Traj
   R@1 89.4/64.6/64.6/66.4 over seeds 0-3 against 91.2/85.8 (seeds 0-1) for the repeat: a
   variant is ⊥ for every other query, so it carries fewer batch-term labels than the clean
   record it replaces;
4. a confirmed negative: a trajectory of the query's own video verified not to match it (the
   paper's confirmed within-video negatives ``N_b``, 3.2, D.1 and E.3.1), drawn uniformly.

So ``P_b`` (slots 1-3) and ``N_b`` (slot 4) are within-video sets, as E.3.1 defines them
(``P_b, N_b ⊆ R(V_b)``): a verified match in another video never fills a group slot. Group
labels come from human-verified relations only: pseudo-labels never enter ``P_b`` or ``N_b``
(D.2). A repeated record counts with its multiplicity (DESIGN 4.1).

**L_bi-only rows.** A query with no confirmed within-video negative has no ``N_b`` and is not in
the groups ``L_group`` averages over (``B_N`` of 3.2); it is kept as an *L_bi-only row*: slots
1-3 as above and no slot 4, its ``group`` row all ⊥ (-1), its ``relation`` row as any other's, so
it feeds ``L_t→v`` / ``L_v→t`` and its records are columns for every row (``Group.bi_only``,
counted in ``TrainingPlan.counts()`` and ``TrainBatch.stats()``). A mismatch in another video is
no ``N_b``: it acts only through the batch terms. Left out (``TrainingPlan.excluded``, with the
reason) are only queries whose recorded target is not a verified match or lies in another video,
and queries without a target and without a verified match in their own video.

**Cross-video columns.** Verified matches of a query in *other* videos (human-verified,
relation 1) enter the batch only as extra columns: after its own slots, each group adds up to
``cross_video_columns`` (default 1) of them, drawn uniformly without replacement, with
``group`` ⊥ (-1) on every row and ``relation`` 1 on its own row (the other rows take the
snapshot's labels like any stored record). They are the cross-video signal the batch terms see
even when no linked query shares the batch. A group therefore has 3 + ``k`` (L_bi-only) or 4 +
``k`` columns, ``0 <= k <= cross_video_columns``: ``P = Σ_b |columns(b)|``, not ``4B`` (``4B``
exactly when every query has a negative and no cross-video match, or with
``cross_video_columns=0`` and no L_bi-only row).

**Noisy GT** (:func:`noisy_gt`, B.3/D.1): remove one contiguous segment of 10-20% of the
observations, then drop each remaining observation with probability 0.1 (at least one stays); move
each kept box's centre by up to ±5% of its width and height and scale its width and height by
factors in [0.9, 1.1]; clip to the image, restoring the original box where clipping leaves a
degenerate one. The features of a perturbed record must be computed from its own crops, so each
target gets ``noisy_variants`` variants drawn once with a fixed seed (their features are cached like
any other record's) and each group draws from them at random: a finite sample of the paper's
per-sample augmentation.

**Batch tensors** ``[B, P]`` for ``models.training.losses.mask_guided_loss``. Columns are in group
order, each group's columns contiguous (its slots, then its cross-video columns):
``TrainBatch.offsets[i]:offsets[i + 1]`` are group ``i``'s, ``offsets[i]`` its clean target
(``TrainBatch.target_columns``) and ``TrainBatch.slots`` names each column's slot (0-3, or
``CROSS_VIDEO`` = -1). A rank encodes a contiguous run of groups and so a contiguous run of
columns (:meth:`TrainBatch.local_slices`); gathering the ranks' embeddings in rank order gives
the batch's column order.

- ``group``: 1 for the group's own positive slots (1-3), 0 for its negative (slot 4), -1
  elsewhere (its cross-video columns included; an L_bi-only row is all -1);
- ``relation``: 1 for the query's own slots 1-3 and cross-video columns; for a stored record
  (variant 0), the verified label of (query, trajectory) in the snapshot; for a noisy variant, 1
  when it is a variant of the query's own target and ⊥ otherwise (a subset of the observations
  may lose the evidence a label was given on: D.3 says abstain). Labels never conflict: a group
  positive is always a match, its negative never one. With ``use_pseudo`` (off by default) the
  snapshot's pseudo-labels also fill ``relation`` where no verified label exists: training
  signal for the batch terms only, marked in ``pseudo`` and counted apart from the
  human-verified core in :meth:`TrainBatch.stats`.

**Relation-aware batching.** Queries (full groups and L_bi-only rows alike) are visited in a
seeded random order, each once per epoch. Each batch starts from the next unvisited query and
then fills up to ``link_fraction`` of its places with unvisited queries *linked* to those
already chosen (a verified binary relation between one's query and the other's target, in
different videos; links through a verified match are taken first), so the cross-video relations
the batch terms need land in the same batch; the rest comes in order. The plan is a pure
function of the seed: batch ``s`` is the same however often the plan is rebuilt (a resumed run
continues exactly). :data:`PLAN_VERSION` names these rules; a checkpoint records it.

**Class-balanced batches** (``sampler="class_balanced"``, SCOUT 5.1: +1.6 points for matching the
test set's normal/anomalous balance). Each group has a class, :meth:`TrainingPlan.group_class`,
from its query's own predicates (training may read approved query text): with ``class_by="events"``
(the default) the behaviour the query states, the names of its event predicates
(``models.facts.EVENTS``: walks, stands, enters, ...) joined with ``+``, or ``none`` for an
appearance- or scene-only query, the nearest thing to the paper's normal/anomalous behaviour;
with ``class_by`` set to a predicate name, that predicate's value (``none`` without one).
Batches come from ``models.retrievers.scout.sampler.ClassBalancedBatchSampler`` over the groups:
every class an equal share of each batch, ``⌈G / batch_size⌉`` batches per epoch, epoch ``e``
drawn from ``[seed, e]``, so batch ``s`` is again a pure function of the seed. The linking of
``link_fraction`` does not apply to them. The default ``uniform`` sampler is the
relation-aware batching above, unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import torch

from models.config import PlainConfig
from models.facts import EVENTS
from models.retrievers.scout.sampler import ClassBalancedBatchSampler
from models.training.snapshot import RelationSnapshotData

GROUP_SIZE = 4                                   # slots of a full group (an L_bi-only row has GROUP_SIZE - 1)
CLEAN, SECOND, THIRD, NEGATIVE = 0, 1, 2, 3      # a group's slots (module docstring)
CROSS_VIDEO = -1                                 # the slot of a cross-video column (group ⊥, relation 1)
PLAN_VERSION = 2                                 # 2: within-video P_b, L_bi-only rows, cross-video columns
RecordKey = tuple[int, int]                      # (trajectory id, variant); variant 0: the stored track
SAMPLERS = ("uniform", "class_balanced")         # BatchingConfig.sampler
NO_CLASS = "none"                                # the class of a query without the class_by predicate(s)


@dataclass
class BatchingConfig(PlainConfig):
    """Groups, the noisy-GT augmentation and batch composition (paper B.3 / D.1 defaults)."""

    noisy_gt: bool = True                        # use a noisy-GT variant as the second record (paper default)
    noisy_variants: int = 4                      # variants drawn per target (features cached once each)
    segment_fraction: tuple[float, float] = (0.1, 0.2)  # share of observations in the removed segment
    drop_probability: float = 0.1                # chance to drop each remaining observation
    center_jitter: float = 0.05                  # centre shift, up to this fraction of the box size
    scale_range: tuple[float, float] = (0.9, 1.1)  # width and height scale factors
    link_fraction: float = 0.5                   # share of a batch filled with linked queries
    cross_video_columns: int = 1                 # verified cross-video matches per query added as columns (L_bi only)
    repeat_clean_gt: bool = True                 # no own-video positive for slot 3: the clean GT again, not a 2nd variant
    use_pseudo: bool = False                     # pseudo-labels fill the batch relations (never the groups; D.2)
    sampler: str = "uniform"                     # "uniform" (relation-aware) | "class_balanced" (module docstring)
    class_by: str = "events"                     # a group's class: "events" (stated behaviour) or a predicate name

    def __post_init__(self) -> None:
        self.segment_fraction = tuple(float(v) for v in self.segment_fraction)
        self.scale_range = tuple(float(v) for v in self.scale_range)
        problems = []
        if self.noisy_variants < 1:
            problems.append(f"noisy_variants must be >= 1, got {self.noisy_variants}")
        lo, hi = self.segment_fraction
        if not 0.0 <= lo <= hi < 1.0:
            problems.append(f"segment_fraction must be 0 <= low <= high < 1, got {self.segment_fraction}")
        if not 0.0 <= self.drop_probability < 1.0:
            problems.append(f"drop_probability must be in [0, 1), got {self.drop_probability}")
        if not 0.0 <= self.center_jitter < 0.5:
            problems.append(f"center_jitter must be in [0, 0.5), got {self.center_jitter}")
        if not 0.0 < self.scale_range[0] <= self.scale_range[1]:
            problems.append(f"scale_range must be 0 < low <= high, got {self.scale_range}")
        if not 0.0 <= self.link_fraction <= 1.0:
            problems.append(f"link_fraction must be in [0, 1], got {self.link_fraction}")
        if self.cross_video_columns < 0:
            problems.append(f"cross_video_columns must be >= 0, got {self.cross_video_columns}")
        if self.sampler not in SAMPLERS:
            problems.append(f"sampler must be one of {', '.join(SAMPLERS)}, got {self.sampler!r}")
        if not isinstance(self.class_by, str) or not self.class_by:
            problems.append(f"class_by must be 'events' or a predicate name, got {self.class_by!r}")
        if problems:
            raise ValueError("BatchingConfig: " + "; ".join(problems))


# -- the noisy-GT augmentation ------------------------------------------------------------------------
def noisy_gt(frames: np.ndarray, boxes: np.ndarray, width: int, height: int, rng: np.random.Generator,
             config: BatchingConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A noisy-GT variant of one trajectory (module docstring): ``(frames [m], boxes [m, 4])``, m >= 1."""
    cfg = config or BatchingConfig()
    frames = np.asarray(frames, dtype=np.int32).reshape(-1)
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    n = len(frames)
    if n == 0 or len(boxes) != n:
        raise ValueError(f"need at least one observation and as many boxes as frames, got {n} and {len(boxes)}")
    if width < 1 or height < 1:
        raise ValueError(f"bad image size {width}x{height}")
    # temporal: one contiguous segment of ~10-20%, then independent drops; at least one survives
    keep = np.ones(n, dtype=bool)
    if n > 1:
        length = min(n - 1, max(1, round(rng.uniform(*cfg.segment_fraction) * n)))
        start = int(rng.integers(0, n - length + 1))
        keep[start:start + length] = False
    survivors = np.flatnonzero(keep)
    dropped = rng.random(survivors.size) < cfg.drop_probability
    if dropped.all():
        dropped[int(rng.integers(survivors.size))] = False
    kept = survivors[~dropped]
    # spatial: centre jitter and scale per box, clipped; a degenerate result keeps the original box
    orig = boxes[kept].astype(np.float64)                                               # [m, 4]
    w, h = orig[:, 2] - orig[:, 0], orig[:, 3] - orig[:, 1]                             # [m]
    cx = (orig[:, 0] + orig[:, 2]) / 2 + rng.uniform(-cfg.center_jitter, cfg.center_jitter, kept.size) * w
    cy = (orig[:, 1] + orig[:, 3]) / 2 + rng.uniform(-cfg.center_jitter, cfg.center_jitter, kept.size) * h
    nw = w * rng.uniform(*cfg.scale_range, kept.size)
    nh = h * rng.uniform(*cfg.scale_range, kept.size)
    new = np.stack([cx - nw / 2, cy - nh / 2, cx + nw / 2, cy + nh / 2], axis=1)         # [m, 4]
    new[:, [0, 2]] = np.clip(new[:, [0, 2]], 0, width)
    new[:, [1, 3]] = np.clip(new[:, [1, 3]], 0, height)
    degenerate = (new[:, 2] - new[:, 0] < 1.0) | (new[:, 3] - new[:, 1] < 1.0)           # [m]
    new[degenerate] = orig[degenerate]
    return frames[kept], new.astype(np.float32)


# -- batches --------------------------------------------------------------------------------------------
@dataclass
class Group:
    """One training query: its target, the within-video candidates of its slots and its cross-video
    matches (module docstring)."""

    query_id: int
    video_id: int                                # the query's video
    target_id: int                               # its clean ground-truth trajectory
    positives: list[int]                         # other verified matches in the query's own video (P_b)
    negatives: list[int]                         # confirmed within-video negatives N_b (human-verified)
    cross_matches: list[int] = field(default_factory=list)  # verified matches in other videos: columns only

    @property
    def bi_only(self) -> bool:
        """No confirmed within-video negative: an L_bi-only row (no ``L_group`` term)."""
        return not self.negatives


@dataclass
class TrainBatch:
    """One optimizer step's groups across all ranks (rank-major), with their label tensors."""

    step: int                                    # optimizer step the batch belongs to
    query_ids: list[int]                         # [B] one query per group (row)
    query_videos: list[int]                      # [B] the query's video
    records: list[RecordKey]                     # [P] records, each group's columns contiguous, in group order
    record_videos: list[int]                     # [P] each record's video
    group: torch.Tensor                          # [B, P] int8 group labels G in {1, 0, -1}
    relation: torch.Tensor                       # [B, P] int8 batch relations M in {1, 0, -1}
    pseudo: torch.Tensor | None = None           # [B, P] bool: entries of M from pseudo-labels (None: none)
    offsets: list[int] | None = None             # [B + 1] group i's columns: offsets[i]:offsets[i + 1] (None: 4 each)
    slots: list[int] | None = None               # [P] each column's slot 0-3, or CROSS_VIDEO (None: 0-3 per group)

    def __post_init__(self) -> None:
        b, p = len(self.query_ids), len(self.records)
        if self.offsets is None:                 # the fixed layout: four columns per group
            self.offsets = [GROUP_SIZE * i for i in range(b + 1)]
        if self.slots is None:
            self.slots = [j % GROUP_SIZE for j in range(p)] if p == GROUP_SIZE * b else None
        self.offsets = [int(o) for o in self.offsets]
        if (len(self.offsets) != b + 1 or self.offsets[0] != 0 or self.offsets[-1] != p
                or any(a >= c for a, c in pairwise(self.offsets))):
            raise ValueError(f"offsets must rise from 0 to the {p} records, one step per group ({b}), got {self.offsets}")
        if self.slots is None or len(self.slots) != p:
            raise ValueError(f"slots must name each of the {p} records' slot")

    @property
    def target_columns(self) -> list[int]:
        """``[B]`` the column of each group's clean target (its first column)."""
        return self.offsets[:-1]

    def columns(self, i: int) -> slice:
        """Group ``i``'s columns: its slots, then its cross-video columns."""
        return slice(self.offsets[i], self.offsets[i + 1])

    def local_slices(self, rank: int = 0, world_size: int = 1) -> tuple[slice, slice]:
        """The groups (rows) and records (columns) that ``rank`` encodes: a contiguous run of
        groups and their columns (concatenated in rank order they are the whole batch)."""
        b = len(self.query_ids)
        if world_size < 1 or not 0 <= rank < world_size or b % world_size:
            raise ValueError(f"cannot split {b} groups over rank {rank} of {world_size}")
        n = b // world_size
        return slice(rank * n, (rank + 1) * n), slice(self.offsets[rank * n], self.offsets[(rank + 1) * n])

    def loss_block(self, rank: int = 0, world_size: int = 1, gather: bool = False) -> tuple[slice, slice]:
        """The rows and columns of ``group`` / ``relation`` that the mask-guided loss of ``rank``
        scores: the whole batch when the ranks' embeddings are gathered (``gather`` with several
        processes), else the rank's own block (:meth:`local_slices`)."""
        if world_size > 1 and gather:
            self.local_slices(rank, world_size)                 # the same checks
            return slice(None), slice(None)
        return self.local_slices(rank, world_size)

    def stats(self, rows: slice = slice(None), cols: slice = slice(None)) -> dict:
        """Realized label counts of the batch relations ``M[rows, cols]`` (the labels a loss used:
        pass :meth:`loss_block`), overall and across videos.

        ``positives`` / ``negatives`` / ``unknown`` and the ``cross_video_*`` counts are the
        human-verified core; ``pseudo_positives`` / ``pseudo_negatives`` count the pseudo-labels
        apart. ``t2v_rows`` and ``v2t_cols`` are the rows and positive-record columns the batch
        terms of DESIGN 4.1 average over (pseudo-labels included, as the loss sees them), and
        ``*_without_negative`` those of them with no 0: the numerators and denominators of the
        loss's zero-negative rates, so the rates of several blocks (ranks) can be pooled.
        ``group_rows`` are the rows ``L_group`` averages over (a 0 in ``group``), ``bi_only_rows``
        the rows with no group label at all (L_bi-only queries) and ``cross_video_columns`` the
        extra cross-video columns (slot ``CROSS_VIDEO``) of the block."""
        rel = self.relation[rows, cols].numpy()                                        # [b, p]
        grp = self.group[rows, cols].numpy()                                           # [b, p]
        pseudo = (self.pseudo[rows, cols].numpy() if self.pseudo is not None
                  else np.zeros(rel.shape, dtype=bool))                                # [b, p]
        cross = (np.asarray(self.query_videos)[rows][:, None]
                 != np.asarray(self.record_videos)[cols][None, :])                     # [b, p]
        core = ~pseudo
        m_pos = rel == 1                                                               # [b, p]
        in_p_plus = m_pos.any(axis=0)                                                  # [p]
        b_neg = (rel == 0) & in_p_plus[None, :]                                        # [b, p]
        t2v_rows = m_pos.any(axis=1)                                                   # [b]
        return {"positives": int((m_pos & core).sum()), "negatives": int(((rel == 0) & core).sum()),
                "unknown": int((rel == -1).sum()),
                "pseudo_positives": int((m_pos & pseudo).sum()), "pseudo_negatives": int(((rel == 0) & pseudo).sum()),
                "cross_video_positives": int((m_pos & core & cross).sum()),
                "cross_video_negatives": int(((rel == 0) & core & cross).sum()),
                "t2v_rows": int(t2v_rows.sum()),
                "t2v_rows_without_negative": int((t2v_rows & ~b_neg.any(axis=1)).sum()),
                "v2t_cols": int(in_p_plus.sum()),
                "v2t_cols_without_negative": int((in_p_plus & ~b_neg.any(axis=0)).sum()),
                "group_rows": int((grp == 0).any(axis=1).sum()),
                "bi_only_rows": int((grp == -1).all(axis=1).sum()),
                "cross_video_columns": int((np.asarray(self.slots)[cols] == CROSS_VIDEO).sum())}


def _seeded(*parts: int) -> np.random.Generator:
    return np.random.default_rng([int(p) & 0xFFFFFFFF for p in parts])


def _take(pool: list[int], rng: np.random.Generator) -> int:
    """Remove and return a uniformly drawn member of a non-empty ``pool``."""
    return pool.pop(int(rng.integers(len(pool))))


class TrainingPlan:
    """Groups, noisy-GT variants and the deterministic batch sequence of one training snapshot.

    ``groups`` holds every training query, full groups and L_bi-only rows (``Group.bi_only``);
    ``excluded`` the queries left out, with the reason; :meth:`counts` the tallies a run reports."""

    def __init__(self, snapshot: RelationSnapshotData, config: BatchingConfig | None = None, *, seed: int = 0):
        self.config = config or BatchingConfig()
        self.seed = int(seed)
        self.snapshot = snapshot
        matrix, qids, tids = snapshot.matrix(include_pseudo=False)                     # [Q, T] the verified core
        self._q_index = {q: i for i, q in enumerate(qids)}
        self._t_index = {t: i for i, t in enumerate(tids)}
        self._pseudo = np.zeros(matrix.shape, dtype=bool)                              # [Q, T]
        self._matrix = matrix                                                          # [Q, T] int8 batch relations
        if self.config.use_pseudo:
            self._matrix = snapshot.matrix(include_pseudo=True)[0]
            for r in snapshot.relations:
                if r.pseudo and r.label != -1:
                    self._pseudo[self._q_index[r.query_id], self._t_index[r.trajectory_id]] = True
        self._t_ids = np.asarray(tids, dtype=np.int64)
        self.track_video = {t.id: t.video_id for t in snapshot.tracks}
        t_video = np.asarray([self.track_video[t] for t in tids], dtype=np.int64)       # [T]
        self.groups: list[Group] = []
        self.excluded: dict[int, str] = {}
        for q in snapshot.queries:
            row = matrix[self._q_index[q.id]]                                          # [T] verified labels only
            own = t_video == q.video_id
            target = q.target_id
            if target is None or target not in self._t_index or row[self._t_index[target]] != 1:
                own_matches = self._t_ids[(row == 1) & own]
                if q.target_id is not None:
                    self.excluded[q.id] = f"its target {q.target_id} is not a verified match"
                    continue
                if own_matches.size == 0:
                    self.excluded[q.id] = "no verified match in its own video"
                    continue
                target = int(own_matches[0])
            if self.track_video[target] != q.video_id:
                self.excluded[q.id] = f"its target {target} is in another video"
                continue
            positives = [int(t) for t in self._t_ids[(row == 1) & own] if t != target]
            cross = [int(t) for t in self._t_ids[(row == 1) & ~own] if t != target]
            negatives = [int(t) for t in self._t_ids[(row == 0) & own]]
            self.groups.append(Group(q.id, q.video_id, int(target), positives, negatives, cross))
        self._query_predicates = {q.id: [p for p in q.predicates if isinstance(p, dict)] for q in snapshot.queries}
        if not self.groups:
            raise ValueError(f"snapshot {snapshot.split!r}: no query can form a training group "
                             f"({len(self.excluded)} excluded, e.g. {next(iter(self.excluded.items()), None)})")
        self._links = self._linked()
        self._plan: list[list[int]] = []                  # batch -> group indices
        self._plan_state: tuple | None = None
        self._balanced: tuple[int, ClassBalancedBatchSampler, dict[int, list[list[int]]]] | None = None

    def group_class(self, group: Group) -> str:
        """The class of ``group`` for class-balanced batches (module docstring)."""
        predicates = self._query_predicates.get(group.query_id, [])
        if self.config.class_by == "events":
            names = sorted({str(p.get("name")) for p in predicates if p.get("name") in EVENTS})
            return "+".join(names) or NO_CLASS
        values = sorted({str(p.get("value")) for p in predicates if p.get("name") == self.config.class_by})
        return "+".join(values) or NO_CLASS

    def class_counts(self) -> dict[str, int]:
        """Training groups per class (:meth:`group_class`)."""
        counts: dict[str, int] = {}
        for g in self.groups:
            c = self.group_class(g)
            counts[c] = counts.get(c, 0) + 1
        return dict(sorted(counts.items()))

    def counts(self) -> dict:
        """How the snapshot's queries entered the plan: ``groups`` (with a within-video negative,
        scored by ``L_group``), ``bi_only`` (L_bi-only rows), ``excluded``, and ``cross_video``
        (training queries with a verified cross-video match, each adding up to
        ``cross_video_columns`` columns to its batches)."""
        bi_only = sum(g.bi_only for g in self.groups)
        return {"queries": len(self.snapshot.queries), "groups": len(self.groups) - bi_only, "bi_only": bi_only,
                "excluded": len(self.excluded),
                "cross_video": sum(bool(g.cross_matches) for g in self.groups)
                if self.config.cross_video_columns else 0}

    # -- variants ------------------------------------------------------------------------------
    def variant_observations(self) -> dict[RecordKey, tuple[np.ndarray, np.ndarray]]:
        """The noisy-GT variants of every group target: ``{(track_id, k): (frames, boxes)}``, k >= 1."""
        if not self.config.noisy_gt:
            return {}
        videos = {v.id: v for v in self.snapshot.videos}
        tracks = {t.id: t for t in self.snapshot.tracks}
        out = {}
        for tid in sorted({g.target_id for g in self.groups}):
            t = tracks[tid]
            video = videos[t.video_id]
            for k in range(1, self.config.noisy_variants + 1):
                out[(tid, k)] = noisy_gt(t.frames, t.boxes, video.width, video.height,
                                         _seeded(self.seed, 0x6E6F, tid, k), self.config)
        return out

    # -- links and batch composition -----------------------------------------------------------
    def _linked(self) -> list[tuple[list[int], list[int]]]:
        """Per group: (groups linked by a verified cross-video match, by a verified mismatch)."""
        n = len(self.groups)
        q_rows = np.asarray([self._q_index[g.query_id] for g in self.groups])
        t_cols = np.asarray([self._t_index[g.target_id] for g in self.groups])
        labels = self._matrix[q_rows][:, t_cols]                                       # [G, G] query i, target j
        videos = np.asarray([g.video_id for g in self.groups])
        cross = videos[:, None] != videos[None, :]                                     # [G, G]
        match = ((labels == 1) | (labels.T == 1)) & cross
        known = ((labels != -1) | (labels.T != -1)) & cross
        np.fill_diagonal(match, False)
        np.fill_diagonal(known, False)
        return [(np.flatnonzero(match[i]).tolist(), np.flatnonzero(known[i] & ~match[i]).tolist()) for i in range(n)]

    def _compose(self, upto: int, batch_size: int) -> None:
        """Extend the plan to ``upto`` batches (the plan is one seeded sequence from batch 0)."""
        if self._plan_state is None or self._plan_state[0] != batch_size:
            self._plan = []
            self._plan_state = (batch_size, 0, list(_seeded(self.seed, 0x6570, 0).permutation(len(self.groups))),
                                _seeded(self.seed, 0x6C6B))
        _, epoch, order, rng = self._plan_state
        n_link = round(self.config.link_fraction * batch_size)
        while len(self._plan) < upto:
            batch: list[int] = []
            n_linked = 0
            while len(batch) < batch_size:
                if not order:                          # a new epoch: every query once more
                    epoch += 1
                    order = list(_seeded(self.seed, 0x6570, epoch).permutation(len(self.groups)))
                candidates: list[int] = []
                if batch and n_linked < n_link:
                    pending = set(order) - set(batch)
                    candidates = sorted({j for i in batch for j in self._links[i][0]} & pending) or \
                        sorted({j for i in batch for j in self._links[i][1]} & pending)
                if candidates:
                    pick = candidates[int(rng.integers(len(candidates)))]
                    order.remove(pick)
                    n_linked += 1
                else:                                  # (a query may repeat across an epoch boundary)
                    pick = order.pop(0)
                batch.append(int(pick))
            self._plan.append(batch)
        self._plan_state = (batch_size, epoch, order, rng)

    def batch_groups(self, step: int, batch_size: int) -> list[Group]:
        """The groups of optimizer step ``step`` (deterministic in the seed)."""
        if step < 0 or batch_size < 1:
            raise ValueError(f"need step >= 0 and batch_size >= 1, got {step} and {batch_size}")
        if self.config.sampler == "class_balanced":
            return [self.groups[i] for i in self._balanced_batch(step, batch_size)]
        self._compose(step + 1, batch_size)
        return [self.groups[i] for i in self._plan[step]]

    def _balanced_batch(self, step: int, batch_size: int) -> list[int]:
        """Group indices of step ``step`` under the class-balanced sampler (epoch ``step // n``)."""
        if self._balanced is None or self._balanced[0] != batch_size:
            labels = [self.group_class(g) for g in self.groups]
            try:
                sampler = ClassBalancedBatchSampler(labels, batch_size, seed=self.seed)
            except ValueError as exc:
                raise ValueError(f"class-balanced batches of {batch_size} groups by {self.config.class_by!r} "
                                 f"(classes {self.class_counts()}): {exc}; lower batch_size or use the "
                                 "uniform sampler") from None
            self._balanced = (batch_size, sampler, {})
        _, sampler, epochs = self._balanced
        epoch, index = divmod(step, len(sampler))
        if epoch not in epochs:
            sampler.set_epoch(epoch)
            epochs.clear()                             # steps go forward: one epoch is kept at a time
            epochs[epoch] = list(sampler)
        return epochs[epoch][index]

    def _slots(self, g: Group, rng: np.random.Generator) -> tuple[list[RecordKey], list[int]]:
        """One group's own records and their slots (module docstring), then its cross-video columns."""
        own = list(g.positives)
        n_var = self.config.noisy_variants
        if self.config.noisy_gt:
            k2 = int(rng.integers(1, n_var + 1))
            second = (g.target_id, k2)
            if own:
                third = (_take(own, rng), 0)
            elif self.config.repeat_clean_gt:
                third = (g.target_id, 0)
            else:                                  # a second variant, another one where there are several
                k3 = k2
                if n_var >= 2:
                    k3 = int(rng.integers(1, n_var))               # uniform over 1..n_var except k2
                    k3 += k3 >= k2
                third = (g.target_id, k3)
        else:
            second = (_take(own, rng) if own else g.target_id, 0)
            third = (_take(own, rng) if own else g.target_id, 0)
        records, slots = [(g.target_id, 0), second, third], [CLEAN, SECOND, THIRD]
        if g.negatives:
            records.append((g.negatives[int(rng.integers(len(g.negatives)))], 0))
            slots.append(NEGATIVE)
        cross = list(g.cross_matches)
        for _ in range(min(self.config.cross_video_columns, len(cross))):
            records.append((_take(cross, rng), 0))
            slots.append(CROSS_VIDEO)
        return records, slots

    def batch(self, step: int, batch_size: int) -> TrainBatch:
        """Records and label tensors of step ``step`` (module docstring)."""
        groups = self.batch_groups(step, batch_size)
        rng = _seeded(self.seed, 0x7374, step)
        records: list[RecordKey] = []
        slots: list[int] = []
        offsets = [0]
        for g in groups:
            recs, sl = self._slots(g, rng)
            records += recs
            slots += sl
            offsets.append(len(records))
        b, p = len(groups), len(records)
        group = torch.full((b, p), -1, dtype=torch.int8)                               # [B, P]
        relation = torch.full((b, p), -1, dtype=torch.int8)                            # [B, P]
        pseudo = torch.zeros((b, p), dtype=torch.bool)                                 # [B, P]
        cols = np.asarray([self._t_index[tid] for tid, _ in records])                  # [P]
        variant = np.asarray([k for _, k in records])                                  # [P]
        owner = np.asarray([tid for tid, _ in records])                                # [P]
        slot = np.asarray(slots)                                                       # [P]
        for i, g in enumerate(groups):
            row = self._matrix[self._q_index[g.query_id]][cols].astype(np.int8)        # [P]
            row = np.where(variant > 0, -1, row)                                       # variants: ⊥ ...
            row = np.where(owner == g.target_id, 1, row)                               # ... except own target's
            from_pseudo = self._pseudo[self._q_index[g.query_id]][cols] & (variant == 0) & (owner != g.target_id)
            own = slice(offsets[i], offsets[i + 1])
            own_slots = slot[own]
            row[own] = np.where(own_slots == NEGATIVE, 0, 1)                           # positives and cross: matches
            from_pseudo[own] = False                                                   # the group's own: verified
            g_row = np.full(p, -1, dtype=np.int8)                                      # [P] L_bi-only: all ⊥
            if not g.bi_only:
                g_row[own] = np.select([own_slots == NEGATIVE, own_slots >= CLEAN], [0, 1], -1)
            relation[i] = torch.from_numpy(row)
            pseudo[i] = torch.from_numpy(from_pseudo)
            group[i] = torch.from_numpy(g_row)
        return TrainBatch(step=step, query_ids=[g.query_id for g in groups], query_videos=[g.video_id for g in groups],
                          records=records, record_videos=[self.track_video[t] for t, _ in records],
                          group=group, relation=relation, pseudo=pseudo, offsets=offsets, slots=slots)

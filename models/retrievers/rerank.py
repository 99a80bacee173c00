"""Second-stage ranking (no Django): ActPair's pivot-promote pairwise reranking, SCOUT's CombSUM
fusion with its top-20 shortlist, and SCOUT's rerank blend with the attribute-decomposed VLM term.

- ``pivot_promote(candidates, compare)`` follows Algorithm 1 of the ActPair paper: the first
  candidate is the pivot; every other candidate is compared with it once; those the comparator
  prefers to the pivot (answer ``"b"``) are reranked recursively and placed first, then the
  pivot, then the others (answer ``"a"`` or ``"tie"``) in their prior order. The comparator calls
  are counted, since each one is a multimodal model call.
- ``combsum(score_lists)``: per query, every retriever's scores are min-max normalised to [0, 1]
  (a constant row becomes zeros) and summed (DESIGN 5). ``shortlist`` keeps the top 20. Per-query
  scales rank each query's gallery; ``minmax_all`` (one map for the whole array) is what keeps
  scores of different queries comparable, as trajectory→text ranking needs.
- ``rrf(score_lists, k=60)``: reciprocal rank fusion (Cormack et al., 2009), the rank-only control
  SCOUT sets CombSUM against (7.1, 7.3): per query ``Σ_lists 1 / (k + rank)``, ranks from 1.
- ``rerank_blend``: over the shortlist, each signal is min-max normalised per query and the three
  are mixed with weights 0.2 (fused) / 0.6 (VLM) / 0.2 (ITM). The VLM signal is
  ``attribute_vlm_score``: ½ the holistic log P(yes) (6.2: "read out as the log-probability of
  yes") + ½ the geometric mean of the appearance, action and scene scores (each 0–100), each half
  min-max normalised over the query's shortlist before they are added, since one is a
  log-probability <= 0 and the other a 0–100 score.

Score arrays are NumPy (torch tensors are accepted and converted); results are float64 NumPy.
These functions compute only on the scores and comparators they are given. At evaluation and
search those must come from model-side inputs (DESIGN 4.4): retriever scores, ScoutITM over the
features and the query tokens, a VLM term and comparators reading the candidates' pixels or a
describer's outputs (``models.retrievers.described``), never a candidate's approved records.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

ANSWERS = ("a", "b", "tie")


# -- pivot-promote (ActPair, Algorithm 1) ---------------------------------------------------------
def pivot_promote(candidates: Sequence, compare: Callable[[object, object], str]) -> tuple[list, int]:
    """Rerank ``candidates`` (best first, in the prior order) with a pairwise comparator.

    ``compare(a, b)`` answers ``"a"`` when ``a`` is better supported by the query, ``"b"`` when
    ``b`` is, ``"tie"`` otherwise; it is always called with the current pivot as ``a``. Returns the
    reranked list and the number of comparator calls (``M-1`` when the comparator confirms the
    prior top, at most ``M(M-1)/2``). The paper's tail recursion is unrolled into a loop, so long
    lists never reach Python's recursion limit.
    """
    if not callable(compare):
        raise ValueError("compare must be a callable compare(a, b) -> 'a' | 'b' | 'tie'")
    remaining = list(candidates)
    settled: list = []          # pivot ⊕ worse of every level, innermost level first
    n_calls = 0
    while len(remaining) > 1:
        pivot, better, worse = remaining[0], [], []
        for other in remaining[1:]:
            answer = compare(pivot, other)
            n_calls += 1
            if answer not in ANSWERS:
                raise ValueError(f"compare returned {answer!r}; expected one of {ANSWERS}")
            (better if answer == "b" else worse).append(other)
        settled = [pivot, *worse, *settled]
        remaining = better
    return remaining + settled, n_calls


# -- score arrays ---------------------------------------------------------------------------------
def _scores(x, name: str, ndim: int | None = 2) -> np.ndarray:
    """``x`` as finite float64 NumPy with ``ndim`` dimensions (any when ``None``)."""
    if hasattr(x, "detach"):                  # a torch tensor, without importing torch here
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {list(a.shape)}")
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        raise ValueError(f"{name} must hold real numbers")
    a = a.astype(np.float64, copy=False)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return a


def minmax_rows(scores) -> np.ndarray:
    """Per row, ``(x - min) / (max - min)``; a constant row becomes zeros. ``[Q, N]`` → ``[Q, N]``."""
    s = _scores(scores, "scores")
    if s.shape[1] == 0:
        return s.copy()
    lo = s.min(axis=1, keepdims=True)                                             # [Q, 1]
    span = s.max(axis=1, keepdims=True) - lo                                      # [Q, 1]
    return np.divide(s - lo, span, out=np.zeros_like(s), where=span > 0)          # [Q, N]


def minmax_all(scores) -> np.ndarray:
    """One ``(x - min) / (max - min)`` over the whole array (a constant array becomes zeros): the
    same affine map for every row, so values of different rows stay comparable. ``[Q, N]`` →
    ``[Q, N]``."""
    s = _scores(scores, "scores")
    if s.size == 0:
        return s.copy()
    lo, span = s.min(), s.max() - s.min()
    return (s - lo) / span if span > 0 else np.zeros_like(s)                      # [Q, N]


def combsum(score_lists: Sequence) -> np.ndarray:
    """CombSUM fusion: each ``[Q, N]`` score array (one per retriever, over the same gallery in the
    same column order) min-max normalised per query, then summed. Returns ``[Q, N]``."""
    return np.sum([minmax_rows(s) for s in _score_lists(score_lists, "combsum")], axis=0)   # [Q, N]


def rrf(score_lists: Sequence, k: float = 60) -> np.ndarray:
    """Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): per query, each ``[Q, N]``
    score list ranks the gallery (rank 1 = best; ties to the lower index, as :func:`shortlist`),
    and an item's fused score is ``Σ_lists 1 / (k + rank)``. Only ranks count, not score
    magnitudes: the control SCOUT sets CombSUM against. ``k`` > 0 (60 in the original paper)
    damps the weight of the very top ranks. Returns ``[Q, N]``."""
    if isinstance(k, bool) or not isinstance(k, int | float) or not (np.isfinite(k) and k > 0):
        raise ValueError(f"rrf needs k > 0 (a finite number; 60 in Cormack et al.), got {k!r}")
    fused = None
    for s in _score_lists(score_lists, "rrf"):
        order = np.argsort(-s, axis=1, kind="stable")                                 # [Q, N]
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(1, s.shape[1] + 1)[None, :].repeat(len(s), 0), axis=1)
        term = 1.0 / (k + ranks)                                                      # [Q, N]
        fused = term if fused is None else fused + term
    return fused                                                                      # [Q, N]


def _score_lists(score_lists: Sequence, fusion: str) -> list[np.ndarray]:
    """The ``[Q, N]`` score lists of a fusion as float64 arrays of one shape (a stacked
    ``[L, Q, N]`` array is ``L`` lists); none, or shapes that differ, are a ``ValueError``."""
    if isinstance(score_lists, np.ndarray) or hasattr(score_lists, "detach"):
        score_lists = list(score_lists)
    if len(score_lists) == 0:
        raise ValueError(f"{fusion} needs at least one score list")
    arrays = [_scores(s, f"score_lists[{i}]") for i, s in enumerate(score_lists)]
    for i, a in enumerate(arrays):
        if a.shape != arrays[0].shape:
            raise ValueError(f"score_lists[{i}] has shape {list(a.shape)}, expected {list(arrays[0].shape)}")
    return arrays


def shortlist(scores, k: int = 20) -> np.ndarray:
    """Column indices of the ``k`` best items per query (``[Q, min(k, N)]``), best first, ties
    broken by the lower index: the first ``k`` columns of a stable descending sort
    (:func:`top_positions` per row)."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    s = _scores(scores, "scores")
    if 4 * k >= s.shape[1]:                                                      # short rows: sort them whole
        return np.argsort(-s, axis=1, kind="stable")[:, :k]                      # [Q, min(k, N)]
    return np.stack([top_positions(row, k) for row in s]) if len(s) else np.zeros((0, k), np.int64)


def top_positions(row: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest values of a finite 1-D ``row`` (``[min(k, N)]``), largest
    first, ties to the lower position: ``np.argsort(-row, kind="stable")[:k]`` without sorting
    the row. The ``k``-th largest of the row's block maxima is a lower bound of its ``k``-th
    largest value, so one pass finds every item at or above that bound (the ``k`` best and every
    item tied with the ``k``-th); of those tied, the lower positions are kept, and only the ``k``
    kept are sorted."""
    n = row.shape[0]
    if 4 * k >= n:
        return np.argsort(-row, kind="stable")[:k]
    blocks = min(n // 2, max(4 * k, int(np.sqrt(n))))                            # at least k blocks
    maxima = np.maximum.reduceat(row, np.linspace(0, n, blocks, endpoint=False).astype(np.int64))
    bound = np.partition(maxima, blocks - k)[blocks - k]                         # k-th largest block maximum
    found = np.flatnonzero(row >= bound)                                         # [m >= k] ascending
    values = row[found]                                                          # [m]
    if found.size > k:
        kth = values[np.argpartition(-values, k - 1)[k - 1]]                     # the k-th largest value
        keep = values > kth                                                      # fewer than k
        keep[np.flatnonzero(values == kth)[: k - np.count_nonzero(keep)]] = True  # ties: the lower positions
        found, values = found[keep], values[keep]                                # [k]
    return found[np.lexsort((found, -values))]


# -- rerank blend (SCOUT 6.2 and 7.1) -------------------------------------------------------------
@dataclass
class BlendConfig:
    shortlist: int = 20     # candidates per query taken from the fused ranking to the rerankers
    w_fused: float = 0.2    # weight of the min-max normalised fused (CombSUM) score
    w_vlm: float = 0.6      # weight of the min-max normalised VLM term (attribute_vlm_score, log P(yes))
    w_itm: float = 0.2      # weight of the min-max normalised ITM (ScoutITM) match probability

    def __post_init__(self):
        if not isinstance(self.shortlist, int) or self.shortlist < 1:
            raise ValueError(f"shortlist must be a positive integer, got {self.shortlist!r}")
        for name in ("w_fused", "w_vlm", "w_itm"):
            w = getattr(self, name)
            if not (isinstance(w, int | float) and np.isfinite(w) and w >= 0):
                raise ValueError(f"{name} must be a finite non-negative number, got {w!r}")


def vlm_halves(log_p_yes, appearance, action, scene) -> tuple[np.ndarray, np.ndarray]:
    """The two halves of SCOUT's VLM term, before any normalisation: the holistic log P(yes)
    (<= 0) and the geometric mean of the appearance, action and scene scores (each 0–100) divided
    by 100, in [0, 1]. The geometric mean is conjunctive: a zero on any axis zeroes it. Arrays of
    one shape (any); both results have that shape."""
    lp, app, act, sce = (_scores(a, name, ndim=None) for a, name in (
        (log_p_yes, "log_p_yes"), (appearance, "appearance"), (action, "action"), (scene, "scene")))
    if not (lp.shape == app.shape == act.shape == sce.shape):
        raise ValueError("log_p_yes, appearance, action and scene must have one shape")
    if (lp > 0).any():
        raise ValueError("log_p_yes must be log-probabilities (<= 0), not probabilities or logits")
    for a, name in ((app, "appearance"), (act, "action"), (sce, "scene")):
        if ((a < 0) | (a > 100)).any():
            raise ValueError(f"{name} scores must lie in [0, 100]")
    return lp, np.cbrt(app * act * sce) / 100.0


def attribute_vlm_score(log_p_yes, appearance, action, scene) -> np.ndarray:
    """SCOUT's VLM term over shortlists: ``½ · mm(log P(yes)) + ½ · mm((app · act · sce)^(1/3))``.

    The last axis holds one query's shortlisted candidates (``[M]`` for one query, ``[Q, M]`` for
    several); ``mm`` is the min-max over that axis (:func:`minmax_rows`: a constant row becomes
    zeros). The holistic half is the log-probability of "yes", as SCOUT 6.2 reads it out, not
    P(yes). Normalising each half over the shortlist makes "half and half" hold whatever the
    spread of either. Result in [0, 1], of the inputs' shape."""
    lp, geometric = vlm_halves(log_p_yes, appearance, action, scene)
    if lp.ndim not in (1, 2):
        raise ValueError(f"the VLM term needs [M] or [Q, M] shortlists, got shape {list(lp.shape)}")
    rows = (lp.reshape(-1, lp.shape[-1]), geometric.reshape(-1, lp.shape[-1]))           # [Q, M] each
    return (0.5 * minmax_rows(rows[0]) + 0.5 * minmax_rows(rows[1])).reshape(lp.shape)


def pair_vlm_value(log_p_yes: float, appearance: float, action: float, scene: float) -> float:
    """One candidate's VLM value where no shortlist is scored together (a pairwise comparator
    sees one candidate at a time): ``½ · P(yes) + ½ · (app · act · sce)^(1/3) / 100``, both
    halves already on [0, 1]."""
    lp, geometric = vlm_halves(log_p_yes, appearance, action, scene)
    return float(0.5 * np.exp(lp) + 0.5 * geometric)


def rerank_blend(fused, vlm, itm, config: BlendConfig | None = None) -> np.ndarray:
    """Blend the three rerank signals over the shortlist: each ``[Q, M]`` array (columns = the
    query's shortlisted candidates, in one order for all three) is min-max normalised per query,
    then ``w_fused · fused + w_vlm · vlm + w_itm · itm``. Returns the blended scores ``[Q, M]``;
    sort them (descending) for the final ranking."""
    config = config or BlendConfig()
    f = minmax_rows(_scores(fused, "fused"))
    v = minmax_rows(_scores(vlm, "vlm"))
    i = minmax_rows(_scores(itm, "itm"))
    if not (f.shape == v.shape == i.shape):
        raise ValueError(f"fused, vlm and itm must have one shape, got {list(f.shape)}, "
                         f"{list(v.shape)}, {list(i.shape)}")
    return config.w_fused * f + config.w_vlm * v + config.w_itm * i               # [Q, M]


def fuse_and_rerank(score_lists: Sequence, rerank_scores: Callable[[np.ndarray], tuple],
                    config: BlendConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The whole SCOUT second stage: CombSUM over the retrievers, a shortlist of
    ``config.shortlist`` per query, ``rerank_scores(shortlist_ids [Q, M]) -> (vlm, itm)`` (each
    ``[Q, M]``) from the rerankers, and the blend. Returns (item ids ``[Q, M]`` in the final order,
    their blended scores ``[Q, M]``); ties keep the fused order."""
    config = config or BlendConfig()
    fused = combsum(score_lists)                                                  # [Q, N]
    ids = shortlist(fused, config.shortlist)                                      # [Q, M]
    vlm, itm = rerank_scores(ids)
    blended = rerank_blend(np.take_along_axis(fused, ids, axis=1), vlm, itm, config)
    order = np.argsort(-blended, axis=1, kind="stable")                           # [Q, M]
    return np.take_along_axis(ids, order, axis=1), np.take_along_axis(blended, order, axis=1)

"""Retrieval metrics and the benchmark protocols of DESIGN 4.3 (no Django), vectorised in NumPy.

``evaluate_rankings(scores, relevance)`` is the public contract of DESIGN 5: every query ``q``
ranks its gallery (row ``q`` of ``scores``) by descending score, ties broken by the lower item
index; items labelled ``-1`` (⊥, unknown) are removed from that query's gallery before ranking;
queries without a relevant (``1``) item are skipped and not counted in ``n_queries``. It returns,
in percent:

- ``R@k`` (k = 1, 3, 5, 10): the share of queries with a relevant item among the first k;
- ``mAP``: the mean over queries of AP, the mean over a query's relevant items of the precision at
  their ranks;
- ``mAP@10``: the mean of ``Σ_{k≤10} P@k · rel_k / min(n_rel, 10)`` (PAB style; with one relevant
  item, the reciprocal rank when it is within 10, else 0).

How it is vectorised: each row is sorted once with ``np.lexsort`` on (removed last, descending
score, index); removed items then sit after every kept one, so the position of a kept item in the
sorted row is its rank in the filtered gallery, and every metric is a cumulative sum over the
sorted relevance. Rows are processed in chunks to bound memory.

Benchmark protocols over a query × trajectory similarity matrix ``sim`` ``[E, T]`` with the verified
``relation`` ``[E, T]`` in {1, 0, -1}, ``track_video`` ``[T]`` (video id of each trajectory of
the gallery: the union of the frozen pools) and ``query_video`` ``[E]`` (video id each query was
written for):

- ``evaluate_t2traj``: each query ranks the frozen pool of its own video.
- ``evaluate_traj2t``: each trajectory ranks all queries.
- ``evaluate_ocvr``: each query ranks all videos by ``max_{r ∈ pool(V)} s(e, r)``. A video is
  **relevant** to a query when at least one of its pool trajectories is labelled 1; it is
  **irrelevant** only when *every* trajectory of its pool is labelled 0 (a confirmed mismatch);
  otherwise (no 1 and at least one ⊥) its label is unknown and it is removed from that query's
  gallery. An unknown trajectory may be the match, so calling such a video irrelevant could punish
  a correct retrieval; calling it relevant could reward a wrong one.

Each protocol returns the ``evaluate_rankings`` figures plus ``strata``: the same figures for the
ranking rows grouped by the pool size of their video (``2``, ``3-5``, ``6-10``, ``>10``, and ``<2``
only when such pools occur). ``evaluate_t2traj`` also returns ``random_R@1``, the random baseline
``100 · mean_e 1/|pool(V_e)|`` over the scored queries.
"""
from __future__ import annotations

import math

import numpy as np

KS = (1, 3, 5, 10)
CHUNK_ELEMENTS = 1 << 22
STRATA = (("<2", 0, 1), ("2", 2, 2), ("3-5", 3, 5), ("6-10", 6, 10), (">10", 11, math.inf))


# -- inputs ---------------------------------------------------------------------------------------
def _as_numpy(x, name: str) -> np.ndarray:
    if hasattr(x, "detach"):                  # a torch tensor, without importing torch here
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _check_matrix_pair(scores, relevance, names=("scores", "relevance")) -> tuple[np.ndarray, np.ndarray]:
    s = _as_numpy(scores, names[0])
    r = _as_numpy(relevance, names[1])
    if s.ndim != 2:
        raise ValueError(f"{names[0]} must be a 2-D array [queries, items], got shape {list(s.shape)}")
    if r.shape != s.shape:
        raise ValueError(f"{names[1]} must have the shape of {names[0]} {list(s.shape)}, got {list(r.shape)}")
    if not np.issubdtype(s.dtype, np.number) or np.issubdtype(s.dtype, np.complexfloating):
        raise ValueError(f"{names[0]} must be real numbers")
    s = s.astype(np.float64, copy=False)
    if np.isnan(s).any():
        raise ValueError(f"{names[0]} contains NaN")
    if r.dtype == bool or not np.issubdtype(r.dtype, np.number):
        raise ValueError(f"{names[1]} must be integers in {{1, 0, -1}}")
    if not np.isin(r, (1, 0, -1)).all():
        raise ValueError(f"{names[1]} holds values outside {{1, 0, -1}}")
    return s, r.astype(np.int8, copy=False)


def _check_ids(ids, name: str, n: int) -> np.ndarray:
    a = _as_numpy(ids, name)
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D array of {n} ids, got shape {list(a.shape)}")
    return a


# -- per-query figures ----------------------------------------------------------------------------
def _per_query_chunk(s: np.ndarray, r: np.ndarray) -> dict[str, np.ndarray]:
    n_rows, n_items = s.shape
    index = np.broadcast_to(np.arange(n_items), s.shape)
    order = np.lexsort((index, -s, r == -1), axis=1)                              # [Q, N]
    rel = np.take_along_axis(r == 1, order, axis=1)                               # [Q, N] bool
    hits = np.cumsum(rel, axis=1)                                                 # [Q, N]
    ranks = np.arange(1, n_items + 1)                                             # [N]
    precision_at_rel = np.where(rel, hits / ranks, 0.0)                           # [Q, N]
    n_rel = hits[:, -1] if n_items else np.zeros(n_rows, int)                     # [Q]
    denom = np.maximum(n_rel, 1)
    out = {
        "n_rel": n_rel,
        "AP": precision_at_rel.sum(axis=1) / denom,                               # [Q]
        "AP@10": precision_at_rel[:, :10].sum(axis=1) / np.maximum(np.minimum(n_rel, 10), 1),
    }
    for k in KS:
        out[f"R@{k}"] = rel[:, :k].any(axis=1).astype(np.float64)                 # [Q]
    return out


def per_query_metrics(scores, relevance) -> dict[str, np.ndarray]:
    """Per query (row): ``n_rel`` and, as fractions in [0, 1], ``R@1/3/5/10``, ``AP`` and ``AP@10``
    under the rules of ``evaluate_rankings`` (a row with ``n_rel == 0`` has zeros)."""
    s, r = _check_matrix_pair(scores, relevance)
    step = max(1, CHUNK_ELEMENTS // max(1, s.shape[1]))
    parts = [_per_query_chunk(s[i:i + step], r[i:i + step]) for i in range(0, s.shape[0], step)]
    if not parts:
        return {key: np.zeros(0) for key in ("n_rel", "AP", "AP@10", *(f"R@{k}" for k in KS))}
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def _summary(per_query: dict[str, np.ndarray], rows: np.ndarray | None = None) -> dict:
    scored = per_query["n_rel"] > 0
    if rows is not None:
        scored = scored & rows
    n = int(scored.sum())

    def pct(key: str) -> float:
        return float(100.0 * per_query[key][scored].mean()) if n else math.nan

    out = {f"R@{k}": pct(f"R@{k}") for k in KS}
    out["mAP"] = pct("AP")
    out["mAP@10"] = pct("AP@10")
    out["n_queries"] = n
    return out


def evaluate_rankings(scores, relevance) -> dict:
    """``R@1``, ``R@3``, ``R@5``, ``R@10``, ``mAP``, ``mAP@10`` (percent, ``nan`` when no query is
    scored) and ``n_queries`` for ``scores`` ``[Q, N]`` and ``relevance`` ``[Q, N]`` in {1, 0, -1}
    (NumPy arrays or torch tensors); see the module docstring for the rules."""
    return _summary(per_query_metrics(scores, relevance))


def map_at_10(scores, relevance) -> float:
    """mAP@10 in percent for image-style galleries (PAB protocol: with one relevant item per query,
    the mean reciprocal rank cut at 10)."""
    return evaluate_rankings(scores, relevance)["mAP@10"]


# -- benchmark protocols (DESIGN 4.3) -------------------------------------------------------------
def _videos(track_video: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tracks grouped by video: (video ids, stable track order by video, start of each video in that
    order, pool size of each video)."""
    videos, inverse, sizes = np.unique(track_video, return_inverse=True, return_counts=True)
    order = np.argsort(inverse, kind="stable")                                    # [T]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)        # [V]
    return videos, order, starts, sizes


def _strata(per_query: dict[str, np.ndarray], pool_size: np.ndarray) -> dict[str, dict]:
    out = {}
    for label, lo, hi in STRATA:
        rows = (pool_size >= lo) & (pool_size <= hi)
        if label == "<2" and not rows.any():
            continue
        out[label] = _summary(per_query, rows)
    return out


def _check_protocol(sim, relation, track_video, query_video):
    s, r = _check_matrix_pair(sim, relation, ("sim", "relation"))
    tv = _check_ids(track_video, "track_video", s.shape[1])
    qv = _check_ids(query_video, "query_video", s.shape[0])
    return s, r, tv, qv


def evaluate_t2traj(sim, relation, track_video, query_video) -> dict:
    """Text→trajectory: each query ranks the frozen pool of its own video (``track_video ==
    query_video[e]``); trajectories of other videos are not in its gallery. Adds ``strata`` by pool
    size and ``random_R@1 = 100 · mean_e 1/|pool(V_e)|`` over the scored queries. A query whose video
    has no trajectory in ``track_video`` is rejected."""
    s, r, tv, qv = _check_protocol(sim, relation, track_video, query_video)
    videos, order, starts, sizes = _videos(tv)
    pos = np.searchsorted(videos, qv)                                             # [E]
    known = (pos < videos.size) & (videos[np.minimum(pos, videos.size - 1)] == qv)
    if not known.all():
        raise ValueError(f"queries {np.flatnonzero(~known)[:5].tolist()} name videos without trajectories")
    pool = sizes[pos]                                                             # [E]
    width = int(pool.max()) if pool.size else 0
    slot = np.arange(width)                                                       # [K]
    inside = slot[None, :] < pool[:, None]                                        # [E, K]
    cols = order[np.minimum(starts[pos][:, None] + slot[None, :], order.size - 1)]  # [E, K]
    rows = np.arange(s.shape[0])[:, None]
    pool_scores = np.where(inside, s[rows, cols], 0.0)                            # [E, K]
    pool_rel = np.where(inside, r[rows, cols], -1)                                # [E, K]
    per_query = per_query_metrics(pool_scores, pool_rel)
    out = _summary(per_query)
    scored = per_query["n_rel"] > 0
    out["random_R@1"] = float(100.0 * (1.0 / pool[scored]).mean()) if scored.any() else math.nan
    out["strata"] = _strata(per_query, pool)
    return out


def evaluate_traj2t(sim, relation, track_video, query_video) -> dict:
    """Trajectory→text: each trajectory ranks all queries (``sim.T``); strata by the pool size of the
    trajectory's video. ``query_video`` is checked for shape only (kept for a uniform signature)."""
    s, r, tv, _ = _check_protocol(sim, relation, track_video, query_video)
    _, inverse, sizes = np.unique(tv, return_inverse=True, return_counts=True)
    per_query = per_query_metrics(s.T, r.T)
    out = _summary(per_query)
    out["strata"] = _strata(per_query, sizes[inverse])
    return out


def video_scores_and_relevance(sim, relation, track_video) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query and video: the score ``max_{r ∈ pool(V)} s(e, r)`` and the OCVR relevance rule of
    the module docstring. Returns (video ids ``[V]``, scores ``[E, V]``, relevance ``[E, V]``)."""
    s, r = _check_matrix_pair(sim, relation, ("sim", "relation"))
    tv = _check_ids(track_video, "track_video", s.shape[1])
    videos, order, starts, _ = _videos(tv)
    if videos.size == 0:
        return videos, np.zeros((s.shape[0], 0)), np.zeros((s.shape[0], 0), np.int8)
    s_sorted, r_sorted = s[:, order], r[:, order]                                 # [E, T]
    best = np.maximum.reduceat(s_sorted, starts, axis=1)                          # [E, V]
    any_match = np.maximum.reduceat((r_sorted == 1).astype(np.int8), starts, axis=1) > 0
    all_mismatch = np.minimum.reduceat((r_sorted == 0).astype(np.int8), starts, axis=1) > 0
    rel = np.where(any_match, 1, np.where(all_mismatch, 0, -1)).astype(np.int8)  # [E, V]
    return videos, best, rel


def evaluate_ocvr(sim, relation, track_video, query_video) -> dict:
    """Open-corpus video retrieval: each query ranks every video by its best pool trajectory
    (relevance rule in the module docstring); strata by the pool size of the query's own video
    (queries whose video is not in the gallery fall in ``<2``)."""
    s, r, tv, qv = _check_protocol(sim, relation, track_video, query_video)
    videos, best, rel = video_scores_and_relevance(s, r, tv)
    _, _, _, sizes = _videos(tv)
    pos = np.minimum(np.searchsorted(videos, qv), max(videos.size - 1, 0))
    own = sizes[pos] * (videos[pos] == qv) if videos.size else np.zeros(qv.size, int)
    per_query = per_query_metrics(best, rel)
    out = _summary(per_query)
    out["n_videos"] = int(videos.size)
    out["strata"] = _strata(per_query, own)
    return out

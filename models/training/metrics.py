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
- ``evaluate_traj2t``: each trajectory ranks all queries. This ranks scores *across* queries, so
  they must be on one scale for every query: never normalise them per query (softmax over a
  query's gallery, z-score or min-max of its row) before this protocol; a per-query scale makes
  the query with the smallest spread win every trajectory (``models.retrievers.pipeline``'s
  ``comparable`` scores are what a pipeline hands it).
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


def _t2traj_rows(s, r, tv, qv) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-query values of T2Traj and the pool size of each query's video."""
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
    return per_query_metrics(pool_scores, pool_rel), pool


def _traj2t_rows(s, r, tv) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-trajectory values of Traj2T and the pool size of each trajectory's video."""
    _, inverse, sizes = np.unique(tv, return_inverse=True, return_counts=True)
    return per_query_metrics(s.T, r.T), sizes[inverse]


def _ocvr_rows(s, r, tv, qv) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Per-query values of OCVR, the pool size of each query's own video (0 when it is not in the
    gallery) and the number of videos."""
    videos, best, rel = video_scores_and_relevance(s, r, tv)
    _, _, _, sizes = _videos(tv)
    pos = np.minimum(np.searchsorted(videos, qv), max(videos.size - 1, 0))
    own = sizes[pos] * (videos[pos] == qv) if videos.size else np.zeros(qv.size, int)
    return per_query_metrics(best, rel), own, int(videos.size)


def evaluate_t2traj(sim, relation, track_video, query_video) -> dict:
    """Text→trajectory: each query ranks the frozen pool of its own video (``track_video ==
    query_video[e]``); trajectories of other videos are not in its gallery. Adds ``strata`` by pool
    size and ``random_R@1 = 100 · mean_e 1/|pool(V_e)|`` over the scored queries. A query whose video
    has no trajectory in ``track_video`` is rejected."""
    per_query, pool = _t2traj_rows(*_check_protocol(sim, relation, track_video, query_video))
    out = _summary(per_query)
    scored = per_query["n_rel"] > 0
    out["random_R@1"] = float(100.0 * (1.0 / pool[scored]).mean()) if scored.any() else math.nan
    out["strata"] = _strata(per_query, pool)
    return out


def evaluate_traj2t(sim, relation, track_video, query_video) -> dict:
    """Trajectory→text: each trajectory ranks all queries (``sim.T``); strata by the pool size of the
    trajectory's video. ``query_video`` is checked for shape only (kept for a uniform signature)."""
    s, r, tv, _ = _check_protocol(sim, relation, track_video, query_video)
    per_query, pool = _traj2t_rows(s, r, tv)
    out = _summary(per_query)
    out["strata"] = _strata(per_query, pool)
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
    per_query, own, n_videos = _ocvr_rows(*_check_protocol(sim, relation, track_video, query_video))
    out = _summary(per_query)
    out["n_videos"] = n_videos
    out["strata"] = _strata(per_query, own)
    return out


def stratum_of(pool_size: np.ndarray) -> list[str]:
    """The stratum label (``STRATA``) of each pool size."""
    labels = np.full(pool_size.shape, "", dtype=object)
    for label, lo, hi in STRATA:
        labels[(pool_size >= lo) & (pool_size <= hi)] = label
    return labels.tolist()


# Per-row values that experiments pair across systems (fractions in [0, 1]).
ROW_METRICS = ("R@1", "R@3", "R@5", "R@10", "AP", "AP@10")


def protocol_rows(sim, relation, track_video, query_video, *, traj2t_sim=None) -> dict[str, dict]:
    """Per protocol, the values of every *scored* ranking row (a row with a relevant item):
    ``{"t2traj" | "traj2t" | "ocvr": {"row": [i, ...], "stratum": [...], "R@1": [...], ...,
    "AP": [...], "AP@10": [...]}}``. ``row`` indexes the queries (T2Traj, OCVR) or the
    trajectories (Traj2T) of ``sim``; ``stratum`` is the row's pool-size stratum. The means of these
    values (× 100) are the protocols' figures, so two systems evaluated on the same snapshot can be
    compared row by row (:func:`paired_bootstrap`). Traj2T ranks ``traj2t_sim`` when given (scores
    comparable across queries, where ``sim`` was normalised per query), else ``sim``."""
    s, r, tv, qv = _check_protocol(sim, relation, track_video, query_video)
    st = s
    if traj2t_sim is not None:
        if np.shape(_as_numpy(traj2t_sim, "traj2t_sim")) != s.shape:
            raise ValueError(f"traj2t_sim must have the shape of sim {list(s.shape)}, "
                             f"got {list(np.shape(_as_numpy(traj2t_sim, 'traj2t_sim')))}")
        st = _check_matrix_pair(traj2t_sim, r, ("traj2t_sim", "relation"))[0]
    parts = {"t2traj": _t2traj_rows(s, r, tv, qv), "traj2t": _traj2t_rows(st, r, tv),
             "ocvr": _ocvr_rows(s, r, tv, qv)[:2]}
    out = {}
    for task, (per_query, pool) in parts.items():
        scored = np.flatnonzero(per_query["n_rel"] > 0)
        out[task] = {"row": scored.tolist(), "stratum": stratum_of(pool[scored])} \
            | {m: per_query[m][scored].astype(float).tolist() for m in ROW_METRICS}
    return out


# -- paired comparison (DESIGN 5) ---------------------------------------------------------------
def paired_bootstrap(a, b, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Paired bootstrap of ``mean(b - a)`` over queries (DESIGN 5).

    ``a``, ``b``: per-query values ``[Q]`` of two systems on the same queries. Query indices are
    resampled with replacement ``n_resamples`` times (NumPy's ``default_rng(seed)``, in chunks);
    returns ``delta`` = mean(b − a) on the original queries, ``low`` / ``high`` = the percentile
    interval of the resampled means at ``confidence``, ``p_value`` = twice the smaller share of
    resampled means on either side of 0 (at most 1), and ``n`` = the number of queries. A shape
    mismatch, an empty input, a non-finite value or a bad setting is a ``ValueError``."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-D of the same length, got {list(x.shape)} and {list(y.shape)}")
    if x.size == 0:
        raise ValueError("a and b are empty: no queries to compare")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a and b must be finite (no NaN or infinity)")
    if not isinstance(n_resamples, int) or n_resamples < 1 or not 0.0 < confidence < 1.0:
        raise ValueError("n_resamples must be a positive integer and confidence in (0, 1)")
    d = y - x                                                                     # [Q]
    n = d.size
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)                                                 # [R]
    chunk = max(1, CHUNK_ELEMENTS // n)
    for start in range(0, n_resamples, chunk):
        stop = min(n_resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))                          # [r, Q]
        means[start:stop] = d[idx].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    p = 2.0 * min(float((means <= 0).mean()), float((means >= 0).mean()))
    return {"delta": float(d.mean()), "low": float(low), "high": float(high), "p_value": min(1.0, p), "n": int(n)}


def hierarchical_bootstrap(a, b, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Paired two-level bootstrap of ``mean(b - a)`` over seeds, then queries (DESIGN 4.5).

    ``a``, ``b``: per-seed, per-query values ``[S, Q]`` of the reference and the variant; row ``s``
    of both is the same seed and column ``q`` the same query, so the difference ``d = b - a`` stays
    paired. Each resample draws ``S`` seeds with replacement, then ``Q`` queries with replacement,
    and takes the mean of ``d`` over the drawn seeds × drawn queries. The queries are drawn once per
    resample for all its seeds: every seed scored the same test queries, so a query's difficulty is
    shared by the seeds (drawing them anew per seed would treat them as different queries and
    average that share away). Seed-to-seed spread of the difference (training noise) thus widens
    the interval, which the query-only :func:`paired_bootstrap` of seed-averaged values cannot see.

    Vectorised: a resample's draws become weights, ``w_s`` ``[S]`` and ``w_q`` ``[Q]`` (draw
    counts over ``S`` and ``Q``), and its mean over every drawn (seed, query) is
    ``w_s · d · w_q``, computed for a chunk of resamples as one matrix product ``W_q dᵀ`` (each
    seed's mean over the drawn queries) weighted by ``W_s``. Returns ``delta`` = mean(d), ``low`` / ``high`` (percentile interval at
    ``confidence``), ``p_value`` (as :func:`paired_bootstrap`), ``n_seeds`` and ``n``. Fewer than 2
    seeds is a ``ValueError``: with one seed there is no seed spread to resample, and the interval
    would silently be the query-only one."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 2 or x.shape != y.shape:
        raise ValueError(f"a and b must be 2-D [seeds, queries] of the same shape, got {list(x.shape)} and "
                         f"{list(y.shape)}")
    return hierarchical_bootstrap_many(x[None], y[None], n_resamples=n_resamples, confidence=confidence,
                                       seed=seed)[0]


def hierarchical_bootstrap_many(a, b, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0) -> list[dict]:
    """:func:`hierarchical_bootstrap` of ``K`` measures of the same seeds and queries at once: ``a``,
    ``b`` ``[K, S, Q]`` (e.g. R@1, R@3 and AP of each query), one resampling shared by all ``K``
    (the draws depend only on ``S``, ``Q`` and ``seed``, so each result equals its own call).
    Returns ``K`` dicts; the same input checks."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 3 or x.shape != y.shape:
        raise ValueError(f"a and b must be 3-D [measures, seeds, queries] of the same shape, got {list(x.shape)} "
                         f"and {list(y.shape)}")
    if x.shape[1] < 2:
        raise ValueError(f"the hierarchical interval resamples seeds: it needs at least 2 seeds, got {x.shape[1]}")
    if x.shape[2] == 0:
        raise ValueError("a and b have no queries to compare")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a and b must be finite (no NaN or infinity)")
    if not isinstance(n_resamples, int) or n_resamples < 1 or not 0.0 < confidence < 1.0:
        raise ValueError("n_resamples must be a positive integer and confidence in (0, 1)")
    d = y - x                                                                     # [K, S, Q]
    k, n_seeds, n = d.shape
    flat = d.transpose(2, 0, 1).reshape(n, k * n_seeds)                          # [Q, K·S]
    rng = np.random.default_rng(seed)
    means = np.empty((k, n_resamples))                                            # [K, R]
    chunk = max(1, CHUNK_ELEMENTS // (n_seeds + n + k * n_seeds))
    for start in range(0, n_resamples, chunk):
        r = min(n_resamples, start + chunk) - start
        seeds = rng.integers(0, n_seeds, size=(r, n_seeds))                       # [r, S]
        queries = rng.integers(0, n, size=(r, n))                                 # [r, Q]
        w_s = _draw_counts(seeds, n_seeds) / n_seeds                              # [r, S]
        w_q = _draw_counts(queries, n) / n                                        # [r, Q]
        per_seed = (w_q @ flat).reshape(r, k, n_seeds)                            # [r, K, S]
        means[:, start:start + r] = np.einsum("rks,rs->kr", per_seed, w_s)        # [K, r]
    tail = (1.0 - confidence) / 2.0
    out = []
    for row, diff in zip(means, d):
        low, high = np.quantile(row, [tail, 1.0 - tail])
        p = 2.0 * min(float((row <= 0).mean()), float((row >= 0).mean()))
        out.append({"delta": float(diff.mean()), "low": float(low), "high": float(high), "p_value": min(1.0, p),
                    "n_seeds": int(n_seeds), "n": int(n)})
    return out


def _draw_counts(draws: np.ndarray, n: int) -> np.ndarray:
    """How often each of ``n`` indices was drawn in each row of ``draws`` ``[r, k]`` → ``[r, n]``."""
    r = draws.shape[0]
    return np.bincount((draws + n * np.arange(r)[:, None]).ravel(), minlength=r * n).reshape(r, n)


def hierarchical_bootstrap_loop(a, b, n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict:
    """The plain-loop reading of :func:`hierarchical_bootstrap` (the test oracle): the same draws
    (seed indices ``[R, S]``, then query indices ``[R, Q]``, as one chunk of the fast version
    draws them), and per resample the mean of the differences over every drawn (seed, query)."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, d.shape[0], size=(n_resamples, d.shape[0]))
    queries = rng.integers(0, d.shape[1], size=(n_resamples, d.shape[1]))
    means = []
    for r in range(n_resamples):
        means.append(float(np.mean([d[s, q] for s in seeds[r] for q in queries[r]])))
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return {"delta": float(d.mean()), "low": float(low), "high": float(high)}

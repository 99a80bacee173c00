"""The cross-video miner (:func:`mine`): input checks, per-split FAISS search with rejection
sampling and exact float64 rescoring, and the brute-force reference (:func:`mine_bruteforce`) the
tests hold it to. Configuration, results and strata are in :mod:`models.curation.mining`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import faiss
import numpy as np

from models.curation.compatibility import (
    COMPATIBLE,
    DEFINITE_CONFLICT,
    POSSIBLE_CONFLICT,
    Compatibility,
    classify_pair,
)
from models.curation.mining import (
    EASY,
    HARD,
    POTENTIAL,
    RANDOM,
    STRATA_PRIORITY,
    MiningConfig,
    MiningResult,
    _assemble,
)

UNIT_TOLERANCE = 1e-3        # largest accepted | ||row|| - 1 | of an input embedding row
_SAMPLING_ROUNDS = 4         # rejection-sampling rounds before a query falls back to its exact set
_PAIR_BLOCK = 2048           # pairs per float64 rescoring block (~6 MB per operand at d = 384)
_CHECK_BLOCK = 16384         # rows per block when checking inputs
_DEPTH_DRAW = 4096           # random pairs that estimate each structured class's share (first search depth)
_FALLBACK_BLOCK = 64         # queries per exact float32 similarity block in the sampling fallback


# -- input checks --------------------------------------------------------------------------------
def _ids(values, name: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {list(arr.shape)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if n is not None and arr.size != n:
        raise ValueError(f"{name} has {arr.size} entries, expected {n}")
    return arr


def _labels(values, name: str, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"{name} must be a 1-D array of {n} labels, got shape {list(arr.shape)}")
    return arr.astype(str)


def _spaces(emb, name: str, n_spaces: int, n_rows: int) -> list[np.ndarray]:
    arrays = [emb] if isinstance(emb, np.ndarray) else list(emb)
    if len(arrays) != n_spaces:
        raise ValueError(f"{name}: {len(arrays)} embedding spaces given, the config names {n_spaces}")
    out = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if a.ndim != 2 or a.shape[0] != n_rows or a.shape[1] == 0:
            raise ValueError(f"{name}[{i}] must have shape [{n_rows}, d], got {list(a.shape)}")
        if not np.issubdtype(a.dtype, np.floating):
            raise ValueError(f"{name}[{i}] must be floating point, got {a.dtype}")
        for s in range(0, n_rows, _CHECK_BLOCK):                              # bounded temporaries
            block = a[s:s + _CHECK_BLOCK]
            if not np.isfinite(block).all():
                raise ValueError(f"{name}[{i}] holds NaN or infinite values")
            norms = np.sqrt(np.einsum("nd,nd->n", block, block))                # [b]
            bad = np.flatnonzero(np.abs(norms - 1.0) > UNIT_TOLERANCE)
            if bad.size:
                raise ValueError(f"{name}[{i}] row {s + bad[0]} has norm {norms[bad[0]]:.4f}: "
                                 "pass unit (L2-normalised) rows")
        out.append(a)
    return out


def _fuse(spaces: list[np.ndarray], weights: tuple[float, ...]) -> np.ndarray:
    """``[√w_1 x_1, …, √w_m x_m]`` as one float32 C-contiguous array (no copy for one float32 space)."""
    if len(spaces) == 1:
        return np.ascontiguousarray(spaces[0], dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(
        [np.sqrt(w) * s.astype(np.float32) for s, w in zip(spaces, weights)], axis=1), dtype=np.float32)


@dataclass
class _Inputs:
    """Checked, fused inputs shared by ``mine`` and ``mine_bruteforce``."""

    q_ids: np.ndarray                            # int64 [Q]
    q_video: np.ndarray                          # int64 [Q]
    q_split: np.ndarray                          # int64 [Q] split code
    qf: np.ndarray                               # float32 [Q, D] fused
    t_ids: np.ndarray                            # int64 [T]
    t_video: np.ndarray                          # int64 [T]
    t_split: np.ndarray                          # int64 [T]
    tf: np.ndarray                               # float32 [T, D]
    split_names: np.ndarray                      # str [S]
    known: np.ndarray                            # int64 [K'] sorted codes q_pos * T + t_pos
    known_log: dict
    compat: Compatibility | None = None          # structured compatibility (config.structured)


def _check_inputs(config: MiningConfig, query_ids, query_videos, query_splits, query_emb,
                  traj_ids, traj_videos, traj_splits, traj_emb, known_pairs, structure=None) -> _Inputs:
    if not isinstance(config, MiningConfig):
        raise ValueError(f"config must be a MiningConfig, got {type(config).__name__}")
    q_ids = _ids(query_ids, "query_ids")
    t_ids = _ids(traj_ids, "traj_ids")
    n_q, n_t = q_ids.size, t_ids.size
    if config.structured != (structure is not None):
        raise ValueError("structured strata (config.structured) need a structure (a Compatibility of the "
                         "queries' predicates and the trajectories' facts), and a structure needs them")
    if structure is not None and (not isinstance(structure, Compatibility)
                                  or (structure.n_queries, structure.n_trajectories) != (n_q, n_t)):
        raise ValueError(f"structure must be a Compatibility of {n_q} queries and {n_t} trajectories")
    q_video = _ids(query_videos, "query_videos", n_q)
    t_video = _ids(traj_videos, "traj_videos", n_t)
    for name, arr in (("query_ids", q_ids), ("traj_ids", t_ids)):
        if arr.size and arr.min() < 0:
            raise ValueError(f"{name} must be non-negative (they key the random draws)")
        if np.unique(arr).size != arr.size:
            raise ValueError(f"{name} holds duplicates")
    q_split_lab = _labels(query_splits, "query_splits", n_q)
    t_split_lab = _labels(traj_splits, "traj_splits", n_t)
    n_spaces = len(config.encoders)
    q_spaces = _spaces(query_emb, "query_emb", n_spaces, n_q)
    t_spaces = _spaces(traj_emb, "traj_emb", n_spaces, n_t)
    for i, (a, b) in enumerate(zip(q_spaces, t_spaces)):
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"space {i} ({config.encoders[i]}): queries have d={a.shape[1]}, "
                             f"trajectories d={b.shape[1]}")
    split_names, codes = np.unique(np.concatenate([q_split_lab, t_split_lab]), return_inverse=True)
    q_split, t_split = codes[:n_q].astype(np.int64), codes[n_q:].astype(np.int64)

    known = np.zeros(0, np.int64)
    known_log = {"given": 0, "in_scope": 0}
    if known_pairs is not None:
        kp = np.asarray(known_pairs)
        if kp.size == 0:
            kp = kp.reshape(0, 2)
        if kp.ndim != 2 or kp.shape[1] != 2 or (kp.size and not np.issubdtype(kp.dtype, np.integer)):
            raise ValueError(f"known_pairs must be an integer array [K, 2] of (query_id, trajectory_id), "
                             f"got shape {list(kp.shape)} dtype {kp.dtype}")
        kp = kp.astype(np.int64)
        q_order, t_order = np.argsort(q_ids), np.argsort(t_ids)
        qi = np.searchsorted(q_ids, kp[:, 0], sorter=q_order).clip(0, max(n_q - 1, 0))
        ti = np.searchsorted(t_ids, kp[:, 1], sorter=t_order).clip(0, max(n_t - 1, 0))
        ok = np.zeros(len(kp), bool)
        if n_q and n_t:
            qp, tp = q_order[qi], t_order[ti]
            ok = (q_ids[qp] == kp[:, 0]) & (t_ids[tp] == kp[:, 1])
            in_scope = ok & (q_split[qp] == t_split[tp]) & (q_video[qp] != t_video[tp])
            known = np.unique(qp[in_scope] * np.int64(n_t) + tp[in_scope])
        known_log = {"given": len(kp), "ids_not_found": int((~ok).sum()), "in_scope": int(known.size)}
    return _Inputs(q_ids, q_video, q_split, _fuse(q_spaces, config.weights), t_ids, t_video, t_split,
                   _fuse(t_spaces, config.weights), split_names, known, known_log, structure)


def _is_known(known: np.ndarray, codes: np.ndarray) -> np.ndarray:
    if known.size == 0:
        return np.zeros(codes.shape, bool)
    at = np.searchsorted(known, codes).clip(0, known.size - 1)
    return known[at] == codes


def _pair_scores(qf: np.ndarray, tf: np.ndarray, qpos: np.ndarray, tpos: np.ndarray) -> np.ndarray:
    """float64 inner products of the fused rows ``qf[qpos[n]]`` and ``tf[tpos[n]]``, any shape."""
    qpos, tpos = np.broadcast_arrays(qpos, tpos)
    flat_q, flat_t = qpos.ravel(), tpos.ravel()
    out = np.empty(flat_q.size, np.float64)
    for s in range(0, flat_q.size, _PAIR_BLOCK):
        a = qf[flat_q[s:s + _PAIR_BLOCK]].astype(np.float64)                   # [n, D]
        b = tf[flat_t[s:s + _PAIR_BLOCK]].astype(np.float64)                   # [n, D]
        out[s:s + _PAIR_BLOCK] = np.einsum("nd,nd->n", a, b)                   # [n]
    return out.reshape(qpos.shape)


# -- the FAISS miner -----------------------------------------------------------------------------
class _Rows:
    """Provenance rows collected during a run (query position, trajectory position, ...)."""

    def __init__(self):
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, qpos, tpos, stratum: int, sim, rank) -> None:
        qpos = np.asarray(qpos, np.int64).ravel()
        if qpos.size:
            self.parts.append((qpos, np.asarray(tpos, np.int64).ravel(), np.full(qpos.size, stratum, np.int8),
                               np.asarray(sim, np.float64).ravel(), np.asarray(rank, np.int64).ravel()))

    def arrays(self) -> tuple[np.ndarray, ...]:
        if not self.parts:
            return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8),
                    np.zeros(0, np.float64), np.zeros(0, np.int64))
        return tuple(np.concatenate(cols) for cols in zip(*self.parts))


def _search_eps(d: int) -> float:
    """A bound on |float32 FAISS score - float64 score| for fused rows of length ``d`` (forward
    error of a float32 dot product: d · 2⁻²⁴ · ||q|| · ||t||), doubled for safety."""
    return 2.0 * d * 2.0 ** -24 * (1.0 + UNIT_TOLERANCE) ** 2 + 1e-7


def _decide(cfg: MiningConfig, ss: np.ndarray, bound: np.ndarray, exhausted: bool):
    """The potential/hard strata of rows whose candidates ``ss`` [R, k] (float64, sorted
    descending, -inf for excluded) are exact above ``bound`` [R] (every candidate not in the row
    scores at most ``bound``). Returns ``complete [R]``, the cut size ``p [R]``, the number of
    potential matches ``pot_n [R]`` and the hard-negative mask ``hard [R, k]``."""
    n_rows, k = ss.shape
    safe_len = (ss > bound[:, None]).sum(axis=1)                                # [R] exact prefix
    pos = np.arange(k)[None, :]                                                 # [1, k]
    if cfg.potential_min is None:
        p = np.minimum(cfg.potential_k, safe_len)                               # [R]
        cut_known = (safe_len >= cfg.potential_k) | exhausted
    else:
        p = ((ss >= cfg.potential_min) & (pos < safe_len[:, None])).sum(axis=1)  # [R]
        cut_known = (p < safe_len) | (bound < cfg.potential_min) | exhausted
    pot_n = np.minimum(p, cfg.potential_k)                                      # [R]
    hard = (pos >= p[:, None]) & (pos < (p + cfg.hard_k)[:, None]) & (pos < safe_len[:, None])  # [R, k]
    below = bound < cfg.hard_min if cfg.hard_min is not None else np.zeros(n_rows, bool)
    if cfg.hard_min is not None:
        hard &= ss >= cfg.hard_min
    h_cnt = hard.sum(axis=1)                                                    # [R]
    hard_known = (safe_len >= p + cfg.hard_k) | (p + h_cnt < safe_len) | below | exhausted
    return cut_known & hard_known, p, pot_n, hard


class _SplitMiner:
    """Mines one split: a FAISS ``IndexFlatIP`` over the split's fused trajectory rows.

    FAISS proposes the top ``k`` by float32 inner product; the proposals are rescored in float64
    and sorted by (similarity desc, position). Every trajectory FAISS did not return scores at
    most ``D[:, -1] + eps`` in float64, so the part of the sorted list above that bound is exactly
    the head of the query's full candidate list. A query whose strata are not settled inside that
    head is searched again with ``k`` doubled (at most up to the split size).
    """

    def __init__(self, cfg: MiningConfig, data: _Inputs, split: int, log: dict):
        self.cfg, self.data, self.log = cfg, data, log
        self.members = np.flatnonzero(data.t_split == split)                   # [Ts] global positions
        self.t_video = data.t_video[self.members]                              # [Ts]
        self.eps = _search_eps(data.tf.shape[1])
        self.index = None
        if self.members.size:
            self.index = faiss.IndexFlatIP(data.tf.shape[1])
            for s in range(0, self.members.size, _CHECK_BLOCK):                # FAISS keeps a copy;
                self.index.add(np.ascontiguousarray(data.tf[self.members[s:s + _CHECK_BLOCK]]))  # add in blocks
        videos, counts = np.unique(self.t_video, return_counts=True)
        self.video_sizes = dict(zip(videos.tolist(), counts.tolist()))
        self.known_per_query = np.bincount(data.known // np.int64(data.t_ids.size),
                                           minlength=data.q_ids.size)                 # [Q]
        # queries with no possible-conflict candidate in the split settle their hard list at once
        self.possible_anywhere = None if data.compat is None else data.compat.possible_anywhere(self.members)

    def split_rows(self) -> np.ndarray:
        """The split's fused trajectory rows [Ts, D]: a view of the index's own copy."""
        n, d = self.index.ntotal, self.index.d
        return faiss.rev_swig_ptr(self.index.get_xb(), n * d).reshape(n, d)

    def allowed(self, qpos: np.ndarray, local: np.ndarray) -> np.ndarray:
        """[R, k] mask: ``local`` split positions that are candidates of queries ``qpos`` [R]."""
        gpos = self.members[local]
        other = self.t_video[local] != self.data.q_video[qpos][:, None]
        return other & ~_is_known(self.data.known, qpos[:, None] * np.int64(self.data.t_ids.size) + gpos)

    def _lists(self, qp: np.ndarray, local: np.ndarray, ok: np.ndarray) -> list[tuple]:
        """The ranked lists of a block as (the config, the candidates [R, k], the rows settled
        whatever the depth [R]): one list without structure; with it the compatible candidates for
        the potential cut and the possible conflicts for hard negatives."""
        none = np.zeros(qp.size, bool)
        if self.data.compat is None:
            return [(self.cfg, ok, none)]
        cls = self.data.compat.classify(qp[:, None], self.members[local])       # [R, k]
        return [(replace(self.cfg, hard_k=0, hard_min=None), ok & (cls == COMPATIBLE), none),
                (replace(self.cfg, potential_k=0, potential_min=None), ok & (cls == POSSIBLE_CONFLICT),
                 ~self.possible_anywhere[qp])]

    def _first_depth(self, qpos: np.ndarray) -> int:
        """The first search depth for the budgets: ``potential_k + hard_k``, or with the structure
        each budget over its class's share of a random draw of the block's pairs (with a margin), so
        that most queries settle without a deeper search. It only sets where searching starts."""
        cfg = self.cfg
        if self.data.compat is None:
            return cfg.potential_k + cfg.hard_k
        rng = np.random.default_rng([cfg.seed, int(qpos[0])])
        draw = self.data.compat.classify(rng.choice(qpos, _DEPTH_DRAW),
                                         self.members[rng.integers(0, self.members.size, _DEPTH_DRAW)])
        depth = 0.0
        for budget, cls in ((cfg.potential_k, COMPATIBLE), (cfg.hard_k, POSSIBLE_CONFLICT)):
            share = float((draw == cls).mean())
            if budget:
                depth = max(depth, 1.5 * budget / share if share else float(self.members.size))
        return int(min(self.members.size, np.ceil(depth)))

    def rank_strata(self, qpos: np.ndarray, rows: _Rows) -> None:
        cfg, n_split = self.cfg, self.members.size
        need = cfg.potential_k + cfg.hard_k
        if need == 0:
            return
        own = np.array([self.video_sizes.get(int(v), 0) for v in self.data.q_video[qpos]])
        # enough for the budgets when the own video and the known pairs fill the head of the list
        k = int(min(n_split, self._first_depth(qpos) + 1 + int((own + self.known_per_query[qpos]).max())))
        pending = np.arange(qpos.size)
        while pending.size:
            qp = qpos[pending]
            scores32, local = self.index.search(self.data.qf[qp], k)          # [R, k] each
            self.log["faiss_searches"] += 1
            self.log["faiss_queries"] += int(qp.size)
            s64 = _pair_scores(self.data.qf, self.data.tf, qp[:, None], self.members[local])  # [R, k]
            by_pos = np.argsort(local, axis=1, kind="stable")                  # ties → lower position
            local = np.take_along_axis(local, by_pos, axis=1)
            s64 = np.take_along_axis(s64, by_pos, axis=1)
            exhausted = k >= n_split
            bound = np.full(qp.size, -np.inf) if exhausted else scores32[:, -1].astype(np.float64) + self.eps
            decided = []
            complete = np.ones(qp.size, bool)
            for list_cfg, keep, settled in self._lists(qp, local, self.allowed(qp, local)):
                s_list = np.where(keep, s64, -np.inf)                           # [R, k]
                order = np.argsort(-s_list, axis=1, kind="stable")              # [R, k]
                ss = np.take_along_axis(s_list, order, axis=1)
                list_complete, p, pot_n, hard = _decide(list_cfg, ss, bound, exhausted)
                complete &= list_complete | settled
                decided.append((list_cfg, np.take_along_axis(local, order, axis=1), ss, p, pot_n, hard))
            done = np.flatnonzero(complete)
            pos = np.arange(k)[None, :]
            for list_cfg, ranked, ss, p, pot_n, hard in decided:
                pot = (pos < pot_n[done, None])                                 # [r, k]
                r_idx, c_idx = np.nonzero(pot)
                rows.add(qp[done][r_idx], self.members[ranked[done][r_idx, c_idx]], POTENTIAL,
                         ss[done][r_idx, c_idx], c_idx)
                r_idx, c_idx = np.nonzero(hard[done])
                rows.add(qp[done][r_idx], self.members[ranked[done][r_idx, c_idx]], HARD,
                         ss[done][r_idx, c_idx], c_idx)
                self.log["potential_overflow"] += int((p[done] - pot_n[done]).sum())
                self.log["short"]["potential_match"] += int((pot_n[done] < list_cfg.potential_k).sum())
                self.log["short"]["hard_negative"] += int((hard[done].sum(axis=1) < list_cfg.hard_k).sum())
            if not exhausted and (~complete).any():
                self.log["deepened_queries"] += int((~complete).sum())
            pending = pending[~complete]
            k = min(n_split, 2 * k)

    def _of_class(self, ok: np.ndarray, qp: np.ndarray, local: np.ndarray, need_class: int | None) -> np.ndarray:
        """``ok`` [R, m] narrowed to candidates of the structured class ``need_class`` (None: all)."""
        if need_class is None:
            return ok
        r_idx, c_idx = np.nonzero(ok)
        cls = self.data.compat.classify(qp[r_idx], self.members[local[r_idx, c_idx]])   # [n] only where ok
        ok = ok.copy()
        ok[r_idx[cls != need_class], c_idx[cls != need_class]] = False
        return ok

    def sample(self, qpos: np.ndarray, stratum: int, budget: int, s_max: float | None, rows: _Rows,
               need_class: int | None = None) -> None:
        """Uniform draws without replacement from each query's candidates (with s < s_max, and of
        the structured class ``need_class`` when given)."""
        if budget == 0 or self.members.size == 0:
            return
        n_split = self.members.size
        rngs = [np.random.default_rng([self.cfg.seed, stratum, int(self.data.q_ids[q])]) for q in qpos]
        chosen: list[list[int]] = [[] for _ in qpos]                           # local positions
        sims: list[list[float]] = [[] for _ in qpos]
        m = 2 * budget + 16
        # a budget near the split size is cheaper to fill from the exact candidate list directly
        active = np.arange(qpos.size) if 2 * budget < n_split else np.zeros(0, np.int64)
        for _ in range(_SAMPLING_ROUNDS):
            if active.size == 0:
                break
            draws = np.stack([rngs[i].integers(0, n_split, m) for i in active])  # [A, m]
            qp = qpos[active]
            ok = self.allowed(qp, draws)                                        # [A, m]
            s = _pair_scores(self.data.qf, self.data.tf, qp[:, None], self.members[draws])  # [A, m]
            if s_max is not None:
                ok &= s < s_max
            ok = self._of_class(ok, qp, draws, need_class)
            for row, i in enumerate(active):
                have = set(chosen[i])
                for j in np.flatnonzero(ok[row]):
                    t = int(draws[row, j])
                    if t not in have:
                        have.add(t)
                        chosen[i].append(t)
                        sims[i].append(float(s[row, j]))
                        if len(chosen[i]) == budget:
                            break
            active = np.array([i for i in active if len(chosen[i]) < budget], dtype=np.int64)
            m = min(4 * m, 4 * n_split)
        if 2 * budget >= n_split:
            active = np.arange(qpos.size)
        if active.size:
            self._finish_exactly(qpos, active, rngs, chosen, sims, budget, s_max, need_class)
        name = STRATA_PRIORITY[stratum]
        self.log["short"][name] += sum(len(c) < budget for c in chosen)
        n_chosen = np.array([len(c) for c in chosen], np.int64)                 # [R]
        flat = np.fromiter((t for c in chosen for t in c), np.int64, int(n_chosen.sum()))
        rows.add(np.repeat(qpos, n_chosen), self.members[flat], stratum,
                 np.fromiter((v for c in sims for v in c), np.float64, flat.size), np.full(flat.size, -1))

    def _finish_exactly(self, qpos, active, rngs, chosen, sims, budget, s_max, need_class=None) -> None:
        """Fill the rest of each active query's budget from its exact accepted set, in a random
        order drawn from its own generator (so the subset stays uniform)."""
        self.log["sampling_fallbacks"] += int(active.size)
        index_rows = self.split_rows()                                          # [Ts, D]
        for s in range(0, active.size, _FALLBACK_BLOCK):
            block = active[s:s + _FALLBACK_BLOCK]
            qp = qpos[block]
            everything = np.broadcast_to(np.arange(self.members.size), (qp.size, self.members.size))
            ok = self.allowed(qp, everything)                                   # [b, Ts]
            if s_max is not None:
                s32 = self.data.qf[qp] @ index_rows.T                           # [b, Ts]
                ok &= s32 < s_max + self.eps
                near = ok & (s32 > s_max - self.eps)                            # settle these in float64
                r_idx, c_idx = np.nonzero(near)
                exact = _pair_scores(self.data.qf, self.data.tf, qp[r_idx], self.members[c_idx])
                ok[r_idx[exact >= s_max], c_idx[exact >= s_max]] = False
            ok = self._of_class(ok, qp, everything, need_class)
            for row, i in enumerate(block):
                rest = np.setdiff1d(np.flatnonzero(ok[row]), np.asarray(chosen[i], np.int64))
                pick = rngs[i].permutation(rest)[:budget - len(chosen[i])]
                chosen[i].extend(int(t) for t in pick)
                sims[i].extend(_pair_scores(self.data.qf, self.data.tf, np.full(pick.size, qpos[i]),
                                            self.members[pick]).tolist())


def mine(config: MiningConfig, *, query_ids, query_videos, query_splits, query_emb, traj_ids, traj_videos,
         traj_splits, traj_emb, known_pairs=None, chunk: int = 1024,
         structure: Compatibility | None = None) -> MiningResult:
    """Mine cross-video candidate pairs within each split into strata (see the module docstring of
    ``models.curation.mining``). ``structure``: the queries' predicates and the trajectories'
    approved facts in input order, required by (and only with) ``config.structured``.

    Memory: one float32 copy of a split's trajectory rows in the FAISS index, plus per chunk of
    queries FAISS's blocked score buffer and ``chunk × k`` candidates; the ``Q × T`` matrix is
    never built.
    """
    if isinstance(chunk, bool) or not isinstance(chunk, int | np.integer) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    started = time.perf_counter()
    data = _check_inputs(config, query_ids, query_videos, query_splits, query_emb, traj_ids, traj_videos,
                         traj_splits, traj_emb, known_pairs, structure)
    log = {"faiss_searches": 0, "faiss_queries": 0, "deepened_queries": 0, "potential_overflow": 0,
           "sampling_fallbacks": 0, "short": dict.fromkeys(STRATA_PRIORITY, 0), "splits": {}}
    rows = _Rows()
    for split, name in enumerate(data.split_names):
        qs = np.flatnonzero(data.q_split == split)
        miner = _SplitMiner(config, data, split, log)
        log["splits"][str(name)] = {"queries": int(qs.size), "trajectories": int(miner.members.size),
                                    "videos": len(miner.video_sizes)}
        if qs.size == 0:
            continue
        if miner.members.size == 0:
            for stratum_name, budget in zip(STRATA_PRIORITY, (config.potential_k, config.hard_k,
                                                                config.easy_k, config.random_k)):
                log["short"][stratum_name] += int(qs.size) if budget else 0
            continue
        for s in range(0, qs.size, chunk):
            qpos = qs[s:s + chunk]
            miner.rank_strata(qpos, rows)
            miner.sample(qpos, EASY, config.easy_k, config.easy_max, rows,
                         DEFINITE_CONFLICT if config.structured else None)
            miner.sample(qpos, RANDOM, config.random_k, None, rows)
    log["short"] = {f"{k}_queries_under_budget": v for k, v in log["short"].items()}
    qp, tp, st, sim, rank = rows.arrays()
    compat = None if data.compat is None else data.compat.classify(qp, tp)      # [M] vectorised
    result = _assemble(data.q_ids[qp], data.t_ids[tp], np.zeros(qp.size, np.int32), st, sim, rank, (config,),
                       compat)
    result.log = _run_log(config, data, result, log, started)
    return result


def _run_log(config: MiningConfig, data: _Inputs, result: MiningResult, log: dict, started: float) -> dict:
    return {
        "config": config.to_dict(), "config_hash": config.config_hash(), "run": config.run,
        "encoder": config.encoder, "strata_definition": config.strata_definition(),
        "faiss": faiss.__version__, "n_queries": int(data.q_ids.size), "n_trajectories": int(data.t_ids.size),
        "known_pairs": data.known_log, "pairs": len(result), "provenance_rows": int(result.prov_pair.size),
        "duplicates_merged": int(result.prov_pair.size) - len(result), "pairs_by_stratum": result.counts(),
        "mined_by_stratum": {name: int((result.prov_stratum == i).sum()) for i, name in enumerate(STRATA_PRIORITY)},
        **log, "seconds": round(time.perf_counter() - started, 3),
    }


# -- the brute-force reference -------------------------------------------------------------------
def mine_bruteforce(config: MiningConfig, *, query_ids, query_videos, query_splits, query_emb, traj_ids,
                    traj_videos, traj_splits, traj_emb, known_pairs=None, block: int = 64,
                    structure: Compatibility | None = None) -> MiningResult:
    """The potential-match and hard-negative strata the slow, obvious way: for each query every
    similarity to its split in float64, the excluded ones dropped, a full sort, and a loop down
    the sorted list (with ``structure``: each candidate's class read pair by pair through
    ``predicate_support``, :func:`~models.curation.compatibility.classify_pair`). Sampled strata
    are not produced (they are checked by their definitions)."""
    started = time.perf_counter()
    data = _check_inputs(config, query_ids, query_videos, query_splits, query_emb, traj_ids, traj_videos,
                         traj_splits, traj_emb, known_pairs, structure)
    n_t = data.t_ids.size
    out: list[tuple[int, int, int, float, int]] = []
    if structure is not None:
        return _structured_bruteforce(config, data, block, started)
    for split in range(data.split_names.size):
        members = np.flatnonzero(data.t_split == split)
        qs = np.flatnonzero(data.q_split == split)
        if members.size == 0 or qs.size == 0:
            continue
        t64 = data.tf[members].astype(np.float64)                              # [Ts, D]
        for s in range(0, qs.size, block):
            qb = qs[s:s + block]
            sims = t64 @ data.qf[qb].astype(np.float64).T                       # [Ts, b]
            for col, q in enumerate(qb):
                keep = np.flatnonzero((data.t_video[members] != data.q_video[q])
                                      & ~np.isin(q * n_t + members, data.known))   # [C] candidates
                ranked = keep[np.lexsort((keep, -sims[keep, col]))]             # s desc, position asc
                n_pot = n_hard = 0
                for rank, j in enumerate(ranked):
                    value = float(sims[j, col])
                    in_cut = value >= config.potential_min if config.potential_min is not None \
                        else rank < config.potential_k
                    if in_cut:
                        if n_pot < config.potential_k:
                            out.append((q, members[j], POTENTIAL, value, rank))
                            n_pot += 1
                        continue
                    if n_hard >= config.hard_k or (config.hard_min is not None and value < config.hard_min):
                        break
                    out.append((q, members[j], HARD, value, rank))
                    n_hard += 1
    arr = np.array(out, dtype=np.float64).reshape(-1, 5)
    qp, tp = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
    result = _assemble(data.q_ids[qp], data.t_ids[tp], np.zeros(qp.size, np.int32), arr[:, 2].astype(np.int8),
                       arr[:, 3], arr[:, 4].astype(np.int64), (config,))
    result.log = {"pairs": len(result), "pairs_by_stratum": result.counts(),
                  "seconds": round(time.perf_counter() - started, 3)}
    return result


def _structured_bruteforce(config: MiningConfig, data: _Inputs, block: int, started: float) -> MiningResult:
    """``mine_bruteforce`` with structured strata: potential matches from the compatible candidates,
    hard negatives from those with a possible conflict, each list by similarity."""
    n_t, structure = data.t_ids.size, data.compat
    out: list[tuple[int, int, int, float, int, int]] = []
    for split in range(data.split_names.size):
        members = np.flatnonzero(data.t_split == split)
        qs = np.flatnonzero(data.q_split == split)
        if members.size == 0 or qs.size == 0:
            continue
        t64 = data.tf[members].astype(np.float64)                              # [Ts, D]
        for s in range(0, qs.size, block):
            qb = qs[s:s + block]
            sims = t64 @ data.qf[qb].astype(np.float64).T                       # [Ts, b]
            for col, q in enumerate(qb):
                keep = np.flatnonzero((data.t_video[members] != data.q_video[q])
                                      & ~np.isin(q * n_t + members, data.known))
                ranked = keep[np.lexsort((keep, -sims[keep, col]))]
                classes = [classify_pair(structure.query_predicates[q], structure.trajectory_facts[members[j]])
                           for j in ranked]
                compatible = [j for j, c in zip(ranked, classes) if c == COMPATIBLE]
                possible = [j for j, c in zip(ranked, classes) if c == POSSIBLE_CONFLICT]
                for rank, j in enumerate(compatible):
                    value = float(sims[j, col])
                    if rank >= config.potential_k or (config.potential_min is not None and value < config.potential_min):
                        break
                    out.append((q, members[j], POTENTIAL, value, rank, COMPATIBLE))
                for rank, j in enumerate(possible):
                    value = float(sims[j, col])
                    if rank >= config.hard_k or (config.hard_min is not None and value < config.hard_min):
                        break
                    out.append((q, members[j], HARD, value, rank, POSSIBLE_CONFLICT))
    arr = np.array(out, dtype=np.float64).reshape(-1, 6)
    qp, tp = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
    result = _assemble(data.q_ids[qp], data.t_ids[tp], np.zeros(qp.size, np.int32), arr[:, 2].astype(np.int8),
                       arr[:, 3], arr[:, 4].astype(np.int64), (config,), arr[:, 5].astype(np.int8))
    result.log = {"pairs": len(result), "pairs_by_stratum": result.counts(),
                  "seconds": round(time.perf_counter() - started, 3)}
    return result

"""Cross-video candidate mining into strata (DESIGN 2.9; VTrajEmbed paper, Appendix E.3.2).

Within-video relations come from the full ``Q_V × K_V`` review. Across videos nobody can review
every pair, so the platform *mines* comparisons worth reviewing: for each query, trajectories of
**other videos of the same split**, sorted into strata that guide sampling (never labels):
potential matches and hard negatives (reviewed pair by pair), easy negatives (reviewed in
stratified samples, or pseudo-labelled through ``models.curation.calibration``) and uniformly random pairs
that audit the selection bias of the other three.

API (NumPy arrays and ids in, dataclasses out)
----------------------------------------------
``mine(config, *, query_ids, query_videos, query_splits, query_emb, traj_ids, traj_videos,
traj_splits, traj_emb, known_pairs=None, chunk=1024) -> MiningResult``

- ``query_ids [Q]``, ``traj_ids [T]``: non-negative integer ids (database keys), unique;
- ``query_videos [Q]``, ``traj_videos [T]``: integer video ids (a query's video is the one it
  was written for; its trajectories are never mined for it);
- ``query_splits [Q]``, ``traj_splits [T]``: split labels (``"train"``, ``"dev"``, ...); pairs
  never cross splits;
- ``query_emb``, ``traj_emb``: one array ``[Q, d]`` / ``[T, d]`` of unit rows per embedding space,
  in the order of ``config.encoders`` (a single array when there is one space). For example space
  0 the retriever's text and trajectory towers, space 1 the query text and the trajectory's
  approved description text, both through the same sentence encoder;
- ``known_pairs [K, 2]``: ``(query_id, trajectory_id)`` pairs that already have a relation or
  a pending review; they are skipped (never mined, never counted against a budget);
- ``chunk``: queries per FAISS search batch; bounds memory, never changes the result.

``mine_bruteforce(...)`` takes the same arguments and returns the potential-match and
hard-negative strata computed the slow, obvious way (every similarity of every query, a full
sort, a plain loop); the tests and ``bench_mining`` compare it with ``mine``.

``merge_results(results) -> MiningResult`` joins runs (other encoders, seeds, budgets): a pair
mined more than once is returned once with every provenance.

Similarity and the fusion rule
------------------------------
With embedding spaces ``i = 1..m`` and weights ``w_i`` (positive, summing to 1), the similarity of
query ``q`` and trajectory ``r`` is the convex combination of cosine similarities
``s(q, r) = Σ_i w_i ⟨q_i, r_i⟩``. It is computed as one inner product of the fused unit vectors
``[√w_1 q_1, …, √w_m q_m]`` and ``[√w_1 r_1, …, √w_m r_m]``, so one FAISS ``IndexFlatIP`` per
split serves any number of spaces. Reported similarities are these inner products recomputed in
float64 from the float32 fused vectors (FAISS only proposes candidates; see ``_SearchState``).

Strata (per query ``q``)
------------------------
The candidates ``C(q)`` are the trajectories of ``q``'s split, not of ``q``'s video, not in a
known pair, ordered by ``s`` descending, ties to the lower input position.

- ``potential_match``: the *cut* is the first ``potential_k`` candidates when ``potential_min`` is
  None, else every candidate with ``s >= potential_min``; the first ``potential_k`` of the cut
  are mined (the rest of a larger cut is counted in the log as overflow, not mined).
- ``hard_negative``: after the cut, the next ``hard_k`` candidates with ``s >= hard_min`` (any
  ``s`` when ``hard_min`` is None).
- ``easy_negative``: ``easy_k`` candidates drawn uniformly without replacement from those with
  ``s < easy_max`` (all of them when fewer).
- ``random``: ``random_k`` candidates drawn uniformly without replacement from ``C(q)``.

Structured strata (``structured=True``; ``mine(..., structure=Compatibility)``, Appendix E.3.2).
Each candidate also has a class from the query's required predicates against its approved facts
(:mod:`models.curation.compatibility`): ``definite_conflict`` (a predicate is contradicted, e.g.
the category or an upper colour), ``possible_conflict`` (a predicate's attribute is described with
other values only: multi-coloured, changing, interval-scoped) or ``compatible``. Then

- ``potential_match``: as above over the *compatible* candidates only (a definite conflict is
  never a potential match, nor is a possible one);
- ``hard_negative``: the ``hard_k`` most similar candidates with a *possible* conflict (with
  ``s >= hard_min`` when given); similarity still ranks, the structure decides who may enter;
- ``easy_negative``: ``easy_k`` drawn uniformly from the candidates with a *definite* conflict
  (and ``s < easy_max`` when given);
- ``random``: unchanged (it audits the selection of the other three).

Each provenance row then carries its class (``compatibility``). Ranks in provenance are positions
in the stratum's own list (compatible or possible-conflict candidates by similarity).

The random draws of query ``q`` come from ``numpy.random.default_rng([seed, stratum, query_id])``,
so a query's pairs depend only on the seed, its own id and the data, not on chunking or on the
other queries. Rejection sampling (draw positions uniformly, keep the first distinct accepted
ones) yields a uniformly random subset of the accepted set; a query whose accepted set is too
small to fill its budget after a few rounds finishes on the exact accepted set. The full
``Q × T`` matrix is never built.

A pair in several strata (say potential match and random) is one pair; its ``stratum`` is the
first of ``STRATA_PRIORITY`` it was mined into, and ``provenance`` keeps every (run, stratum).
Strata and final relation labels are stored apart: a mined hard negative may turn out a match.

Rank in provenance: the position among the query's candidates by similarity (0 = most similar)
for potential matches and hard negatives; ``-1`` for the sampled strata.

The search itself (input checks, the FAISS miner, :func:`mine` and the brute-force reference
:func:`mine_bruteforce`) is in :mod:`models.curation.mining_search`; this module holds the
configuration, the results and their merging.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property

import numpy as np

from models.config import PlainConfig
from models.curation.compatibility import COMPATIBILITY
from models.facts import canonical_json
from models.training.snapshot import STRATA

# The mining strata, highest priority first: a pair mined into several keeps the first as its
# stratum. Names are those of models.training.snapshot.STRATA.
STRATA_PRIORITY = ("potential_match", "hard_negative", "easy_negative", "random")
assert set(STRATA_PRIORITY) <= set(STRATA), "mining strata must be snapshot strata"
POTENTIAL, HARD, EASY, RANDOM = range(4)


# -- configuration -------------------------------------------------------------------------------
MAX_BUDGET = 100_000   # per-query budget of any stratum
MAX_SEED = 2**32 - 1   # seeds are 32-bit


@dataclass(frozen=True)
class MiningConfig(PlainConfig):
    """Everything that decides which pairs a mining run returns (``chunk`` does not)."""

    encoders: tuple[str, ...] = ("all-MiniLM-L6-v2",)  # name of each embedding space's encoder, input order
    weights: tuple[float, ...] = (1.0,)     # fusion weight per space: s = Σ w_i cos_i; positive, sum 1
    potential_k: int = 5                    # per-query budget of potential matches
    potential_min: float | None = None      # potential cut: s >= this; None: the top potential_k
    hard_k: int = 10                        # per-query budget of hard negatives (just below the cut)
    hard_min: float | None = None           # hard negatives need s >= this; None: no floor
    easy_k: int = 10                        # per-query budget of easy negatives (uniform, s < easy_max)
    easy_max: float | None = 0.2            # easy negatives need s < this; required when easy_k > 0
    random_k: int = 5                       # per-query budget of uniformly random candidates (bias audit)
    seed: int = 0                           # seeds every random draw (with the stratum and query id)
    structured: bool = False                # strata also read the structured compatibility of P(e) with D_r^H
    run_name: str = ""                      # a label for provenance; "" uses the config hash

    def __post_init__(self):
        object.__setattr__(self, "encoders", tuple(self.encoders))
        object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))
        if not self.encoders or not all(isinstance(e, str) and e for e in self.encoders):
            raise ValueError(f"encoders must be non-empty names, got {self.encoders!r}")
        if len(self.weights) != len(self.encoders):
            raise ValueError(f"{len(self.encoders)} encoders but {len(self.weights)} weights")
        if not all(np.isfinite(w) and w > 0 for w in self.weights) or abs(sum(self.weights) - 1) > 1e-6:
            raise ValueError(f"weights must be positive and sum to 1, got {self.weights}")
        for name, high in (("potential_k", MAX_BUDGET), ("hard_k", MAX_BUDGET), ("easy_k", MAX_BUDGET),
                           ("random_k", MAX_BUDGET), ("seed", MAX_SEED)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= value <= high:
                raise ValueError(f"{name} must be an integer in 0..{high}, got {value!r}")
        for name in ("potential_min", "hard_min", "easy_max"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and -1.0 <= value <= 1.0):
                raise ValueError(f"{name} must be None or in [-1, 1], got {value!r}")
        if not isinstance(self.structured, bool):
            raise ValueError(f"structured must be true or false, got {self.structured!r}")
        if self.easy_k > 0 and self.easy_max is None and not self.structured:
            raise ValueError("easy negatives (easy_k > 0) need easy_max (or structured strata)")
        if self.potential_min is not None and self.hard_min is not None and self.hard_min > self.potential_min:
            raise ValueError(f"hard_min {self.hard_min} is above potential_min {self.potential_min}")
        if self.hard_min is not None and self.easy_max is not None and self.easy_max > self.hard_min:
            raise ValueError(f"easy_max {self.easy_max} is above hard_min {self.hard_min}: "
                             "easy negatives must lie below the hard-negative band")

    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON of the config (``run_name`` included)."""
        return hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()

    @property
    def run(self) -> str:
        return self.run_name or self.config_hash()[:12]

    @property
    def encoder(self) -> str:
        """The similarity's encoders in one string, e.g. ``"vtrajembed*0.5+all-MiniLM-L6-v2*0.5"``."""
        if len(self.encoders) == 1:
            return self.encoders[0]
        return "+".join(f"{e}*{w:g}" for e, w in zip(self.encoders, self.weights))

    def strata_definition(self) -> dict[str, str]:
        """The strata in words with this config's numbers, for logs and release records."""
        sim = f"s = {' + '.join(f'{w:g}·cos[{e}]' for e, w in zip(self.encoders, self.weights))}"
        cut = (f"the top {self.potential_k} candidates" if self.potential_min is None else
               f"the top {self.potential_k} of the candidates with s >= {self.potential_min:g}")
        floor = "" if self.hard_min is None else f" with s >= {self.hard_min:g}"
        below = "" if self.easy_max is None else f" with s < {self.easy_max:g}"
        if self.structured:
            easy = ("none" if self.easy_k == 0 else f"{self.easy_k} drawn uniformly from the candidates whose "
                    f"approved facts definitely conflict with a required predicate{below}")
            cut = (f"the top {self.potential_k} compatible candidates (no predicate conflicts)"
                   + ("" if self.potential_min is None else f" with s >= {self.potential_min:g}"))
            hard = (f"the top {self.hard_k} candidates with a possible (never a definite) conflict of a "
                    f"required predicate{floor}")
        else:
            easy = ("none" if self.easy_k == 0 else f"{self.easy_k} drawn uniformly from the candidates{below}")
            hard = f"the next {self.hard_k} candidates after the potential cut{floor}"
        return {
            "candidates": "same split, other video, not a known pair; " + sim,
            "potential_match": cut,
            "hard_negative": hard,
            "easy_negative": easy,
            "random": f"{self.random_k} drawn uniformly from all candidates",
            "priority": " > ".join(STRATA_PRIORITY),
        }


# -- results -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MinedPair:
    """One mined pair with all its provenance (a row view of ``MiningResult``)."""

    query_id: int
    trajectory_id: int
    stratum: str                                 # first of STRATA_PRIORITY it was mined into
    strata: tuple[str, ...]                      # every stratum it was mined into, priority order
    similarity: float                            # the similarity under the run that gave `stratum`
    provenance: tuple[dict, ...]                 # {run, config_hash, encoder, stratum, similarity, rank[,
                                                 #  compatibility]}


@dataclass
class MiningResult:
    """Mined pairs as columns (``N`` pairs) plus a provenance table (``M >= N`` rows).

    Pairs are sorted by ``(query_id, trajectory_id)``. Provenance row ``j`` says that pair
    ``prov_pair[j]`` was mined into ``prov_stratum[j]`` by run ``configs[prov_run[j]]``; the rows
    are grouped by pair in pair order, the pair's own stratum first.
    """

    query_ids: np.ndarray                        # int64 [N]
    trajectory_ids: np.ndarray                   # int64 [N]
    stratum: np.ndarray                          # int8 [N], index into STRATA_PRIORITY
    similarity: np.ndarray                       # float64 [N]
    prov_pair: np.ndarray                        # int64 [M], index of the pair
    prov_run: np.ndarray                         # int32 [M], index into configs
    prov_stratum: np.ndarray                     # int8 [M]
    prov_similarity: np.ndarray                  # float64 [M]
    prov_rank: np.ndarray                        # int64 [M], similarity rank or -1 for sampled strata
    configs: tuple[MiningConfig, ...]            # the runs, in order of first appearance
    log: dict = field(default_factory=dict)      # counts, timings, config echo (JSON-ready)
    prov_compat: np.ndarray | None = None        # int8 [M], COMPATIBILITY index or -1 (similarity only)

    def __post_init__(self):
        if self.prov_compat is None:
            self.prov_compat = np.full(self.prov_pair.size, -1, np.int8)

    def __len__(self) -> int:
        return int(self.query_ids.size)

    def stratum_names(self) -> list[str]:
        return [STRATA_PRIORITY[c] for c in self.stratum]

    def counts(self) -> dict[str, int]:
        """Pairs per (primary) stratum."""
        n = np.bincount(self.stratum, minlength=len(STRATA_PRIORITY))
        return {name: int(n[i]) for i, name in enumerate(STRATA_PRIORITY)}

    def pair(self, i: int) -> MinedPair:
        if not 0 <= i < len(self):
            raise IndexError(f"pair {i} is outside 0..{len(self) - 1}")
        lo, hi = np.searchsorted(self.prov_pair, [i, i + 1])                   # rows grouped by pair
        prov = tuple(
            self._run_info[self.prov_run[j]] | {"stratum": STRATA_PRIORITY[self.prov_stratum[j]],
                                                "similarity": float(self.prov_similarity[j]),
                                                "rank": int(self.prov_rank[j])}
            | ({"compatibility": COMPATIBILITY[self.prov_compat[j]]} if self.prov_compat[j] >= 0 else {})
            for j in range(lo, hi))
        strata = tuple(STRATA_PRIORITY[c] for c in sorted({int(self.prov_stratum[j]) for j in range(lo, hi)}))
        return MinedPair(int(self.query_ids[i]), int(self.trajectory_ids[i]), STRATA_PRIORITY[self.stratum[i]],
                         strata, float(self.similarity[i]), prov)

    @cached_property
    def _run_info(self) -> list[dict]:
        return [{"run": c.run, "config_hash": c.config_hash(), "encoder": c.encoder} for c in self.configs]

    def pairs(self) -> Iterator[MinedPair]:
        for i in range(len(self)):
            yield self.pair(i)

    def to_records(self) -> list[dict]:
        """JSON-ready dicts, one per pair (what a service stores as a CrossPair row)."""
        return [asdict(p) | {"strata": list(p.strata), "provenance": list(p.provenance)} for p in self.pairs()]


# -- assembly and merging ------------------------------------------------------------------------
def _assemble(q_ids, t_ids, run, stratum, sim, rank, configs: tuple[MiningConfig, ...],
              compat: np.ndarray | None = None) -> MiningResult:
    """Group provenance rows by pair; drop repeated (pair, config hash, stratum) rows.
    ``compat``: the rows' compatibility classes (-1 or None: similarity only)."""
    compat = np.full(q_ids.size, -1, np.int8) if compat is None else np.asarray(compat, np.int8)
    hashes = [c.config_hash() for c in configs]
    first = {h: hashes.index(h) for h in hashes}
    keep_cfg = sorted(set(first.values()))
    remap = np.array([keep_cfg.index(first[h]) for h in hashes], np.int32) if hashes else np.zeros(0, np.int32)
    run = remap[run] if run.size else run.astype(np.int32)
    order = np.lexsort((run, stratum, t_ids, q_ids))                            # pair, then priority, then run
    q_ids, t_ids, run, stratum, sim, rank, compat = (a[order] for a in (q_ids, t_ids, run, stratum, sim, rank,
                                                                        compat))
    if q_ids.size:
        same = (q_ids[1:] == q_ids[:-1]) & (t_ids[1:] == t_ids[:-1]) & (run[1:] == run[:-1]) & \
            (stratum[1:] == stratum[:-1])
        keep = np.concatenate([[True], ~same])
        q_ids, t_ids, run, stratum, sim, rank, compat = (a[keep] for a in (q_ids, t_ids, run, stratum, sim, rank,
                                                                           compat))
    new_pair = np.ones(q_ids.size, bool)
    new_pair[1:] = (q_ids[1:] != q_ids[:-1]) | (t_ids[1:] != t_ids[:-1])
    starts = np.flatnonzero(new_pair)                                           # [N] first row = primary
    return MiningResult(
        query_ids=q_ids[starts].astype(np.int64), trajectory_ids=t_ids[starts].astype(np.int64),
        stratum=stratum[starts].astype(np.int8), similarity=sim[starts].astype(np.float64),
        prov_pair=(np.cumsum(new_pair) - 1).astype(np.int64), prov_run=run.astype(np.int32),
        prov_stratum=stratum.astype(np.int8), prov_similarity=sim.astype(np.float64),
        prov_rank=rank.astype(np.int64), configs=tuple(configs[i] for i in keep_cfg),
        prov_compat=compat.astype(np.int8))


def merge_results(results: Sequence[MiningResult]) -> MiningResult:
    """One result from several runs: each pair once, with the provenance of every run that mined
    it; its stratum is the highest-priority one over all runs. Merging a run twice changes nothing."""
    if not results or not all(isinstance(r, MiningResult) for r in results):
        raise ValueError("merge_results needs a non-empty sequence of MiningResult")
    configs: list[MiningConfig] = []
    cols = []
    for r in results:
        offset = len(configs)
        configs.extend(r.configs)
        cols.append((r.query_ids[r.prov_pair], r.trajectory_ids[r.prov_pair], r.prov_run + offset,
                     r.prov_stratum, r.prov_similarity, r.prov_rank, r.prov_compat))
    q, t, run, st, sim, rank, compat = (np.concatenate(c) for c in zip(*cols))
    merged = _assemble(q, t, run.astype(np.int32), st, sim, rank, tuple(configs), compat)
    merged.log = {"merged_runs": [c.run for c in merged.configs], "pairs": len(merged),
                  "provenance_rows": int(merged.prov_pair.size),
                  "duplicates_merged": int(merged.prov_pair.size) - len(merged),
                  "pairs_by_stratum": merged.counts(), "runs": [r.log for r in results]}
    return merged

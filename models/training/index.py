"""A FAISS index of unit trajectory embeddings for first-stage retrieval (no Django).

Trajectory embeddings (``v`` of VTrajEmbed, the predicted ``ŷ`` of SCOUT, ActPair image
embeddings) are unit vectors, so the inner product is the cosine similarity the models score with.
Every vector carries a trajectory id and the id of its video (both int64), so a query can rank
trajectories or whole videos.

Kinds (``IndexConfig.kind``):

- ``"exact"``: ``IndexFlatIP`` behind an ``IndexIDMap2``; brute force, the reference.
- ``"ivf"``: IVF-Flat with inner product. ``nlist`` coarse cells (default ``round(√n)`` of the
  build set, at least 1 and at most n), trained by k-means on at most ``64 · nlist`` vectors drawn
  with ``seed`` (at least ``min(n, 39 · nlist)``, FAISS's minimum for stable centroids); a query
  visits ``nprobe`` cells (default 32). Vectors are stored uncompressed, so scores are exact and
  only the candidate set is approximate.
- ``"hnsw"``: ``IndexHNSWFlat`` with inner product, ``hnsw_m`` links per node (32),
  ``ef_construction`` 80 and ``ef_search`` 96; no training, slower to build than IVF.

Video-level search scores a video by ``max_{r ∈ video} s(q, r)``: the index returns trajectories
best first, so the first hit of each video carries its maximum; the search widens (doubling the
trajectory depth) until ``k`` distinct videos are found or the index is exhausted. With the exact
kind the result is exact; with an approximate kind the maximum is over the trajectories it found.

``save`` writes one ``.npz`` file (the serialised FAISS index, the ids, the video ids and the
config as JSON) to a temporary file in the target folder and renames it into place, so a reader
never sees half a file. Bad input (wrong width, NaN or infinite values, rows that are not unit
length, duplicate ids, ids of the wrong shape) raises ``ValueError`` before the index changes.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import faiss
import numpy as np

KINDS = ("exact", "ivf", "hnsw")
FORMAT = "trajlab-faiss-index/1"


@dataclass
class IndexConfig:
    dim: int = 256                   # embedding width
    kind: str = "exact"              # "exact" (IndexFlatIP), "ivf" (IVF-Flat) or "hnsw" (HNSW-Flat)
    nlist: int = 0                   # IVF coarse cells; 0 picks round(√n) of the build set
    nprobe: int = 32                 # IVF cells visited per query
    train_per_cell: int = 64         # IVF k-means sample: at most this many vectors per cell
    hnsw_m: int = 32                 # HNSW links per node
    ef_construction: int = 80        # HNSW candidate list while inserting
    ef_search: int = 96              # HNSW candidate list while searching
    unit_tolerance: float = 1e-2     # largest accepted | ‖x‖ − 1 | for stored and query vectors
    seed: int = 0                    # seed of the IVF training sample and k-means

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("dim", "nprobe", "train_per_cell", "hnsw_m", "ef_construction", "ef_search"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.nlist, int) or self.nlist < 0:
            raise ValueError(f"nlist must be a non-negative integer, got {self.nlist!r}")
        if not (self.unit_tolerance > 0 and math.isfinite(self.unit_tolerance)):
            raise ValueError(f"unit_tolerance must be positive, got {self.unit_tolerance!r}")


def _vectors(x, dim: int, tolerance: float, name: str) -> np.ndarray:
    if hasattr(x, "detach"):                  # a torch tensor, without importing torch here
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2:
        raise ValueError(f"{name} must be [n, {dim}], got shape {list(a.shape)}")
    if a.shape[1] != dim:
        raise ValueError(f"{name} have width {a.shape[1]}, the index holds width {dim}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"{name} must be floating-point, got {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.float32)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contain NaN or infinite values")
    norms = np.linalg.norm(a, axis=1)
    off = np.abs(norms - 1.0) > tolerance
    if off.any():
        rows = np.flatnonzero(off)[:5].tolist()
        raise ValueError(f"{name} rows {rows} are not unit vectors (norms {norms[rows].round(4).tolist()}); "
                         "L2-normalise them first")
    return a


def _ids(x, n: int, name: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D array of {n} integers, got shape {list(a.shape)}")
    if n and not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must be integers, got {a.dtype}")
    return a.astype(np.int64)


class TrajectoryIndex:
    """Trajectory embeddings with their trajectory and video ids; see the module docstring."""

    def __init__(self, config: IndexConfig | None = None):
        self.config = config or IndexConfig()
        self._index = None                       # the FAISS index, made by build() or load()
        self._ids = np.zeros(0, np.int64)        # [n] trajectory ids in insertion order
        self._videos = np.zeros(0, np.int64)     # [n] video id of each trajectory
        self._lookup = None                      # (sorted ids, their videos), rebuilt after add()

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def build(cls, embeddings, ids, video_ids, config: IndexConfig | None = None) -> TrajectoryIndex:
        """A new index holding ``embeddings`` ``[n, dim]`` (IVF cells are trained on them)."""
        index = cls(config)
        index._create(_vectors(embeddings, index.config.dim, index.config.unit_tolerance, "embeddings"))
        index.add(embeddings, ids, video_ids)
        return index

    def _create(self, train: np.ndarray) -> None:
        c = self.config
        if c.kind == "exact":
            self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(c.dim))
        elif c.kind == "hnsw":
            hnsw = faiss.IndexHNSWFlat(c.dim, c.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = c.ef_construction
            self._index = faiss.IndexIDMap2(hnsw)
        else:
            if train.shape[0] == 0:
                raise ValueError("an IVF index is trained on its build set, which is empty")
            n = train.shape[0]
            nlist = c.nlist or round(math.sqrt(n))
            nlist = max(1, min(nlist, n))
            sample = min(n, max(39 * nlist, c.train_per_cell * nlist))
            if sample < n:
                rng = np.random.default_rng(c.seed)
                train = train[np.sort(rng.choice(n, sample, replace=False))]
            quantizer = faiss.IndexFlatIP(c.dim)
            ivf = faiss.IndexIVFFlat(quantizer, c.dim, nlist, faiss.METRIC_INNER_PRODUCT)
            ivf.cp.seed = c.seed
            ivf.train(train)                     # (the wrapper keeps a reference to the quantizer)
            self._index = ivf
        self._apply_search_parameters()

    def _apply_search_parameters(self) -> None:
        c = self.config
        if c.kind == "ivf":
            faiss.extract_index_ivf(self._index).nprobe = c.nprobe
        elif c.kind == "hnsw":
            faiss.downcast_index(self._index.index).hnsw.efSearch = c.ef_search

    def set_search_parameters(self, *, nprobe: int | None = None, ef_search: int | None = None) -> None:
        """Change how wide an approximate search looks (IVF ``nprobe``, HNSW ``ef_search``) without
        rebuilding; the values are kept in ``config`` and saved with the index."""
        for value, name in ((nprobe, "nprobe"), (ef_search, "ef_search")):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if nprobe is not None:
            self.config.nprobe = nprobe
        if ef_search is not None:
            self.config.ef_search = ef_search
        if self._index is not None:
            self._apply_search_parameters()

    def add(self, embeddings, ids, video_ids) -> None:
        """Add trajectories: ``embeddings`` ``[n, dim]`` unit rows, ``ids`` and ``video_ids``
        ``[n]`` integers; ids must be new."""
        if self._index is None:
            raise ValueError("the index is empty: use TrajectoryIndex.build(...) or load(...) first")
        x = _vectors(embeddings, self.config.dim, self.config.unit_tolerance, "embeddings")
        ids = _ids(ids, x.shape[0], "ids")
        videos = _ids(video_ids, x.shape[0], "video_ids")
        if np.unique(ids).size != ids.size:
            raise ValueError("ids hold duplicates")
        if ids.size and np.isin(ids, self._ids).any():
            raise ValueError(f"ids {ids[np.isin(ids, self._ids)][:5].tolist()} are already in the index")
        if (ids == -1).any():
            raise ValueError("-1 is reserved for 'no result' and cannot be an id")
        if ids.size:
            self._index.add_with_ids(x, ids)
            self._ids = np.concatenate([self._ids, ids])
            self._videos = np.concatenate([self._videos, videos])
            self._lookup = None

    def __len__(self) -> int:
        return int(self._ids.size)

    # -- searching --------------------------------------------------------------------------------
    def search(self, queries, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` trajectories per query: (scores ``[Q, k]`` float32, ids ``[Q, k]`` int64), best
        first; where fewer than ``k`` are found the rest is ``-inf`` / ``-1``."""
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        q = _vectors(queries, self.config.dim, self.config.unit_tolerance, "queries")
        if self._index is None or len(self) == 0:
            return np.full((q.shape[0], k), -np.inf, np.float32), np.full((q.shape[0], k), -1, np.int64)
        scores, ids = self._index.search(q, k)                                      # [Q, k]
        scores = np.where(ids < 0, -np.inf, scores).astype(np.float32)
        return scores, ids.astype(np.int64)

    def video_of(self, ids) -> np.ndarray:
        """Video id of each trajectory id (any shape); -1 for -1 and for unknown ids."""
        if self._lookup is None:
            order = np.argsort(self._ids, kind="stable")
            self._lookup = (self._ids[order], self._videos[order])
        sorted_ids, sorted_videos = self._lookup
        a = np.asarray(ids, dtype=np.int64)
        if sorted_ids.size == 0:
            return np.full(a.shape, -1, np.int64)
        pos = np.minimum(np.searchsorted(sorted_ids, a), sorted_ids.size - 1)
        return np.where(sorted_ids[pos] == a, sorted_videos[pos], -1)

    def search_videos(self, queries, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` videos per query scored by their best trajectory: (scores ``[Q, k]``, video ids
        ``[Q, k]``), best first, ``-inf`` / ``-1`` past the last video."""
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        q = _vectors(queries, self.config.dim, self.config.unit_tolerance, "queries")
        n_q = q.shape[0]
        out_scores = np.full((n_q, k), -np.inf, np.float32)
        out_videos = np.full((n_q, k), -1, np.int64)
        pending = np.arange(n_q)
        depth = min(len(self), max(4 * k, 64))
        while pending.size and len(self):
            scores, ids = self.search(q[pending], depth)                           # [q, depth]
            videos = self.video_of(ids)                                              # [q, depth]
            first, n_found = _first_hits(videos)                                     # [q, depth], [q]
            done = (n_found >= k) | (depth >= len(self))
            for row in np.flatnonzero(done):
                cols = np.flatnonzero(first[row])[:k]
                out_scores[pending[row], : cols.size] = scores[row, cols]
                out_videos[pending[row], : cols.size] = videos[row, cols]
            pending = pending[~done]
            depth = min(len(self), depth * 2)
        return out_scores, out_videos

    # -- files ------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the index to ``path`` (a ``.npz`` file) atomically; returns the path."""
        if self._index is None:
            raise ValueError("nothing to save: the index was never built")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, format=np.array(FORMAT), config=np.array(json.dumps(asdict(self.config))),
                         index=faiss.serialize_index(self._index), ids=self._ids, videos=self._videos)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> TrajectoryIndex:
        """Read an index written by ``save``."""
        with np.load(Path(path), allow_pickle=False) as data:
            if "format" not in data or str(data["format"]) != FORMAT:
                raise ValueError(f"{path} is not a {FORMAT} file")
            index = cls(IndexConfig(**json.loads(str(data["config"]))))
            index._index = faiss.deserialize_index(data["index"])
            index._ids = data["ids"].astype(np.int64)
            index._videos = data["videos"].astype(np.int64)
        if index._index.ntotal != index._ids.size or index._index.d != index.config.dim:
            raise ValueError(f"{path} is inconsistent: {index._index.ntotal} vectors of width "
                             f"{index._index.d} for {index._ids.size} ids of width {index.config.dim}")
        index._apply_search_parameters()
        return index


def _first_hits(videos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``videos`` ``[Q, K]`` (−1 = no hit): a mask of the first occurrence of each video
    and the number of distinct videos."""
    order = np.argsort(videos, axis=1, kind="stable")                                # [Q, K]
    sorted_v = np.take_along_axis(videos, order, axis=1)
    new = np.ones_like(sorted_v, dtype=bool)
    new[:, 1:] = sorted_v[:, 1:] != sorted_v[:, :-1]
    new &= sorted_v >= 0
    first = np.zeros_like(new)
    np.put_along_axis(first, order, new, axis=1)
    return first, first.sum(axis=1)

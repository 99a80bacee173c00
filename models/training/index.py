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

``save(path)`` writes the FAISS index to ``<path stem>.faiss`` (``faiss.write_index``), then a
``.npz`` file with the ids, the video ids and the config as JSON, each to a temporary file in the
target folder renamed into place, so a reader never sees half a file. ``load`` maps the FAISS
file (``IO_FLAG_MMAP_IFC``: the stored vectors and inverted lists stay in the page cache, shared
by every process that loads them) unless asked for a private copy; a mapped index is read-only.
Files of the first format (the serialised index inside the ``.npz``) still load. Bad input (wrong
width, NaN or infinite values, rows that are not unit length, duplicate ids, ids of the wrong
shape) raises ``ValueError`` before the index changes.

**Served galleries** (:func:`served_config`, :class:`GalleryRanker`). A served search ranks one
gallery for one query. Below :data:`EXACT_MAX` trajectories it scores every one (a float32
matrix-vector product, :func:`cosines`) and takes the best with
``models.retrievers.rerank.top_positions``: the exact ranking, ties to the lower position. From
:data:`EXACT_MAX` up the gallery keeps an IVF-Flat index (``round(√n)`` cells) visiting
:data:`SERVED_NPROBE` cells per query, stored with each index's config. On a million clustered
trajectories ``tests/benchmarks/bench_search.py`` measured recall@10 0.998 at ``nprobe`` 6, the
smallest that reaches 0.99, and 0.9998 at 8, in 0.4 ms a query: 8 keeps a margin for queries
less like the gallery than the benchmark's (recall falls where many trajectories lie about as
close to the query, and on galleries without cluster structure; the benchmark's sweep shows the
trade). HNSW, the other candidate, took 10 minutes to build over the same million on two threads
and reached recall@10 0.93 at ``ef_search`` 512 (1.9 ms). The IVF candidates carry exact inner
products and are ordered by score, then position (FAISS keeps an arbitrary few of the items tied
at its last place, so it is asked for one more than needed, and for more while the tie runs past
what it returned). A ranking deeper than :data:`APPROX_MAX_DEPTH`, a query that is not a unit
vector, or one whose visited cells hold fewer than the asked depth is answered by the exact path.
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

from models.retrievers.rerank import top_positions

KINDS = ("exact", "ivf", "hnsw")
FORMAT = "trajlab-faiss-index/2"                 # the .npz names a .faiss file beside it
FORMAT_INLINE = "trajlab-faiss-index/1"          # the serialised index inside the .npz (still read)
EXACT_MAX = 50_000                               # served galleries smaller than this are ranked exactly
SERVED_NPROBE = 8                                # IVF cells a served query visits (bench_search.py)
APPROX_MAX_DEPTH = 4096                          # deeper served rankings are exact


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
        self._mapped = False                     # the FAISS index is a read-only map of its file

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
        if self._mapped:
            raise ValueError("this index maps its file read-only; load it with mmap=False to add to it")
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

    @property
    def ids(self) -> np.ndarray:
        """``[n]`` trajectory ids in insertion order (read-only)."""
        view = self._ids.view()
        view.flags.writeable = False
        return view

    @property
    def videos(self) -> np.ndarray:
        """``[n]`` the video id of each trajectory, aligned with :attr:`ids` (read-only)."""
        view = self._videos.view()
        view.flags.writeable = False
        return view

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
        """Write the index to ``path`` (a ``.npz`` file) and its FAISS index to
        :func:`faiss_path` of it, each atomically, the FAISS file first; returns ``path``."""
        if self._index is None:
            raise ValueError("nothing to save: the index was never built")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(faiss_path(path), lambda tmp: faiss.write_index(self._index, tmp))
        fields = {"format": np.array(FORMAT), "config": np.array(json.dumps(asdict(self.config))),
                  "ids": self._ids, "videos": self._videos}
        _write_atomic(path, lambda tmp: _savez(tmp, fields))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, *, mmap: bool = True) -> TrajectoryIndex:
        """Read an index written by ``save``: its FAISS file mapped read-only (``mmap``) or copied
        into memory."""
        path = Path(path)
        with np.load(path, allow_pickle=False) as data:
            stored = str(data["format"]) if "format" in data else None
            if stored not in (FORMAT, FORMAT_INLINE):
                raise ValueError(f"{path} is not a {FORMAT} file")
            index = cls(IndexConfig(**json.loads(str(data["config"]))))
            if stored == FORMAT_INLINE:
                index._index = faiss.deserialize_index(data["index"])
            index._ids = data["ids"].astype(np.int64)
            index._videos = data["videos"].astype(np.int64)
        if stored == FORMAT:
            if not faiss_path(path).is_file():
                raise ValueError(f"{path} names the FAISS file {faiss_path(path)}, which is missing")
            index._index = faiss.read_index(str(faiss_path(path)), faiss.IO_FLAG_MMAP_IFC if mmap else 0)
            index._mapped = mmap
        if index._index.ntotal != index._ids.size or index._index.d != index.config.dim:
            raise ValueError(f"{path} is inconsistent: {index._index.ntotal} vectors of width "
                             f"{index._index.d} for {index._ids.size} ids of width {index.config.dim}")
        index._apply_search_parameters()
        return index


def faiss_path(path: str | os.PathLike) -> Path:
    """The FAISS file of the index saved at ``path``: the same name with the suffix ``.faiss``."""
    return Path(path).with_suffix(".faiss")


def _savez(name: str, fields: dict) -> None:
    with open(name, "wb") as fh:                 # a file object: np.savez would append ".npz" to a name
        np.savez(fh, **fields)


def _write_atomic(path: Path, write) -> None:
    """``write(temporary file name)``, flushed to disk, then renamed to ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- served galleries -----------------------------------------------------------------------------
def served_config(*, n: int, dim: int) -> IndexConfig:
    """The index a served search keeps over a gallery of ``n`` trajectories of width ``dim``:
    exact below :data:`EXACT_MAX`, else IVF-Flat visiting :data:`SERVED_NPROBE` cells."""
    if n < EXACT_MAX:
        return IndexConfig(dim=dim, kind="exact")
    return IndexConfig(dim=dim, kind="ivf", nprobe=SERVED_NPROBE)


def cosines(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Scores ``[T]`` float64 of one unit ``query`` ``[d]`` against unit ``vectors`` ``[T, d]``:
    the float32 product, as the exact ranking of search and evaluation computes it."""
    return (np.asarray(vectors, np.float32) @ np.asarray(query, np.float32)).astype(np.float64)


class GalleryRanker:
    """The first stage of a served search over one gallery (the module docstring): its unit
    vectors ``[T, d]`` in position order (memory-mapped is fine) and the :class:`TrajectoryIndex`
    over them, whose ids, ascending, name the positions."""

    def __init__(self, vectors: np.ndarray, index: TrajectoryIndex):
        ids = index.ids
        if vectors.ndim != 2 or vectors.shape != (len(index), index.config.dim):
            raise ValueError(f"the gallery holds vectors of shape {list(vectors.shape)}, its index "
                             f"{len(index)} of width {index.config.dim}")
        if ids.size and not np.all(np.diff(ids) > 0):
            raise ValueError("a served index holds its trajectories in ascending id order")
        self.vectors = vectors
        self.index = index
        self.ids = ids                           # [T] trajectory id of each position
        self.videos = index.videos               # [T] video of each position

    @property
    def approximate(self) -> bool:
        return self.index.config.kind != "exact"

    def __len__(self) -> int:
        return len(self.index)

    def top(self, query: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """The ``depth`` best positions for the unit ``query`` ``[d]`` (all of them when fewer),
        best first, ties to the lower position: (positions ``[m]`` int64, scores ``[m]`` float64,
        whether the index answered rather than the exact path)."""
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive integer, got {depth!r}")
        query = np.asarray(query, np.float32)
        if query.shape != (self.index.config.dim,):
            raise ValueError(f"the query must be [{self.index.config.dim}], got {list(query.shape)}")
        want = min(depth, len(self))
        unit = abs(float(np.linalg.norm(query)) - 1.0) <= self.index.config.unit_tolerance
        ask = want + 1
        while self.approximate and unit and 0 < want <= APPROX_MAX_DEPTH and ask <= 2 * APPROX_MAX_DEPTH:
            scores, found = self.index.search(query[None, :], min(ask, len(self)))      # [1, ask] each
            hit = found[0] >= 0
            values, found = scores[0][hit].astype(np.float64), found[0][hit]             # [m] best first
            if values.size < want:                                                       # the cells hold too few
                break
            if values.size < ask or values[-1] < values[want - 1]:   # every item tied with the last kept is here
                positions = np.searchsorted(self.ids, found)                             # [m]
                order = np.lexsort((positions, -values))[:want]
                return positions[order], values[order], True
            ask *= 2                                                  # a tie runs past what was asked: ask more
        scores = cosines(self.vectors, query)                                            # [T]
        positions = top_positions(scores, want) if want else np.zeros(0, np.int64)
        return positions, scores[positions], False


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

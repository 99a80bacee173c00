"""A disk cache of frozen features, keyed by content.

A key is the SHA-256 of a canonical JSON description of everything the features depend on: the
encoder's ``name`` (weights digest and settings included), the video's content hash, the exact
observations, the sampling settings. Equal inputs give equal keys wherever the files live, and any
change (a new pool version, other weights) gives a new key, so entries never go stale and are
never overwritten with different numbers.

Entries are ``.npz`` files of named arrays under ``<root>/<key[:2]>/<key>.npz``, written to a
temporary name and renamed into place, so a reader never sees half a file and two processes
computing the same entry both end with a complete one.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np


def cache_key(parts: dict) -> str:
    """SHA-256 of ``parts`` as canonical JSON (sorted keys, no spaces)."""
    try:
        text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    except TypeError as exc:
        raise ValueError(f"cache key parts must be plain JSON data: {exc}") from None
    return hashlib.sha256(text.encode()).hexdigest()


def array_digest(*arrays: np.ndarray) -> str:
    """SHA-256 of arrays' dtypes, shapes and bytes (for observations inside a key)."""
    digest = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        digest.update(f"{a.dtype.str}{list(a.shape)}".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


class FeatureCache:
    """Named arrays on disk by content key; ``root=None`` keeps nothing (always computes)."""

    def __init__(self, root: str | os.PathLike | None):
        self.root = Path(root) if root else None
        self.stats = {"hits": 0, "misses": 0}

    def path(self, key: str) -> Path:
        if self.root is None:
            raise ValueError("this cache has no folder")
        return self.root / key[:2] / f"{key}.npz"

    def get(self, key: str) -> dict[str, np.ndarray] | None:
        if self.root is None:
            return None
        path = self.path(key)
        try:
            with np.load(path, allow_pickle=False) as z:
                return {name: z[name] for name in z.files}
        except FileNotFoundError:
            return None
        except (OSError, ValueError):                 # a damaged entry is recomputed, not trusted
            return None

    def put(self, key: str, arrays: dict[str, np.ndarray]) -> None:
        if self.root is None:
            return
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **arrays)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_or_compute(self, parts: dict, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The cached arrays for ``parts``, computing and storing them on a miss."""
        key = cache_key(parts)
        found = self.get(key)
        if found is not None:
            self.stats["hits"] += 1
            return found
        self.stats["misses"] += 1
        arrays = compute()
        self.put(key, arrays)
        return arrays

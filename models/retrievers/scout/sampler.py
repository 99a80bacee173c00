"""Class-balanced batches for SCOUT's in-batch InfoNCE (the batch size is the main knob, and
balancing normal/anomalous classes adds 1.6 points in the paper).
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import torch


# -- class-balanced batches -----------------------------------------------------------------------
class ClassBalancedBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Batches of dataset indices with an equal share of every class (e.g. normal / anomalous).

    With ``C`` classes each batch holds ``batch_size // C`` items of every class; the remaining
    ``batch_size % C`` seats go to ``C`` classes in turn (a rotating start, so over ``C``
    consecutive batches every class gets the same number of seats). Within a class, items are
    drawn from a seeded permutation without replacement; when it runs out a new permutation
    starts, so a small class is revisited more often than a large one (that is the balancing).
    A batch never holds the same item twice (a duplicate would be a false in-batch negative), so
    every class needs at least as many items as its largest per-batch share.

    ``n_batches`` batches per epoch (default: ``ceil(len(labels) / batch_size)``); the order
    depends only on ``seed`` and the epoch set with :meth:`set_epoch`.
    """

    def __init__(self, labels: Sequence[int] | np.ndarray | torch.Tensor, batch_size: int,
                 n_batches: int | None = None, seed: int = 0):
        labels = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels)
        if labels.ndim != 1 or len(labels) == 0:
            raise ValueError("labels must be a non-empty 1-D sequence of class labels")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.classes, inverse = np.unique(labels, return_inverse=True)
        n_classes = len(self.classes)
        if batch_size < n_classes:
            raise ValueError(f"batch_size {batch_size} is smaller than the number of classes {n_classes}")
        self.members = [np.flatnonzero(inverse == c) for c in range(n_classes)]
        largest_share = batch_size // n_classes + (batch_size % n_classes > 0)
        small = [(str(self.classes[c]), len(m)) for c, m in enumerate(self.members) if len(m) < largest_share]
        if small:
            raise ValueError(f"classes with fewer items than their per-batch share {largest_share}: {small}")
        self.batch_size = batch_size
        self.n_batches = n_batches if n_batches is not None else math.ceil(len(labels) / batch_size)
        if not isinstance(self.n_batches, int) or self.n_batches < 1:
            raise ValueError(f"n_batches must be a positive integer, got {n_batches!r}")
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.n_batches

    def shares(self, batch: int) -> np.ndarray:
        """Seats per class ``[C]`` in batch number ``batch`` of an epoch."""
        n_classes = len(self.classes)
        base, extra = divmod(self.batch_size, n_classes)
        seats = np.full(n_classes, base)
        start = (batch * extra) % n_classes
        seats[(start + np.arange(extra)) % n_classes] += 1
        return seats

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        queues = [list(rng.permutation(m)) for m in self.members]
        for i in range(self.n_batches):
            batch: list[int] = []
            for c, share in enumerate(self.shares(i)):
                queue = queues[c]
                if len(queue) < share:
                    # the leftovers of this pass go first; the next pass puts them last so the
                    # batch cannot take one of them twice
                    fresh = rng.permutation(self.members[c])
                    left = set(queue)
                    queue.extend([j for j in fresh if j not in left] + [j for j in fresh if j in left])
                batch.extend(int(j) for j in queue[:share])
                del queue[:share]
            order = rng.permutation(len(batch))
            yield [batch[j] for j in order]

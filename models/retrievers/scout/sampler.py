"""Class-balanced batches for SCOUT's in-batch InfoNCE (the batch size is the main knob, and
balancing normal/anomalous classes adds 1.6 points in the paper), and ScoutITM's training batches
that keep every kind of pair (positives, mined and identity-hard negatives) in each batch.
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


# -- ScoutITM's training batches ------------------------------------------------------------------
class KindMixedPairBatches:
    """Batches of ScoutITM training-pair indices in which every kind of pair keeps its share.

    ``kinds [P]`` tags each pair (e.g. 0 positive, 1 mined negative, 2 identity-hard negative).
    Each batch gives every kind ``batch_size · n_kind / P`` seats, rounded by largest remainder,
    and at least one seat to every kind present (taken from the kind with the most seats), so a
    small kind is never missing from a batch by chance. Within a kind, pairs are drawn uniformly
    with replacement; the batch is then shuffled. In expectation this is the uniform draw over
    all pairs; the order depends only on ``seed``."""

    def __init__(self, kinds: Sequence[int] | np.ndarray | torch.Tensor, batch_size: int, seed: int = 0):
        kinds = np.asarray(kinds.cpu() if isinstance(kinds, torch.Tensor) else kinds)
        if kinds.ndim != 1 or len(kinds) == 0:
            raise ValueError("kinds must be a non-empty 1-D sequence of pair kinds")
        self.kinds, inverse = np.unique(kinds, return_inverse=True)
        if not isinstance(batch_size, int) or batch_size < len(self.kinds):
            raise ValueError(f"batch_size must be an integer >= the {len(self.kinds)} kinds of pairs, got {batch_size!r}")
        self.members = [np.flatnonzero(inverse == k) for k in range(len(self.kinds))]
        self.seats = self._seats(np.array([len(m) for m in self.members]), batch_size)   # [K]
        self.batch_size = batch_size
        self.gen = torch.Generator().manual_seed(int(seed))

    @staticmethod
    def _seats(counts: np.ndarray, batch_size: int) -> np.ndarray:
        share = batch_size * counts / counts.sum()                                        # [K]
        seats = np.floor(share).astype(np.int64)
        by_remainder = np.argsort(-(share - seats), kind="stable")
        seats[by_remainder[: batch_size - seats.sum()]] += 1
        for k in np.flatnonzero(seats == 0):
            seats[np.argmax(seats)] -= 1
            seats[k] = 1
        return seats

    def batch(self) -> torch.Tensor:
        """The next batch of pair indices ``[batch_size]``."""
        picks = [torch.as_tensor(m)[torch.randint(len(m), (int(s),), generator=self.gen)]
                 for m, s in zip(self.members, self.seats)]
        out = torch.cat(picks)                                                            # [b]
        return out[torch.randperm(len(out), generator=self.gen)]

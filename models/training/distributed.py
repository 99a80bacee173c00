"""Gathering embeddings across training processes with exact gradients (no Django).

Contrastive losses get more negatives when every process sees the embeddings of every other
process. ``gather_with_grad`` concatenates the local ``[n_r, ...]`` tensors of all ranks in rank
order (``[Σ n_r, ...]``); batches may have different lengths on different ranks (the last batch of
an epoch). Rank and world size are passed in explicitly, as in open_clip's ``loss.py``, and one
process (``world_size == 1``) is a no-op that returns the input itself.

Gradient convention (the one ``torch.distributed.nn.all_gather`` and open_clip use): every rank
computes the *same* loss ``L`` over the gathered batch, and the backward pass sums, over ranks, the
gradients that arrive for this rank's slice. The local input therefore receives
``world_size · ∂L/∂x_r``; DistributedDataParallel then averages parameter gradients over ranks, so
each parameter ends with exactly ``∂L/∂θ`` of the single-process full-batch loss. Without DDP,
average the parameter gradients yourself (all-reduce sum, divide by ``world_size``).
"""
from __future__ import annotations

import torch
import torch.distributed as dist


def _check_rank(rank: int, world_size: int) -> None:
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an integer in 0..{world_size - 1}, got {rank!r}")


class _GatherWithGrad(torch.autograd.Function):
    """All-gather along dim 0 (variable lengths) whose backward sums the gradients of the local
    slice over ranks."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
        n_local = torch.tensor([x.shape[0]], device=x.device, dtype=torch.long)
        sizes = [torch.zeros_like(n_local) for _ in range(world_size)]
        dist.all_gather(sizes, n_local)
        counts = [int(s.item()) for s in sizes]                                   # [W]
        longest = max(counts)
        padded = x.new_zeros((longest, *x.shape[1:]))                             # [n_max, ...]
        padded[: x.shape[0]] = x
        parts = [torch.empty_like(padded) for _ in range(world_size)]
        dist.all_gather(parts, padded.contiguous())
        ctx.counts, ctx.rank = counts, rank
        return torch.cat([part[:n] for part, n in zip(parts, counts)], dim=0)   # [Σ n_r, ...]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous()                                                  # [Σ n_r, ...]
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        start = sum(ctx.counts[: ctx.rank])
        return grad[start: start + ctx.counts[ctx.rank]], None, None             # [n_r, ...]


def gather_with_grad(x: torch.Tensor, rank: int = 0, world_size: int = 1) -> torch.Tensor:
    """Concatenate ``x`` (``[n_r, ...]``) from all ranks in rank order, keeping the autograd graph.

    ``world_size == 1`` returns ``x`` unchanged (no process group needed). Otherwise the default
    process group must be initialised with ``world_size`` members, this process being ``rank``;
    the trailing dimensions and dtype must agree across ranks. See the module docstring for how
    gradients are combined.
    """
    _check_rank(rank, world_size)
    if not isinstance(x, torch.Tensor) or x.ndim < 1:
        raise ValueError("x must be a tensor with at least one dimension")
    if world_size == 1:
        return x
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(f"world_size={world_size} but no torch.distributed process group is initialised")
    if dist.get_world_size() != world_size or dist.get_rank() != rank:
        raise ValueError(f"rank/world_size {rank}/{world_size} do not match the process group "
                         f"({dist.get_rank()}/{dist.get_world_size()})")
    return _GatherWithGrad.apply(x, rank, world_size)


def close_process_group(*, finished: bool) -> None:
    """Leave the default process group, if one is initialised. After a run that ``finished`` on
    every rank, the ranks meet at a barrier first: a rank that tears gloo down while another still
    talks to it aborts that process (``terminate called without an active exception``). After an
    error there is no barrier, which another rank that failed elsewhere would never reach."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    if finished and dist.get_world_size() > 1:
        dist.barrier()
    dist.destroy_process_group()

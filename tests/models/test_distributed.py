"""``gather_with_grad`` and the losses across ranks: a no-op for one process, and a real two-process
gloo run on the CPU whose parameter gradients (averaged over ranks, as DistributedDataParallel
does) equal the single-process gradient of the full-batch loss."""
from __future__ import annotations

import socket

import pytest
import torch
import torch.multiprocessing as mp

from models.training.distributed import gather_with_grad
from models.training.losses import info_nce, mask_guided_loss, siglip_loss

WORLD = 2
ROWS = (3, 2)        # rank 0 holds 3 pairs, rank 1 holds 2: unequal batches on purpose
D_IN, D_OUT = 6, 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def problem() -> dict:
    """Inputs of the whole batch, two linear encoders and the labels of the gathered batch."""
    gen = torch.Generator().manual_seed(5)
    n = sum(ROWS)
    group = torch.full((n, n), -1)
    relation = torch.full((n, n), -1)
    for i in range(n):
        group[i, i] = relation[i, i] = 1
        group[i, (i + 1) % n] = relation[i, (i + 1) % n] = 0
    relation[0, 3] = relation[4, 1] = 0
    relation[2, 0] = 1
    return {
        "a": torch.randn(n, D_IN, generator=gen, dtype=torch.float64),
        "b": torch.randn(n, D_IN, generator=gen, dtype=torch.float64),
        "wa": torch.randn(D_OUT, D_IN, generator=gen, dtype=torch.float64),
        "wb": torch.randn(D_OUT, D_IN, generator=gen, dtype=torch.float64),
        "group": group, "relation": relation,
    }


def losses(fa: torch.Tensor, fb: torch.Tensor, data: dict, rank: int, world_size: int) -> dict:
    fa = torch.nn.functional.normalize(fa, dim=1)
    fb = torch.nn.functional.normalize(fb, dim=1)
    return {
        "mask_guided": mask_guided_loss(fa, fb, data["group"], data["relation"],
                                        torch.tensor(7.0, dtype=torch.float64),
                                        rank=rank, world_size=world_size)["loss"],
        "info_nce": info_nce(fa, fb, 0.2, rank=rank, world_size=world_size),
        "siglip": siglip_loss(fa, fb, torch.tensor(10.0, dtype=torch.float64),
                              torch.tensor(-3.0, dtype=torch.float64), rank=rank, world_size=world_size),
    }


def gradients(data: dict, rank: int, world_size: int) -> dict:
    """Per loss: (value, d/dwa, d/dwb) for this rank's slice of the batch."""
    start = sum(ROWS[:rank]) if world_size > 1 else 0
    stop = start + ROWS[rank] if world_size > 1 else sum(ROWS)
    out = {}
    for name in ("mask_guided", "info_nce", "siglip"):
        wa = data["wa"].clone().requires_grad_(True)
        wb = data["wb"].clone().requires_grad_(True)
        fa, fb = data["a"][start:stop] @ wa.T, data["b"][start:stop] @ wb.T
        loss = losses(fa, fb, data, rank, world_size)[name]
        loss.backward()
        out[name] = (loss.detach(), wa.grad, wb.grad)
    return out


def worker(rank: int, port: int, results: str) -> None:
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                         rank=rank, world_size=WORLD)
    try:
        out = gradients(problem(), rank, WORLD)
        averaged = {}
        for name, (value, ga, gb) in out.items():
            # what DistributedDataParallel does with parameter gradients
            for g in (ga, gb):
                torch.distributed.all_reduce(g)
                g /= WORLD
            averaged[name] = (value, ga, gb)
        torch.save(averaged, f"{results}.{rank}")
    finally:
        torch.distributed.destroy_process_group()


def test_one_process_is_a_no_op():
    x = torch.randn(3, 4, requires_grad=True)
    assert gather_with_grad(x) is x
    assert gather_with_grad(x, rank=0, world_size=1) is x


def test_bad_rank_or_missing_group_is_rejected():
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match="rank"):
        gather_with_grad(x, rank=2, world_size=2)
    with pytest.raises(ValueError, match="world_size"):
        gather_with_grad(x, rank=0, world_size=0)
    with pytest.raises(ValueError, match="process group"):
        gather_with_grad(x, rank=0, world_size=2)


@pytest.mark.timeout(120)
def test_two_gloo_processes_match_the_full_batch_gradient(tmp_path):
    torch.set_num_threads(1)
    results = str(tmp_path / "grads")
    mp.spawn(worker, args=(free_port(), results), nprocs=WORLD, join=True)
    reference = gradients(problem(), 0, 1)
    for rank in range(WORLD):
        got = torch.load(f"{results}.{rank}")
        for name, (value, ga, gb) in reference.items():
            # every rank computes the full-batch loss, and the averaged gradients are exact
            assert torch.allclose(got[name][0], value, rtol=1e-12), (rank, name)
            assert torch.allclose(got[name][1], ga, rtol=1e-10, atol=1e-13), (rank, name)
            assert torch.allclose(got[name][2], gb, rtol=1e-10, atol=1e-13), (rank, name)

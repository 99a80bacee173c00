"""Fixtures of the training, evaluation and search tests: a tiny rendered benchmark (built once per
session with ``models.demo_benchmark``) registered as sealed relation snapshots, and a small
VTrajEmbed config that trains in well under a second per step on one CPU core."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from django.utils import timezone

from annotation.models import RelationSnapshot
from models.demo_benchmark import build_demo_benchmark

# A few rendered 16-frame scenes: 3 train videos (8 tracks, 24 queries), 2 dev videos.
TINY_BENCHMARK = {"videos": {"train": 3, "dev": 2, "test": 0}, "include_demo_scenes": False, "n_frames": 16,
                  "width": 128, "height": 96, "people": (2, 3), "seed": 0}
# VTrajEmbed at a width of 32 with 8 Fast observations: the same code paths as the paper's size.
TINY_VTRAJEMBED = {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "embed_dim": 32, "geo_hidden": 16,
                   "agg_layers": 1, "heads": 2, "agg_heads": 2, "features": {"n_fast_max": 8, "n_slow_budget": 2}}


def tiny_config(**overrides) -> dict:
    return {"steps": 6, "batch_size": 4, "checkpoint_every": 2, "lr": 1e-3, "device": "cpu",
            "model": TINY_VTRAJEMBED, **overrides}


@pytest.fixture(scope="session")
def tiny_benchmark_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny-benchmark")
    build_demo_benchmark(root, TINY_BENCHMARK)
    return root


def register_snapshot(folder: Path, *, sealed: bool = True) -> RelationSnapshot:
    """A RelationSnapshot row for a snapshot folder written by ``models.snapshot``."""
    from models.snapshot import RelationSnapshotData

    data = RelationSnapshotData.load(folder)
    return RelationSnapshot.objects.create(
        split=data.split, name=f"tiny {data.split}", content_sha256=data.content_sha256(), path=str(folder),
        pool_versions={str(v.id): v.pool_version for v in data.videos}, counts=data.counts(), complete=True,
        sealed_at=timezone.now() if sealed else None)


@pytest.fixture
def snapshots(db, tiny_benchmark_dir) -> dict[str, RelationSnapshot]:
    return {split: register_snapshot(tiny_benchmark_dir / "snapshots" / split) for split in ("train", "dev")}


@pytest.fixture
def var_dir(settings, tmp_path) -> Path:
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    return settings.VAR_DIR


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# SCOUT's predictor at a width of 32: a second retriever to fuse with.
TINY_SCOUT = {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 2, "ff_mult": 2, "n_prompts": 2},
              "features": {"n_fast_max": 8}}


@pytest.fixture(scope="session")
def trained_dirs(tiny_benchmark_dir, tmp_path_factory) -> dict[str, Path]:
    """Checkpoint folders of a tiny VTrajEmbed and a tiny SCOUT trained on the train snapshot
    (straight through ``models.training.train``, once per session)."""
    from models.snapshot import RelationSnapshotData
    from models.training import train

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    data = RelationSnapshotData.load(tiny_benchmark_dir / "snapshots" / "train")
    root = tmp_path_factory.mktemp("trained")
    out = {}
    for kind, model in (("vtrajembed", TINY_VTRAJEMBED), ("scout", TINY_SCOUT)):
        out[kind] = root / kind
        train(data, kind, tiny_config(steps=8, model=model, cache_dir=str(root / "features")), out[kind])
    torch.set_num_threads(before)
    return out


def finished_run(snapshots, folder: Path, kind: str = "vtrajembed"):
    """A succeeded TrainingRun row whose checkpoint is ``folder``."""
    from workers.models import RunStatus, TrainingRun

    return TrainingRun.objects.create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], model_kind=kind,
                                      config=tiny_config(), steps_total=8, steps_done=8, out_dir=str(folder),
                                      status=RunStatus.SUCCEEDED)

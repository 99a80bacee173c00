"""Fixtures of the training, evaluation and search tests: the tiny rendered benchmark (built once
per session with ``models.demo.benchmark``) registered as sealed relation snapshots, checkpoints
trained once per session, and one torch thread per test."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.demo.benchmark import build_demo_benchmark
from tests.workers.factories import (
    TINY_BENCHMARK,
    TINY_SCOUT,
    TINY_VTRAJEMBED,
    register_snapshot,
    tiny_config,
)


@pytest.fixture(scope="session")
def tiny_benchmark_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny-benchmark")
    build_demo_benchmark(root, TINY_BENCHMARK)
    return root


@pytest.fixture
def snapshots(db, tiny_benchmark_dir) -> dict:
    return {split: register_snapshot(tiny_benchmark_dir / "snapshots" / split) for split in ("train", "dev")}


@pytest.fixture
def var_dir(settings, tmp_path) -> Path:
    """A VAR_DIR of the test's own, with the store's MEDIA_ROOT (checkpoints, indexes) inside it."""
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    settings.MEDIA_ROOT = settings.VAR_DIR / "media"
    return settings.VAR_DIR


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def trained_dirs(tiny_benchmark_dir, tmp_path_factory) -> dict[str, Path]:
    """Checkpoint folders of a tiny VTrajEmbed and a tiny SCOUT trained on the train snapshot
    (straight through ``models.training.trainer.train``, once per session)."""
    from models.training.snapshot import RelationSnapshotData
    from models.training.trainer import train

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

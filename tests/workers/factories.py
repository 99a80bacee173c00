"""Records and configs for the training, evaluation and search tests: a tiny rendered benchmark's
settings, tiny model configs that train in well under a second per step on one CPU core, and rows
for snapshot folders and finished runs."""
from __future__ import annotations

from pathlib import Path

from django.utils import timezone

# A few rendered 16-frame scenes: 3 train videos (8 tracks, 24 queries), 2 dev videos.
TINY_BENCHMARK = {"videos": {"train": 3, "dev": 2, "test": 0}, "include_demo_scenes": False, "n_frames": 16,
                  "width": 128, "height": 96, "people": (2, 3), "seed": 0}
# VTrajEmbed at a width of 32 with 8 Fast observations: the same code paths as the paper's size.
TINY_VTRAJEMBED = {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "embed_dim": 32, "geo_hidden": 16,
                   "agg_layers": 1, "heads": 2, "agg_heads": 2, "features": {"n_fast_max": 8, "n_slow_budget": 2}}
# SCOUT's predictor at a width of 32: a second retriever to fuse with.
TINY_SCOUT = {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 2, "ff_mult": 2, "n_prompts": 2},
              "features": {"n_fast_max": 8}}


def tiny_config(**overrides) -> dict:
    return {"steps": 6, "batch_size": 4, "checkpoint_every": 2, "lr": 1e-3, "device": "cpu",
            "model": TINY_VTRAJEMBED, **overrides}


def register_snapshot(folder: Path, *, sealed: bool = True, complete: bool = True):
    """A RelationSnapshot row for a snapshot folder written by ``models.training.snapshot``."""
    from annotation.models import RelationSnapshot
    from models.training.snapshot import RelationSnapshotData

    data = RelationSnapshotData.load(folder)
    return RelationSnapshot.objects.create(
        split=data.split, name=f"tiny {data.split}", content_sha256=data.content_sha256(), path=str(folder),
        pool_versions={str(v.id): v.pool_version for v in data.videos}, counts=data.counts(), complete=complete,
        sealed_at=timezone.now() if sealed else None)


def finished_run(snapshots, folder: Path, kind: str = "vtrajembed"):
    """A succeeded TrainingRun row whose checkpoint is ``folder``."""
    from workers.models import RunStatus, TrainingRun

    return TrainingRun.objects.create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], model_kind=kind,
                                      config=tiny_config(), steps_total=8, steps_done=8, out_dir=str(folder),
                                      status=RunStatus.SUCCEEDED)

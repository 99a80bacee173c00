"""Training checkpoints and run files in the platform's store (``common.storage``).

A training run trains in a folder of the worker's own host (:func:`work_dir`,
``VAR_DIR/training/<run id>``) and keeps nothing there that another host needs:

- each checkpoint, once the trainer has written it whole, is stored as
  ``training/<run id>/checkpoint-<step>.pt`` (:func:`checkpoint_store`); only then does the run's
  row name it (``checkpoint_key``, ``checkpoint_sha256``, ``checkpoint_step``), and the one it
  named before is removed. A store that fails mid-upload leaves the row naming the previous
  checkpoint, which is still there; an object stored whose row was never updated is an orphan,
  never a dangling reference;
- an attempt starts from the checkpoint the row names (:func:`checkpoint_restore`): fetched into the
  work folder and checked against its SHA-256, whichever host wrote it. A checkpoint the work
  folder holds that the row does not name (its upload failed) is dropped;
- readers (evaluation, search) get a local copy checked against the row's SHA-256
  (:func:`checkpoint_local`: the read-through cache from a bucket, the stored file on disk);
- at the end ``result.json``, ``steps.jsonl`` and the torchrun logs go to ``training/<run id>/``
  (:func:`run_files_store`).

Runs recorded by older versions hold a local folder in ``out_dir`` and no ``checkpoint_key``: they
are read from that folder, on the host that has it.
"""
from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from django.db import transaction

from common.storage import StorageError, file_sha256, store
from models.training.trainer import CHECKPOINT
from workers.folders import training_root
from workers.models import TrainingRun

logger = logging.getLogger(__name__)

RUN_FILES = ("result.json", "steps.jsonl")


def run_key(run_id: int) -> str:
    """The storage key of a run's folder (what ``TrainingRun.out_dir`` holds)."""
    return f"training/{int(run_id)}"


def is_legacy(run: TrainingRun) -> bool:
    """A run of an older version: ``out_dir`` is a local folder, its checkpoint only there."""
    return bool(run.out_dir) and Path(run.out_dir).is_absolute()


def work_dir(run: TrainingRun) -> Path:
    """The folder this host trains ``run`` in."""
    return Path(run.out_dir) if is_legacy(run) else training_root() / str(run.pk)


def checkpoint_store(*, run_id: int, path: Path, step: int) -> str:
    """Store the checkpoint at ``path`` (complete, saved at ``step``) and name it on the run's row;
    returns its key. The object is whole before the row names it (``put_file`` is atomic); the
    checkpoint the row named before is removed afterwards."""
    key = f"{run_key(run_id)}/checkpoint-{int(step):08d}.pt"
    stored = store().put_file(key, Path(path))
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().only("checkpoint_key").get(pk=run_id)
        previous = run.checkpoint_key
        TrainingRun.objects.filter(pk=run_id).update(checkpoint_key=stored.key, checkpoint_sha256=stored.sha256,
                                                     checkpoint_step=int(step))
    if previous and previous != stored.key:
        try:
            store().delete(previous)
        except StorageError:
            logger.warning("training run %s: the older checkpoint %s could not be removed", run_id, previous)
    return stored.key


def checkpoint_restore(*, run: TrainingRun, out: Path) -> int | None:
    """Make ``out/checkpoint.pt`` the checkpoint the run's row names (fetched from the store and
    checked against its SHA-256), or remove it when the row names none; returns its step."""
    local = out / CHECKPOINT
    if not run.checkpoint_key:
        if local.is_file() and not is_legacy(run):
            logger.warning("training run %s: %s was never stored whole; training starts over", run.pk, local)
            local.unlink()
        return None
    if local.is_file() and file_sha256(local) == run.checkpoint_sha256:
        return run.checkpoint_step
    tmp = out / f".{CHECKPOINT}.restore"
    store().download(run.checkpoint_key, tmp, sha256=run.checkpoint_sha256)
    tmp.replace(local)
    return run.checkpoint_step


def checkpoint_local(run: TrainingRun) -> Path:
    """A local file (or, for an older run, folder) holding the run's checkpoint, checked against
    the SHA-256 its row holds. ``FileNotFoundError`` when the run has none."""
    if run.checkpoint_key:
        return store().local_path(run.checkpoint_key, sha256=run.checkpoint_sha256)
    if is_legacy(run):
        return Path(run.out_dir)
    raise FileNotFoundError(f"training run {run.pk} has stored no checkpoint")


def run_files_store(*, run: TrainingRun, out: Path) -> list[str]:
    """Store the run's summary, step log and torchrun logs under its key; returns the keys."""
    if is_legacy(run):
        return []
    names = [n for n in RUN_FILES if (out / n).is_file()] + sorted(p.name for p in out.glob("torchrun-*.log"))
    return [store().put_file(f"{run_key(run.pk)}/{name}", out / name).key for name in names]



# -- search indexes ---------------------------------------------------------------------------------------
def index_key(*, run_id: int, snapshot_sha256: str) -> str:
    """The storage key of the search index of a run over a snapshot (by its content hash)."""
    return f"search/run-{int(run_id)}/{snapshot_sha256}"


def index_store(*, run_id: int, snapshot_sha256: str, files: list[Path]) -> None:
    """Store an index's files under its key in the given order: the last (the vectors) is the
    one a reader looks for, so a reader that finds it finds the rest."""
    key = index_key(run_id=run_id, snapshot_sha256=snapshot_sha256)
    for f in files:
        store().put_file(f"{key}/{f.name}", f)


def index_fetch(*, run_id: int, snapshot_sha256: str, files: list[Path]) -> bool:
    """Fetch a stored index into the local ``files`` (this host's copy, memory-mapped by searches),
    each checked against the checksum stored with it, the last file placed last; False when the
    store holds no such index."""
    key = index_key(run_id=run_id, snapshot_sha256=snapshot_sha256)
    if not store().exists(f"{key}/{files[-1].name}"):
        return False
    files[-1].parent.mkdir(parents=True, exist_ok=True)
    for f in files:
        tmp = f.with_name(f".{f.name}.{uuid.uuid4().hex[:8]}.fetch")
        try:
            store().download(f"{key}/{f.name}", tmp)
            os.replace(tmp, f)
        finally:
            tmp.unlink(missing_ok=True)
    return True

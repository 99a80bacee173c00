"""Objects in the store that no record names: found, and removed when asked.

Every writer stores an object whole before the row that names it is written, so a failure between
the two (the store, the database or the process going away) leaves an *orphan*, never a record that
names a missing object. This sweep finds them under the prefixes whose owners it knows:

- ``snapshots/<folder>/``: a relation snapshot's files; an orphan when no ``RelationSnapshot.path``
  is that folder;
- ``training/<run>/``: a training run's checkpoints and files; an orphan when the run is gone, and a
  checkpoint the run does not name (``checkpoint_key``) is one too (the previous checkpoint, when its
  removal failed);
- ``search/run-<run>/``: a run's search indexes; orphans when the run is gone;
- ``releases/<name>/<version>/``: a release's files; an orphan when no ``Release.path`` is that
  folder (a publication whose row was never written).

Only objects last written more than ``older_than`` ago count: a younger one may belong to a writer
still between its upload and its row. Videos, frame folders and staged uploads are left alone
(their rows and jobs own them; a failed import already removes what it stored).
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from django.utils import timezone

from annotation.models import RelationSnapshot, Release
from common.storage import ObjectStore, StorageError, store
from workers.models import TrainingRun

PREFIXES = ("snapshots", "training", "search", "releases")
DEFAULT_AGE = dt.timedelta(hours=24)
_CHECKPOINT = re.compile(r"^training/(\d+)/checkpoint-[^/]+$")
_RUN = re.compile(r"^(?:training/(\d+)|search/run-(\d+))/")


@dataclass(frozen=True)
class Orphan:
    key: str
    reason: str
    modified: dt.datetime


def orphan_objects(*, older_than: dt.timedelta = DEFAULT_AGE, objects: ObjectStore | None = None) -> list[Orphan]:
    """The objects under :data:`PREFIXES` that no record names and that were last written more than
    ``older_than`` ago, in key order."""
    if older_than < dt.timedelta(0):
        raise ValueError(f"older_than must not be negative, got {older_than}")
    objects = objects or store()
    cutoff = timezone.now() - older_than
    listed = [(key, when) for prefix in PREFIXES for key, when in objects.listed(prefix) if when < cutoff]
    snapshots = set(RelationSnapshot.objects.values_list("path", flat=True))
    releases = set(Release.objects.values_list("path", flat=True))
    run_ids = {int(m.group(1) or m.group(2)) for key, _ in listed if (m := _RUN.match(key))}
    runs = dict(TrainingRun.objects.filter(pk__in=run_ids).values_list("pk", "checkpoint_key"))
    out = []
    for key, when in listed:
        reason = _orphan_reason(key, snapshots, runs, releases)
        if reason:
            out.append(Orphan(key, reason, when))
    return out


def _orphan_reason(key: str, snapshots: set[str], runs: dict[int, str], releases: set[str]) -> str:
    if key.startswith("releases/"):
        folder = "/".join(key.split("/", 3)[:3])
        return "" if folder in releases else "no release names its folder"
    if key.startswith("snapshots/"):
        folder = key.rsplit("/", 1)[0]
        return "" if folder in snapshots else "no relation snapshot names its folder"
    m = _RUN.match(key)
    if m is None:
        return ""
    run = int(m.group(1) or m.group(2))
    if run not in runs:
        return f"training run {run} is gone"
    if _CHECKPOINT.match(key) and key != runs[run]:
        return f"training run {run} names another checkpoint"
    return ""


def storage_sweep(*, delete: bool = False, older_than: dt.timedelta = DEFAULT_AGE) -> dict:
    """The orphans (see the module docstring), removed when ``delete``; a removal that fails is
    reported and the sweep goes on."""
    objects = store()
    orphans = orphan_objects(older_than=older_than, objects=objects)
    removed, failed = [], []
    if delete:
        for orphan in orphans:
            try:
                objects.delete(orphan.key)
                removed.append(orphan.key)
            except StorageError as exc:
                failed.append({"key": orphan.key, "error": exc.message})
    return {"store": objects.url, "older_than_s": int(older_than.total_seconds()),
            "orphans": [{"key": o.key, "reason": o.reason, "modified": o.modified.isoformat()} for o in orphans],
            "removed": removed, "failed": failed}

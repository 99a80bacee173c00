"""Training checkpoints, run files, search indexes and relation snapshots in an S3 bucket (a real
SeaweedFS server, tests/storage_server.py): rows hold keys, another host (its own VAR_DIR and
cache, nothing shared but the database and the bucket) resumes and searches from the bucket, a
changed object is refused by name, and the server dying mid-upload of a checkpoint leaves no row
naming a missing object."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import requests
import torch

from annotation.benchmark.services import snapshots as snapshot_services
from annotation.benchmark.services.snapshots import relation_snapshot_create, relation_snapshot_load
from common import storage
from common.jobs.runs import run_retry
from common.storage import BucketStore, StorageError
from models.training.snapshot import (
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)
from tests.storage_server import start_weed, stop_weed
from tests.trajectories.test_media_in_bucket import _ports
from tests.workers.factories import tiny_config
from trajectories.services.ingestion import video_import
from workers import training as training_services
from workers.artefacts import checkpoint_local, index_key
from workers.execute import training_run_execute
from workers.models import TrainingRun, TrainingStep
from workers.search import search, search_index_build, search_index_path
from workers.training import training_run_create

pytestmark = pytest.mark.django_db


def _create(snapshots, **config):
    return training_run_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], model_kind="vtrajembed",
                               config=tiny_config(**config), queue=False)


def _another_host(settings, tmp_path, name: str):
    """This process now plays a host with its own VAR_DIR and read-through cache."""
    settings.VAR_DIR = tmp_path / name / "var"
    settings.VAR_DIR.mkdir(parents=True)
    settings.TRAJLAB_STORAGE_CACHE_DIR = tmp_path / name / "cache"
    storage.reset()
    return storage.store()


class _Killed(BaseException):
    """Stands for the worker process dying."""


def test_checkpoints_and_the_index_are_in_the_bucket_and_another_host_searches_from_them(
        object_storage, snapshots, var_dir, settings, tmp_path):
    run = training_run_execute(run=_create(snapshots))
    assert run.status == "succeeded", run.error
    assert run.out_dir == f"training/{run.pk}" and run.checkpoint_key == f"training/{run.pk}/checkpoint-00000006.pt"
    assert object_storage.list(run.out_dir) == [run.checkpoint_key, f"{run.out_dir}/result.json",
                                                f"{run.out_dir}/steps.jsonl"]
    assert object_storage.head(run.checkpoint_key)["Metadata"]["sha256"] == run.checkpoint_sha256
    # a process with no credentials reads it through a presigned URL
    fetched = requests.get(storage.presigned_get(run.checkpoint_key, expires_s=60), timeout=30).content
    assert hashlib.sha256(fetched).hexdigest() == run.checkpoint_sha256
    index = index_key(run_id=run.pk, snapshot_sha256=snapshots["dev"].content_sha256)
    assert [k.rsplit(".", 1)[-1] for k in object_storage.list(index)] == ["faiss", "json", "npz", "npy"]
    here = search(run=run, text="a person in a red top walking right", k=5)

    # on a host that shares no folder with the first: the index and the checkpoint come from the bucket
    other = _another_host(settings, tmp_path, "web-2")
    assert not search_index_path(run=run, snapshot=snapshots["dev"]).exists()
    built = search_index_build(run=run, snapshot=snapshots["dev"])
    assert not built["built"] and search_index_path(run=run, snapshot=snapshots["dev"]).is_file()
    from workers import search as search_module

    search_module._loaded.clear()
    there = search(run=run, text="a person in a red top walking right", k=5)
    assert [r["trajectory"] for r in there["results"]] == [r["trajectory"] for r in here["results"]]
    assert np.allclose([r["score"] for r in there["results"]], [r["score"] for r in here["results"]])
    assert other.cache.stats["fetches"] == 1 and str(checkpoint_local(run)).startswith(str(other.cache.root))


def test_a_lost_attempt_resumes_on_another_host_from_the_bucket(object_storage, snapshots, var_dir, settings,
                                                                 tmp_path, monkeypatch):
    original = training_services._StepRecorder.__call__

    def dies_after_step_3(self, record):
        original(self, record)
        if self.attempt == 1 and record["step"] == 3:
            raise _Killed

    monkeypatch.setattr(training_services._StepRecorder, "__call__", dies_after_step_3)
    run = _create(snapshots)
    with pytest.raises(_Killed):
        training_run_execute(run=run)
    run.refresh_from_db()
    assert run.checkpoint_step == 2 and object_storage.exists(run.checkpoint_key)

    _another_host(settings, tmp_path, "gpu-2")                  # the work folder of the first host is not here
    run = training_run_execute(run=run)
    assert run.status == "succeeded" and run.resumes == [{"attempt": 2, "from_step": 2}]
    assert [(s.step, s.attempt) for s in TrainingStep.objects.filter(run=run).order_by("step")] == \
        [(1, 1), (2, 1), (3, 2), (4, 2), (5, 2), (6, 2)]
    run.job.refresh_from_db()
    assert f"checkpoint of step 2 read from training/{run.pk}/checkpoint-00000002.pt" in run.job.log_tail
    assert storage.store().list(run.out_dir)[0] == run.checkpoint_key == f"training/{run.pk}/checkpoint-00000006.pt"


def test_a_checkpoint_changed_in_the_bucket_is_refused_by_name(object_storage, s3_server, s3_bucket, snapshots,
                                                               var_dir, settings, tmp_path):
    run = training_run_execute(run=_create(snapshots, steps=2))
    assert run.status == "succeeded", run.error
    s3_server.client().put_object(Bucket=s3_bucket, Key=object_storage.full_key(run.checkpoint_key), Body=b"no",
                                  Metadata={"sha256": run.checkpoint_sha256})
    _another_host(settings, tmp_path, "eval-2")
    with pytest.raises(StorageError, match="checkpoint-00000002.pt was changed outside the platform") as err:
        checkpoint_local(run)
    assert err.value.code == "checksum_mismatch" and run.checkpoint_key in err.value.extra["object"]


def test_a_checkpoint_changed_on_local_disk_is_refused_by_name(snapshots, var_dir):
    run = training_run_execute(run=_create(snapshots, steps=2))
    path = checkpoint_local(run)
    assert torch.load(path, weights_only=False)["step"] == 2      # read, checked, once
    assert storage.presigned_get(run.checkpoint_key) == path.as_uri()
    path.write_bytes(path.read_bytes()[:-1])                        # changed behind the platform's back
    with pytest.raises(StorageError, match="changed outside the platform") as err:
        checkpoint_local(run)
    assert err.value.code == "checksum_mismatch" and err.value.extra["object"].endswith(run.checkpoint_key)


@pytest.mark.slow
def test_server_killed_mid_checkpoint_upload_leaves_no_row_naming_a_missing_object(
        settings, snapshots, var_dir, tmp_path, monkeypatch):
    """The checkpoint of step 4 is being uploaded when the S3 server dies. The run fails with the
    object named, its row still names the checkpoint of step 2, which the restarted server holds
    whole, and a retry resumes from it and finishes."""
    server = start_weed(tmp_path / "own-s3")
    try:
        server.client().create_bucket(Bucket="ckpt-fault")
        settings.TRAJLAB_STORAGE_URL = "s3://ckpt-fault/lab"
        settings.AWS_S3_ENDPOINT_URL = server.endpoint
        settings.AWS_ACCESS_KEY_ID, settings.AWS_SECRET_ACCESS_KEY = server.access_key, server.secret_key
        settings.TRAJLAB_STORAGE_CACHE_DIR = tmp_path / "cache"
        storage.reset()
        put = BucketStore.put_file

        def dies_during_step_4(self, key, source):
            if key.endswith("checkpoint-00000004.pt"):
                stop_weed(server)              # SIGKILL while the checkpoint goes up
            return put(self, key, source)

        monkeypatch.setattr(BucketStore, "put_file", dies_during_step_4)
        run = training_run_execute(run=_create(snapshots, steps=6))
        assert run.status == "failed"
        assert f"ckpt-fault/lab/training/{run.pk}/checkpoint-00000004.pt: the storage server cannot be reached" \
            in run.error
        assert run.checkpoint_key == f"training/{run.pk}/checkpoint-00000002.pt" and run.checkpoint_step == 2

        monkeypatch.setattr(BucketStore, "put_file", put)
        server = start_weed(tmp_path / "own-s3", ports=_ports(server), fresh=False)
        storage.reset()
        for row in TrainingRun.objects.exclude(checkpoint_key=""):       # every key a row names is there
            assert storage.store().head(row.checkpoint_key)["Metadata"]["sha256"] == row.checkpoint_sha256
        run = run_retry(run=run, queue=False)
        run = training_run_execute(run=run)
        assert run.status == "succeeded", run.error
        assert run.resumes[-1]["from_step"] == 2 and run.checkpoint_step == 6
    finally:
        stop_weed(server)
        storage.reset()


def test_a_snapshot_is_stored_under_a_key_and_read_back_from_the_bucket(
        object_storage, media_root, small_video, settings, tmp_path, monkeypatch):
    video = video_import(path=small_video, source="lab").video
    data = RelationSnapshotData(
        split="train", videos=[SnapshotVideo(id=video.pk, path=video.path, width=video.width, height=video.height,
                                             fps=float(video.fps), n_frames=video.frame_count)],
        tracks=[SnapshotTrack(id=1, video_id=video.pk, frames=np.arange(3, dtype=np.int32),
                              boxes=np.tile(np.array([[1, 2, 30, 40]], np.float32), (3, 1)))],
        queries=[SnapshotQuery(id=1, video_id=video.pk, text="a person")], relations=[])
    monkeypatch.setattr(snapshot_services, "snapshot_data_build", lambda *, split: (data, {"complete": False}))
    settings.VAR_DIR = tmp_path / "web-1"
    snap = relation_snapshot_create(split="train")
    assert snap.path.startswith("snapshots/") and not snap.path.startswith("/")                 # a key
    assert object_storage.list(snap.path) == [f"{snap.path}/snapshot.json", f"{snap.path}/tracks.npz"]
    assert not list((tmp_path / "web-1" / "snapshots").iterdir())          # the staging folder is gone
    stored = object_storage.read(f"{snap.path}/snapshot.json").decode()
    assert video.path in stored and str(tmp_path) not in stored              # no local path in what is stored

    other = _another_host(settings, tmp_path, "gpu-2")
    loaded = relation_snapshot_load(snapshot=snap)
    assert loaded.content_sha256() == snap.content_sha256
    assert loaded.videos[0].path == str(video.abspath) and loaded.videos[0].path.startswith(str(other.cache.root))

"""A large upload's import job whose worker dies mid-import is picked up again: the upload stays
staged in the bucket until a delivery finishes, so the task delivered a second time (as the broker
does after the kill), on a host with its own folder, imports the video once and removes the
staged object."""
from __future__ import annotations

import pytest

from common.models import Job
from tests.common.redelivery import WorkerDied
from trajectories import tasks
from trajectories.models import Video
from trajectories.services import ingestion

pytestmark = pytest.mark.django_db


def test_an_import_job_continues_after_its_worker_died(object_storage, media_root, tmp_path, manager_client,
                                                       small_video, settings, monkeypatch,
                                                       django_capture_on_commit_callbacks):
    settings.TRAJLAB_SYNC_IMPORT_BYTES = 100                   # everything counts as large
    with open(small_video, "rb") as fh, django_capture_on_commit_callbacks(execute=False):
        r = manager_client.post("/api/videos/", {"file": fh, "source": "cam-big"}, format="multipart")
    assert r.status_code == 202, r.content
    job = Job.objects.get(pk=r.json()["job"]["id"])
    real, calls = ingestion.video_import, []

    def dies_the_first_time(**kwargs):
        calls.append(kwargs["path"])
        if len(calls) == 1:
            raise WorkerDied("killed while the staged copy was being imported")
        return real(**kwargs)

    monkeypatch.setattr(ingestion, "video_import", dies_the_first_time)
    settings.MEDIA_ROOT = tmp_path / "first-worker"
    with pytest.raises(WorkerDied):
        tasks.video_import_task(job.pk)
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("running", 1) and not Video.objects.exists()
    assert object_storage.exists(job.params["staging"])        # still staged for the next delivery

    settings.MEDIA_ROOT = tmp_path / "second-worker"           # another host takes the message up
    tasks.video_import_task(job.pk)
    job.refresh_from_db()
    assert job.status == "succeeded" and job.attempts == 2 and job.result["created"] is True, job.error
    video = Video.objects.get()
    assert job.result["video"] == video.pk and video.frame_count == 30 and object_storage.exists(video.path)
    assert not object_storage.exists(job.params["staging"]) and len(calls) == 2

"""Track imports as jobs (issue 27, finding 2): the request checks the file and queues a job on the
cpu queue; the job reads the frames and finds the duplicate pairs holding no lock, reports progress,
and stores everything in one transaction; a failed job keeps nothing but its reason and is retried;
a refused MOTChallenge folder leaves nothing behind, its own video included."""
from __future__ import annotations

import numpy as np
import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from common.errors import ApplicationError
from common.models import Job
from models.tracks_io.mot import format_mot, format_seqinfo
from models.tracks_io.records import ImportedTrack
from tests.conftest import media_files, write_video
from tests.trajectories.factories import video_factory
from trajectories import tasks
from trajectories.models import (
    ProposalConfig,
    ProposalRun,
    Source,
    SplitGroup,
    TrackImport,
    Trajectory,
    Video,
)
from trajectories.services import imports
from trajectories.services.imports import track_import, track_import_create, track_import_execute

ROWS = ("track_id,frame,x1,y1,x2,y2\n" + "".join(f"1,{f},{10 + f},20,{50 + f},100\n" for f in range(10))
        + "".join(f"2,{f},{12 + f},21,{52 + f},101\n" for f in range(10))).encode()



def _nowait_locks(*tables_and_ids) -> None:
    """Lock each row from another session without waiting: raises if anyone holds it."""
    db = connection.settings_dict
    with psycopg.connect(dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"] or None,
                         host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432) as other:
        for table, pk in tables_and_ids:
            other.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE NOWAIT", [pk])
        other.rollback()


def test_the_job_finds_duplicates_holding_no_lock_and_stores_them_at_once(transactional_db, media_root, sent,
                                                                          monkeypatch):
    video = video_factory(split="train", frame_count=12)
    result = track_import_create(video=video, data=ROWS, file_name="t.csv", fmt="csv", source="lab")
    run = result.run
    assert result.created and run.status == "queued" and run.job.kind == "track_import" and run.job.queue == "cpu"
    assert sent == [("trajectories.tasks.proposal_run_task", [run.pk], "cpu")]
    assert not Trajectory.objects.exists() and TrackImport.objects.get().data == ROWS
    real, seen = imports.propose_duplicate_pairs, []

    def propose(*args, **kwargs):
        # while the pairs are computed, every other request can lock the rows the import touches
        _nowait_locks(("trajectories_splitgroup", video.split_group_id), ("trajectories_proposalrun", run.pk),
                      ("trajectories_video", video.pk))
        seen.append(Trajectory.objects.count())
        return real(*args, **kwargs)

    monkeypatch.setattr(imports, "propose_duplicate_pairs", propose)
    assert tasks.proposal_run_task(run.pk)["status"] == "succeeded"       # the worker's entry point
    run.refresh_from_db()
    assert seen == [0] and run.status == "succeeded" and run.trajectory_count == 2 and run.duplicate_count == 1
    job = Job.objects.get(pk=run.job_id)
    assert job.status == "succeeded" and job.progress == 1.0 and "2 tracks, 1 duplicate candidates" in job.message
    assert job.result == {"trajectories": 2, "duplicate_candidates": 1}
    assert TrackImport.objects.get().data == b""


def test_a_failed_job_keeps_no_trajectory_and_is_queued_again(db, media_root, sent, monkeypatch, manager_client):
    video = video_factory(split="train", frame_count=12)
    run = track_import_create(video=video, data=ROWS, file_name="t.csv", fmt="csv", source="lab").run

    def broken(**kwargs):
        raise ApplicationError("the disk is full", code="disk_full")

    monkeypatch.setattr("trajectories.services.imports.trajectories_store", broken)
    run = track_import_execute(run_id=run.pk)
    assert run.status == "failed" and "the disk is full" in run.error and not Trajectory.objects.exists()
    assert TrackImport.objects.get().data == ROWS                          # kept for the retry
    monkeypatch.undo()
    # a retry of its job queues the run again in place, and the file it kept is imported
    response = manager_client.post(f"/api/jobs/{run.job_id}/retry/", format="json")
    assert response.status_code == 202, response.json()
    run.refresh_from_db()
    assert run.status == "queued" and run.retries == 1 and run.job.kind == "track_import"
    assert tasks.proposal_run_task(run.pk)["trajectories"] == 2
    assert ProposalRun.objects.get().status == "succeeded"


def test_more_duplicate_pairs_than_an_import_stores_fail_its_job_and_tubes_store_none(db, media_root, settings):
    settings.TRAJLAB_TRACK_IMPORT_MAX_DUPLICATES = 0
    video = video_factory(split="train", frame_count=12)
    run = track_import_create(video=video, data=ROWS, file_name="t.csv", fmt="csv", source="lab", queue=False).run
    run = track_import_execute(run_id=run.pk)
    assert run.status == "failed" and "make more than 0 duplicate pairs" in run.error
    assert not Trajectory.objects.exists()
    # annotated tubes are supervision: their overlaps are no duplicates to review
    tubes = track_import_create(video=video, data=ROWS, file_name="t.csv", fmt="csv", source="lab", purpose="tubes",
                                queue=False).run
    tubes = track_import_execute(run_id=tubes.pk)
    assert tubes.status == "succeeded" and tubes.trajectory_count == 2 and tubes.duplicate_count == 0


def test_an_import_here_that_fails_keeps_nothing(db, media_root, monkeypatch):
    video = video_factory(split="train", frame_count=12)

    def broken(**kwargs):
        raise RuntimeError("the worker fell over")

    monkeypatch.setattr("trajectories.services.imports.trajectories_store", broken)
    with pytest.raises(RuntimeError):
        track_import(video=video, data=ROWS, file_name="t.csv", fmt="csv", source="lab")
    assert not ProposalRun.objects.exists() and not TrackImport.objects.exists()
    assert not ProposalConfig.objects.exists() and not Job.objects.exists()


def _mot_folder(root, *, n_frames: int, last_frame: int, seqinfo: bool):
    """A MOTChallenge folder that brings its own 160x120 video and a ground truth up to ``last_frame``."""
    root.mkdir()
    write_video(root / "clip.mp4", n_frames=n_frames, size=(160, 120), fps=10.0)
    frames = np.arange(last_frame)
    track = ImportedTrack(track_id=1, category="person", frames=frames,
                          boxes=np.stack([10 + frames, np.full(len(frames), 20.0), 40 + frames,
                                          np.full(len(frames), 80.0)], 1),
                          scores=np.ones(len(frames)), lines=frames)
    (root / "gt").mkdir()
    (root / "gt" / "gt.txt").write_text(format_mot([track]))
    if seqinfo:
        (root / "seqinfo.ini").write_text(format_seqinfo(name="clip", fps=10, frame_count=n_frames, width=160,
                                                         height=120))
    return root


def _nothing_left(media_root) -> None:
    assert not Video.objects.exists() and not SplitGroup.objects.exists() and not Source.objects.exists()
    assert not ProposalRun.objects.exists() and not TrackImport.objects.exists()
    assert media_files(media_root) == []


@pytest.mark.slow
def test_a_mot_folder_refused_without_a_split_keeps_no_video(db, media_root, tmp_path):
    folder = _mot_folder(tmp_path / "MOT-01", n_frames=30, last_frame=30, seqinfo=True)
    with pytest.raises(CommandError, match="no split yet"):
        call_command("import_tracks", str(folder), "--source", "MOT-01")
    _nothing_left(media_root)


@pytest.mark.slow
def test_a_mot_folder_whose_tracks_are_refused_after_its_video_keeps_no_video(db, media_root, tmp_path):
    # without seqinfo.ini the tracks can only be checked against the video once it is read
    folder = _mot_folder(tmp_path / "MOT-02", n_frames=30, last_frame=40, seqinfo=False)
    with pytest.raises(CommandError, match="past the video's last frame"):
        call_command("import_tracks", str(folder), "--source", "MOT-02", "--split", "train")
    _nothing_left(media_root)
    folder = _mot_folder(tmp_path / "MOT-03", n_frames=30, last_frame=30, seqinfo=False)
    call_command("import_tracks", str(folder), "--source", "MOT-03", "--split", "train")
    assert ProposalRun.objects.get().status == "succeeded" and Video.objects.count() == 1

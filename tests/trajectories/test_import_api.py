"""The REST API of imported tracks and tube-match reports."""
from __future__ import annotations

import numpy as np
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.curation.services.pools import pool_freeze
from annotation.models import Description
from models.tracks_io.records import ImportedTrack
from models.tracks_io.tubes_json import format_tubes_json
from tests.trajectories.factories import video_factory
from trajectories.models import ProposalRun, TrackImport, TubeMatchReport
from trajectories.services.imports import track_import_execute

ROWS = "track_id,frame,x1,y1,x2,y2\n" + "".join(f"1,{f},{10 + f},20,{50 + f},100\n" for f in range(10))


def _upload(client, video, text: str, name: str = "tracks.csv", **fields):
    data = {"file": SimpleUploadedFile(name, text.encode()), "video": video.pk, "format": "csv",
            "source": "lab tracker", **fields}
    return client.post("/api/track-imports/", data, format="multipart")


def _imported(client, video, text: str, name: str = "tracks.csv", **fields) -> dict:
    """Upload, then run the queued job as a worker would; the import as the API shows it then."""
    response = _upload(client, video, text, name, **fields)
    assert response.status_code == 202, response.json()
    track_import_execute(run_id=response.json()["run"])
    return client.get(f"/api/track-imports/{response.json()['id']}/").json()


def test_upload_queues_a_job_that_stores_the_tracks_and_a_reupload_answers_200(db, media_root, manager_client):
    video = video_factory(split="train", frame_count=12)
    response = _upload(manager_client, video, ROWS)
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["format"] == "csv" and body["review"] == "reviewed" and body["run_status"] == "queued"
    assert body["trajectory_count"] == 0 and body["job"] is not None and body["progress"] == 0.0
    assert len(body["file_sha256"]) == 64 and body["video"] == video.pk
    assert manager_client.get(f"/api/jobs/{body['job']}/").json()["kind"] == "track_import"
    assert _upload(manager_client, video, ROWS).status_code == 200             # queued already: the same import
    track_import_execute(run_id=body["run"])
    done = manager_client.get(f"/api/track-imports/{body['id']}/").json()
    assert done["run_status"] == "succeeded" and done["trajectory_count"] == 1 and done["progress"] == 1.0
    assert TrackImport.objects.get().data == b""                                # the file went with the job
    run = manager_client.get(f"/api/proposal-runs/{body['run']}/").json()
    assert run["kind"] == "imported"
    assert _upload(manager_client, video, ROWS).status_code == 200
    listed = manager_client.get(f"/api/track-imports/?video={video.pk}").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == body["id"]


def test_a_bad_file_is_a_400_with_its_line_and_stores_nothing(db, media_root, manager_client):
    video = video_factory(split="train", frame_count=12)
    response = _upload(manager_client, video, ROWS + "1,3,10,20,50,100\n")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_track_file" and body["extra"]["problems"][0]["line"] == 12
    assert "appears twice on frame 3" in body["message"]
    assert not ProposalRun.objects.exists() and not TrackImport.objects.exists()


def test_source_verified_needs_a_reason_and_annotators_cannot_import(db, media_root, manager_client, client_for,
                                                                     annotator):
    video = video_factory(split="train", frame_count=12)
    response = _upload(manager_client, video, ROWS, review="source_verified")
    assert response.status_code == 400 and response.json()["code"] == "reason_required"
    assert _upload(client_for(annotator), video, ROWS).status_code == 403
    response = _upload(manager_client, video, ROWS, review="source_verified", review_reason="verified by hand")
    assert response.status_code == 202 and response.json()["review_reason"] == "verified by hand"


def test_tube_match_reports(db, media_root, manager_client):
    video = video_factory(split="train", frame_count=12)
    frames = np.arange(10)
    boxes = np.stack([10 + frames, np.full(10, 20), 50 + frames, np.full(10, 100)], 1).astype(float)
    tube = ImportedTrack(track_id=7, category="person", frames=frames, boxes=boxes, scores=np.ones(10),
                         lines=frames, caption="a person walks right")
    tubes = _imported(manager_client, video, format_tubes_json([tube]), name="tubes.json", format="json",
                      purpose="tubes")
    proposals = _imported(manager_client, video, ROWS)
    response = manager_client.post("/api/tube-match-reports/", {"tubes_run": tubes["run"],
                                                                 "proposals_run": proposals["run"]}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["counts"] == {"matched": 1, "ambiguous": 0, "unmatched": 0}
    assert body["report"]["tubes"][0]["caption"] == "a person walks right"
    assert manager_client.get(f"/api/tube-match-reports/{body['id']}/").json()["id"] == body["id"]
    assert manager_client.get(f"/api/tube-match-reports/?video={video.pk}").json()["count"] == 1
    swapped = manager_client.post("/api/tube-match-reports/", {"tubes_run": proposals["run"],
                                                                "proposals_run": tubes["run"]}, format="json")
    assert swapped.status_code == 409 and swapped.json()["code"] == "not_tubes"
    assert TubeMatchReport.objects.count() == 1


def test_tube_captions_are_proposed_through_the_api(db, media_root, manager_client):
    video = video_factory(split="train", frame_count=12)
    frames = np.arange(10)
    boxes = np.stack([10 + frames, np.full(10, 20), 50 + frames, np.full(10, 100)], 1).astype(float)
    tube = ImportedTrack(track_id=7, category="person", frames=frames, boxes=boxes, scores=np.ones(10),
                         lines=frames, caption="a person walks right")
    tubes = _imported(manager_client, video, format_tubes_json([tube]), name="tubes.json", format="json",
                      purpose="tubes")
    proposals = _imported(manager_client, video, ROWS, review="source_verified", review_reason="fixture")
    report = manager_client.post("/api/tube-match-reports/", {"tubes_run": tubes["run"],
                                                               "proposals_run": proposals["run"]}, format="json").json()
    pool = pool_freeze(run=ProposalRun.objects.get(pk=proposals["run"]))
    response = manager_client.post(f"/api/tube-match-reports/{report['id']}/captions/", {"pool": pool.pk},
                                   format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["proposed"] == 1
    description = Description.objects.get(pool=pool)
    assert description.status == "in_review" and description.versions.get().content["appearance"] == \
        "a person walks right"
    assert manager_client.post("/api/tube-match-reports/999/captions/", {"pool": pool.pk},
                               format="json").status_code == 404


def test_files_over_the_limits_are_413_and_400_and_store_nothing(db, media_root, manager_client, settings):
    """Issue 27, finding 2: uploads and their tracks and boxes are bounded, with answers that say so."""
    video = video_factory(split="train", frame_count=12)
    settings.TRAJLAB_TRACK_FILE_MAX_BYTES = len(ROWS) - 1
    response = _upload(manager_client, video, ROWS)
    assert response.status_code == 413 and response.json()["code"] == "too_large"
    assert response.json()["extra"]["limit_bytes"] == len(ROWS) - 1
    check = manager_client.post("/api/track-imports/check/", {
        "file": SimpleUploadedFile("t.csv", ROWS.encode()), "video": video.pk, "format": "csv"}, format="multipart")
    assert check.status_code == 413
    # a body that says it is larger than a file and its form is refused before it is read
    settings.TRAJLAB_TRACK_FILE_MAX_BYTES = 10
    big = manager_client.post("/api/track-imports/", data=b"x" * 10, content_type="multipart/form-data; boundary=b",
                              CONTENT_LENGTH=str(2 * 1024 * 1024))
    assert big.status_code == 413
    settings.TRAJLAB_TRACK_FILE_MAX_BYTES = 1024 * 1024
    settings.TRAJLAB_TRACK_IMPORT_MAX_BOXES = 9
    response = _upload(manager_client, video, ROWS)
    assert response.status_code == 400 and response.json()["code"] == "too_many_boxes"
    assert response.json()["extra"] == {"limit": 9, "count": 10, "setting": "TRAJLAB_TRACK_IMPORT_MAX_BOXES",
                                        "file": "tracks.csv"}
    settings.TRAJLAB_TRACK_IMPORT_MAX_TRACKS = 0
    assert _upload(manager_client, video, ROWS).json()["code"] == "too_many_tracks"
    assert not ProposalRun.objects.exists() and not TrackImport.objects.exists()

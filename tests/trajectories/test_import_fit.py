"""A tracks file made for another video needs a confirmation (issue 27, finding 13): the
TUD-Campus ground truth (640x480, 71 frames, shipped with motmetrics) onto a 640x360, 120-frame
video with clipping was imported as 8 tracks with 13 duplicate candidates. Now the check names
what does not fit, shows the first frame's boxes, and the import waits for ``confirm_fit``."""
from __future__ import annotations

from pathlib import Path

import motmetrics
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.trajectories.factories import video_factory
from trajectories.models import ProposalConfig, ProposalRun, TrackImport
from trajectories.services.imports import track_import_execute

TUD = Path(motmetrics.__file__).parent / "data"


def _gt(sequence: str) -> bytes:
    return (TUD / sequence / "gt.txt").read_bytes()


def _form(video, data: bytes, **fields) -> dict:
    return {"file": SimpleUploadedFile("gt.txt", data), "video": video.pk, "format": "mot", "source": "TUD",
            "clip": "true", **fields}


def test_tud_campus_onto_a_smaller_longer_video_is_refused_until_confirmed(db, media_root, manager_client):
    crossing = video_factory(split="train", width=640, height=360, frame_count=120)
    response = manager_client.post("/api/track-imports/", _form(crossing, _gt("TUD-Campus")), format="multipart")
    assert response.status_code == 409, response.json()
    body = response.json()
    assert body["code"] == "fit_unconfirmed"
    findings = {f["code"]: f for f in body["extra"]["findings"]}
    assert set(findings) == {"boxes_outside", "frames_short"}
    assert findings["boxes_outside"]["count"] == 275 and "640x360" in findings["boxes_outside"]["message"]
    assert "y 147 to 467" in findings["boxes_outside"]["message"]
    assert "frame 71" in findings["frames_short"]["message"] and "120 frames" in findings["frames_short"]["message"]
    assert not ProposalRun.objects.exists() and not TrackImport.objects.exists() and not ProposalConfig.objects.exists()

    # confirmed: imported, and the findings stay with the import
    response = manager_client.post("/api/track-imports/", _form(crossing, _gt("TUD-Campus"), confirm_fit="true"),
                                   format="multipart")
    assert response.status_code == 202, response.json()
    assert [f["code"] for f in response.json()["fit_findings"]] == ["boxes_outside", "frames_short"]
    run = track_import_execute(run_id=response.json()["run"])
    assert run.status == "succeeded" and run.trajectory_count == 8


def test_a_sequence_on_its_own_video_needs_no_confirmation(db, media_root, manager_client):
    for sequence, frames in (("TUD-Campus", 71), ("TUD-Stadtmitte", 179)):
        own = video_factory(split="train", width=640, height=480, frame_count=frames)
        response = manager_client.post("/api/track-imports/", _form(own, _gt(sequence)), format="multipart")
        assert response.status_code == 202, response.json()
        assert response.json()["fit_findings"] == []


def test_the_check_shows_findings_problems_and_the_first_frames_boxes(db, media_root, manager_client):
    crossing = video_factory(split="train", width=640, height=360, frame_count=120)
    form = _form(crossing, _gt("TUD-Campus"))
    form.pop("source")
    response = manager_client.post("/api/track-imports/check/", form, format="multipart")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["fits"] is False and body["problems"] == [] and body["tracks"] == 8 and body["boxes"] == 359
    assert (body["first_frame"], body["last_frame"]) == (1, 71)
    assert body["box_extent"] == [-31.0, 147.0, 681.0, 467.0]
    assert (body["video_width"], body["video_height"], body["video_frames"]) == (640, 360, 120)
    assert [f["code"] for f in body["findings"]] == ["boxes_outside", "frames_short"]
    first = body["preview"][0]
    assert first["frame"] == 0 and len(first["boxes"]) == 6
    assert {"track_id": 1, "category": "person", "box": [398.0, 181.0, 519.0, 410.0]} in first["boxes"]
    assert [p["frame"] for p in body["preview"]] == [0, 1, 2]
    # without clipping the boxes past the frame refuse the file: listed with their lines, with the preview
    form = _form(crossing, _gt("TUD-Campus"), clip="false")
    form.pop("source")
    body = manager_client.post("/api/track-imports/check/", form, format="multipart").json()
    assert body["fits"] is False and body["problems"][0]["line"] == 1 and "outside the 640x360" in \
        body["problems"][0]["message"] and body["preview"][0]["frame"] == 0
    # a file that does not parse is refused as its import would be; annotators may not check files
    form = _form(crossing, b"1,1,nan,2,3,4,1,1,1\n")
    assert manager_client.post("/api/track-imports/check/", form, format="multipart").json()["code"] == \
        "invalid_track_file"
    assert not TrackImport.objects.exists()


def test_the_check_is_for_managers(db, media_root, client_for, annotator):
    video = video_factory(split="train")
    response = client_for(annotator).post("/api/track-imports/check/", _form(video, _gt("TUD-Campus")),
                                          format="multipart")
    assert response.status_code == 403


def test_the_command_line_asks_for_confirm_fit(db, media_root, tmp_path):
    crossing = video_factory(split="train", width=640, height=360, frame_count=120)
    (tmp_path / "gt").mkdir()
    (tmp_path / "gt" / "gt.txt").write_bytes(_gt("TUD-Campus"))
    args = ["import_tracks", str(tmp_path), "--video", str(crossing.pk), "--source", "TUD", "--clip"]
    with pytest.raises(CommandError, match="--confirm-fit"):
        call_command(*args)
    assert not ProposalRun.objects.exists()
    call_command(*args, "--confirm-fit")
    run = ProposalRun.objects.get()
    assert run.status == "succeeded" and run.trajectory_count == 8
    assert [f["code"] for f in run.track_import.fit_findings] == ["boxes_outside", "frames_short"]

"""Bringing CVAT for video and Label Studio annotations in as imported proposal runs, through the
service, the API and the command line; bad files are refused with the line of their element and
leave nothing behind, and so does a MOTChallenge folder whose tracks are refused after it brought
its video (without --split: it joins a split group that already has one)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from common.errors import ApplicationError
from common.models import Job
from tests.conftest import media_files
from tests.trajectories.factories import video_factory
from tests.trajectories.test_import_jobs import _mot_folder
from trajectories.models import (
    ProposalConfig,
    ProposalRun,
    Source,
    SplitGroup,
    TrackImport,
    Trajectory,
    Video,
)
from trajectories.services.imports import track_import, track_import_execute

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
CVAT = (EXAMPLES / "cvat_for_video_1_1.xml").read_bytes()
LABEL_STUDIO = (EXAMPLES / "label_studio_video.json").read_bytes()


def _video():
    return video_factory(split="train", width=640, height=360, frame_count=50)


def _stored(run) -> dict[int, Trajectory]:
    return {t.track_id: t for t in Trajectory.objects.filter(run=run)}


def _nothing_stored(video: Video) -> None:
    assert not ProposalRun.objects.exists() and not ProposalConfig.objects.exists()
    assert not TrackImport.objects.exists() and not Trajectory.objects.exists() and not Job.objects.exists()
    assert SplitGroup.objects.get(pk=video.split_group_id).locked_at is None


def test_a_cvat_file_becomes_an_imported_run_with_cvats_boxes(db, media_root):
    video = _video()
    result = track_import(video=video, data=CVAT, file_name="annotations.xml", fmt="cvat", source="CVAT task 5")
    run = result.run
    assert result.created and run.kind == "imported" and run.status == "succeeded" and run.trajectory_count == 2
    record = run.track_import
    assert record.format == "cvat" and record.options == {"clip": False}
    assert record.counts == {"rows": 80, "outside": 2, "tracks_not_boxes": 1, "interpolated": 73, "occluded": 10,
                             "keyframes": 8, "clipped": 0}
    person, car = _stored(run)[0], _stored(run)[1]
    assert (person.category, car.category) == ("person", "car")
    np.testing.assert_array_equal(person.frames_array(), [*range(0, 20), *range(30, 40)])
    np.testing.assert_allclose(person.boxes_array()[3], [130, 50, 170, 150])
    assert (car.first_frame, car.last_frame, car.n_obs) == (0, 49, 50)
    assert person.temporal_coverage == pytest.approx(30 / 40)        # the gap while outside stays a gap


def test_a_label_studio_export_becomes_an_imported_run_in_pixels(db, media_root):
    video = _video()
    run = track_import(video=video, data=LABEL_STUDIO, file_name="project-1.json", fmt="labelstudio",
                       source="Label Studio project 1", review="source_verified",
                       review_reason="boxes drawn and checked by the lab").run
    assert run.status == "succeeded" and run.track_import.counts["interpolated"] == 38
    person, car = _stored(run)[1], _stored(run)[2]
    np.testing.assert_array_equal(person.frames_array(), [*range(0, 11), *range(20, 50)])
    np.testing.assert_allclose(person.boxes_array()[0], [64, 72, 96, 162])
    np.testing.assert_allclose(car.boxes_array(), [[284, 180, 320, 244]], atol=1e-4)


@pytest.mark.parametrize("fmt,data,line,fragment", [
    ("cvat", CVAT.replace(b'xtl="300.00"', b'xtl="nan"'), 78, "xtl is not a finite number"),
    ("cvat", CVAT.replace(b'xbr="545.00"', b'xbr="700.00"'), 89, "lies outside the 640x360 frame"),
    ("cvat", CVAT.replace(b'frame="45"', b'frame="64"'), 89, "frame 64 is past the video's last frame 49"),
    ("cvat", CVAT.replace(b' occluded="1"', b""), 74, "lacks the attribute(s) occluded"),
    ("cvat", CVAT.replace(b"</track>\n  <track", b"<track", 1), 96, "not well-formed XML"),
    ("cvat", CVAT.replace(b"<width>640</width>", b"<width>1280</width>"), 62, "declares width 1280"),
    ("labelstudio", LABEL_STUDIO.replace(b'"x": 30.0', b'"x": NaN'), 17, "x is not a finite number"),
    ("labelstudio", LABEL_STUDIO.replace(b'"x": 30.0', b'"x": 99.0'), 17, "lies outside the 640x360 frame"),
    ("labelstudio", LABEL_STUDIO.replace(b'"frame": 21', b'"frame": 70'), 17, "frame 70 is past"),
    ("labelstudio", LABEL_STUDIO.replace(b'"frame": 11, "enabled": false, ', b'"frame": 11, '), 16, "lacks enabled"),
    ("labelstudio", LABEL_STUDIO.replace(b'"was_cancelled": true', b'"was_cancelled": false'), 61,
     "2 annotations hold video rectangles"),
])
def test_bad_files_are_refused_with_the_line_of_their_element_and_nothing_is_stored(db, media_root, fmt, data, line,
                                                                                  fragment):
    video = _video()
    with pytest.raises(ApplicationError) as info:
        track_import(video=video, data=data, file_name="bad", fmt=fmt, source="somewhere")
    assert info.value.code == "invalid_track_file" and fragment in info.value.message, info.value.message
    assert info.value.extra["problems"][0]["line"] == line
    _nothing_stored(video)


def test_keyframes_that_interpolate_past_the_box_limit_are_refused(db, media_root, settings):
    settings.TRAJLAB_TRACK_IMPORT_MAX_BOXES = 60
    video = _video()
    with pytest.raises(ApplicationError) as info:
        track_import(video=video, data=CVAT, file_name="annotations.xml", fmt="cvat", source="CVAT")
    assert info.value.code == "too_many_boxes" and info.value.extra["limit"] == 60
    assert "once its keyframes are interpolated" in info.value.message
    _nothing_stored(video)


# -- the API and the import form's check -----------------------------------------------------------------
def _upload(client, url: str, video, data: bytes, name: str, fmt: str, **fields):
    return client.post(url, {"file": SimpleUploadedFile(name, data), "video": video.pk, "format": fmt,
                             "source": "annotation tool", **fields}, format="multipart")


@pytest.mark.parametrize("fmt,data,name,tracks", [("cvat", CVAT, "annotations.xml", 2),
                                                  ("labelstudio", LABEL_STUDIO, "project-1.json", 2)])
def test_the_api_imports_both_formats_through_a_job(db, media_root, manager_client, fmt, data, name, tracks):
    video = _video()
    check = _upload(manager_client, "/api/track-imports/check/", video, data, name, fmt)
    assert check.status_code == 200, check.json()
    assert check.json()["fits"] and check.json()["tracks"] == tracks and check.json()["last_frame"] == 49 + (
        fmt == "labelstudio")                                            # Label Studio numbers frames from 1
    response = _upload(manager_client, "/api/track-imports/", video, data, name, fmt)
    assert response.status_code == 202, response.json()
    assert response.json()["format"] == fmt and response.json()["run_status"] == "queued"
    track_import_execute(run_id=response.json()["run"])
    done = manager_client.get(f"/api/track-imports/{response.json()['id']}/").json()
    assert done["run_status"] == "succeeded" and done["trajectory_count"] == tracks


def test_the_api_refuses_a_bad_file_with_a_400_naming_its_line(db, media_root, manager_client):
    video = _video()
    response = _upload(manager_client, "/api/track-imports/", video, CVAT.replace(b'ytl="20', b'ytl="x'),
                       "annotations.xml", "cvat")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_track_file" and body["extra"]["file"] == "annotations.xml"
    assert body["extra"]["problems"][0] == {"line": 86, "message": "ytl is not a number: 'x0.00'"}
    check = _upload(manager_client, "/api/track-imports/check/", video,
                    LABEL_STUDIO.replace(b'"x": 30.0', b'"x": 99.0'), "p.json", "labelstudio")
    assert check.status_code == 200 and not check.json()["fits"]
    assert check.json()["problems"][0]["line"] == 17
    assert _upload(manager_client, "/api/track-imports/", video, CVAT, "a.xml", "vott").status_code == 400
    _nothing_stored(video)


# -- the command line -------------------------------------------------------------------------------------
def test_the_command_line_reads_both_formats_from_their_names(db, media_root, tmp_path, capsys):
    video = _video()
    (tmp_path / "annotations.xml").write_bytes(CVAT)
    (tmp_path / "project-1.json").write_bytes(LABEL_STUDIO)
    call_command("import_tracks", str(tmp_path / "annotations.xml"), "--video", str(video.pk), "--source", "CVAT")
    call_command("import_tracks", str(tmp_path / "project-1.json"), "--video", str(video.pk), "--source", "LS")
    out = capsys.readouterr().out
    assert "2 tracks, 80 boxes" in out and "2 tracks, 42 boxes" in out
    assert sorted(TrackImport.objects.values_list("format", flat=True)) == ["cvat", "labelstudio"]


def test_the_command_line_refuses_a_bad_file_with_its_line_and_keeps_nothing(db, media_root, tmp_path, capsys):
    video = _video()
    (tmp_path / "bad.json").write_bytes(LABEL_STUDIO.replace(b'"height": 25.0, "time": 0.4', b'"time": 0.4'))
    with pytest.raises(CommandError, match="line 16: region 'rA1xQ9' \\(track 1\\): the sequence entry lacks height"):
        call_command("import_tracks", str(tmp_path / "bad.json"), "--video", str(video.pk), "--source", "LS")
    (tmp_path / "bad.xml").write_text(CVAT.decode().replace("<version>1.1</version>", "<version>1.0</version>"))
    with pytest.raises(CommandError, match="line 3: expected <version>1.1</version>"):
        call_command("import_tracks", str(tmp_path / "bad.xml"), "--video", str(video.pk), "--source", "CVAT")
    _nothing_stored(video)


# -- a MOTChallenge folder's own video, when its tracks are refused ---------------------------------------
def _refuse_in_job(monkeypatch):
    def broken(**kwargs):
        raise ApplicationError("the disk is full", code="disk_full")

    monkeypatch.setattr("trajectories.services.imports.trajectories_store", broken)


@pytest.mark.slow
@pytest.mark.parametrize("last_frame,seqinfo,in_job,message", [
    (40, False, False, "past the video's last frame"),       # refused by the check against the video it brought
    (10, True, False, "may not belong to video"),            # refused by the fit check (409)
    (30, True, True, "the disk is full"),                    # refused by the job that stores the tracks
])
def test_a_mot_folder_without_split_keeps_nothing_once_its_tracks_are_refused(db, media_root, tmp_path, monkeypatch,
                                                                              last_frame, seqinfo, in_job, message):
    first = _mot_folder(tmp_path / "LAB-01", n_frames=30, last_frame=30, seqinfo=True)
    call_command("import_tracks", str(first), "--source", "LAB", "--split", "train")
    before = {"files": media_files(media_root), "videos": list(Video.objects.values_list("pk", flat=True)),
              "runs": ProposalRun.objects.count(), "jobs": Job.objects.count(), "configs": ProposalConfig.objects.count(),
              "imports": TrackImport.objects.count(), "trajectories": Trajectory.objects.count(),
              "groups": list(SplitGroup.objects.values_list("name", "split")),
              "sources": list(Source.objects.values_list("name", flat=True))}
    folder = _mot_folder(tmp_path / "LAB-02", n_frames=31, last_frame=last_frame, seqinfo=seqinfo)
    if in_job:
        _refuse_in_job(monkeypatch)
    with pytest.raises(CommandError, match=message):
        call_command("import_tracks", str(folder), "--source", "LAB")          # no --split: LAB has one
    after = {"files": media_files(media_root), "videos": list(Video.objects.values_list("pk", flat=True)),
             "runs": ProposalRun.objects.count(), "jobs": Job.objects.count(), "configs": ProposalConfig.objects.count(),
             "imports": TrackImport.objects.count(), "trajectories": Trajectory.objects.count(),
             "groups": list(SplitGroup.objects.values_list("name", "split")),
             "sources": list(Source.objects.values_list("name", flat=True))}
    assert after == before
    assert [p for p in (media_root / "videos").rglob("*") if p.is_dir() and not any(p.iterdir())] == []


def test_a_label_studio_json_is_told_from_a_tube_file_by_its_content(db, media_root, tmp_path):
    from trajectories.management.commands.import_tracks import _format_of

    (tmp_path / "tubes.json").write_text(json.dumps({"format": "trajlab-tubes/1", "tubes": []}))
    (tmp_path / "one-task.json").write_text(json.dumps({"id": 1, "annotations": []}))
    (tmp_path / "export.json").write_bytes(LABEL_STUDIO)
    assert [_format_of(tmp_path / n) for n in ("tubes.json", "one-task.json", "export.json")] == \
        ["json", "labelstudio", "labelstudio"]
    assert [_format_of(Path(n)) for n in ("a.XML", "t.csv", "gt.txt")] == ["cvat", "csv", "mot"]

"""Importing existing tracks and tubes (issue 14): MOTChallenge from a rendered scene through review,
freeze and a snapshot; source-verified imports; bad files refused with nothing stored; the
annotated-tube branch against a known answer; captions as description proposals."""
from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction

from annotation.benchmark.services.descriptions import (
    description_run_create,
    description_run_execute,
)
from annotation.benchmark.services.queries import generation_run_create, generation_run_execute
from annotation.benchmark.services.snapshots import relation_snapshot_create, relation_snapshot_load
from annotation.benchmark.services.tube_captions import tube_captions_propose
from annotation.curation.services.pools import pool_freeze
from annotation.demo.builders import demo_video_import
from annotation.demo.simulation import simulate_annotators
from annotation.demo.simulation_relations import simulate_relation_review
from annotation.models import Description, PoolMember, Query, WorkItem
from common.errors import ApplicationError, ConflictError
from models.tracks_io.mot import format_mot, format_seqinfo
from models.tracks_io.records import ImportedTrack
from models.tracks_io.tubes_json import format_tubes_json
from models.world.renderer import render_scene
from models.world.scene import GroundTruth, PersonSpec, SceneSpec, gt_path_for
from tests.trajectories.factories import video_factory
from trajectories.models import (
    ProposalConfig,
    ProposalRun,
    SplitGroup,
    TrackImport,
    Trajectory,
    TubeMatchReport,
)
from trajectories.services.imports import track_import
from trajectories.services.tube_matching import tube_match_report_create


def _scene(name: str, people: list[PersonSpec]) -> SceneSpec:
    return SceneSpec(name=name, width=320, height=180, fps=8, n_frames=32, seed=7, background="plaza", people=people)


def _render(tmp_path: Path, spec: SceneSpec, split: str = "train"):
    path = tmp_path / f"{spec.name}.mp4"
    gt = render_scene(spec, path)
    gt.save(gt_path_for(path))
    video = demo_video_import(path, source=spec.name, name=spec.name, ground_truth=gt_path_for(path),
                              echo=lambda *a, **k: None)
    SplitGroup.objects.filter(pk=video.split_group_id).update(split=split)
    video.refresh_from_db()
    return video, gt


def _gt_tracks(gt: GroundTruth, *, min_visible: float = 0.3) -> list[ImportedTrack]:
    tracks = []
    for p in gt.people:
        frames = np.array([f for f, b in enumerate(p.boxes) if b is not None and p.visible[f] > min_visible])
        boxes = np.array([p.boxes[f] for f in frames], float)
        tracks.append(ImportedTrack(track_id=p.id + 1, category="person", frames=frames, boxes=boxes,
                                    scores=np.ones(len(frames)), lines=np.zeros(len(frames), int)))
    return tracks


def _mot_folder(root: Path, gt: GroundTruth, *, frames_from: Path | None = None) -> Path:
    """A MOTChallenge sequence folder of the scene: gt/gt.txt, seqinfo.ini and (optionally) img1/."""
    (root / "gt").mkdir(parents=True)
    (root / "gt" / "gt.txt").write_text(format_mot(_gt_tracks(gt)))
    (root / "seqinfo.ini").write_text(format_seqinfo(name=gt.scene, fps=gt.fps, frame_count=gt.n_frames,
                                                     width=gt.width, height=gt.height))
    if frames_from is not None:
        (root / "img1").mkdir()
        cap = cv2.VideoCapture(str(frames_from))
        for i in range(gt.n_frames):
            ok, frame = cap.read()
            assert ok
            cv2.imwrite(str(root / "img1" / f"{i + 1:06d}.png"), frame)
        cap.release()
    return root


TWO_PEOPLE = [PersonSpec(upper="red", lower="blue", direction="right", speed="normal", start=(40, 160), height=80),
              PersonSpec(upper="yellow", lower="grey", direction="left", speed="slow", start=(280, 120), height=60)]


@pytest.mark.slow
def test_mot_folder_of_a_rendered_scene_is_reviewed_frozen_and_reaches_a_snapshot(db, media_root, tmp_path, settings,
                                                                                   make_user):
    settings.VAR_DIR = tmp_path / "var"
    manager = make_user("manager", username="boss")
    video, gt = _render(tmp_path, _scene("motchain", TWO_PEOPLE))
    folder = _mot_folder(tmp_path / "MOT-chain-01", gt)

    call_command("import_tracks", str(folder), "--video", str(video.pk), "--source", "MOT-chain-01 ground truth")

    run = ProposalRun.objects.get(video=video)
    record = run.track_import
    assert run.kind == "imported" and run.config.backend == "imported" and run.status == "succeeded"
    assert record.format == "mot" and record.review == "reviewed" and record.source == "MOT-chain-01 ground truth"
    assert record.file_sha256 == hashlib.sha256((folder / "gt" / "gt.txt").read_bytes()).hexdigest()
    assert record.options == {"gt": True, "clip": False}
    assert run.trajectory_count == 2
    stored = {t.track_id: t for t in Trajectory.objects.filter(run=run)}
    expected = _gt_tracks(gt)
    for t in expected:
        np.testing.assert_array_equal(stored[t.track_id].frames_array(), t.frames)
        np.testing.assert_allclose(stored[t.track_id].boxes_array(), t.boxes, atol=0.01)
    # imported tracks go through the same usability review as a tracker's
    assert WorkItem.objects.filter(stage="usability", trajectory__run=run).count() == 2

    simulate_annotators(n_annotators=3, accuracy=1.0, seed=0)
    pool = pool_freeze(run=run, frozen_by=manager)
    assert pool.n_members == 2
    desc = description_run_create(pools=[pool], created_by=manager, queue=False)
    description_run_execute(run=desc)
    simulate_relation_review(accuracy=1.0, seed=1, stage=WorkItem.Stage.DESCRIPTION)
    gen = generation_run_create(pools=[pool], created_by=manager, queue=False)
    generation_run_execute(run=gen)
    simulate_relation_review(accuracy=1.0, seed=2, stage=WorkItem.Stage.RELATION)
    assert Query.objects.filter(pool=pool, status="accepted").exists()

    snap = relation_snapshot_create(split="train", created_by=manager)
    data = relation_snapshot_load(snapshot=snap)
    assert data.content_sha256() == snap.content_sha256
    assert {q.target_id for q in Query.objects.filter(pool=pool, status="accepted")} <= set(stored_ids := [
        t.pk for t in stored.values()]) and stored_ids
    assert str(video.pk) in snap.pool_versions

    # the same file again is the same run
    call_command("import_tracks", str(folder), "--video", str(video.pk), "--source", "MOT-chain-01 ground truth")
    assert ProposalRun.objects.filter(video=video).count() == 1


@pytest.mark.slow
def test_a_mot_folder_with_img1_brings_its_own_video(db, media_root, tmp_path):
    spec = _scene("motframes", TWO_PEOPLE)
    gt = render_scene(spec, tmp_path / "motframes.mp4")
    folder = _mot_folder(tmp_path / "MOT-frames-02", gt, frames_from=tmp_path / "motframes.mp4")
    call_command("import_tracks", str(folder), "--source", "MOT-frames-02", "--split", "dev",
                 "--source-verified", "benchmark ground truth, verified by its authors")
    run = ProposalRun.objects.get()
    assert (run.video.frame_count, run.video.width, run.video.fps) == (32, 320, 8.0)
    assert run.video.split == "dev" and run.track_import.review == "source_verified"
    assert not WorkItem.objects.exists()                            # source-verified: no review opened
    assert pool_freeze(run=run).n_members == 2


def _csv(rows) -> bytes:
    return ("track_id,frame,x1,y1,x2,y2\n" + "".join(",".join(map(str, r)) + "\n" for r in rows)).encode()


GOOD_ROWS = [(1, f, 10 + f, 20, 50 + f, 100) for f in range(10)] + [(2, f, 200, 20, 240, 100) for f in range(5)]


def test_source_verified_import_is_frozen_without_review_and_keeps_its_reason(db, media_root):
    video = video_factory(split="train", frame_count=12)
    result = track_import(video=video, data=_csv(GOOD_ROWS), file_name="tracks.csv", fmt="csv", source="lab tracker",
                          review="source_verified", review_reason="hand-corrected by the lab")
    run = result.run
    assert result.created and run.track_import.review_reason == "hand-corrected by the lab"
    assert not WorkItem.objects.filter(trajectory__run=run).exists()
    pool = pool_freeze(run=run)
    assert sorted(PoolMember.objects.filter(pool=pool).values_list("trajectory__track_id", flat=True)) == [1, 2]
    # the database itself refuses a source-verified record without a reason
    with pytest.raises(IntegrityError), transaction.atomic():
        TrackImport.objects.filter(pk=run.track_import.pk).update(review_reason="")
    with pytest.raises(ApplicationError) as info:
        track_import(video=video, data=_csv(GOOD_ROWS), file_name="t.csv", fmt="csv", source="x",
                     review="source_verified")
    assert info.value.code == "reason_required"


@pytest.mark.parametrize("rows,line,fragment", [
    ([(1, 0, 10, 20, 50, 100), (1, 1, 10, 20, 50)], 3, "found 5"),                       # wrong columns
    ([(1, 0, 10, 20, 50, 100), (1, 1, 10, 20, 700, 100)], 3, "outside the 640x360 frame"),
    ([(1, 0, 10, 20, 50, 100), (1, 50, 10, 20, 50, 100)], 3, "past the video's last frame 49"),
    ([(1, 0, 10, 20, 50, 100), (1, 0, 12, 20, 52, 100)], 3, "appears twice on frame 0"),
    ([(1, 0, 10, 20, 50, 100), (1, 1, "nan", 20, 50, 100)], 3, "not a finite number"),
])
def test_bad_files_are_refused_with_the_line_and_nothing_is_stored(db, media_root, rows, line, fragment):
    video = video_factory(split="train", frame_count=50)
    with pytest.raises(ApplicationError) as info:
        track_import(video=video, data=_csv(rows), file_name="bad.csv", fmt="csv", source="somewhere")
    assert info.value.code == "invalid_track_file"
    assert info.value.extra["problems"][0]["line"] == line and fragment in str(info.value.message)
    assert not ProposalRun.objects.exists() and not ProposalConfig.objects.exists()
    assert not TrackImport.objects.exists() and not Trajectory.objects.exists()
    assert SplitGroup.objects.get(pk=video.split_group_id).locked_at is None


def test_an_unassigned_split_is_refused(db, media_root):
    video = video_factory(split="", frame_count=12)
    with pytest.raises(ConflictError) as info:
        track_import(video=video, data=_csv(GOOD_ROWS), file_name="t.csv", fmt="csv", source="x")
    assert info.value.code == "split_unassigned" and not ProposalRun.objects.exists()


# -- the annotated-tube branch ------------------------------------------------------------------------
THREE_PEOPLE = [  # far apart and all in view the whole time, so the known answer is exact
    PersonSpec(upper="red", lower="blue", direction="right", speed="slow", start=(40, 170), height=70),
    PersonSpec(upper="green", lower="black", direction="none", start=(160, 170), height=70),
    PersonSpec(upper="yellow", lower="grey", direction="none", start=(270, 170), height=70),
]


def _subset(track: ImportedTrack, frames, *, track_id: int | None = None, caption: str = "") -> ImportedTrack:
    keep = np.isin(track.frames, list(frames))
    return ImportedTrack(track_id=track.track_id if track_id is None else track_id, category=track.category,
                         frames=track.frames[keep], boxes=track.boxes[keep], scores=track.scores[keep],
                         lines=track.lines[keep], caption=caption)


@pytest.mark.slow
def test_the_annotated_tube_branch_reports_the_known_answer(db, media_root, tmp_path, make_user):
    manager = make_user("manager", username="boss")
    video, gt = _render(tmp_path, _scene("tubes", THREE_PEOPLE))
    a, b, c = _gt_tracks(gt, min_visible=0.0)
    assert all(len(t.frames) == 32 for t in (a, b, c))
    # HC-STVG-style event tubes: A on frames 4-19, B on 0-15, C on 16-31, with captions
    tubes = [_subset(a, range(4, 20), caption="The person in red walks to the right."),
             _subset(b, range(0, 16), caption="The person in green stands still."),
             _subset(c, range(16, 32), caption="The person in yellow waits.")]
    tubes_run = track_import(video=video, data=format_tubes_json(tubes).encode(), file_name="tubes.json",
                             fmt="json", source="rendered scene ground truth", purpose="tubes").run
    assert not WorkItem.objects.filter(trajectory__run=tubes_run).exists()
    with pytest.raises(ConflictError):
        pool_freeze(run=tubes_run)
    # proposals: A's whole track (kept beyond the tube's interval); a track that follows B on 0-25 and then
    # switches to C on 26-31 (6 of C's 16 tube frames: not enough coverage for C)
    switcher = ImportedTrack(track_id=20, category="person", frames=np.arange(32),
                             boxes=np.vstack([b.boxes[:26], c.boxes[26:]]), scores=np.ones(32),
                             lines=np.zeros(32, int))
    full_a = ImportedTrack(track_id=10, category="person", frames=a.frames, boxes=a.boxes, scores=a.scores,
                           lines=a.lines)
    props_run = track_import(video=video, data=format_tubes_json([full_a, switcher]).encode(),
                             file_name="tracks.json", fmt="json", source="a tracker", review="source_verified",
                             review_reason="fixture tracks").run
    ids = dict(Trajectory.objects.filter(run=props_run).values_list("track_id", "pk"))

    report = tube_match_report_create(tubes_run=tubes_run, proposals_run=props_run, created_by=manager)
    assert report.counts == {"matched": 1, "ambiguous": 1, "unmatched": 1}
    by_track = {t["tube_track_id"]: t for t in report.report["tubes"]}
    assert by_track[1]["status"] == "matched" and by_track[1]["raw_positives"] == [ids[10]]
    assert by_track[1]["caption"] == "The person in red walks to the right."
    assert by_track[2]["status"] == "ambiguous" and by_track[2]["positive_candidates"] == [ids[20]]
    assert "6 frame(s) of tube" in by_track[2]["reasons"][str(ids[20])]
    assert by_track[3]["status"] == "unmatched" and by_track[3]["ignored"] == [ids[20]]
    assert by_track[2]["negative_candidates"] == [ids[10]] and by_track[3]["negative_candidates"] == [ids[10]]
    pairs = {(p["tube"], p["trajectory"]): p for p in report.report["pairs"]}
    tube_c = Trajectory.objects.get(run=tubes_run, track_id=3).pk
    assert pairs[(tube_c, ids[20])]["coverage"] == pytest.approx(6 / 16, abs=1e-6)
    # asked again, the report is replaced, not duplicated
    tube_match_report_create(tubes_run=tubes_run, proposals_run=props_run, config={"min_coverage": 0.3,
                                                                                         "min_mean_iou": 0.3})
    assert TubeMatchReport.objects.count() == 1
    report.refresh_from_db()
    assert report.report["tubes"][2]["status"] == "ambiguous"      # C_τ = meanIoU = 6/16 ≥ 0.3: a positive of C too

    # captions seed description review as model-side proposals, never as approved text
    report = tube_match_report_create(tubes_run=tubes_run, proposals_run=props_run)
    pool = pool_freeze(run=props_run)
    counts = tube_captions_propose(report=report, pool=pool, created_by=manager)
    assert counts["proposed"] == 1
    description = Description.objects.get(pool=pool, trajectory_id=ids[10])
    assert description.status == "in_review" and description.approved_version is None
    version = description.versions.get()
    assert version.origin == "model" and version.content["appearance"] == "The person in red walks to the right."
    assert WorkItem.objects.get(stage="description", description=version).state == "open"
    assert tube_captions_propose(report=report, pool=pool)["kept_existing"] == 1


def test_the_database_refuses_malformed_import_records_and_self_reports(db, media_root):
    video = video_factory(split="train", frame_count=12)
    run = track_import(video=video, data=_csv(GOOD_ROWS), file_name="t.csv", fmt="csv", source="x").run
    record = run.track_import
    for change in ({"file_sha256": "not-a-hash"}, {"format": "xml"}):
        with pytest.raises(IntegrityError), transaction.atomic():
            TrackImport.objects.filter(pk=record.pk).update(**change)
    with pytest.raises(IntegrityError), transaction.atomic():
        TubeMatchReport.objects.create(video=video, tubes_run=run, proposals_run=run, config={}, counts={}, report={})
    with pytest.raises(ConflictError) as info:
        tube_match_report_create(tubes_run=run, proposals_run=run)
    assert info.value.code == "not_tubes"


def test_the_tube_branch_from_the_command_line(db, media_root, tmp_path, capsys):
    video = video_factory(split="train", frame_count=12)
    frames = np.arange(10)
    boxes = np.stack([10 + frames, np.full(10, 20), 50 + frames, np.full(10, 100)], 1).astype(float)
    tube = ImportedTrack(track_id=3, category="person", frames=frames, boxes=boxes, scores=np.ones(10),
                         lines=frames, caption="a person walks right")
    (tmp_path / "tubes.json").write_text(format_tubes_json([tube]))
    (tmp_path / "tracks.csv").write_bytes(_csv(GOOD_ROWS))
    call_command("import_tracks", str(tmp_path / "tubes.json"), "--video", str(video.pk), "--source", "s", "--tubes")
    call_command("import_tracks", str(tmp_path / "tracks.csv"), "--video", str(video.pk), "--source", "s",
                 "--source-verified", "checked by hand")
    tubes_run = ProposalRun.objects.get(track_import__purpose="tubes")
    props_run = ProposalRun.objects.get(track_import__purpose="proposals")
    call_command("match_tubes", "--tubes-run", str(tubes_run.pk), "--proposals-run", str(props_run.pk))
    out = capsys.readouterr().out
    assert "1 matched, 0 ambiguous, 0 unmatched" in out
    report = TubeMatchReport.objects.get()
    pool = pool_freeze(run=props_run)
    call_command("propose_tube_captions", "--report", str(report.pk), "--pool", str(pool.pk))
    assert "1 caption(s) proposed for review" in capsys.readouterr().out
    (tmp_path / "bad.csv").write_bytes(_csv([(1, 0, 10, 20, 50, 100), (1, 1, 10, 20, 50)]))
    with pytest.raises(CommandError, match="line 3"):
        call_command("import_tracks", str(tmp_path / "bad.csv"), "--video", str(video.pk), "--source", "s")

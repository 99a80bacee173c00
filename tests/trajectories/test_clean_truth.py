"""Clean-truth tubes (seed 002, D.1): an annotated tube matched to a proposal is kept beside it,
linked, with the pair's overlap figures, and read through the API."""
from __future__ import annotations

import numpy as np
import pytest
from django.db import IntegrityError, transaction

from models.tracks_io.records import ImportedTrack
from models.tracks_io.tubes_json import format_tubes_json
from tests.trajectories.factories import video_factory
from trajectories.models import CleanTruthTube, Trajectory, TubeMatchReport
from trajectories.services.imports import track_import
from trajectories.services.tube_matching import tube_match_report_create


def _track(track_id: int, frames, x0: float, caption: str = "") -> ImportedTrack:
    frames = np.asarray(list(frames))
    boxes = np.stack([x0 + frames, np.full(len(frames), 20), x0 + 40 + frames, np.full(len(frames), 100)], 1)
    return ImportedTrack(track_id=track_id, category="person", frames=frames, boxes=boxes.astype(float),
                         scores=np.ones(len(frames)), lines=frames, caption=caption)


@pytest.fixture
def runs(db, media_root):
    """A tubes run (A annotated on frames 3-7 only, B on 0-9) and a proposals run: A's whole track
    (frames 0-11, one pixel off) and a track far from both."""
    video = video_factory(split="train", frame_count=12)
    tubes = track_import(video=video, data=format_tubes_json([_track(1, range(3, 8), 10, "A walks right"),
                                                             _track(2, range(10), 200)]).encode(),
                         file_name="tubes.json", fmt="json", source="annotations", purpose="tubes").run
    proposals = track_import(video=video, data=format_tubes_json([_track(5, range(12), 11),
                                                                 _track(6, range(12), 400)]).encode(),
                             file_name="tracks.json", fmt="json", source="a tracker", review="source_verified",
                             review_reason="fixture tracks").run
    return tubes, proposals


def _ids(run) -> dict[int, int]:
    return dict(Trajectory.objects.filter(run=run).values_list("track_id", "pk"))


def test_a_matched_tube_is_kept_beside_its_proposal_with_its_own_boxes(runs):
    tubes, proposals = runs
    tube, prop = _ids(tubes), _ids(proposals)
    report = tube_match_report_create(tubes_run=tubes, proposals_run=proposals)
    assert report.counts == {"matched": 1, "ambiguous": 0, "unmatched": 1}
    (link,) = CleanTruthTube.objects.all()
    assert (link.tube_id, link.trajectory_id, link.report_id) == (tube[1], prop[5], report.pk)
    assert link.caption == "A walks right" and link.video_id == tubes.video_id
    pair = next(p for p in report.report["pairs"] if p["tube"] == tube[1] and p["trajectory"] == prop[5])
    assert (link.max_iou, link.coverage, link.mean_iou) == (pair["max_iou"], pair["coverage"], pair["mean_iou"])
    assert link.coverage == 1.0 and link.mean_iou == pytest.approx(39 * 80 / (41 * 80))
    # the clean record is the event-limited tube; the proposal keeps its full extent
    assert link.tube.frames_array().tolist() == [3, 4, 5, 6, 7]
    assert link.trajectory.frames_array().tolist() == list(range(12))
    np.testing.assert_allclose(link.tube.boxes_array()[0], [13, 20, 53, 100])


def test_the_links_follow_their_report_and_never_touch_the_tube(runs):
    tubes, proposals = runs
    tube = Trajectory.objects.get(run=tubes, track_id=1)
    before = (bytes(tube.frames), bytes(tube.boxes))
    tube_match_report_create(tubes_run=tubes, proposals_run=proposals)
    # stricter screening: the one-pixel-off proposal is no positive any more (meanIoU 0.95 < 0.99)
    report = tube_match_report_create(tubes_run=tubes, proposals_run=proposals, config={"min_mean_iou": 0.99})
    assert report.counts["matched"] == 0 and not CleanTruthTube.objects.exists()
    tube.refresh_from_db()
    assert (bytes(tube.frames), bytes(tube.boxes)) == before
    tube_match_report_create(tubes_run=tubes, proposals_run=proposals)
    assert CleanTruthTube.objects.count() == 1 and TubeMatchReport.objects.count() == 1


def test_the_database_refuses_a_self_link_and_figures_out_of_range(runs):
    tubes, proposals = runs
    report = tube_match_report_create(tubes_run=tubes, proposals_run=proposals)
    link = CleanTruthTube.objects.get()
    base = dict(report=report, video_id=link.video_id, max_iou=0.9, coverage=1.0, mean_iou=0.8)
    with pytest.raises(IntegrityError), transaction.atomic():
        CleanTruthTube.objects.create(tube_id=link.tube_id, trajectory_id=link.tube_id, **base)
    with pytest.raises(IntegrityError), transaction.atomic():
        CleanTruthTube.objects.filter(pk=link.pk).update(coverage=1.5)
    with pytest.raises(IntegrityError), transaction.atomic():
        CleanTruthTube.objects.create(tube_id=link.tube_id, trajectory_id=link.trajectory_id, **base)


def test_the_api_lists_clean_truth_read_only(runs, manager_client, client_for, annotator):
    tubes, proposals = runs
    prop = _ids(proposals)
    report = tube_match_report_create(tubes_run=tubes, proposals_run=proposals)
    body = client_for(annotator).get(f"/api/clean-truth-tubes/?trajectory={prop[5]}").json()
    assert body["count"] == 1
    (row,) = body["results"]
    assert row["report"] == report.pk and row["trajectory"] == prop[5] and row["tube_track_id"] == 1
    assert row["frames"] == [3, 4, 5, 6, 7] and row["boxes"][0] == [13.0, 20.0, 53.0, 100.0]
    assert (row["first_frame"], row["last_frame"], row["coverage"]) == (3, 7, 1.0)
    assert manager_client.get(f"/api/clean-truth-tubes/?trajectory={prop[6]}").json()["count"] == 0
    assert manager_client.get(f"/api/clean-truth-tubes/?report={report.pk + 1}").json()["count"] == 0
    assert manager_client.get("/api/clean-truth-tubes/?video=x").status_code == 400
    assert manager_client.post("/api/clean-truth-tubes/", {}, format="json").status_code == 405
    assert client_for().get("/api/clean-truth-tubes/").status_code in (401, 403)

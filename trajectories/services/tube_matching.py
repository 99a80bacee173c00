"""The annotated-tube branch (seed D.1, issue 14 item 2): match a run's proposals against the
video's imported annotated tubes and store the per-video report (``TubeMatchReport``).

The maths is ``models.curation.tube_matching``; here the runs are checked, loaded and the report
stored. Proposal pairs already proposed for duplicate review are passed as possible same-identity
fragments, so such a fragment of a positive is never proposed as a low-overlap negative.

Each identity-checked raw positive keeps its tube beside it as a :class:`CleanTruthTube`: the
annotated tube is the clean ground truth (its event-limited boxes), the proposal the matched raw
record (its full extent), as D.1 keeps both.
"""
from __future__ import annotations

from django.db import transaction

from common.errors import ApplicationError, ConflictError
from models.curation.tube_matching import Track, TubeMatchConfig, match_tubes
from trajectories.models import (
    CleanTruthTube,
    DuplicateCandidate,
    ProposalRun,
    Trajectory,
    TubeMatchReport,
)


def _tracks(run: ProposalRun) -> list[tuple[Trajectory, Track]]:
    return [(t, Track(t.pk, t.frames_array().astype("int64"), t.boxes_array().astype("float64")))
            for t in Trajectory.objects.filter(run=run).order_by("pk")]


def tube_match_report_create(*, tubes_run: ProposalRun, proposals_run: ProposalRun, config: dict | None = None,
                             created_by=None) -> TubeMatchReport:
    """Match ``proposals_run``'s trajectories against ``tubes_run``'s annotated tubes on one video
    and store the report (computed again, and replaced, when asked again).

    Refused: a ``tubes_run`` that is not an import of annotated tubes (409 ``not_tubes``), a
    ``proposals_run`` that is one (409 ``tubes_as_proposals``), runs of different videos (400
    ``different_videos``), an unfinished run (409 ``run_not_finished``), bad settings (400
    ``invalid_match_settings``). Locks the report row of the pair of runs while replacing it and
    its clean-truth tubes (one per identity-checked raw positive).
    """
    if not tubes_run.annotated_tubes:
        raise ConflictError(f"run {tubes_run.pk} is not an import of annotated tubes", code="not_tubes")
    if proposals_run.annotated_tubes:
        raise ConflictError(f"run {proposals_run.pk} holds annotated tubes, not proposals", code="tubes_as_proposals")
    if tubes_run.video_id != proposals_run.video_id:
        raise ApplicationError(f"runs {tubes_run.pk} and {proposals_run.pk} belong to different videos",
                               code="different_videos")
    for run in (tubes_run, proposals_run):
        if run.status != ProposalRun.Status.SUCCEEDED:
            raise ConflictError(f"run {run.pk} is {run.status}; match finished runs", code="run_not_finished")
    try:
        settings = TubeMatchConfig.from_dict(config)
    except (TypeError, ValueError) as exc:
        raise ApplicationError(str(exc), code="invalid_match_settings") from None
    tubes = _tracks(tubes_run)
    proposals = _tracks(proposals_run)
    track_id_of = {row.pk: row.track_id for row, _ in tubes}
    captions = tubes_run.track_import.captions
    pairs = DuplicateCandidate.objects.filter(trajectory_a__run=proposals_run).values_list("trajectory_a_id",
                                                                                            "trajectory_b_id")
    result = match_tubes([t for _, t in tubes], [p for _, p in proposals], settings, same_identity=list(pairs))
    body = result.as_dict()
    for outcome in body["tubes"]:
        outcome["tube_track_id"] = track_id_of[outcome["tube"]]
        outcome["caption"] = captions.get(str(outcome["tube_track_id"]), "")
    with transaction.atomic():
        TubeMatchReport.objects.select_for_update().filter(tubes_run=tubes_run, proposals_run=proposals_run).first()
        report, _ = TubeMatchReport.objects.update_or_create(
            tubes_run=tubes_run, proposals_run=proposals_run,
            defaults=dict(video_id=tubes_run.video_id, config=settings.as_dict(), counts=result.counts(),
                          report=body, created_by=created_by))
        _clean_truth_store(report)
    return report


def _clean_truth_store(report: TubeMatchReport) -> None:
    """Replace the report's clean-truth tubes with one per (tube, raw positive) of its body."""
    overlap = {(p["tube"], p["trajectory"]): p for p in report.report["pairs"]}
    rows = []
    for link in raw_positives(report):
        pair = overlap[(link["tube"], link["trajectory"])]
        rows.append(CleanTruthTube(report=report, video_id=report.video_id, tube_id=link["tube"],
                                   trajectory_id=link["trajectory"], caption=link["caption"],
                                   max_iou=pair["max_iou"], coverage=pair["coverage"], mean_iou=pair["mean_iou"]))
    CleanTruthTube.objects.filter(report=report).delete()
    CleanTruthTube.objects.bulk_create(rows)


def raw_positives(report: TubeMatchReport) -> list[dict]:
    """The identity-checked raw positives of a report: ``{"tube", "tube_track_id", "trajectory",
    "caption"}`` per pair (tube and trajectory are trajectory ids)."""
    return [{"tube": t["tube"], "tube_track_id": t["tube_track_id"], "trajectory": r, "caption": t["caption"]}
            for t in report.report["tubes"] for r in t["raw_positives"]]

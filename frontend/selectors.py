"""Reads that the web UI needs and no other app offers: the work waiting for one person, per
task type, and the managers' pipeline progress per stage and split. Both are aggregates over
other apps' records; the rules they count by (who may claim what) live in those apps."""
from __future__ import annotations

from django.db import connection
from django.db.models import Count

from annotation.curation import selectors as annotation_selectors
from annotation.models import CandidatePool, Vote, WorkItem
from common.roles import Role, user_has_role
from trajectories.models import ProposalRun, SplitGroup, Video

QUEUE_COUNT_CAP = 1000  # queues are counted up to this many items ("1000+"), so a count stays cheap
SPLITS = ("train", "dev", "test")
UNASSIGNED = "unassigned"


def _capped_count(queryset) -> tuple[int, bool]:
    n = queryset.order_by().values("pk")[: QUEUE_COUNT_CAP + 1].count()
    return min(n, QUEUE_COUNT_CAP), n > QUEUE_COUNT_CAP


def annotator_queues(*, user) -> list[dict]:
    """Per review stage (for annotators) and per adjudication stage (for adjudicators): how many
    items this person could take now, the item they hold without a vote, and how many they did.

    "Could take" is ``annotation.curation.selectors.claimable_items``, the claim rule as a read. Counting
    stops at ``QUEUE_COUNT_CAP``.
    """
    out: list[dict] = []
    if user_has_role(user, Role.ANNOTATOR):
        for stage in WorkItem.Stage.values:
            available, more = _capped_count(annotation_selectors.claimable_items(annotator=user, stage=stage))
            seat = annotation_selectors.active_assignment(annotator=user, stage=stage)
            held = seat.item_id if seat is not None else None
            done = Vote.objects.filter(annotator=user, is_adjudication=False, item__stage=stage).count()
            out.append({"stage": stage, "kind": "review", "available": available, "more": more,
                        "in_progress": held, "done": done})
    if user_has_role(user, Role.ADJUDICATOR):
        queue = annotation_selectors.adjudication_queue(user=user)
        for stage in WorkItem.Stage.values:
            available, more = _capped_count(queue.filter(stage=stage))
            done = Vote.objects.filter(annotator=user, is_adjudication=True, item__stage=stage).count()
            out.append({"stage": stage, "kind": "adjudication", "available": available, "more": more,
                        "in_progress": None, "done": done})
    return out


def _review_counts() -> list[tuple[str, str, str, int]]:
    """``(stage, split, state, items)`` of every review item. The items are counted per stage,
    video and state first, in the order of the ``work_item_progress`` index (read alone, without
    the rows), and only those counts, one per video, are joined to the videos' splits: joining
    every item to its video and split first took most of the page's time at a million items."""
    items, videos, groups = (m._meta.db_table for m in (WorkItem, Video, SplitGroup))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT w.stage, g.split, w.state, SUM(w.n) FROM (SELECT stage, video_id, state, COUNT(*) AS n "
            f"FROM {items} GROUP BY stage, video_id, state) AS w JOIN {videos} AS v ON v.id = w.video_id "
            f"JOIN {groups} AS g ON g.id = v.split_group_id GROUP BY w.stage, g.split, w.state")
        return [(stage, split_name, state, int(n)) for stage, split_name, state, n in cursor.fetchall()]


def pipeline_progress() -> dict:
    """Counts per split of every pipeline stage the platform has so far: videos, proposal runs by
    status, review items by stage and state, and videos with a frozen pool. Five grouped queries,
    whatever the number of records. Videos without a split are reported as ``unassigned``."""
    def split(value: str) -> str:
        return value or UNASSIGNED

    videos = {split(r["split_group__split"]): r["n"]
              for r in Video.objects.order_by().values("split_group__split").annotate(n=Count("id"))}
    runs: dict[str, dict[str, int]] = {}
    for r in ProposalRun.objects.order_by().values("video__split_group__split", "status").annotate(n=Count("id")):
        runs.setdefault(split(r["video__split_group__split"]), {})[r["status"]] = r["n"]
    review: dict[str, dict[str, dict[str, int]]] = {stage: {} for stage in WorkItem.Stage.values}
    for stage, split_name, state, n in _review_counts():
        review.setdefault(stage, {}).setdefault(split(split_name), {})[state] = n
    frozen = {split(r["video__split_group__split"]): r
              for r in CandidatePool.objects.filter(frozen_at__isnull=False).order_by()
              .values("video__split_group__split")
              .annotate(pools=Count("id"), videos_with_pool=Count("video", distinct=True))}
    splits = [*SPLITS, *([UNASSIGNED] if UNASSIGNED in videos else [])]
    pools = {s: {"videos": videos.get(s, 0), "videos_with_pool": frozen[s]["videos_with_pool"] if s in frozen else 0,
                 "pools": frozen[s]["pools"] if s in frozen else 0} for s in splits}
    return {"splits": splits, "videos": {s: videos.get(s, 0) for s in splits}, "proposal_runs": runs,
            "review": review, "pools": pools}

"""Freezing candidate pools (DESIGN 2.4-2.5): consolidate the retained trajectories of a reviewed
proposal run and store them as an immutable, versioned pool."""
from __future__ import annotations

import hashlib

import numpy as np
from django.db import transaction
from django.utils import timezone

from annotation.benchmark.services.queries import queries_mark_for_reverification
from annotation.curation.selectors import of_runs
from annotation.curation.stages.identity import SAME
from annotation.curation.stages.usability import USABLE
from annotation.models import CandidatePool, PoolMember, Vote, WorkItem
from common.errors import ConflictError
from models.curation.consolidation import TrackObs, consolidate
from trajectories.models import ProposalRun, Trajectory

OPEN_ITEMS_NAMED = 50  # open items a refused freeze names (the counts cover all of them)


def _undecided(run: ProposalRun) -> tuple[dict[str, int], list[dict]]:
    """How many usability and duplicate items of ``run`` are open or in adjudication, and the
    first ``OPEN_ITEMS_NAMED`` of them (id, stage, state), so a refusal can name them."""
    rows = list(WorkItem.objects.filter(of_runs([run.pk]), state__in=[WorkItem.State.OPEN, WorkItem.State.ADJUDICATE])
                .order_by("id").values("id", "stage", "state"))
    counts = {"usability": sum(r["stage"] == WorkItem.Stage.USABILITY for r in rows),
              "identity": sum(r["stage"] == WorkItem.Stage.IDENTITY for r in rows)}
    return counts, rows[:OPEN_ITEMS_NAMED]


def _named(rows: list[dict], total: int) -> str:
    names = ", ".join(f"#{r['id']} ({r['stage']}, {r['state']})" for r in rows)
    return names + (f" and {total - len(rows)} more" if total > len(rows) else "")


def _redecided(items: list[WorkItem]) -> set[int]:
    """The items of ``items`` that were reopened before and decided again by all their votes (an
    adjudication followed the reopening)."""
    reopened = [item for item in items if item.reopened_at is not None]
    return {item.pk for item in reopened
            if Vote.objects.filter(item=item, is_adjudication=True, created_at__gte=item.reopened_at).exists()}


def _reopen_conflicts(conflicts, items_by_pair: dict[tuple[int, int], WorkItem]
                      ) -> tuple[list[list[int]], list[list[int]]]:
    """Send every judgment on a conflicting cycle back to adjudication, where ``decide`` over all
    its votes settles it (``annotation.curation.stages.identity``). A cycle that holds judgments
    already decided that way again cannot be settled by more rounds: those judgments end
    unresolved (kept apart, flagged for relation review), so no item loops. Returns the pairs
    reopened and the pairs left unresolved."""
    reopen, unresolved = set(), set()
    for conflict in conflicts:
        pairs = [p for p in conflict.pairs_to_adjudicate() if p in items_by_pair]
        again = _redecided([items_by_pair[p] for p in pairs])
        if again:
            unresolved.update(p for p in pairs if items_by_pair[p].pk in again)
        else:
            reopen.update(pairs)
    reopen -= unresolved
    now = timezone.now()
    WorkItem.objects.filter(pk__in=[items_by_pair[p].pk for p in reopen]).update(
        state=WorkItem.State.ADJUDICATE, decision="", decided_at=None, reopened_at=now)
    WorkItem.objects.filter(pk__in=[items_by_pair[p].pk for p in unresolved]).update(
        state=WorkItem.State.UNRESOLVED, decision="", decided_at=now)
    return [list(p) for p in sorted(reopen)], [list(p) for p in sorted(unresolved)]


def _pool_hash(members: list[PoolMember]) -> str:
    digest = hashlib.sha256()
    for m in sorted(members, key=lambda m: m.trajectory_id):
        digest.update(f"{m.trajectory_id}:{m.role}:".encode() + bytes(m.frames) + bytes(m.boxes))
    return digest.hexdigest()


def pool_freeze(*, run: ProposalRun, frozen_by=None, reason: str = "") -> CandidatePool:
    """Freeze the candidate pool of ``run``'s video from its decided review items.

    Preconditions: the run succeeded, holds no annotated tubes, and every usability and identity
    item of it is decided or unresolved. Retained trajectories are those decided ``usable`` (every
    trajectory of a source-verified import, which has no review items); duplicate groups come from
    confirmed ``same`` pairs among them, never joining a confirmed ``different`` pair. If such a
    conflict exists, the judgments on its cycle are reopened for adjudication (or, those already
    decided again after a reopening, end unresolved) and the freeze is refused (409
    ``consolidation_conflict``). A video that already has a pool from another run gets
    a new version only with a ``reason`` (the tracking defect fixed), and the old version's
    queries are marked for re-verification in the same transaction. Freezing the same run again returns its pool. Locks the video's latest pool row.
    """
    if run.status != ProposalRun.Status.SUCCEEDED:
        raise ConflictError(f"proposal run {run.pk} is {run.status}; only a finished run can be frozen",
                            code="run_not_finished")
    if run.annotated_tubes:
        raise ConflictError(f"proposal run {run.pk} holds annotated tubes: match proposals against them; "
                            "freeze the proposals' run", code="tubes_not_a_pool")
    with transaction.atomic():
        latest = (CandidatePool.objects.select_for_update().filter(video_id=run.video_id)
                  .order_by("-version").first())
        if latest is not None and latest.run_id == run.pk:
            return latest
        if latest is not None and not reason.strip():
            raise ConflictError(
                f"video {run.video_id} already has frozen pool v{latest.version} (run {latest.run_id}); a new "
                "version replaces it only to fix a tracking defect: say which in `reason`",
                code="pool_exists", extra={"pool": latest.pk})
        undecided, named = _undecided(run)
        if any(undecided.values()):
            total = sum(undecided.values())
            raise ConflictError(
                f"review of run {run.pk} is not finished: {total} item{' is' if total == 1 else 's are'} still open "
                f"or in adjudication ({undecided['usability']} usability, {undecided['identity']} duplicate): "
                f"{_named(named, total)}",
                code="review_unfinished", extra={**undecided, "open_items": named})
        if run.source_verified:  # retained as the source gives them, the reason on its TrackImport
            retained = list(Trajectory.objects.filter(run=run).order_by("pk"))
        else:
            retained = list(Trajectory.objects.filter(
                run=run, work_items__stage=WorkItem.Stage.USABILITY, work_items__state=WorkItem.State.DECIDED,
                work_items__decision=USABLE).order_by("pk"))
        kept_ids = {t.pk for t in retained}
        items = WorkItem.objects.filter(stage=WorkItem.Stage.IDENTITY, duplicate__trajectory_a__run=run,
                                        state=WorkItem.State.DECIDED).select_related("duplicate")
        items_by_pair, same, different = {}, [], []
        for item in items:
            pair = (item.duplicate.trajectory_a_id, item.duplicate.trajectory_b_id)
            if pair[0] in kept_ids and pair[1] in kept_ids:
                items_by_pair[pair] = item
                (same if item.decision == SAME else different).append(pair)
        result = consolidate([TrackObs(t.pk, t.frames_array(), t.boxes_array()) for t in retained],
                             same_edges=same, different_edges=different)
        if result.conflicts:
            pairs, unresolved = _reopen_conflicts(result.conflicts, items_by_pair)
    if result.conflicts:  # outside the atomic block: the reopened items stay reopened
        raise ConflictError(
            f"{len(result.conflicts)} duplicate decision(s) would join trajectories judged different; "
            f"{len(pairs)} judgments went back to adjudication"
            + (f", {len(unresolved)} decided again by all their votes and still contradicting ended unresolved"
               if unresolved else ""),
            code="consolidation_conflict", extra={"pairs": pairs, "unresolved": unresolved})
    with transaction.atomic():
        latest = (CandidatePool.objects.select_for_update().filter(video_id=run.video_id)
                  .order_by("-version").first())
        lineage = {row["source_id"]: row for row in result.lineage}
        pool = CandidatePool.objects.create(
            video_id=run.video_id, run=run, version=(latest.version + 1) if latest else 1, supersedes=latest,
            reason=reason.strip(), frozen_by=frozen_by)
        members = []
        for track in result.kept:
            row = lineage[track.id]
            members.append(PoolMember(
                pool=pool, trajectory_id=track.id,
                role={"representative": PoolMember.Role.REPRESENTATIVE, "fragment": PoolMember.Role.FRAGMENT}.get(
                    row["role"], PoolMember.Role.SINGLE),
                group_representative_id=row["representative"] if row["role"] == "fragment" else None,
                n_obs=len(track.frames), n_removed=row["n_removed"],
                frames=np.asarray(track.frames, "<i4").tobytes(), boxes=np.asarray(track.boxes, "<f4").tobytes()))
        PoolMember.objects.bulk_create(members)
        pool.n_members = len(members)
        pool.lineage = result.lineage
        pool.content_sha256 = _pool_hash(members)
        pool.frozen_at = timezone.now()
        pool.save(update_fields=["n_members", "lineage", "content_sha256", "frozen_at"])
        if latest is not None:
            # Benchmark construction built on the old version: its queries wait for re-verification.
            queries_mark_for_reverification(latest, pool)
    return pool

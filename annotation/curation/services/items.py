"""Work items: one usability item per proposed trajectory, one identity item per duplicate pair."""
from __future__ import annotations

from django.db import transaction

from annotation.models import ReviewPolicy, WorkItem
from common.errors import ConflictError
from trajectories.models import DuplicateCandidate, ProposalRun, Trajectory


def review_policy_get() -> ReviewPolicy:
    return ReviewPolicy.objects.get_or_create(name="default")[0]


@transaction.atomic
def work_items_create_for_run(*, run: ProposalRun) -> dict[str, int]:
    """Create the usability and identity items of a finished proposal run (idempotent).

    Each item copies the review policy's panel size and required votes, so changing the policy
    later does not change how existing items are decided. Returns how many items the run has per
    stage (existing ones included).
    """
    if run.status != ProposalRun.Status.SUCCEEDED:
        raise ConflictError(f"proposal run {run.pk} is {run.status}; review starts once it has succeeded",
                            code="run_not_finished")
    if run.source_verified or run.annotated_tubes:
        raise ConflictError(f"proposal run {run.pk} is {'source-verified' if run.source_verified else 'annotated tubes'}"
                            ": it has no usability or duplicate review", code="run_not_reviewed")
    policy = review_policy_get()
    common = {"video_id": run.video_id, "panel_size": policy.panel_size, "required_votes": policy.required_votes}
    trajectories = Trajectory.objects.filter(run=run).values_list("pk", flat=True)
    pairs = DuplicateCandidate.objects.filter(trajectory_a__run=run).values_list("pk", flat=True)
    WorkItem.objects.bulk_create(
        [WorkItem(stage=WorkItem.Stage.USABILITY, trajectory_id=pk, **common) for pk in trajectories],
        ignore_conflicts=True)
    WorkItem.objects.bulk_create(
        [WorkItem(stage=WorkItem.Stage.IDENTITY, duplicate_id=pk, **common) for pk in pairs],
        ignore_conflicts=True)
    return {
        "usability": WorkItem.objects.filter(stage=WorkItem.Stage.USABILITY, trajectory__run=run).count(),
        "identity": WorkItem.objects.filter(stage=WorkItem.Stage.IDENTITY, duplicate__trajectory_a__run=run).count(),
    }


def work_items_open_on_run_stored(sender, *, run: ProposalRun, **kwargs) -> None:
    """Receiver of ``trajectories.signals.proposal_run_stored``: open review of every stored run
    when the policy says so (the default), inside the transaction that stores it. Imported runs
    that are source-verified or annotated tubes open no review (``trajectories.services.imports``)."""
    if run.source_verified or run.annotated_tubes:
        return
    if review_policy_get().open_review_automatically:
        work_items_create_for_run(run=run)

"""No model reads the answer: an evaluation or experiment whose reranker is the backend that
proposed the approved descriptions of its snapshot's videos is refused (400, naming both), and
figures on rendered videos with the embedded heuristics carry the smoke-test stamp."""
from __future__ import annotations

import numpy as np
import pytest
from django.utils import timezone

from annotation.models import (
    CandidatePool,
    Description,
    DescriptionRun,
    DescriptionVersion,
    RelationSnapshot,
)
from annotation.smoke_test import SMOKE_TEST_NOTE, SMOKE_TEST_STAMP, card_note_lines
from common.errors import ApplicationError
from models.facts import parse_description
from tests.trajectories.factories import run_factory, video_factory
from tests.workers.factories import TINY_VTRAJEMBED
from trajectories.models import Source, Trajectory
from workers.answer_guard import reranker_proposer_check, smoke_stamp
from workers.evaluation import evaluation_run_create
from workers.management.commands.experiment import format_table

pytestmark = pytest.mark.django_db
POINTWISE = {"reranker": "pointwise", "shortlist": 4, "top_k": 4}
CONTENT = {"appearance": "a person in a red top", "motion": "walks to the left",
           "facts": [{"id": "f0", "kind": "attribute", "name": "upper_colour", "value": "red", "start_frame": 0,
                      "end_frame": 10, "evidence_frames": [0], "scope": "whole", "known": True}]}


def _snapshot(*, rendered: bool, proposer: dict) -> RelationSnapshot:
    """A sealed snapshot over one video whose one trajectory's description, proposed by
    ``proposer`` (a description run's backend record), is approved."""
    video = video_factory(split="dev")
    if rendered:
        video.source = Source.objects.get_or_create(name="rendered-crossing")[0]
        video.save(update_fields=["source"])
    run = run_factory(video=video)
    pool = CandidatePool.objects.create(video=video, version=1, run=run)
    frames = np.arange(10)
    traj = Trajectory.objects.create(
        run=run, video=video, track_id=1, category="person", n_obs=10, first_frame=0, last_frame=9,
        frames=frames.astype("<i4").tobytes(), boxes=np.tile([10, 20, 50, 100], (10, 1)).astype("<f4").tobytes(),
        scores=np.ones(10, "<f4").tobytes(), temporal_coverage=1.0, longest_run=10, median_area=3200.0,
        abrupt_changes=0, mean_score=1.0)
    described = DescriptionRun.objects.create(backend=proposer, prompt_version="heuristic-v3", prompt_sha256="0" * 64,
                                              budget={})
    described.pools.add(pool)
    d = Description.objects.create(run=described, pool=pool, trajectory=traj, status=Description.Status.IN_REVIEW,
                                   attempts=1)
    version = DescriptionVersion.objects.create(description=d, number=1, origin="model", content=CONTENT,
                                                content_sha256=parse_description(CONTENT).content_hash())
    Description.objects.filter(pk=d.pk).update(status=Description.Status.APPROVED, approved_version=version)
    return RelationSnapshot.objects.create(split="dev", name="guarded", content_sha256="1" * 64, path="/nowhere",
                                           pool_versions={str(video.id): 1}, counts={}, complete=True,
                                           sealed_at=timezone.now())


def _evaluate(snapshot, pipeline):
    return evaluation_run_create(snapshot=snapshot, kind="untrained", model_kind="vtrajembed",
                                 config={"model": TINY_VTRAJEMBED}, pipeline=pipeline, queue=False)


def test_reranking_with_the_proposer_is_refused_naming_both():
    snapshot = _snapshot(rendered=False, proposer={"name": "heuristic", "hfov_deg": 60.0})
    with pytest.raises(ApplicationError) as exc:
        _evaluate(snapshot, POINTWISE)
    assert exc.value.code == "reranker_is_proposer" and exc.value.status_code == 400
    message = exc.value.message
    assert "pointwise scorer ('heuristic'" in message and "description run" in message and "heuristic-v3" in message
    assert exc.value.extra["proposer"]["backend"] == "heuristic"


def test_another_backend_or_other_settings_may_rerank():
    snapshot = _snapshot(rendered=False, proposer={"name": "heuristic", "hfov_deg": 60.0})
    reranker_proposer_check(snapshot, {**POINTWISE, "scorer": {"backend": "heuristic", "settings": {"hfov_deg": 75.0}}})
    reranker_proposer_check(snapshot, {**POINTWISE, "scorer": {"backend": "transformers", "settings": {}}})
    reranker_proposer_check(snapshot, {})                            # no reranker: nothing to refuse
    run, created = _evaluate(snapshot, None)
    assert created and SMOKE_TEST_STAMP not in run.stamps          # not rendered: no smoke-test stamp


def test_rendered_videos_with_the_embedded_heuristics_are_stamped():
    snapshot = _snapshot(rendered=True, proposer={"name": "heuristic"})
    assert smoke_stamp(snapshot) == SMOKE_TEST_STAMP
    run, _ = _evaluate(snapshot, None)
    assert SMOKE_TEST_STAMP in run.stamps
    other = _snapshot(rendered=True, proposer={"name": "openai-vlm"})
    assert smoke_stamp(other) is None
    assert smoke_stamp(other, {**POINTWISE, "scorer": {"backend": "heuristic", "settings": {}}}) == SMOKE_TEST_STAMP


def test_the_cli_table_says_the_stamp():
    assert format_table({"tables": [], "stamps": [SMOKE_TEST_STAMP]}).splitlines()[0] == f"note: {SMOKE_TEST_NOTE}"
    assert SMOKE_TEST_NOTE == "world-aware heuristics on rendered scenes: a smoke test, not evidence"
    assert format_table({"tables": [], "stamps": []}) == ""


def test_the_release_card_says_it_for_heuristic_descriptions_of_rendered_videos():
    snapshot = _snapshot(rendered=True, proposer={"name": "heuristic"})
    run = DescriptionRun.objects.get(descriptions__pool__video_id=int(next(iter(snapshot.pool_versions))))
    note = card_note_lines({"describer_runs": [{"id": run.pk, "backend": {"name": "heuristic"}}]})
    assert SMOKE_TEST_NOTE in note[0]
    assert card_note_lines({"describer_runs": [{"id": run.pk, "backend": {"name": "openai-vlm"}}]}) == []
    real = _snapshot(rendered=False, proposer={"name": "heuristic"})
    real_run = DescriptionRun.objects.get(descriptions__pool__video_id=int(next(iter(real.pool_versions))))
    assert card_note_lines({"describer_runs": [{"id": real_run.pk, "backend": {"name": "heuristic"}}]}) == []

"""The annotators' claim and vote requests are timed for /metrics
(``trajlab_review_action_duration_seconds``), beside the latency of every route."""
from __future__ import annotations

import pytest

from common.observability.metrics import REQUEST_SECONDS, REVIEW_SECONDS

pytestmark = pytest.mark.django_db


def _count(histogram, *labels) -> float:
    for metric in histogram.collect():
        for s in metric.samples:
            if s.name.endswith("_count") and tuple(s.labels.values()) == labels:
                return s.value
    return 0.0


def test_claims_and_votes_are_timed(reviewable_run, annotators, client_for, manager_client):
    run = reviewable_run()
    assert manager_client.post("/api/review/items/", {"run": run.pk}, format="json").status_code == 201
    claims, votes = _count(REVIEW_SECONDS, "claim"), _count(REVIEW_SECONDS, "vote")
    vote_route = _count(REQUEST_SECONDS, "review-vote", "POST", "2xx")
    client = client_for(annotators[0])
    seat = client.post("/api/review/next/", {"stage": "identity"}, format="json")
    assert seat.status_code == 200
    vote = client.post(f"/api/review/items/{seat.json()['item']}/votes/", {"label": "same"}, format="json")
    assert vote.status_code == 201
    again = client.post(f"/api/review/items/{seat.json()['item']}/votes/", {"label": "same"}, format="json")
    assert again.status_code == 409                                  # refused: not a vote's latency
    assert _count(REVIEW_SECONDS, "claim") == claims + 1
    assert _count(REVIEW_SECONDS, "vote") == votes + 1
    assert _count(REQUEST_SECONDS, "review-vote", "POST", "2xx") == vote_route + 1
    assert _count(REQUEST_SECONDS, "review-vote", "POST", "4xx") >= 1

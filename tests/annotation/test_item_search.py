"""The managers' item search (``GET /api/review/items/search/``): filters by stage, state, video,
split, annotator, decision and text, each narrowing the list to exactly the matching items."""
from __future__ import annotations

import pytest

from annotation.models import WorkItem
from tests.annotation.conftest import panel_votes
from tests.trajectories.factories import video_factory
from trajectories.models import Video

pytestmark = pytest.mark.django_db


def _ids(client, **params) -> set[int]:
    response = client.get("/api/review/items/search/", params | {"limit": 500})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == len(body["results"])
    return {r["id"] for r in body["results"]}


def test_each_filter_narrows_to_the_matching_items(reviewable_run, annotators, manager_client, client_for):
    train = reviewable_run()
    dev = reviewable_run(video_factory(split="dev"))
    Video.objects.filter(pk=dev.video_id).update(name="corner-cam")
    items = WorkItem.objects.filter(video=train.video, stage="usability").order_by("pk")
    decided = panel_votes(items[0], annotators[:3], ["usable", "usable", "unusable"])
    panel_votes(items[1], annotators[1:4], ["unusable", "unusable", "usable"])
    every = set(WorkItem.objects.values_list("pk", flat=True))
    assert _ids(manager_client) == every
    assert _ids(manager_client, stage="identity") == set(WorkItem.objects.filter(stage="identity").values_list("pk", flat=True))
    assert _ids(manager_client, state="decided") == {items[0].pk, items[1].pk}
    assert _ids(manager_client, video=dev.video_id) == set(dev.video.work_items.values_list("pk", flat=True))
    assert _ids(manager_client, split="dev") == set(dev.video.work_items.values_list("pk", flat=True))
    assert _ids(manager_client, annotator=annotators[0].username) == {items[0].pk}
    assert _ids(manager_client, annotator=annotators[1].username) == {items[0].pk, items[1].pk}
    assert _ids(manager_client, label="usable") == {decided.pk}
    assert _ids(manager_client, q="corner") == set(dev.video.work_items.values_list("pk", flat=True))
    assert _ids(manager_client, q=str(items[1].pk)) == {items[1].pk}
    assert _ids(manager_client, stage="usability", split="train", state="open") == \
        set(items.exclude(pk__in=[items[0].pk, items[1].pk]).values_list("pk", flat=True))
    row = manager_client.get("/api/review/items/search/", {"q": str(items[0].pk)}).json()["results"][0]
    assert (row["n_votes"], row["decision"], row["split"], row["stage"]) == (3, "usable", "train", "usability")
    # bad input is a 400 with the error shape; only managers search
    bad = manager_client.get("/api/review/items/search/", {"annotator": "nobody-at-all"})
    assert bad.status_code == 400 and bad.json()["code"] == "unknown_annotator"
    assert manager_client.get("/api/review/items/search/", {"state": "nope"}).status_code == 400
    assert client_for(annotators[0]).get("/api/review/items/search/").status_code == 403

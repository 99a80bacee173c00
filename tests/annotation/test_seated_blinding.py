"""Blinding as a rule over people and items (DESIGN 1, 2.8-2.9): a person seated on an open relation
row or pair reads, through no GET endpoint of the schema, a pre-label, proposal, vote, rating or
label of that row or pair or of any record of its family (the query's parents and revisions, and
the queries of the same target whose predicates contain or are contained in theirs), nor what the
mining says of a family pair (its strata, provenance and similarity).

The proof is an invariance: every GET endpoint of the schema, with every path id and filter the
family's records have, answers the seated reviewer the same before and after every hidden record is
rewritten (labels flipped, pre-labels, proposals, votes, ratings and evidence changed); a manager,
who sits on nothing, sees the rewrite, so the rewrite is one that shows where it is not hidden.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from annotation.curation.services.votes import vote_cast
from annotation.curation.stages import seated_blind
from annotation.curation.stages.base import query_family
from annotation.models import CrossPair, Query, Relation, RelationJudgment, Vote, WorkItem
from tests.annotation.conftest import propose_query, review_row, reviewed_pair, seat
from tests.triggers import triggers_set_aside

pytestmark = pytest.mark.django_db


# Load-balancer probes: they read no record, and their answers carry each check's latency.
PROBES = ("/healthz", "/readyz")


def get_operations() -> list[tuple[str, list[dict]]]:
    """Every GET path of the schema with its query parameters (the probes aside)."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [(path, [p for p in ops["get"].get("parameters", []) if p["in"] == "query"])
            for path, ops in sorted(schema["paths"].items()) if "get" in ops and path not in PROBES]


def answer(response) -> str:
    """A response as comparable text: JSON canonicalised, anything else hashed."""
    if response.get("Content-Type", "").startswith("application/json") and response.content:
        return f"{response.status_code} {json.dumps(response.json(), sort_keys=True)}"
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return f"{response.status_code} {hashlib.sha256(body).hexdigest()}"


def everything_read(client, ids: dict[str, list[int]]) -> dict[str, str]:
    """What ``client`` reads from every GET endpoint: each path id takes each candidate value, and
    each list endpoint is also read with each filter the family's records have."""
    out: dict[str, str] = {}
    for path, parameters in get_operations():
        names = re.findall(r"{(\w+)}", path)
        for values in itertools.product(*(ids.get(name, [1]) for name in names)):
            url = path
            for name, value in zip(names, values):
                url = url.replace("{" + name + "}", str(value))
            variants = [""]
            for parameter in parameters:
                variants += [f"?{parameter['name']}={v}" for v in ids.get(f"?{parameter['name']}", [])]
            for variant in variants:
                response = client.get(url + variant)
                assert response.status_code < 500, (url + variant, response.content[:300])
                out[url + variant] = answer(response)
    return out


def rewrite_hidden(queries: list[int], pairs: list[tuple[int, int]]) -> None:
    """Rewrite every human-side and model-side record of the family, triggers off (immutability is
    not what this test is about): labels flipped, pre-labels, proposals, judgments and ratings
    changed, evidence replaced."""
    with triggers_set_aside():
        pair_relations = Relation.objects.none()
        for query_id, trajectory_id in pairs:
            pair_relations |= Relation.objects.filter(query_id=query_id, trajectory_id=trajectory_id)
        for relation in Relation.objects.filter(query_id__in=queries) | pair_relations:
            Relation.objects.filter(pk=relation.pk).update(
                label={1: 0, 0: 1, -1: 1}[relation.label], source="human",
                evidence={"prelabel": {"label": 1, "predicates": ["rewritten"], "evidence": ["x"]}, "reviews": [9]})
        items = WorkItem.objects.filter(query_id__in=queries)
        for item in items:
            WorkItem.objects.filter(pk=item.pk).update(prelabels={
                key: {"label": 1 - abs(int(entry["label"])), "predicates": ["rewritten"], "evidence": ["y"]}
                for key, entry in item.prelabels.items()})
        for judgment in RelationJudgment.objects.filter(vote__item__in=items):
            RelationJudgment.objects.filter(pk=judgment.pk).update(label={1: 0, 0: 1, -1: 1}[judgment.label])
        Vote.objects.filter(item__in=items).update(payload={"faithful": False, "natural": 1})
        Query.objects.filter(pk__in=queries).update(ratings={"faithful": False, "natural": 2})
        for query_id, trajectory_id in pairs:
            CrossPair.objects.filter(query_id=query_id, trajectory_id=trajectory_id).update(
                proposal={"label": 1, "predicates": ["rewritten"], "evidence": ["z"]}, stratum="easy_negative",
                strata=["easy_negative"], provenance=[{"conflicts": ["rewritten"]}], similarity=0.01)
            WorkItem.objects.filter(pair__query_id=query_id, pair__trajectory_id=trajectory_id).update(
                prelabels={"proposal": {"label": 1, "predicates": ["rewritten"], "evidence": ["z"]}})
            Vote.objects.filter(item__pair__query_id=query_id, item__pair__trajectory_id=trajectory_id) \
                .update(label="mismatch")


@pytest.fixture
def family(world, annotators, client_for, manager_client):
    """``qa`` reviewed (its row and a mined pair with ``b0`` recorded), a sibling ``qs`` (the same
    target and predicates) reviewed, and a revision ``q2`` of ``qa`` whose first reviewer left a
    candidate ⊥: its second reviewer (annotators[2]) holds the open seat. Another reviewer
    (annotators[4]) holds the second seat of ``q2``'s open pair with ``b0``."""
    t1, t2, t3, t4 = world.a
    qa = review_row(world.qa, annotators[0], {t1: 1, t2: 0, t3: 0, t4: 0})
    qs = review_row(propose_query(world.pool_a, t1, "red"), annotators[0], {t1: 1, t2: 0, t3: 0, t4: 0})
    # a query of the same target that asks more (it entails qa's predicates): family by implication
    qx = propose_query(world.pool_a, t1, "red")
    Query.objects.filter(pk=qx.pk).update(predicates=[*qx.predicates, {"name": "direction", "value": "left",
                                                                       "fact_ids": ["f2"]}])
    review_row(Query.objects.get(pk=qx.pk), annotators[0], {t1: 1, t2: 0, t3: 0, t4: 0})
    pair_a = reviewed_pair(qa, world.b[0], 0)
    CrossPair.objects.filter(pk=pair_a.pk).update(proposal={"label": 0, "predicates": ["upper_colour"],
                                                            "evidence": ["f1"]})
    revised = manager_client.post(f"/api/queries/{qa.pk}/revise/",
                                  {"text": "the one in the red top", "predicates": qa.predicates}, format="json")
    assert revised.status_code == 201, revised.content
    q2 = Query.objects.get(pk=revised.json()["id"])
    row_item = WorkItem.objects.get(stage="relation", query=q2)
    seat(row_item, annotators[1])
    vote_cast(item_id=row_item.pk, annotator=annotators[1], label="reviewed",
              judgments={t1: 1, t2: 0, t3: 0, t4: -1}, payload={"faithful": True, "natural": 4})
    second = client_for(annotators[2]).post("/api/review/next/", {"stage": "relation"}, format="json")
    assert second.status_code == 200 and second.json()["item"] == row_item.pk

    proposal = {"label": 0, "predicates": ["upper_colour"], "evidence": ["f1"]}
    pair_2 = CrossPair.objects.create(query=q2, trajectory_id=world.b[0], stratum="potential_match",
                                      strata=["potential_match"], provenance=[], similarity=0.8, proposal=proposal,
                                      review="queued")
    pair_item = WorkItem.objects.create(stage="pair", video_id=q2.video_id, pair=pair_2, panel_size=1,
                                        required_votes=1, prelabels={"proposal": proposal})
    seat(pair_item, annotators[3])
    vote_cast(item_id=pair_item.pk, annotator=annotators[3], label="match")
    pair_item.refresh_from_db()
    assert pair_item.panel_size == 2                      # contradicted the proposal: a second review
    assert client_for(annotators[4]).post("/api/review/next/", {"stage": "pair"}, format="json").json()["item"] \
        == pair_item.pk
    return world, qa, qs, q2, row_item, pair_item


def candidate_ids(world, queries, items) -> dict[str, list[int]]:
    trajectories = [*world.a, world.b[0]]
    pools = [world.pool_a.pk, world.pool_b.pk]
    videos = [world.pool_a.video_id, world.pool_b.video_id]
    return {
        "query_id": queries, "item_id": items, "trajectory_id": trajectories[:1], "video_id": videos[:1],
        "pool_id": pools[:1], "index": [0], "description_id": [1], "other_id": [1],
        "?query": queries, "?trajectory": trajectories, "?video": videos, "?pool": pools[:1],
        "?stage": ["relation", "pair"],
    }


def test_the_family_is_revisions_parents_and_queries_that_entail_or_are_entailed(family, world):
    _, qa, qs, q2, _, _ = family
    other = propose_query(world.pool_a, world.a[1], "blue")            # another target
    (qx,) = Query.objects.filter(target_id=world.a[0], predicates__1__name="direction")
    apart = propose_query(world.pool_a, world.a[0], "red")             # the same target, a different ask
    Query.objects.filter(pk=apart.pk).update(predicates=[{"name": "direction", "value": "left", "fact_ids": []}])
    assert query_family([q2.pk]) == {qa.pk, qs.pk, q2.pk, qx.pk} == query_family([qs.pk])
    # qx entails q2's predicates and the one-predicate query; those two do not imply each other
    assert query_family([apart.pk]) == {apart.pk, qx.pk}
    assert query_family([qx.pk]) == {qa.pk, qs.pk, q2.pk, qx.pk, apart.pk}
    assert other.pk not in query_family([q2.pk]) and query_family([other.pk]) == {other.pk}


@pytest.mark.parametrize("seated", [2, 4], ids=["relation row second reviewer", "pair second reviewer"])
def test_a_seated_reviewer_reads_nothing_hidden_through_any_get_endpoint(family, world, annotators, client_for,
                                                                           manager_client, seated):
    _, qa, qs, q2, row_item, pair_item = family
    queries = sorted(query_family([q2.pk]))
    blind = seated_blind(annotators[seated])
    if seated == 2:
        assert blind.queries == set(queries) and not blind.pairs
        hidden_queries, hidden_pairs = queries, []
    else:
        assert not blind.queries and blind.pairs == {(q, world.b[0]) for q in queries}
        hidden_queries, hidden_pairs = [], sorted(blind.pairs)
    ids = candidate_ids(world, queries, [row_item.pk, pair_item.pk])
    reviewer = client_for(annotators[seated])
    before, manager_before = everything_read(reviewer, ids), everything_read(manager_client, ids)
    assert len(before) > 80 and sum(a.startswith("200") for a in before.values()) > 30

    rewrite_hidden(hidden_queries, hidden_pairs)
    after, manager_after = everything_read(reviewer, ids), everything_read(manager_client, ids)
    changed = sorted(url for url in before if before[url] != after[url])
    assert changed == [], changed
    # the rewrite shows wherever it is not hidden: the manager sits on nothing
    manager_changed = {url for url in manager_before if manager_before[url] != manager_after[url]}
    if seated == 2:
        assert {f"/api/queries/{qa.pk}/", f"/api/queries/{qs.pk}/", f"/api/relations/?query={qa.pk}"} \
            <= manager_changed
    else:
        assert {f"/api/cross-pairs/?query={qa.pk}", f"/api/relations/?trajectory={world.b[0]}"} <= manager_changed


def test_the_blind_lifts_when_the_item_closes(family, world, annotators, client_for):
    _, qa, _, _, row_item, _ = family
    reviewer = client_for(annotators[2])
    row_item.refresh_from_db()
    assert row_item.disputed == [world.a[3]]
    assert reviewer.get(f"/api/relations/?query={qa.pk}").json()["count"] == 0
    assert all(e["label"] is None for e in reviewer.get(f"/api/queries/{qa.pk}/").json()["row"])
    assert reviewer.get(f"/api/queries/{qa.pk}/").json()["ratings"] is None
    vote = reviewer.post(f"/api/review/items/{row_item.pk}/votes/",
                         {"label": "reviewed", "judgments": {str(t): 0 for t in row_item.disputed}}, format="json")
    assert vote.status_code == 201, vote.content
    assert not seated_blind(annotators[2])
    assert reviewer.get(f"/api/relations/?query={qa.pk}").json()["count"] == 5   # its row and its mined pair
    assert reviewer.get(f"/api/queries/{qa.pk}/").json()["ratings"] == {"faithful": True, "natural": 4}


def test_a_seat_on_a_family_row_hides_the_suggestions_of_ones_other_items(family, world, annotators, client_for):
    """annotators[0] reviewed ``qa`` and ``qs`` (closed): a seat on a new sibling's open row hides
    the pre-labels of the family on their own closed items' screens as well."""
    _, qa, _, _, _, _ = family
    sibling = propose_query(world.pool_a, world.a[0], "red")
    item = WorkItem.objects.get(stage="relation", query=sibling)
    first = client_for(annotators[0])
    own = WorkItem.objects.get(stage="relation", query=qa)
    assert any(c["prelabel"] for c in first.get(f"/api/review/items/{own.pk}/").json()["target"]["relation_row"]
               ["candidates"])
    seat(item, annotators[0])
    assert all(c["prelabel"] is None for c in first.get(f"/api/review/items/{own.pk}/").json()["target"]
               ["relation_row"]["candidates"])
    # their own seat's screen is its stage's: a first review with its pre-labels
    screen = first.get(f"/api/review/items/{item.pk}/").json()["target"]["relation_row"]
    assert screen["review_round"] == 1 and all(c["prelabel"] is not None for c in screen["candidates"])


def test_a_seat_given_up_still_blinds_its_holder_until_the_item_closes(family, world, annotators, client_for):
    """annotators[2] skips their second-review seat: they saw the row's screen, so the family
    stays hidden from them while the row is open."""
    _, qa, _, _, row_item, _ = family
    reviewer = client_for(annotators[2])
    skipped = reviewer.post(f"/api/review/items/{row_item.pk}/skip/", {"reason": "need a break"}, format="json")
    assert skipped.status_code in (200, 204), skipped.content
    assert not row_item.assignments.filter(annotator=annotators[2]).exists()
    assert query_family([qa.pk]) <= seated_blind(annotators[2]).queries   # (and the next item it claimed)
    assert reviewer.get(f"/api/relations/?query={qa.pk}").json()["count"] == 0

"""The REST API of descriptions, queries, relations, mining and snapshots, through HTTP with the
real services: permissions, validation errors, blinding, and one happy path per resource.

The records a describer and a query writer would make are built here with the ORM (the
describer needs a real video file, the writer the LLM backends); everything people do (votes,
revisions, snapshots) goes through the API or the services.
"""
from __future__ import annotations

import pytest

from annotation.curation.selectors import review_target
from annotation.curation.services.votes import vote_cast
from annotation.models import (
    CrossPair,
    Description,
    DescriptionRun,
    MiningRun,
    PoolMember,
    PseudoLabelRule,
    Query,
    Relation,
    RelationSnapshot,
    Vote,
    WorkItem,
)
from common.storage import store
from tests.annotation.conftest import (
    approve,
    frozen_pool,
    panel_votes,
    propose_description,
    propose_query,
    review_row,
    reviewed_pair,
    seat,
)

pytestmark = pytest.mark.django_db


# -- permissions and validation --------------------------------------------------------------------
def test_managers_write_staff_read_strangers_nothing(world, client_for, annotator, make_user):
    stranger, anonymous, ann = client_for(make_user()), client_for(), client_for(annotator)
    reads = ["/api/description-runs/", "/api/descriptions/", f"/api/descriptions/{world.green.description_id}/",
             "/api/generation-runs/", "/api/queries/", f"/api/queries/{world.qa.pk}/", "/api/relations/",
             "/api/mining-runs/", "/api/cross-pairs/", "/api/completeness/?split=dev", "/api/snapshots/",
             "/api/pseudo-rules/"]
    for url in reads:
        assert ann.get(url).status_code == 200, url
        assert stranger.get(url).status_code == 403, url
        assert anonymous.get(url).status_code in (401, 403), url
    writes = {"/api/description-runs/": {"pools": [world.pool_a.pk]},
              "/api/generation-runs/": {"pools": [world.pool_a.pk]},
              "/api/mining-runs/": {"split": "dev"},
              "/api/completeness/queue/": {"split": "dev"},
              "/api/snapshots/": {"split": "dev", "allow_incomplete": True},
              "/api/pseudo-rules/": {"rule": {"name": "r", "s_max": 0.2, "encoder": "minilm"}, "declared_bound": 0.1},
              f"/api/queries/{world.qa.pk}/revise/": {"text": "a red top", "predicates": world.qa.predicates}}
    for url, body in writes.items():
        response = ann.post(url, body, format="json")
        assert response.status_code == 403 and response.json()["code"] == "permission_denied", url
        assert anonymous.post(url, body, format="json").status_code in (401, 403), url
    assert not RelationSnapshot.objects.exists() and not MiningRun.objects.exists()
    assert not PseudoLabelRule.objects.exists()
    assert Query.objects.count() == 2 and DescriptionRun.objects.count() == 4


def test_bad_input_is_a_400_with_a_code(world, manager_client):
    bad = [
        ("post", "/api/description-runs/", {"pools": [10**8]}, "invalid"),
        ("post", "/api/description-runs/", {"pools": []}, "no_pools"),
        ("post", "/api/description-runs/", {"pools": [world.pool_a.pk], "backend": {"name": "no-such-model"}},
         "invalid_backend"),
        ("post", "/api/mining-runs/", {"split": "validation"}, "invalid"),
        ("post", "/api/snapshots/", {"split": "everything"}, "invalid"),
        ("post", "/api/completeness/queue/", {}, "invalid"),
        ("get", "/api/relations/?label=2", None, "invalid"),
        ("get", "/api/descriptions/?pool=first", None, "invalid"),
        ("get", "/api/descriptions/?status=fine", None, "invalid"),
        ("get", "/api/queries/?split=val", None, "invalid"),
        ("get", "/api/cross-pairs/?review=later", None, "invalid"),
        ("get", "/api/completeness/", None, "invalid"),
        ("post", f"/api/queries/{world.qa.pk}/revise/", {"text": "the person in the red top", "predicates": []},
         "invalid"),
        ("post", f"/api/queries/{world.qa.pk}/revise/",
         {"text": "the person in the green top", "predicates": [{"name": "upper_colour", "value": "green",
                                                                "fact_ids": ["f1"]}]}, "unsupported_predicate"),
    ]
    for method, url, body, code in bad:
        response = getattr(manager_client, method)(url, body, format="json") if body is not None \
            else getattr(manager_client, method)(url)
        assert response.status_code == 400, (url, body, response.content)
        assert response.json()["code"] == code, (url, body, response.json())
    assert manager_client.get("/api/descriptions/999999/").status_code == 404
    assert manager_client.get("/api/snapshots/999999/").json()["code"] == "not_found"
    assert Query.objects.count() == 2                          # nothing half-written


# -- describer runs and descriptions ---------------------------------------------------------------
def test_a_describer_run_is_queued_with_its_job(reviewable_run, annotators, manager_client):
    pool = frozen_pool(reviewable_run, annotators, "train")
    response = manager_client.post("/api/description-runs/", {"pools": [pool.pk], "backend": {"name": "heuristic"},
                                                              "budget": {}}, format="json")
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["pools"] == [pool.pk] and run["backend"]["name"] == "heuristic"
    assert run["job"]["status"] == "queued" and run["budget"]
    assert manager_client.get(f"/api/description-runs/{run['id']}/").json()["job"]["id"] == run["job"]["id"]
    assert [r["id"] for r in manager_client.get("/api/description-runs/").json()["results"]] == [run["id"]]


def test_description_review_through_the_item_views(world, annotators, manager_client, client_for, make_user):
    green = world.green
    item = WorkItem.objects.get(description=green)
    clients = [client_for(a) for a in annotators[2:5]]
    seat_ = clients[0].post("/api/review/next/", {"stage": "description"}, format="json").json()
    assert seat_["item"] == item.pk and seat_["labels"][1] == "usable_after_minor_correction"
    target = seat_["target"]
    assert target["trajectory"] == world.a[2] and target["relation_row"] is None and target["pair"] is None
    assert target["description"]["version"] == green.pk and target["description"]["content"] == green.content
    # a description vote carries no relation judgments; a correction needs its content
    wrong = clients[0].post(f"/api/review/items/{item.pk}/votes/", {"label": "usable", "judgments": {"1": 1}},
                            format="json")
    assert wrong.status_code == 400 and wrong.json()["code"] == "unexpected_fields"
    missing = clients[0].post(f"/api/review/items/{item.pk}/votes/", {"label": "usable_after_minor_correction"},
                              format="json")
    assert missing.status_code == 400 and missing.json()["code"] == "correction_required"
    corrected = {**green.content, "appearance": "a person in a dark green top"}
    vote = clients[0].post(f"/api/review/items/{item.pk}/votes/",
                           {"label": "usable_after_minor_correction", "correction": corrected}, format="json")
    assert vote.status_code == 201, vote.content
    assert vote.json()["correction"] is not None
    url = f"/api/descriptions/{green.description_id}/"
    # blinding: the next reviewer does not see the first one's correction; its author and managers do
    clients[1].post("/api/review/next/", {"stage": "description"}, format="json")
    assert [v["origin"] for v in clients[1].get(url).json()["versions"]] == ["model"]
    assert [v["origin"] for v in clients[0].get(url).json()["versions"]] == ["model", "correction"]
    as_manager = manager_client.get(url).json()
    assert [v["origin"] for v in as_manager["versions"]] == ["model", "correction"]
    assert as_manager["raw_outputs"] == ['{"appearance": "green"}'] and clients[1].get(url).json()["raw_outputs"] is None
    assert as_manager["status"] == "in_review" and as_manager["facts"] == []
    for client in clients[1:]:
        client.post("/api/review/next/", {"stage": "description"}, format="json")
        assert client.post(f"/api/review/items/{item.pk}/votes/", {"label": "usable"}, format="json").status_code == 201
    done = manager_client.get(url).json()
    assert done["status"] == "approved" and done["approved_version"] == green.pk
    assert [(f["id"], f["value"], f["evidence_frames"]) for f in done["facts"]] == [("f1", "green", [5, 20]),
                                                                                     ("f2", "right", [10])]
    listed = manager_client.get(f"/api/descriptions/?pool={world.pool_a.pk}&status=approved").json()
    assert sorted(d["trajectory"] for d in listed["results"]) == sorted(world.a[:3])
    assert manager_client.get(f"/api/descriptions/?pool={world.pool_b.pk}&status=in_review").json()["count"] == 0


def test_a_description_in_adjudication_shows_its_version_and_votes(world, annotators, adjudicator, client_for):
    item = panel_votes(WorkItem.objects.get(description=world.green), annotators[2:5],
                       ["usable", "unusable", "uncertain"])
    assert item.state == "adjudicate"
    queue = client_for(adjudicator).get("/api/adjudication/").json()
    assert [i["item"] for i in queue] == [item.pk]
    assert queue[0]["target"]["description"]["content"] == world.green.content
    assert sorted(v["label"] for v in queue[0]["votes"]) == ["uncertain", "unusable", "usable"]
    assert all(v["correction"] is None for v in queue[0]["votes"])
    decided = client_for(adjudicator).post(f"/api/adjudication/{item.pk}/", {"label": "usable", "reason": "green"},
                                           format="json")
    assert decided.status_code == 201, decided.content
    assert client_for(adjudicator).get(f"/api/descriptions/{world.green.description_id}/").json()["status"] == "approved"


# -- relation rows and queries ---------------------------------------------------------------------
def test_relation_row_review_with_a_second_review_of_the_disputed(world, annotators, client_for, manager_client,
                                                                  auditor):
    t1, t2, t3, t4 = world.a
    first, second = client_for(annotators[3]), client_for(annotators[4])
    seat_ = first.post("/api/review/next/", {"stage": "relation"}, format="json").json()
    item_id, row = seat_["item"], seat_["target"]["relation_row"]
    assert row["query"] == world.qa.pk and row["text"] == world.qa.text and row["review_round"] == 1
    assert row["predicates"] == world.qa.predicates and row["rate_query"] is True
    prelabels = {c["trajectory"]: c["prelabel"]["label"] for c in row["candidates"]}
    assert prelabels == {t1: 1, t2: 0, t3: -1, t4: -1}            # the complete pool, undescribed included
    vote_url = f"/api/review/items/{item_id}/votes/"
    labels = {str(t1): 1, str(t2): 0, str(t3): 0, str(t4): -1}
    outside = first.post(vote_url, {"label": "reviewed", "judgments": {**labels, str(world.b[0]): 0},
                                    "payload": {"faithful": True, "natural": 4}}, format="json")
    assert outside.status_code == 400 and outside.json()["code"] == "not_in_pool"
    assert outside.json()["extra"]["trajectories"] == [world.b[0]]
    unrated = first.post(vote_url, {"label": "reviewed", "judgments": labels}, format="json")
    assert unrated.status_code == 400 and unrated.json()["code"] == "ratings_required"
    # the first review's payload is exactly its ratings (issue 27, finding 5)
    for payload, code, field in (({"faithful": True, "natural": 9}, "ratings_required", "natural"),
                                 ({"faithful": "yes", "natural": 4}, "ratings_required", "faithful"),
                                 ({"faithful": True, "natural": "4"}, "ratings_required", "natural"),
                                 ({"faithful": True, "natural": 4, "note": "x"}, "unexpected_fields", "note")):
        bad = first.post(vote_url, {"label": "reviewed", "judgments": labels, "payload": payload}, format="json")
        assert bad.status_code == 400 and bad.json()["code"] == code, (payload, bad.content)
        assert field in bad.json()["message"] and field in str(bad.json()["extra"]["fields"])
    voted = first.post(vote_url, {"label": "reviewed", "judgments": labels,
                                  "payload": {"faithful": True, "natural": 4}}, format="json")
    assert voted.status_code == 201, voted.content
    assert voted.json()["judgments"] == labels
    # t4 was left ⊥: an independent second reviewer sees only it, and nothing of the first review
    seat2 = second.post("/api/review/next/", {"stage": "relation"}, format="json").json()
    assert seat2["item"] == item_id
    row2 = seat2["target"]["relation_row"]
    assert row2["review_round"] == 2 and row2["rate_query"] is False
    assert [c["trajectory"] for c in row2["candidates"]] == [t4]
    assert set(row2) == {"query", "text", "predicates", "pool", "review_round", "rate_query", "candidates",
                         "unresolved_identity", "bottom"}        # the pool's flags tell nothing of the first review
    assert row2["bottom"] == []                                  # filled only for an adjudicator of the row
    assert set(row2["candidates"][0]) == {"trajectory", "prelabel"} and seat2["my_vote"] is None
    # t4's pre-label was ⊥, so showing it would tell that the first reviewer said ⊥ too
    assert row2["candidates"][0]["prelabel"] is None
    again = first.get(f"/api/review/items/{item_id}/").json()["target"]["relation_row"]
    assert again["review_round"] == 1 and {c["trajectory"]: c["prelabel"]["label"] for c in again["candidates"]} \
        == {t1: 1, t2: 0, t3: -1, t4: -1}                      # the first reviewer keeps seeing them
    assert second.get(f"/api/queries/{world.qa.pk}/").json()["row"][0]["label"] is None   # nothing recorded yet
    extra = second.post(vote_url, {"label": "reviewed", "judgments": {str(t4): 0, str(t1): 1}}, format="json")
    assert extra.status_code == 400 and extra.json()["code"] == "not_disputed"
    # the second review rates nothing: any payload is refused, not kept (issue 27, finding 5)
    for payload in ({"natural": 9}, {"faithful": True, "natural": 4}):
        rated = second.post(vote_url, {"label": "reviewed", "judgments": {str(t4): 0}, "payload": payload},
                            format="json")
        assert rated.status_code == 400 and rated.json()["code"] == "unexpected_fields", rated.content
    assert Vote.objects.filter(item_id=item_id).count() == 1
    assert second.post(vote_url, {"label": "reviewed", "judgments": {str(t4): 0}}, format="json").status_code == 201
    detail = manager_client.get(f"/api/queries/{world.qa.pk}/").json()
    assert detail["status"] == "accepted" and detail["ratings"] == {"faithful": True, "natural": 4}
    assert [(r["trajectory"], r["label"], r["source"]) for r in detail["row"]] == [
        (t1, 1, "human"), (t2, 0, "human"), (t3, 0, "human"), (t4, 0, "second_review")]
    rows = manager_client.get(f"/api/relations/?query={world.qa.pk}").json()
    assert rows["count"] == 4 and rows["results"][3]["evidence"]["reviews"] == [-1, 0]
    positives = manager_client.get(f"/api/relations/?query={world.qa.pk}&label=1&stratum=within").json()["results"]
    assert [r["trajectory"] for r in positives] == [t1]
    assert manager_client.get(f"/api/relations/?trajectory={t4}&label=-1").json()["count"] == 0
    # auditors read the verified labels without the model's pre-labels or the reviews
    audit = client_for(auditor).get(f"/api/relations/?query={world.qa.pk}").json()["results"]
    assert [r["label"] for r in audit] == [1, 0, 0, 0] and all("evidence" not in r for r in audit)
    assert all(set(r) == {"trajectory", "label"} for r in client_for(auditor).get(f"/api/queries/{world.qa.pk}/")
               .json()["row"])


def test_a_second_review_shows_no_prelabel_of_a_row_with_a_binary_prelabel(world, annotators, client_for):
    t1, t2, t3, t4 = world.a
    item = WorkItem.objects.get(stage="relation", query=world.qa)
    review_row_vote = {str(t1): 1, str(t2): 1, str(t3): 0, str(t4): 0}      # t2 against its pre-label 0
    seat(item, annotators[0])
    vote_cast(item_id=item.pk, annotator=annotators[0], label="reviewed", judgments=review_row_vote,
              payload={"faithful": True, "natural": 3})
    item.refresh_from_db()
    assert (item.panel_size, item.disputed) == (2, [t2])
    seat(item, annotators[1])
    row = review_target(item=item, viewer=annotators[1])["relation_row"]
    assert row["review_round"] == 2 and row["candidates"] == [{"trajectory": t2, "prelabel": None}]
    own = review_target(item=item, viewer=annotators[0])["relation_row"]
    assert own["review_round"] == 1 and {c["trajectory"]: c["prelabel"]["label"] for c in own["candidates"]} == {
        t1: 1, t2: 0, t3: -1, t4: -1}


def test_queries_are_listed_and_revised_by_managers(world, annotators, manager_client, client_for):
    listed = manager_client.get(f"/api/queries/?video={world.pool_a.video_id}&status=in_review&split=dev").json()
    assert [q["id"] for q in listed["results"]] == [world.qa.pk]
    assert manager_client.get("/api/queries/?split=train").json()["count"] == 0
    body = {"text": "someone wearing a red top", "predicates": [{"name": "upper_colour", "value": "red",
                                                                 "fact_ids": ["f1"]}]}
    response = manager_client.post(f"/api/queries/{world.qa.pk}/revise/", body, format="json")
    assert response.status_code == 201, response.content
    revision = response.json()
    assert revision["revision"] == 2 and revision["parent"] == world.qa.pk and revision["status"] == "in_review"
    old = manager_client.get(f"/api/queries/{world.qa.pk}/").json()
    assert old["status"] == "superseded" and old["revised_by"] == revision["id"]
    assert WorkItem.objects.filter(stage="relation", query_id=revision["id"]).exists()   # verified again
    again = manager_client.post(f"/api/queries/{world.qa.pk}/revise/", body, format="json")
    assert again.status_code == 409 and again.json()["code"] == "query_closed"
    assert client_for(annotators[0]).get(f"/api/queries/{revision['id']}/").json()["raw_output"] is None


# -- cross-video pairs, mining, completeness and snapshots -----------------------------------------
def test_pair_review_and_the_cross_pair_list(world, annotators, client_for, manager_client, auditor):
    review_row(world.qa, annotators[3], {world.a[0]: 1, world.a[1]: 0, world.a[2]: 0, world.a[3]: 0})
    assert world.qa.status == "accepted"
    proposal = {"label": 0, "predicates": ["upper_colour"], "evidence": ["f1"]}
    pair = CrossPair.objects.create(query=world.qa, trajectory_id=world.b[0], stratum="hard_negative",
                                    strata=["hard_negative"], provenance=[{"mining_run": 1, "stratum": "hard_negative"}],
                                    similarity=0.61, proposal=proposal, review="queued")
    WorkItem.objects.create(stage="pair", video_id=world.qa.video_id, pair=pair, panel_size=1, required_votes=1,
                            prelabels={"proposal": proposal})
    reviewer = client_for(annotators[4])
    seat_ = reviewer.post("/api/review/next/", {"stage": "pair"}, format="json").json()
    target = seat_["target"]["pair"]
    assert (target["pair"], target["query"], target["trajectory"]) == (pair.pk, world.qa.pk, world.b[0])
    assert target["trajectory_video"] == world.pool_b.video_id and target["proposal"]["label"] == 0
    assert seat_["labels"] == ["match", "mismatch", "uncertain"]
    item = WorkItem.objects.get(pk=seat_["item"])
    assert review_target(item=item, viewer=auditor)["pair"]["proposal"] is None            # auditors: never
    assert review_target(item=item, viewer=annotators[4], audit=True)["pair"]["proposal"] is None
    assert reviewer.post(f"/api/review/items/{seat_['item']}/votes/", {"label": "mismatch"},
                         format="json").status_code == 201
    listed = manager_client.get(f"/api/cross-pairs/?query={world.qa.pk}&stratum=hard_negative").json()["results"]
    assert [(p["trajectory"], p["review"], p["label"], p["proposal"]["label"]) for p in listed] == [
        (world.b[0], "done", 0, 0)]
    assert manager_client.get("/api/cross-pairs/?review=queued").json()["count"] == 0
    assert "proposal" not in client_for(auditor).get("/api/cross-pairs/").json()["results"][0]
    relation = Relation.objects.get(query=world.qa, trajectory_id=world.b[0])
    assert (relation.label, relation.stratum) == (0, "hard_negative")


def test_a_pair_on_its_second_review_shows_no_proposal_anywhere(world, annotators, client_for, manager_client):
    review_row(world.qa, annotators[3], {world.a[0]: 1, world.a[1]: 0, world.a[2]: 0, world.a[3]: 0})
    proposal = {"label": 0, "predicates": ["upper_colour"], "evidence": ["f1"]}
    pair = CrossPair.objects.create(query=world.qa, trajectory_id=world.b[0], stratum="potential_match",
                                    strata=["potential_match"], provenance=[], similarity=0.8, proposal=proposal,
                                    review="queued")
    item = WorkItem.objects.create(stage="pair", video_id=world.qa.video_id, pair=pair, panel_size=1,
                                   required_votes=1, prelabels={"proposal": proposal})
    first, second = client_for(annotators[0]), client_for(annotators[1])
    assert first.post("/api/review/next/", {"stage": "pair"}, format="json").json()["target"]["pair"]["proposal"] \
        == proposal
    assert first.post(f"/api/review/items/{item.pk}/votes/", {"label": "match"}, format="json").status_code == 201
    item.refresh_from_db()
    assert (item.state, item.panel_size) == ("open", 2)        # the first reviewer contradicted the proposal
    # the second reviewer would read "the first said 1 or ⊥" off a proposal of 0: it is shown nowhere
    seat2 = second.post("/api/review/next/", {"stage": "pair"}, format="json").json()
    assert seat2["item"] == item.pk and seat2["target"]["pair"]["proposal"] is None
    assert second.get(f"/api/review/items/{item.pk}/").json()["target"]["pair"]["proposal"] is None
    assert first.get(f"/api/review/items/{item.pk}/").json()["target"]["pair"]["proposal"] == proposal
    for client in (second, manager_client):
        assert [p["proposal"] for p in client.get(f"/api/cross-pairs/?query={world.qa.pk}").json()["results"]] == [None]
    assert second.post(f"/api/review/items/{item.pk}/votes/", {"label": "match"}, format="json").status_code == 201
    listed = manager_client.get(f"/api/cross-pairs/?query={world.qa.pk}").json()["results"]
    assert [(p["label"], p["proposal"]) for p in listed] == [(1, proposal)]    # back once the review is over


def test_auditors_read_every_record_blind(world, annotators, client_for, make_user, auditor):
    """Whoever holds no role but auditor reads records without model suggestions and votes, and
    cannot filter by what is hidden; holding any other role as well lifts the blinding."""
    review_row(world.qa, annotators[3], {world.a[0]: 1, world.a[1]: 0, world.a[2]: 0, world.a[3]: 0})
    pair = CrossPair.objects.create(query=world.qa, trajectory_id=world.b[0], stratum="hard_negative",
                                    strata=["hard_negative"], provenance=[{"mining_run": 1, "stratum": "hard_negative"}],
                                    similarity=0.61, proposal={"label": 0, "predicates": [], "evidence": []},
                                    review="done")
    Relation.objects.create(query=world.qa, trajectory_id=world.b[0], label=0, source="human",
                            stratum="hard_negative", evidence={"proposal": pair.proposal, "reviews": [0]})
    red = Description.objects.get(pool=world.pool_a, trajectory_id=world.a[0])
    aud, both = client_for(auditor), client_for(make_user("auditor", "annotator", username="aud-ann"))
    hidden = {"source", "stratum", "strata", "item", "ratings", "similarity", "provenance", "evidence", "proposal",
              "prelabel"}

    relations = aud.get(f"/api/relations/?query={world.qa.pk}").json()["results"]
    assert len(relations) == 5 and [r["label"] for r in relations][:4] == [1, 0, 0, 0]
    assert set(relations[0]) == {"id", "query", "trajectory", "label", "pseudo", "rule", "decided_at"}
    query = aud.get(f"/api/queries/{world.qa.pk}/").json()
    assert query["status"] == "accepted" and "ratings" not in query
    assert all(set(r) == {"trajectory", "label"} for r in query["row"])
    assert all(not hidden & set(q) for q in aud.get("/api/queries/").json()["results"])
    pairs = aud.get(f"/api/cross-pairs/?query={world.qa.pk}").json()["results"]
    assert [(p["trajectory"], p["label"]) for p in pairs] == [(world.b[0], 0)] and not hidden & set(pairs[0])
    for url in ("/api/relations/?stratum=hard_negative", "/api/cross-pairs/?stratum=hard_negative"):
        refused = aud.get(url)
        assert refused.status_code == 403 and refused.json()["code"] == "hidden_from_auditors", url
        assert refused.json()["extra"] == {"fields": ["stratum"]}
    # descriptions: the approved version alone, without what tells the describer's output from a correction
    approved = aud.get(f"/api/descriptions/{red.pk}/").json()
    assert [v["id"] for v in approved["versions"]] == [red.approved_version_id]
    assert set(approved["versions"][0]) == {"id", "content", "content_sha256", "created_at"}
    assert [f["value"] for f in approved["facts"]] == ["red", "right"]
    in_review = aud.get(f"/api/descriptions/{world.green.description_id}/").json()
    assert in_review["versions"] == [] and in_review["raw_outputs"] is None   # the model's suggestion stays hidden

    # an auditor who also annotates reads as an annotator
    assert "evidence" in both.get(f"/api/relations/?query={world.qa.pk}").json()["results"][0]
    assert both.get(f"/api/queries/{world.qa.pk}/").json()["ratings"] == {"faithful": True, "natural": 4}
    assert both.get(f"/api/cross-pairs/?query={world.qa.pk}").json()["results"][0]["similarity"] == 0.61
    assert both.get("/api/cross-pairs/?stratum=hard_negative").json()["count"] == 1
    assert [v["origin"] for v in both.get(f"/api/descriptions/{world.green.description_id}/").json()["versions"]] \
        == ["model"]


def test_the_schema_declares_what_auditors_do_not_read_optional():
    """An auditor's answer leaves fields out; the published schema must allow that."""
    from drf_spectacular.generators import SchemaGenerator

    from annotation.benchmark.selectors import HIDDEN_FROM_AUDITORS

    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    for component, record in [("RelationOutput", "relation"), ("CrossPairOutput", "cross_pair"),
                              ("QueryOutput", "query"), ("QueryDetailOutput", "query"),
                              ("RowEntryOutput", "row_entry"), ("DescriptionVersionOutput", "description_version")]:
        schema = components[component]
        for name in HIDDEN_FROM_AUDITORS[record]:
            assert name in schema["properties"], (component, name)
            assert name not in schema.get("required", []), (component, name)


def test_mining_runs_are_queued_and_listed(world, manager_client):
    response = manager_client.post("/api/mining-runs/", {"split": "dev", "config": {"seed": 3, "easy_review_rate": 0.5}},
                                   format="json")
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["split"] == "dev" and run["config"]["easy_review_rate"] == 0.5 and run["job"]["status"] == "queued"
    assert manager_client.get(f"/api/mining-runs/{run['id']}/").json()["config"]["mining"]["seed"] == 3
    assert [r["id"] for r in manager_client.get("/api/mining-runs/").json()["results"]] == [run["id"]]
    bad = manager_client.post("/api/mining-runs/", {"split": "dev", "config": {"easy_review_rate": 2}}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_config"


def test_generation_runs_are_queued_and_listed(world, manager_client):
    response = manager_client.post("/api/generation-runs/", {"pools": [world.pool_a.pk, world.pool_b.pk],
                                                             "backend": {"name": "template"}}, format="json")
    assert response.status_code == 202, response.content
    run = response.json()
    assert sorted(run["pools"]) == sorted([world.pool_a.pk, world.pool_b.pk]) and run["job"]["status"] == "queued"
    assert manager_client.get(f"/api/generation-runs/{run['id']}/").json()["backend"]["name"] == "template"
    assert manager_client.get("/api/generation-runs/").json()["count"] == 1


def test_completeness_and_immutable_snapshots(world, annotators, manager_client, client_for, var_dir):
    review_row(world.qa, annotators[3], {world.a[0]: 1, world.a[1]: 0, world.a[2]: 0, world.a[3]: 0})
    review_row(world.qb, annotators[3], {world.b[0]: 1, world.b[1]: 0, world.b[2]: 0, world.b[3]: 0})
    assert (world.qa.status, world.qb.status) == ("accepted", "accepted")
    report = client_for(annotators[0]).get("/api/completeness/?split=dev&limit=3").json()
    assert (report["queries"], report["trajectories"], report["needed"], report["binary"]) == (2, 8, 16, 8)
    assert report["missing_by_kind"] == {"within_video": 0, "cross_video": 8} and not report["complete"]
    assert len(report["missing_pairs"]) == 3
    refused = manager_client.post("/api/snapshots/", {"split": "dev"}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "incomplete_split"
    assert refused.json()["extra"]["completeness"]["missing"] == 8
    assert not RelationSnapshot.objects.exists()
    # the missing cross-video pairs go to pair review, once
    queued = manager_client.post("/api/completeness/queue/", {"split": "dev"}, format="json")
    assert queued.status_code == 200 and queued.json() == {"split": "dev", "queued": 8}
    completion = manager_client.get("/api/cross-pairs/?stratum=completion&review=queued").json()
    assert completion["count"] == 8 and all(p["label"] is None for p in completion["results"])
    assert WorkItem.objects.filter(stage="pair", state="open").count() == 8
    assert manager_client.post("/api/completeness/queue/", {"split": "dev"}, format="json").json()["queued"] == 0
    taken = manager_client.post("/api/snapshots/", {"split": "dev", "name": "first look", "allow_incomplete": True},
                                format="json")
    assert taken.status_code == 201, taken.content
    snap = taken.json()
    assert snap["complete"] is False and len(snap["content_sha256"]) == 64 and snap["name"] == "first look"
    assert snap["pool_versions"] == {str(world.pool_a.video_id): 1, str(world.pool_b.video_id): 1}
    # the API names the snapshot by its storage key, never an absolute server path
    assert snap["path"].startswith("snapshots/") and store().exists(f"{snap['path']}/snapshot.json")
    url = f"/api/snapshots/{snap['id']}/"
    detail = client_for(annotators[0]).get(url).json()
    assert detail["n_relations"] == 8 and detail["content_sha256"] == snap["content_sha256"]
    assert [s["id"] for s in manager_client.get("/api/snapshots/?split=dev").json()["results"]] == [snap["id"]]
    assert manager_client.get("/api/snapshots/?split=train").json()["count"] == 0
    for method in ("put", "patch", "delete"):
        response = getattr(manager_client, method)(url, {"name": "renamed"}, format="json")
        assert response.status_code == 405, method
    assert manager_client.delete("/api/snapshots/").status_code == 405
    assert RelationSnapshot.objects.get(pk=snap["id"]).name == "first look"


# -- pseudo-label rules ----------------------------------------------------------------------------
def test_pseudo_label_rules_are_declared_calibrated_and_applied(world, reviewable_run, annotators, manager_client,
                                                                client_for):
    # dev: five reviewed easy negatives whose facts contradict the query's colour
    approve(world.green, annotators)
    approve(propose_description(world.pool_b, world.b[1], "black", panel=1), annotators)
    for query, trajectory_id in [(world.qa, world.b[0]), (world.qa, world.b[1]), (world.qb, world.a[0]),
                                 (world.qb, world.a[1]), (world.qb, world.a[2])]:
        reviewed_pair(query, trajectory_id, 0)
    # train: one unreviewed mined pair the rule will label
    pool_c = frozen_pool(reviewable_run, annotators, "train")
    pool_d = frozen_pool(reviewable_run, annotators, "train")
    c0 = PoolMember.objects.filter(pool=pool_c).first().trajectory_id
    d0 = PoolMember.objects.filter(pool=pool_d).first().trajectory_id
    approve(propose_description(pool_c, c0, "red", panel=1), annotators)
    approve(propose_description(pool_d, d0, "blue", panel=1), annotators)
    unreviewed = CrossPair.objects.create(query=propose_query(pool_c, c0, "red"), trajectory_id=d0,
                                          stratum="easy_negative", strata=["easy_negative"],
                                          provenance=[{"stratum": "easy_negative", "encoder": "minilm"}],
                                          similarity=0.05, review="not_sampled")
    rule = {"name": "low similarity, colour contradicted", "s_max": 0.3, "encoder": "minilm"}
    annotator_post = client_for(annotators[0]).post("/api/pseudo-rules/", {"rule": rule, "declared_bound": 0.5},
                                                    format="json")
    assert annotator_post.status_code == 403
    bad = manager_client.post("/api/pseudo-rules/", {"rule": {**rule, "s_max": 7}, "declared_bound": 0.5},
                              format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_rule"
    declared = manager_client.post("/api/pseudo-rules/", {"rule": rule, "declared_bound": 0.5}, format="json")
    assert declared.status_code == 201, declared.content
    rule_id = declared.json()["id"]
    assert declared.json()["calibrated_at"] is None and len(declared.json()["rule_sha256"]) == 64
    again = manager_client.post("/api/pseudo-rules/", {"rule": rule, "declared_bound": 0.2}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "rule_exists"
    early = manager_client.post(f"/api/pseudo-rules/{rule_id}/apply/")
    assert early.status_code == 409 and early.json()["code"] == "rule_not_accepted"
    # five correct audits: the 95% upper bound 1 - 0.05^(1/5) = 0.451 is within the declared 0.5
    calibrated = manager_client.post(f"/api/pseudo-rules/{rule_id}/calibrate/")
    assert calibrated.status_code == 200, calibrated.content
    assert calibrated.json()["accepted"] is True
    assert calibrated.json()["calibration"]["upper_bound"] == pytest.approx(1 - 0.05 ** (1 / 5), abs=1e-6)
    twice = manager_client.post(f"/api/pseudo-rules/{rule_id}/calibrate/")
    assert twice.status_code == 409 and twice.json()["code"] == "rule_calibrated"
    applied = manager_client.post(f"/api/pseudo-rules/{rule_id}/apply/")
    assert applied.status_code == 200 and applied.json()["labelled"] == 1, applied.content
    pseudo = manager_client.get("/api/relations/?pseudo=true").json()["results"]
    assert [(r["query"], r["trajectory"], r["label"], r["source"], r["rule"]) for r in pseudo] == [
        (unreviewed.query_id, d0, 0, "pseudo", rule_id)]
    assert manager_client.get("/api/relations/?pseudo=false&split=train").json()["count"] == 0
    # a strict bound needs a larger audit than the dev split offers
    strict = manager_client.post("/api/pseudo-rules/", {"rule": {**rule, "name": "strict"}, "declared_bound": 0.05},
                                 format="json").json()
    too_small = manager_client.post(f"/api/pseudo-rules/{strict['id']}/calibrate/")
    assert too_small.status_code == 409 and too_small.json()["code"] == "audit_too_small"
    assert too_small.json()["extra"] == {"selected": 5, "blinded": 5, "not_blinded": 0, "unreviewed": 0, "needed": 59}
    listed = client_for(annotators[0]).get("/api/pseudo-rules/").json()["results"]
    assert [r["name"] for r in listed] == ["strict", rule["name"]]
    assert client_for(annotators[0]).get(f"/api/pseudo-rules/{rule_id}/").json()["accepted"] is True

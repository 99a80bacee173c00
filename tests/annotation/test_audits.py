"""Audits of a rendered dev split reviewed by imperfect simulated people: seeded sampling of
accepted records and, apart, of difficult cases; auditors blinded to suggestions, votes and strata,
never auditing what they voted on; immutable verdicts; statistics against an independent
Clopper–Pearson implementation.

The split is built once per module inside a transaction rolled back at the end."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
import torch
from django.contrib.auth.models import Group
from django.db import IntegrityError, InternalError, transaction
from django.test import override_settings
from django.utils import timezone
from statsmodels.stats.proportion import proportion_confint

from annotation.benchmark.services.mining import split_members
from annotation.models import AuditJudgment, AuditSample, Description, Query, Relation, Vote
from annotation.releases.selectors import AUDITOR_FIELDS
from annotation.releases.services.audits import (
    audit_create,
    audit_judgment_record,
    audit_sample_claim_next,
    audit_stats,
    description_population,
    query_population,
    relation_population,
)
from common.errors import ApplicationError, ConflictError
from models.curation.calibration import clopper_pearson_upper
from tests.annotation.test_releases import build_rendered_benchmark, review_cross_video

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture(scope="module")
def split(django_db_setup, django_db_blocker, tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("audits")
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=root / "media", VAR_DIR=root / "var"):
        (root / "media" / "tmp").mkdir(parents=True)
        outer = transaction.atomic()
        outer.__enter__()
        try:
            manager = build_rendered_benchmark(root, ["dev", "dev", "dev"], accuracy=0.75, seed=11)
            review_cross_video(["dev"], accuracy=0.8, seed=11)
            yield {"manager": manager}
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def _key(sample: AuditSample) -> tuple:
    return sample.kind, sample.relation_id or sample.query_id or sample.description_id, sample.stratum


def test_populations_are_the_accepted_records_with_their_difficulties(db, split):
    queries, members = split_members("dev")
    relations = relation_population("dev")
    expected = Relation.objects.filter(query__in=queries, trajectory_id__in=[m.trajectory_id for m in members],
                                       label__in=(0, 1), pseudo=False)
    assert sorted(r["id"] for r in relations) == sorted(expected.values_list("id", flat=True))
    second = set(expected.filter(source="second_review").values_list("id", flat=True))
    assert second, "the simulated reviewers were unsure somewhere, so some relations had a second review"
    assert all("disputed" in r["reasons"] for r in relations if r["id"] in second)
    assert all(r["items"] for r in relations)
    assert sorted(q["id"] for q in query_population("dev")) == sorted(q.pk for q in queries)
    described = description_population("dev")
    assert sorted(d["id"] for d in described) == sorted(
        Description.objects.filter(pool_id__in={m.pool_id for m in members}, status="approved").values_list("pk",
                                                                                                             flat=True))
    # a description whose panel split its votes is a low-agreement case
    for d in described:
        labels = [set(Vote.objects.filter(item_id=i, is_adjudication=False).values_list("label", flat=True))
                  for i in d["items"]]
        assert ("low_agreement" in d["reasons"]) == any(len(s) > 1 for s in labels)


def test_sampling_is_seeded_and_reports_difficult_cases_apart(db, split):
    manager = split["manager"]
    first = audit_create(split="dev", n_random=3, n_difficult=2, seed=42, created_by=manager)
    again = audit_create(split="dev", n_random=3, n_difficult=2, seed=42, created_by=manager)
    other = audit_create(split="dev", n_random=3, n_difficult=2, seed=43, created_by=manager)
    samples = list(first.samples.order_by("position"))
    assert [_key(s) for s in samples] == [_key(s) for s in again.samples.order_by("position")]
    assert [_key(s) for s in samples] != [_key(s) for s in other.samples.order_by("position")]
    population = first.population
    for kind in ("relation", "query", "description"):
        mine = [s for s in samples if s.kind == kind]
        random = [s for s in mine if s.stratum == "random"]
        difficult = [s for s in mine if s.stratum == "difficult"]
        assert len(random) == min(3, population[kind]["accepted"])
        assert len(difficult) == min(2, population[kind]["difficult"] - sum(1 for s in random if s.reasons))
        assert all(s.reasons for s in difficult)
        assert not {_key(s)[1] for s in random} & {_key(s)[1] for s in difficult}
    assert population["relation"]["difficult_by_reason"].get("disputed", 0) > 0
    assert any(s.stratum == "difficult" for s in samples)
    # the strata are interleaved in one shuffled order
    assert sorted(s.position for s in samples) == list(range(len(samples)))
    # bad requests are refused up front
    for kwargs, code in (({"n_random": -1, "n_difficult": 1}, "invalid_size"),
                         ({"n_random": 0, "n_difficult": 0}, "invalid_size"),
                         ({"n_random": 1, "n_difficult": 0, "kinds": ["votes"]}, "invalid_kind")):
        with pytest.raises(ApplicationError) as refused:
            audit_create(split="dev", **kwargs)
        assert refused.value.code == code
    with pytest.raises(ConflictError) as refused:
        audit_create(split="test", n_random=2, n_difficult=2)
    assert refused.value.code == "nothing_to_audit"


def test_auditors_see_the_record_only_and_never_what_they_voted_on(db, split, client_for, make_user):
    audit = audit_create(split="dev", n_random=4, n_difficult=3, seed=1, created_by=split["manager"])
    auditor = make_user("auditor")
    client = client_for(auditor)
    seen = []
    while True:
        response = client.post(f"/api/audits/{audit.pk}/next/")
        if response.status_code == 204:
            break
        body = response.json()
        assert set(body) == {"sample", "audit", "kind", "claim_expires_at", "record", "error_types"}
        assert set(body["record"]) == set(AUDITOR_FIELDS[body["kind"]])
        text = str(body)   # (a description's content has facts with evidence frames: that is the record)
        for hidden in ("proposal", "prelabel", "second_review", "stratum", "reasons", "difficult", "annotator"):
            assert hidden not in text, hidden
        # the same sample comes back while the claim runs and nothing is recorded
        assert client.post(f"/api/audits/{audit.pk}/next/").json()["sample"] == body["sample"]
        verdict = client.post(f"/api/audits/{audit.pk}/judgments/", {"sample": body["sample"], "verdict": "correct"},
                              format="json")
        assert verdict.status_code == 201, verdict.content
        seen.append(body["sample"])
    assert sorted(seen) == sorted(audit.samples.values_list("pk", flat=True))

    # a simulated annotator made auditor is never offered a record they voted on
    voter = Vote.objects.filter(is_adjudication=False).order_by("pk").first().annotator
    voter.groups.add(Group.objects.get(name="auditor"))
    voter = type(voter).objects.get(pk=voter.pk)
    second = audit_create(split="dev", n_random=10, n_difficult=10, seed=2, created_by=split["manager"])
    voted = set(Vote.objects.filter(annotator=voter).values_list("item_id", flat=True))
    offered = []
    while (sample := audit_sample_claim_next(audit=second, auditor=voter)) is not None:
        offered.append(sample)
        audit_judgment_record(sample=sample, auditor=voter, verdict="correct")
    assert offered and not any(voted & set(s.items) for s in offered)
    assert second.samples.filter(judgment__isnull=True).count() == sum(
        1 for s in second.samples.all() if voted & set(s.items))
    # annotators and managers do not audit; managers read the strata and reasons
    assert client_for(make_user("annotator")).post(f"/api/audits/{audit.pk}/next/").status_code == 403
    manager = client_for(split["manager"])
    assert manager.post(f"/api/audits/{audit.pk}/next/").status_code == 403
    listed = manager.get(f"/api/audits/{audit.pk}/samples/").json()["results"]
    assert {s["stratum"] for s in listed} == {"random", "difficult"} and all(s["verdict"] == "correct" for s in listed)
    assert client.get(f"/api/audits/{audit.pk}/samples/").status_code == 403


def test_verdicts_are_checked_claimed_and_never_changed(db, split, make_user):
    audit = audit_create(split="dev", n_random=2, n_difficult=0, seed=5, kinds=["relation"])
    a, b = make_user("auditor"), make_user("auditor")
    sample = audit_sample_claim_next(audit=audit, auditor=a)
    with pytest.raises(ConflictError) as refused:
        audit_judgment_record(sample=sample, auditor=b, verdict="correct")
    assert refused.value.code == "not_claimed"
    for kwargs, code in (({"verdict": "error"}, "invalid_error_type"),
                         ({"verdict": "error", "error_type": "wrong_fact"}, "invalid_error_type"),
                         ({"verdict": "correct", "error_type": "other"}, "invalid_error_type"),
                         ({"verdict": "maybe"}, "invalid_verdict")):
        with pytest.raises(ApplicationError) as refused:
            audit_judgment_record(sample=sample, auditor=a, **kwargs)
        assert refused.value.code == code
    judgment = audit_judgment_record(sample=sample, auditor=a, verdict="error", error_type="should_be_match",
                                     note="the colours match", time_spent_ms=1200)
    with pytest.raises(ConflictError) as refused:
        audit_judgment_record(sample=sample, auditor=a, verdict="correct")
    assert refused.value.code == "already_judged"
    # the database refuses changes and a verdict without its error type
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        AuditJudgment.objects.filter(pk=judgment.pk).update(verdict="correct", error_type="")
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        AuditJudgment.objects.filter(pk=judgment.pk).delete()
    other = audit.samples.exclude(pk=sample.pk).get()
    with pytest.raises(IntegrityError), transaction.atomic():
        AuditJudgment.objects.create(sample=other, auditor=a, verdict="error", error_type="")
    # an expired claim goes to another auditor
    mine = audit_sample_claim_next(audit=audit, auditor=a)
    assert mine.pk == other.pk
    AuditSample.objects.filter(pk=mine.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    theirs = audit_sample_claim_next(audit=audit, auditor=b)
    assert theirs.pk == other.pk and theirs.claimed_by_id == b.pk
    with pytest.raises(ConflictError):
        audit_judgment_record(sample=theirs, auditor=a, verdict="correct")


def test_statistics_report_residual_errors_with_exact_intervals(db, split, client_for, make_user):
    audit = audit_create(split="dev", n_random=6, n_difficult=3, seed=9, created_by=split["manager"])
    auditor = make_user("auditor")
    types = {"relation": "should_be_unknown", "query": "ambiguous_target", "description": "wrong_fact"}
    expected: dict = {}
    n = 0
    while (sample := audit_sample_claim_next(audit=audit, auditor=auditor)) is not None:
        error = n % 3 == 0                          # every third sample is judged an error
        audit_judgment_record(sample=sample, auditor=auditor, verdict="error" if error else "correct",
                              error_type=types[sample.kind] if error else "")
        row = expected.setdefault((sample.kind, sample.stratum), [0, 0])
        row[0] += 1
        row[1] += error
        n += 1
    stats = client_for(split["manager"]).get(f"/api/audits/{audit.pk}/stats/").json()
    assert stats == json.loads(json.dumps(audit_stats(audit=audit)))
    assert stats["judged"] == stats["samples"] == n
    for (kind, stratum), (judged, errors) in expected.items():
        s = stats["by_kind"][kind][stratum]
        assert (s["judged"], s["errors"]) == (judged, errors)
        low, high = proportion_confint(errors, judged, alpha=0.05, method="beta")
        assert s["ci95"] == pytest.approx([low, high], abs=1e-9)
        assert s["upper95"] == pytest.approx(clopper_pearson_upper(errors, judged))
        assert s["errors_by_type"] == ({types[kind]: errors} if errors else {})
        if stratum == "random":
            accepted = audit.population[kind]["accepted"]
            assert s["population"] == accepted
            assert s["estimated_residual_errors"] == pytest.approx(errors / judged * accepted)
        else:
            assert sum(r["judged"] for r in s["by_reason"].values()) >= judged
    assert client_for(auditor).get(f"/api/audits/{audit.pk}/stats/").status_code == 403


def test_audit_api_creates_and_lists(db, split, client_for, make_user):
    manager = client_for(split["manager"])
    created = manager.post("/api/audits/", {"split": "dev", "n_random": 2, "n_difficult": 1, "seed": 3,
                                            "kinds": ["query"]}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["kinds"] == ["query"] and body["n_samples"] >= 2 and body["n_judged"] == 0
    assert body["population"]["query"]["accepted"] == Query.objects.filter(
        status="accepted", video__split_group__split="dev").count()
    assert manager.post("/api/audits/", {"split": "dev", "n_random": -1}, format="json").status_code == 400
    assert manager.post("/api/audits/", {"split": "test", "n_random": 1}, format="json").status_code == 409
    auditor = client_for(make_user("auditor"))
    assert auditor.get("/api/audits/?split=dev").json()["count"] >= 1
    assert auditor.get(f"/api/audits/{body['id']}/").status_code == 200
    assert auditor.post("/api/audits/", {"split": "dev", "n_random": 1}, format="json").status_code == 403
    assert client_for(make_user("annotator")).get("/api/audits/").status_code == 403

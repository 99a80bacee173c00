"""The job list as a manager's queue: each queued job's position in its queue and the run behind
each job (what the cancel and retry buttons act on), read in a bounded number of queries."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.jobs.services import job_create, job_start
from common.models import RunStatus
from tests.common.test_runs import KINDS, make_run

pytestmark = pytest.mark.django_db


def test_queue_positions_count_the_queued_jobs_ahead_on_the_same_queue(manager_client):
    first = job_create(kind="a", queue="cpu")
    gpu = job_create(kind="b", queue="gpu")
    second = job_create(kind="c", queue="cpu")
    running = job_start(job=job_create(kind="d", queue="cpu"))
    third = job_create(kind="e", queue="cpu")
    listed = {j["id"]: j for j in manager_client.get("/api/jobs/?limit=50").json()["results"]}
    assert [listed[j.pk]["queue_position"] for j in (first, second, third)] == [1, 2, 3]
    assert listed[gpu.pk]["queue_position"] == 1 and listed[running.pk]["queue_position"] is None
    # the first starts: everyone behind it on its queue moves up, the other queue does not move
    job_start(job=first)
    listed = {j["id"]: j for j in manager_client.get("/api/jobs/?limit=50").json()["results"]}
    assert [listed[j.pk]["queue_position"] for j in (first, second, third)] == [None, 1, 2]
    assert listed[gpu.pk]["queue_position"] == 1
    assert manager_client.get(f"/api/jobs/{third.pk}/").json()["queue_position"] == 2


def test_each_job_names_its_run_whatever_its_kind(manager_client, sent, django_capture_on_commit_callbacks):
    made = {kind: make_run(kind, RunStatus.FAILED if i % 2 else RunStatus.QUEUED) for i, kind in enumerate(KINDS)}
    bare = job_create(kind="video_import")
    with CaptureQueriesContext(connection) as queries:
        body = manager_client.get("/api/jobs/?limit=50").json()
    listed = {j["id"]: j for j in body["results"]}
    for kind, run in made.items():
        assert listed[run.job_id]["run"] == {"kind": kind, "id": run.pk, "status": run.status,
                                             "cancel_requested": False}
    assert listed[bare.pk]["run"] is None
    # one query for the page, one for the count, one per run kind (plus the session's own)
    assert len(queries) <= 2 + len(KINDS) + 4, [q["sql"][:80] for q in queries]
    # a retry gives the run a new job: the list then shows the run on the new job only
    failed = next(r for r in made.values() if r.status == RunStatus.FAILED)
    with django_capture_on_commit_callbacks(execute=True):
        new_job = manager_client.post(f"/api/jobs/{failed.job_id}/retry/").json()["job"]["id"]
    listed = {j["id"]: j for j in manager_client.get("/api/jobs/?limit=50").json()["results"]}
    assert listed[failed.job_id]["run"] is None and listed[new_job]["run"]["status"] == "queued"
    assert listed[new_job]["queue_position"] >= 1

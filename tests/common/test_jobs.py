from __future__ import annotations

import pytest

from common.jobs.services import JobReporter, job_create, job_fail, job_start, job_succeed
from common.models import Job

pytestmark = pytest.mark.django_db


def test_job_lifecycle_and_reporter():
    job = job_create(kind="demo", params={"x": 1})
    assert job.status == "queued" and job.progress == 0
    job = job_start(job=job)
    assert job.status == "running" and job.attempts == 1 and job.started_at is not None
    seen = []
    reporter = JobReporter(job, echo=lambda f, m: seen.append(f), min_interval=0)
    reporter(0.25, "quarter")
    reporter(1.7, "clamped")
    reporter.log("a line for the tail")
    job.refresh_from_db()
    assert job.progress == 1.0 and job.message == "clamped" and "a line for the tail" in job.log_tail
    assert seen == [0.25, 1.7]
    job = job_succeed(job=job, result={"n": 3})
    assert job.status == "succeeded" and job.result == {"n": 3} and job.finished_at is not None


def test_restart_counts_attempts_and_failure_keeps_the_error():
    job = job_start(job=job_create(kind="demo"))
    job = job_start(job=job)  # a re-delivery after a killed worker
    assert job.attempts == 2
    try:
        raise ValueError("bad weights")
    except ValueError as exc:
        job = job_fail(job=job, error=exc)
    job.refresh_from_db()
    assert job.status == "failed" and "ValueError: bad weights" in job.error and "Traceback" in job.error


def test_reporter_throttles_database_writes(django_assert_max_num_queries):
    job = job_create(kind="demo")
    reporter = JobReporter(job, min_interval=60)
    with django_assert_max_num_queries(1):
        for i in range(100):
            reporter(i / 200, "step")


def test_progress_constraint_holds_in_the_database():
    from django.db import IntegrityError

    job = job_create(kind="demo")
    with pytest.raises(IntegrityError):
        Job.objects.filter(pk=job.pk).update(progress=1.5)


def test_jobs_api_shows_own_jobs_to_staff_and_all_to_managers(client_for, make_user):
    ann = make_user("annotator")
    boss = make_user("manager")
    mine = job_create(kind="mine", created_by=ann)
    job_create(kind="other", created_by=boss)
    r = client_for(ann).get("/api/jobs/")
    assert [j["id"] for j in r.json()["results"]] == [mine.pk]
    assert client_for(boss).get("/api/jobs/").json()["count"] == 2
    assert client_for(ann).get(f"/api/jobs/{mine.pk}/").json()["kind"] == "mine"

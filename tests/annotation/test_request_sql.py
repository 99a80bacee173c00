"""The request path's hand-written SQL (``common.sql``): rows read as model instances equal the
ORM's, and on a PostgreSQL connection that prepares statements the claim, the vote and the token
check run as prepared statements, with the answers and query counts of the unprepared path."""
from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.db import connection, transaction
from django.db.models.base import DEFERRED
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.services import token_for
from annotation.curation.services.claims import work_item_claim_next
from annotation.curation.services.votes import vote_cast
from annotation.models import Vote, WorkItem
from common.sql import model_rows, prepared_cursor

pytestmark = pytest.mark.django_db


def test_rows_read_as_instances_equal_the_orm_reads(reviewable_run, annotators):
    reviewable_run()
    table = WorkItem._meta.db_table
    got = model_rows(WorkItem, f"SELECT w.*, w.id * 2 AS doubled FROM {table} w ORDER BY w.id", [])
    want = list(WorkItem.objects.order_by("id"))
    assert got and len(got) == len(want)
    for a, b in zip(got, want):
        for f in WorkItem._meta.concrete_fields:     # JSON, dates and foreign keys through their converters
            assert getattr(a, f.attname) == getattr(b, f.attname), f.name
        assert a.doubled == 2 * b.pk and not a._state.adding and a._state.db == "default"


def test_a_column_left_out_is_deferred_and_loads_on_access(reviewable_run):
    reviewable_run()
    item = WorkItem.objects.order_by("id").first()
    [row] = model_rows(WorkItem, f"SELECT id, stage FROM {WorkItem._meta.db_table} WHERE id = %s", [item.pk])
    assert "state" in row.get_deferred_fields() and row.__dict__.get("state", DEFERRED) is DEFERRED
    assert (row.stage, row.state) == (item.stage, item.state)   # read on first access


def test_no_row_is_an_empty_list():
    assert model_rows(WorkItem, f"SELECT * FROM {WorkItem._meta.db_table} WHERE id = %s", [-1]) == []


@contextmanager
def _preparing(threshold: int | None = 5):
    """The test database's connection set to prepare statements, as the settings make one that
    persists (``DATABASE_CONN_MAX_AGE`` other than 0), or (``None``) not to."""
    connection.ensure_connection()
    raw = connection.connection
    before = raw.prepare_threshold
    raw.prepare_threshold = threshold
    try:
        yield
    finally:
        raw.prepare_threshold = before


def _token_client(user) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user=user)}")
    return api


def _prepared_statements() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return {row[0] for row in cursor.fetchall()}


def _claim_vote_next(client, stage: str) -> tuple[list, int]:
    """A claim, then a vote that answers with the next item: the bodies and the queries."""
    seat = client.post("/api/review/next/", {"stage": stage}, format="json")
    assert seat.status_code == 200, seat.content
    body = seat.json()
    with CaptureQueriesContext(connection) as queries:
        voted = client.post(f"/api/review/items/{body['item']}/votes/",
                            {"label": "usable", "next": True, "prefer": body["upcoming"]["token"]}, format="json")
    assert voted.status_code == 201, voted.content
    return [body, voted.json()], len(queries)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_the_vote_path_runs_prepared_with_the_answers_and_query_counts_of_the_plain_path(reviewable_run, annotators):
    reviewable_run()
    reviewable_run()
    plain_client, prepared_client = _token_client(annotators[0]), _token_client(annotators[1])
    with _preparing(None):
        plain, plain_queries = _claim_vote_next(plain_client, "usability")
    before = _prepared_statements()
    with _preparing():
        prepared, prepared_queries = _claim_vote_next(prepared_client, "usability")
        with prepared_cursor() as cursor:
            cursor.execute("SELECT %s::int + 1", [1])
            assert cursor.fetchone() == (2,)
    statements = _prepared_statements() - before
    # the claim's candidates and seat, the vote's locked read and write, the token check: each a
    # prepared statement
    for part in ("FOR UPDATE OF w SKIP LOCKED", "INSERT INTO annotation_assignment", "AS seat_pk",
                 "INSERT INTO annotation_vote", "AS trajlab_token_expired", "FOR NO KEY UPDATE OF u"):
        assert any(part in s for s in statements), (part, statements)
    assert prepared_queries == plain_queries                   # Django's wrappers see every statement
    for a, b in zip(plain, prepared):                          # the same answers, item numbers aside
        assert a.keys() == b.keys()
    assert prepared[1]["next"]["item"] == prepared[0]["upcoming"]["item"]   # the preferred item, prepared
    assert Vote.objects.filter(annotator=annotators[1]).count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_a_connection_that_does_not_prepare_sends_plain_statements(reviewable_run, annotators):
    reviewable_run()
    before = _prepared_statements()
    with _preparing(None):   # the settings' default: a connection per request prepares nothing
        _claim_vote_next(_token_client(annotators[0]), "usability")
    assert _prepared_statements() == before


def test_a_token_check_reads_the_user_and_roles_through_the_same_reader(annotators):
    me = _token_client(annotators[0]).get("/api/me/")
    assert me.status_code == 200 and me.json()["username"] == annotators[0].username


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="synchronous_commit is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_a_claim_commits_without_waiting_for_the_disk_and_only_its_own_transaction(reviewable_run, annotators):
    reviewable_run()
    seen = []
    with CaptureQueriesContext(connection) as queries:
        seat = work_item_claim_next(annotator=annotators[0], stage="usability")
    assert seat is not None
    assert any("set_config('synchronous_commit', 'off', true)" in q["sql"] and "FOR NO KEY UPDATE" in q["sql"]
               for q in queries.captured_queries)
    assert _synchronous_commit() == "on"          # SET LOCAL: the session's setting after the commit
    # a claim inside a caller's transaction leaves that transaction's durability alone
    with transaction.atomic():
        vote_cast(item_id=seat.item_id, annotator=annotators[0], label="usable")
        with CaptureQueriesContext(connection) as queries:
            work_item_claim_next(annotator=annotators[0], stage="usability")
        seen.append(_synchronous_commit())
    assert seen == ["on"] and not any("synchronous_commit" in q["sql"] for q in queries.captured_queries)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_a_prepared_statement_is_logged_once_with_its_parameters():
    with _preparing(), CaptureQueriesContext(connection) as queries:
        for n in (1, 2):
            with prepared_cursor() as cursor:
                cursor.execute("SELECT %s::int + %s::int", [n, 40])
                assert cursor.fetchone() == (n + 40,)
    assert [q["sql"] for q in queries.captured_queries] == ["SELECT 1::int + 40::int", "SELECT 2::int + 40::int"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_a_claim_query_is_one_prepared_statement_whatever_it_excludes_and_however_large_the_ids(reviewable_run,
                                                                                                annotators):
    from annotation.curation.services import claims

    reviewable_run()
    ids = list(WorkItem.objects.values_list("pk", flat=True))
    before = _prepared_statements()
    with _preparing():
        for tried in ([ids[0]], ids[:3], [*ids[:2], 2**40], [70_000, *ids[:5]]):   # lengths and int sizes vary
            claims._next_candidates(annotators[0], "usability", None, tried, skip_locked=True, lock=False)
    made = [s for s in _prepared_statements() - before if "<> ALL" in s]
    assert len(made) == 1, made
    assert "LIMIT 2" in made[0] and "LIMIT $" not in made[0]   # the limit written in, for the plan

"""Bounded inputs and JSON errors under /api/ (issue 16, item 4): every bad input is a 4xx in the
project's error format, never a 500, HTML or a stack trace."""
from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from annotation.models import Audit, MiningRun, RelationSnapshot
from workers.models import TrainingRun

pytestmark = pytest.mark.django_db

TOO_BIG = str(2**63)  # one past the database's bigint range
FILTERS = [  # the id filters of the list endpoints
    ("/api/queries/", "video"), ("/api/queries/", "pool"),
    ("/api/descriptions/", "pool"), ("/api/descriptions/", "video"), ("/api/descriptions/", "trajectory"),
    ("/api/relations/", "query"), ("/api/relations/", "trajectory"),
    ("/api/cross-pairs/", "query"), ("/api/cross-pairs/", "trajectory"),
    ("/api/pools/", "video"), ("/api/proposal-runs/", "video"), ("/api/trajectories/", "video"),
    ("/api/trajectories/", "run"), ("/api/duplicate-candidates/", "video"),
    ("/api/training-runs/", "snapshot"), ("/api/evaluation-runs/", "snapshot"),
    ("/api/evaluation-runs/", "training_run"),
]


def assert_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = json.loads(response.content)
    assert set(body) == {"code", "message", "extra"}, body
    assert "Traceback" not in response.content.decode()
    if code is not None:
        assert body["code"] == code, body
    return body


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("url, name", FILTERS)
def test_an_id_filter_beyond_the_bigint_range_is_a_400(manager_client, url, name):
    assert_error(manager_client.get(url, {name: TOO_BIG}), 400)
    assert_error(manager_client.get(url, {name: "-" + TOO_BIG + "0"}), 400)
    assert manager_client.get(url, {name: str(2**63 - 1)}).status_code == 200


@pytest.mark.parametrize("depth", [200, 100_000])
def test_deeply_nested_json_is_a_400_even_before_login(depth):
    client = Client(raise_request_exception=False)
    body = '{"username": "a", "password": "b", "x": ' + nested(depth) + "}"
    error = assert_error(client.post("/api/auth/token/", body, content_type="application/json"), 400, "parse_error")
    assert "nest" in error["message"]


def test_deeply_nested_json_is_a_400_on_an_authenticated_endpoint(manager_client):
    body = '{"split": "dev", "seed": ' + nested(50_000) + "}"
    assert_error(manager_client.post("/api/audits/", body, content_type="application/json"), 400, "parse_error")
    assert not Audit.objects.exists()


def test_moderately_nested_json_is_still_parsed(manager_client):
    body = {"split": "dev", "kinds": ["relation"], "seed": 1, "extra": json.loads(nested(30))}
    assert manager_client.post("/api/audits/", body, format="json").status_code in (201, 409)


@pytest.mark.parametrize("field, value", [
    ("seed", 2**32), ("seed", -1), ("seed", 2**64), ("lease_seconds", 10**12), ("lease_seconds", 2**63),
    ("n_random", 2**63),
])
def test_audit_integers_are_bounded(manager_client, field, value):
    body = assert_error(manager_client.post("/api/audits/", {"split": "dev", field: value}, format="json"), 400)
    assert field in body["extra"]["fields"]
    assert not Audit.objects.exists()


@pytest.mark.parametrize("config", [{"steps": 2**63}, {"steps": 10**12}, {"seed": 2**64}, {"checkpoint_every": 2**63},
                                    {"warmup_steps": 2**63}, {"batch_size": 2**40}])
def test_training_config_integers_are_bounded(manager_client, sealed_snapshot, config):
    response = manager_client.post("/api/training-runs/", {"snapshot": sealed_snapshot.pk, "model_kind": "vtrajembed",
                                                           "config": config, "allow_train_split": True}, format="json")
    assert_error(response, 400)
    assert not TrainingRun.objects.exists()


@pytest.fixture
def sealed_snapshot(db, tmp_path):
    return RelationSnapshot.objects.create(split="train", name="bounds", content_sha256="0" * 64, path=str(tmp_path),
                                           pool_versions={}, counts={}, complete=True, sealed_at=timezone.now())


def test_unknown_api_path_is_a_json_404():
    client = Client(raise_request_exception=False)
    assert_error(client.get("/api/no-such-thing/"), 404, "not_found")


def test_wrong_method_is_a_json_405(manager_client):
    assert_error(manager_client.put("/api/audits/", {}, format="json"), 405, "method_not_allowed")


def test_a_body_over_the_limit_is_a_json_413(settings, manager):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = Client(raise_request_exception=False)
    client.force_login(manager)
    payload = json.dumps({"split": "dev", "pad": "x" * 5000})
    assert_error(client.post("/api/audits/", payload, content_type="application/json"), 413, "too_large")
    form = client.post("/api/audits/", {"split": "dev", "pad": "x" * 5000})   # a JSON endpoint reads no forms
    assert_error(form, 415, "unsupported_media_type")
    assert not Audit.objects.exists()


def test_a_server_error_under_api_is_json_without_a_trace(monkeypatch, manager):
    from annotation.releases import selectors

    def boom(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(selectors, "audit_list", boom)
    client = Client(raise_request_exception=False)
    client.force_login(manager)
    body = assert_error(client.get("/api/audits/"), 500, "server_error")
    assert "secret internals" not in json.dumps(body)


def test_errors_outside_api_stay_html():
    response = Client(raise_request_exception=False).get("/accounts/no-such-page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_static_files_are_served_and_a_traversal_is_a_404(monkeypatch):
    client = Client(raise_request_exception=False)
    assert client.get("/static/admin/css/base.css").status_code == 200
    for path in ("/static/../../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd", "/static/..%2f..%2fsettings.py",
                 "/static/admin/../../../../../etc/passwd"):
        assert client.get(path).status_code == 404, path
    # `serve` leaves /static/ to those routes: runserver's own static handler answers a traversal with a 500.
    from common.management.commands import serve

    calls = []
    monkeypatch.setattr(serve, "call_command", lambda *args: calls.append(args))
    monkeypatch.setattr(serve.signal, "signal", lambda *args: None)
    serve.Command().handle(host="127.0.0.1", port="8000", no_worker=True)
    assert calls and "--nostatic" in calls[0] and "--insecure" not in calls[0]


@pytest.mark.parametrize("config", [{"seed": 2**64}, {"seed": 2**32}, {"hard_k": 2**63}, {"random_k": 10**12}])
def test_mining_config_integers_are_bounded(manager_client, config):
    response = manager_client.post("/api/mining-runs/", {"split": "train", "config": config}, format="json")
    assert_error(response, 400)
    assert not MiningRun.objects.exists()



@pytest.mark.parametrize("url, name", [("/api/videos/", "offset"), ("/api/videos/", "limit"),
                                       ("/api/pools/", "video"), ("/api/trajectories/", "run")])
def test_an_empty_number_in_the_query_string_is_a_400_not_the_default(manager_client, url, name):
    # ``?offset=`` is not a number (the schema says integer); leaving it out is how to get the default
    assert_error(manager_client.get(f"{url}?{name}="), 400)
    assert manager_client.get(url).status_code == 200

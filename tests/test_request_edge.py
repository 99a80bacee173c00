"""The request edge (issue 27, findings 3, 4 and 9): text and integers are checked once, where they
enter, for every route of the URL conf and every operation of the schema.

Re-probes what the walk found: a lone surrogate (the JSON escape ``"\\ud800"``) or a NUL in a body,
a NUL or bytes that are not UTF-8 in a query string or a form, integers past int64 in a body, and
path ids past 2^63 - 1. Each is a 400 naming the field (``invalid_text``, ``out_of_range``,
``invalid_id``), never a 500, and nothing is written.
"""
from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
from django.apps import apps
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from annotation.models import RelationSnapshot, WorkItem
from common.roles import Role
from tests.annotation.conftest import annotators, reviewable_run, world  # noqa: F401 (fixtures, reused)

pytestmark = pytest.mark.django_db

ID_MAX = 2**63 - 1
INT_PARAM = re.compile(r"<int:(\w+)>")
METHODS = ("get", "post", "put", "patch", "delete")


def routes(resolver=None, prefix: str = "") -> list[str]:
    """Every ``path()`` route of the URL conf, includes joined (``api/review/items/<int:item_id>/``)."""
    found = []
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            found += routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            found.append(prefix + str(entry.pattern))
    return found


def id_routes() -> list[str]:
    return sorted({r for r in routes() if INT_PARAM.search(r)})


def filled(route: str, value: int, *, only: str | None = None) -> str:
    """``route`` with ``value`` in its int parameter ``only`` (all of them by default), 1 in the others."""
    return "/" + INT_PARAM.sub(lambda m: str(value if only in (None, m.group(1)) else 1), route)


def row_counts() -> dict[str, int]:
    return {m._meta.label: m.objects.count() for m in apps.get_models() if m._meta.managed}


@pytest.fixture
def everyone(make_user):
    """A client of an account holding every role: no role check stands before the edge's."""
    client = Client(raise_request_exception=False)
    client.force_login(make_user(*[r.value for r in Role], username="all-roles"))
    return client


@pytest.fixture(scope="module")
def schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def operations(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def api_path(path: str, value: int = 1) -> str:
    return re.sub(r"\{\w+\}", str(value), path)


def json_body_properties(schema: dict, operation: dict) -> dict:
    content = operation.get("requestBody", {}).get("content", {})
    if "application/json" not in content:
        return {}
    ref = content["application/json"]["schema"]
    if "$ref" in ref:
        ref = schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]
    return ref.get("properties", {})


def error(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    body = json.loads(response.content)
    assert body["code"] == code, body
    return body


# -- path ids ----------------------------------------------------------------------------------------------
def test_every_int_route_refuses_an_id_past_the_bigint_range(everyone):
    """Issue 27, finding 4: ``GET``/``DELETE /api/review/items/{2^63}/`` and ``…/skip/`` were 500s."""
    before = row_counts()
    checked = 0
    for route in id_routes():
        for name in INT_PARAM.findall(route):
            for method in METHODS:
                response = getattr(everyone, method)(filled(route, 2**63, only=name), content_type="application/json")
                body = error(response, 400, "invalid_id")
                assert body["extra"]["field"] == name, (route, body)
                assert name in body["message"]
                checked += 1
    assert checked > 200, checked       # every id route of the API, with every method
    assert row_counts() == before


def test_an_id_in_range_is_not_refused_by_the_edge(everyone):
    for route in id_routes():
        for method in ("get", "delete"):
            response = getattr(everyone, method)(filled(route, ID_MAX))
            assert response.status_code < 500, (route, method, response.content[:300])
            if response.status_code == 400:
                assert json.loads(response.content)["code"] != "invalid_id", route


def test_review_item_routes_past_2_63(world, client_for, annotators):  # noqa: F811 (fixture)
    client = client_for(annotators[0])
    for url in (f"/api/review/items/{2**63}/", f"/api/review/items/{2**64 + 5}/skip/"):
        for method in ("get", "delete", "post"):
            error(getattr(client, method)(url, {}, format="json"), 400, "invalid_id")
    assert client.get(f"/api/review/items/{ID_MAX}/").status_code == 404


# -- bodies --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("poison, code", [("\ud800", "invalid_text"), ("a\x00b", "invalid_text"),
                                          (2**63, "out_of_range"), (-(2**63) - 1, "out_of_range")])
@pytest.mark.usefixtures("world")
def test_every_json_body_refuses_unstorable_values(everyone, schema, poison, code):
    """Every property of every JSON body at once set to ``poison``: the edge refuses it before any view
    reads it (a ``stage`` or ``label`` of ``"\\ud800"`` was a 500, and the message echoed it)."""
    before = row_counts()
    refused = []
    for path, method, operation in operations(schema):
        properties = json_body_properties(schema, operation)
        if not properties:
            continue
        body = json.dumps({name: poison for name in properties})
        response = getattr(everyone, method)(api_path(path), body, content_type="application/json")
        assert response.status_code in (400, 404), (method, path, response.status_code, response.content[:300])
        if response.status_code == 400:
            answer = json.loads(response.content)
            assert answer["code"] == code, (method, path, answer)
            assert answer["extra"]["field"] in properties, (method, path, answer)
            refused.append((method, path))
    assert len(refused) > 25, refused
    assert row_counts() == before


def test_a_lone_surrogate_as_a_stage_or_label(world, client_for, annotators):  # noqa: F811 (fixture)
    client = client_for(annotators[0])
    body = error(client.post("/api/review/next/", '{"stage": "\\ud800"}', content_type="application/json"),
                 400, "invalid_text")
    assert body["extra"]["field"] == "stage" and "surrogate" in body["message"]
    item = WorkItem.objects.filter(stage="usability").first()
    body = error(client.post(f"/api/review/items/{item.pk}/votes/", '{"label": "\\ud800"}',
                             content_type="application/json"), 400, "invalid_text")
    assert body["extra"]["field"] == "label"
    nested = '{"label": "usable", "payload": {"reason\\ud800": 1}}'
    error(client.post(f"/api/review/items/{item.pk}/votes/", nested, content_type="application/json"), 400,
          "invalid_text")


def test_body_bytes_that_are_not_utf8(everyone):
    body = error(everyone.post("/api/audits/", b'{"split": "dev\xff"}', content_type="application/json"), 400,
                 "invalid_text")
    assert "UTF-8" in body["message"]


def test_forms_and_uploads_refuse_a_nul(everyone, tmp_path):
    before = row_counts()
    upload = tmp_path / "clip.mp4"
    upload.write_bytes(b"not a video")
    with upload.open("rb") as handle:
        body = error(everyone.post("/api/videos/", {"file": handle, "source": "cam\x00"}), 400, "invalid_text")
    assert body["extra"]["field"] == "source"
    with upload.open("rb") as handle:
        named = error(everyone.post("/api/videos/", {"file": handle, "source": "cam", "name": "a\x00"}), 400,
                      "invalid_text")
    assert named["extra"]["field"] == "name"
    anonymous = Client(raise_request_exception=False)
    form = "application/x-www-form-urlencoded"
    token = anonymous.post("/api/auth/token/", "username=a%00&password=b", content_type=form)
    assert error(token, 400, "invalid_text")["extra"]["field"] == "username"
    latin1 = anonymous.post("/api/auth/token/", "username=caf%e9&password=b", content_type=form)
    assert error(latin1, 400, "invalid_text")["extra"]["field"] == "username"
    raw = anonymous.post("/api/auth/token/", b"username=caf\xe9&password=b", content_type=form)
    assert error(raw, 400, "invalid_text")["extra"]["field"] == "username"
    assert row_counts() == before


# -- query strings -----------------------------------------------------------------------------------------
@pytest.mark.usefixtures("world")
def test_every_query_parameter_refuses_a_nul_and_bytes_that_are_not_utf8(everyone, schema):
    """``/api/jobs/?kind=%00`` and ``/api/videos/?source=%00`` were 500s on PostgreSQL."""
    checked = 0
    for path, method, operation in operations(schema):
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "query":
                continue
            name = parameter["name"]
            for raw in ("%00", "a%00", "%ff", "%ed%a0%80"):
                response = getattr(everyone, method)(f"{api_path(path)}?{quote(name)}={raw}")
                assert error(response, 400, "invalid_text")["extra"]["field"] == name, (method, path, name)
                checked += 1
    assert checked > 200, checked


def test_named_filters_with_a_nul(everyone):
    for url in ("/api/jobs/?kind=%00", "/api/videos/?source=%00", "/api/review/items/search/?q=%00",
                "/api/videos/?split=x&source=a%00b"):
        error(everyone.get(url), 400, "invalid_text")


@pytest.mark.usefixtures("world")
def test_every_integer_query_parameter_is_bounded(everyone, schema):
    """The schema's bounds of every integer parameter hold: one past them is a 400 naming it."""
    checked = 0
    for path, method, operation in operations(schema):
        for parameter in operation.get("parameters", []):
            spec = parameter["schema"]
            if parameter["in"] != "query" or spec.get("type") != "integer" or "enum" in spec:
                continue
            assert "maximum" in spec and "minimum" in spec, (path, parameter)
            for value in (spec["maximum"] + 1, spec["minimum"] - 1, 2**70):
                response = getattr(everyone, method)(f"{api_path(path)}?{parameter['name']}={value}")
                # 404: the path's record (id 1) may be looked up first
                assert response.status_code in ((400, 404) if "{" in path else (400,)), \
                    (path, parameter["name"], value, response.status_code, response.content[:300])
                checked += 1
    assert checked > 30, checked


def test_the_admin_and_the_pages_refuse_a_nul_too(admin_client):
    assert admin_client.get("/admin/auth/user/?q=%00").status_code == 400
    assert Client(raise_request_exception=False).get("/review/a%00b").status_code == 400


def test_a_token_or_a_session_cookie_with_a_nul(db):
    """The token and the session key are looked up in the database, which refuses a NUL (a 500); a
    quoted cookie's ``\\000`` unquotes to one."""
    client = Client(raise_request_exception=False)
    body = error(client.get("/api/me/", HTTP_AUTHORIZATION="Token abc\x00def"), 400, "invalid_text")
    assert body["extra"]["field"] == "the Authorization header"
    body = error(client.get("/api/me/", HTTP_COOKIE='sessionid="abcdefgh\\000"'), 400, "invalid_text")
    assert body["extra"]["field"] == "the cookie sessionid"
    assert client.get("/accounts/login/", HTTP_COOKIE='sessionid="abcdefgh\\000"').status_code == 400


# -- the smaller findings ------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", ["²", "٣", "①", "12345678901234567890123", "  7  "])
@pytest.mark.usefixtures("world")
def test_item_search_by_text_that_looks_like_digits(manager_client, q):
    """``search?q=²`` answered 500 (``"²".isdigit()`` is true, ``int("²")`` fails)."""
    response = manager_client.get("/api/review/items/search/", {"q": q})
    assert response.status_code == 200, response.content


@pytest.mark.usefixtures("world")
def test_item_search_by_id_still_finds_the_item(manager_client):
    item = WorkItem.objects.order_by("pk").first()
    found = manager_client.get("/api/review/items/search/", {"q": f" {item.pk} "}).json()["results"]
    assert [r["id"] for r in found] == [item.pk]


@pytest.mark.parametrize("name", [0, 1.5, True, ["a"], {"a": 1}])
def test_a_snapshot_name_that_is_not_text_is_a_400(manager_client, name):
    body = error(manager_client.post("/api/snapshots/", {"split": "train", "name": name}, format="json"), 400,
                 "invalid")
    assert "name" in body["extra"]["fields"]
    assert not RelationSnapshot.objects.exists()

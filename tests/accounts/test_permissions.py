"""Every endpoint names who may call it; check each one for each role."""
from __future__ import annotations

import pytest

from common.jobs.services import job_create
from tests.conftest import ROLE_NAMES, write_video
from tests.trajectories.factories import config_factory, proposal, run_factory
from trajectories.models import SplitGroup, Trajectory
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.django_db

MANAGER_ONLY = {"manager"}
ANY_ROLE = set(ROLE_NAMES)


@pytest.fixture
def records(media_root, tmp_path, manager):
    video = video_import(path=write_video(tmp_path / "v.mp4", n_frames=10, size=(160, 120)), source="g").video
    SplitGroup.objects.filter(pk=video.split_group_id).update(split="train")
    run = run_factory(video=video)
    trajectories_store(run=run, proposals=[proposal(1, 0, 5), proposal(2, 0, 5, x=12)])
    a, b = Trajectory.objects.order_by("pk")
    job = job_create(kind="proposal_run", created_by=manager)
    return {"video": video, "run": run, "group": video.split_group, "config": config_factory(), "a": a, "b": b,
            "job": job, "upload": write_video(tmp_path / "upload.mp4", n_frames=5, seed=9)}


def endpoints(r):
    """(method, url, body, roles allowed). Writes get a body that would pass validation."""
    return [
        ("get", "/api/videos/", None, ANY_ROLE),
        ("get", f"/api/videos/{r['video'].pk}/", None, ANY_ROLE),
        ("get", f"/api/videos/{r['video'].pk}/pool/", None, ANY_ROLE),
        ("get", "/api/sources/", None, ANY_ROLE),
        ("get", "/api/split-groups/", None, ANY_ROLE),
        ("patch", f"/api/split-groups/{r['group'].pk}/", {"split": "train"}, MANAGER_ONLY),
        ("post", "/api/splits/assign/", {"seed": 1}, MANAGER_ONLY),
        ("get", "/api/proposal-configs/", None, ANY_ROLE),
        ("post", "/api/proposal-configs/", {"name": "x", "backend": "hog-bytetrack", "categories": ["person"]}, MANAGER_ONLY),
        ("get", "/api/proposal-runs/", None, ANY_ROLE),
        ("get", f"/api/proposal-runs/{r['run'].pk}/", None, ANY_ROLE),
        ("post", "/api/proposal-runs/", {"video": r["video"].pk, "config": r["config"].pk}, MANAGER_ONLY),
        ("get", "/api/trajectories/", None, ANY_ROLE),
        ("get", f"/api/trajectories/{r['a'].pk}/", None, ANY_ROLE),
        ("get", f"/api/trajectories/{r['a'].pk}/crops/", None, ANY_ROLE),
        ("get", "/api/duplicate-candidates/", None, ANY_ROLE),
        ("post", "/api/duplicate-candidates/", {"trajectory_a": r["a"].pk, "trajectory_b": r["b"].pk}, MANAGER_ONLY),
        ("get", "/api/jobs/", None, ANY_ROLE),
        ("get", f"/api/jobs/{r['job'].pk}/", None, MANAGER_ONLY),  # others see only the jobs they started
        ("get", f"/api/videos/{r['video'].pk}/frames/3.jpg", None, ANY_ROLE),
        ("get", f"/api/trajectories/{r['a'].pk}/crops/2.jpg", None, ANY_ROLE),
        ("get", f"/api/trajectories/{r['a'].pk}/marked/2.jpg", None, ANY_ROLE),
        ("upload", "/api/videos/", None, MANAGER_ONLY),
        ("post", "/api/review/next/", {"stage": "usability"}, {"annotator"}),
        ("get", "/api/adjudication/", None, {"adjudicator"}),
        ("get", "/api/review/summary/", None, MANAGER_ONLY),
        ("get", "/api/review/agreement/?stage=usability", None, MANAGER_ONLY),
        ("post", "/api/review/items/", {"run": r["run"].pk}, MANAGER_ONLY),
        ("get", "/api/pools/", None, ANY_ROLE),
        ("get", "/api/description-runs/", None, ANY_ROLE),
        ("get", "/api/descriptions/", None, ANY_ROLE),
        ("get", "/api/generation-runs/", None, ANY_ROLE),
        ("get", "/api/queries/", None, ANY_ROLE),
        ("get", "/api/relations/", None, ANY_ROLE),
        ("get", "/api/mining-runs/", None, ANY_ROLE),
        ("get", "/api/cross-pairs/", None, ANY_ROLE),
        ("get", "/api/completeness/?split=dev", None, ANY_ROLE),
        ("get", "/api/snapshots/", None, ANY_ROLE),
        ("get", "/api/pseudo-rules/", None, ANY_ROLE),
        ("post", "/api/mining-runs/", {"split": "dev"}, MANAGER_ONLY),
        ("post", "/api/pseudo-rules/", {"rule": {"name": f"r-{len(r)}", "s_max": 0.2, "encoder": "e"},
                                        "declared_bound": 0.1}, MANAGER_ONLY),
        ("get", "/api/me/", None, ANY_ROLE | {None}),  # any signed-in user, roles or not
        ("get", "/api/audits/", None, {"manager", "auditor"}),
        ("get", "/api/audits/?split=dev", None, {"manager", "auditor"}),
        ("get", "/api/releases/", None, ANY_ROLE),
        ("get", "/api/releases/?name=demo", None, ANY_ROLE),
    ]


@pytest.mark.parametrize("role", [*ROLE_NAMES, None])
def test_each_endpoint_admits_exactly_its_roles(role, records, make_user, client_for, monkeypatch):
    # Queuing work is not under test here.
    monkeypatch.setattr("common.jobs.runs.current_app.send_task", lambda *a, **k: None)
    user = make_user(role) if role else make_user()
    client = client_for(user)
    anonymous = client_for(None)
    def call(c, method, url, body):
        if method == "upload":
            with open(records["upload"], "rb") as fh:
                return c.post(url, {"file": fh, "source": f"up-{role}"}, format="multipart")
        return getattr(c, method)(url, body, format="json") if body is not None else getattr(c, method)(url)

    for method, url, body, allowed in endpoints(records):
        response = call(client, method, url, body)
        if role in allowed:
            assert response.status_code < 400, (role, method, url, response.status_code, response.content[:300])
        elif role is not None and url.startswith("/api/jobs/") and url != "/api/jobs/":
            assert response.status_code == 404, (role, url)  # another person's job does not exist for them
        else:
            assert response.status_code == 403, (role, method, url, response.status_code)
            assert response.json()["code"] in {"permission_denied", "not_authenticated"}
        assert call(anonymous, method, url, body).status_code in (401, 403), (method, url)


def test_token_auth(make_user, client):
    make_user("annotator", username="ann")
    r = client.post("/api/auth/token/", {"username": "ann", "password": "pw-for-tests"}, content_type="application/json")
    assert r.status_code == 200
    token = r.json()["token"]
    me = client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {token}")
    assert me.status_code == 200 and me.json()["roles"] == ["annotator"]
    bad = client.post("/api/auth/token/", {"username": "ann", "password": "nope"}, content_type="application/json")
    assert bad.status_code == 401 and bad.json()["code"] == "bad_credentials"


def test_unknown_role_is_refused():
    from accounts.services import user_create
    from common.errors import ApplicationError

    with pytest.raises(ApplicationError, match="unknown role"):
        user_create(username="x", password="pw-for-tests", roles=["boss"])


def test_session_login_serves_the_ui(make_user, client):
    make_user("manager", username="boss")
    assert client.get("/").status_code == 302  # to the login page
    r = client.post("/accounts/login/", {"username": "boss", "password": "pw-for-tests"})
    assert r.status_code == 302
    page = client.get("/")
    assert page.status_code == 200 and b"Trajlab" in page.content


def _group_reads(client, path: str, **headers) -> tuple[int, list[str]]:
    """(status, the request's queries that read the role groups)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        status = client.get(path, **headers).status_code
    return status, [q["sql"] for q in ctx.captured_queries if "auth_group" in q["sql"]]


def test_a_request_reads_its_user_and_roles_in_one_query_by_token_and_by_session(make_user, client):
    """The user (by token or by session) comes with its roles: the groups are read in the query
    that reads the user, never in one of their own; a role granted or taken away counts from the
    next request."""
    from django.contrib.auth.models import Group

    from accounts.services import token_for

    user = make_user("annotator", username="ann")
    token = token_for(user=user)
    status, reads = _group_reads(client, "/api/me/", HTTP_AUTHORIZATION=f"Token {token}")
    assert status == 200 and len(reads) == 1 and "authtoken_token" in reads[0], reads
    user.groups.add(Group.objects.get_or_create(name="auditor")[0])
    me = client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {token}").json()
    assert me["roles"] == ["annotator", "auditor"]
    assert client.post("/accounts/login/", {"username": "ann", "password": "pw-for-tests"}).status_code == 302
    status, reads = _group_reads(client, "/api/me/")
    user_table = user._meta.db_table
    assert status == 200 and len(reads) == 1 and f"FROM {user_table} u WHERE u.id" in reads[0], reads
    user.groups.clear()
    assert client.get("/api/me/").json()["roles"] == []
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {token}").status_code in (401, 403)
    assert client.get("/api/me/").status_code in (401, 403)  # the session's user is gone too

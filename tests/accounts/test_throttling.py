"""Sign-in lockout on the token endpoint and the login form; token expiry and rotation."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from accounts.services import token_for

TOKEN_URL = "/api/auth/token/"
PASSWORD = "pw-for-tests"


@pytest.fixture
def limits(settings):
    settings.TRAJLAB_LOGIN_MAX_FAILURES = 3
    settings.TRAJLAB_LOGIN_ADDRESS_MAX_FAILURES = 5
    settings.TRAJLAB_LOGIN_FAILURE_WINDOW_S = 60
    settings.TRAJLAB_LOGIN_LOCKOUT_S = 120
    return settings


def _token(client, username, password, **extra):
    return client.post(TOKEN_URL, {"username": username, "password": password},
                       content_type="application/json", **extra)


def test_token_endpoint_locks_a_username_out_after_n_failures(make_user, client, limits, monkeypatch):
    make_user("annotator", username="ann")
    for _ in range(3):
        assert _token(client, "ann", "wrong").status_code == 401
    # then: even the right password is refused, in the API's error format, with Retry-After
    r = _token(client, "ann", PASSWORD)
    assert r.status_code == 429
    assert r.json()["code"] == "throttled" and set(r.json()) == {"code", "message", "extra"}
    assert 0 < int(r["Retry-After"]) <= 120
    # the lockout is the pair's: the owner signing in from their own address is not locked out
    # by what another address tried (issue 27, finding 9)
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.0.0.9").status_code == 200
    # when the window has passed, the right password works again
    later = time.time() + 121
    monkeypatch.setattr(time, "time", lambda: later)
    r = _token(client, "ann", PASSWORD)
    assert r.status_code == 200 and r.json()["token"]


def test_token_endpoint_locks_an_address_out_across_usernames(make_user, client, limits):
    make_user("annotator", username="ann")
    for name in ("x1", "x2", "x3", "x4", "x5"):
        assert _token(client, name, "wrong", REMOTE_ADDR="10.0.0.7").status_code == 401
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.0.0.7").status_code == 429
    # another address is not affected; nor is a forged X-Forwarded-For trusted without proxies
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.0.0.8").status_code == 200
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.0.0.7",
                  HTTP_X_FORWARDED_FOR="10.9.9.9").status_code == 429


def test_a_right_password_clears_the_pairs_count(make_user, client, limits):
    make_user("annotator", username="ann")
    for _ in range(2):
        assert _token(client, "ann", "wrong", REMOTE_ADDR="10.1.0.1").status_code == 401
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.1.0.1").status_code == 200
    for _ in range(2):   # two more: the count began again at the right password
        assert _token(client, "ann", "wrong", REMOTE_ADDR="10.1.0.1").status_code == 401
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.1.0.1").status_code == 200


def test_nobody_locks_an_account_out_from_elsewhere(make_user, client, limits):
    """Wrong passwords for someone else's account lock out the pair that sent them and, past the
    address's limit, that address; never the account's owner at their own address."""
    make_user("annotator", username="ann")
    for _ in range(10):
        assert _token(client, "ann", "wrong", REMOTE_ADDR="10.2.0.66").status_code in (401, 429)
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.2.0.66").status_code == 429
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.2.0.5").status_code == 200
    # spread over addresses, each pair stays under its limit and nothing locks the owner out
    for i in range(10):
        assert _token(client, "ann", "wrong", REMOTE_ADDR=f"10.3.0.{i}").status_code == 401
    assert _token(client, "ann", PASSWORD, REMOTE_ADDR="10.2.0.5").status_code == 200


def test_login_form_locks_out_with_a_readable_message(make_user, client, limits, monkeypatch):
    make_user("manager", username="boss")
    for _ in range(3):
        r = client.post("/accounts/login/", {"username": "boss", "password": "wrong"})
        assert r.status_code == 200 and b"Wrong username or password" in r.content
    r = client.post("/accounts/login/", {"username": "boss", "password": PASSWORD})
    assert r.status_code == 429
    assert 0 < int(r["Retry-After"]) <= 120
    assert b"Too many failed sign-ins" in r.content
    assert client.get("/api/me/").status_code == 403  # not signed in
    # the form and the token endpoint share the lockout
    assert _token(client, "boss", PASSWORD).status_code == 429
    later = time.time() + 121
    monkeypatch.setattr(time, "time", lambda: later)
    r = client.post("/accounts/login/", {"username": "boss", "password": PASSWORD})
    assert r.status_code == 302
    assert client.get("/api/me/").json()["username"] == "boss"


def test_token_request_rotates_the_key_on_request(make_user, client):
    make_user("annotator", username="ann")
    first = _token(client, "ann", PASSWORD).json()["token"]
    assert _token(client, "ann", PASSWORD).json()["token"] == first      # a second script gets the same key
    second = client.post(TOKEN_URL, {"username": "ann", "password": PASSWORD, "rotate": True},
                         content_type="application/json").json()["token"]
    assert first != second
    assert client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {second}").status_code == 200
    assert client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {first}").status_code == 403
    assert Token.objects.filter(user__username="ann").count() == 1


def test_expired_token_is_refused_with_401(make_user, client, settings):
    settings.TRAJLAB_TOKEN_LIFETIME_HOURS = 24
    make_user("annotator", username="ann")
    key = _token(client, "ann", PASSWORD).json()["token"]
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(hours=23))
    assert client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(hours=24, seconds=1))
    r = client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}")
    assert r.status_code == 401
    assert r.json()["code"] == "token_expired" and "POST /api/auth/token/" in r.json()["message"]
    # a new token request gives a working key
    fresh = _token(client, "ann", PASSWORD).json()["token"]
    assert client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {fresh}").status_code == 200


def test_token_for_replaces_an_expired_token(make_user, settings):
    user = make_user("annotator")
    key = token_for(user=user)
    assert token_for(user=user) == key
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(hours=settings.TRAJLAB_TOKEN_LIFETIME_HOURS + 1))
    assert token_for(user=user) != key


def test_admin_sign_in_is_under_the_same_lockout(make_user, client, limits):
    user = make_user("manager", username="root")
    user.is_staff = True
    user.save()
    for _ in range(3):
        assert client.post("/admin/login/", {"username": "root", "password": "wrong"}).status_code == 200
    r = client.post("/admin/login/", {"username": "root", "password": PASSWORD, "next": "/admin/"})
    assert r.status_code == 429 and "Retry-After" in r
    assert client.get("/admin/").status_code == 302  # still signed out


def test_admin_sign_in_still_reaches_the_admin(make_user, client):
    user = make_user("manager", username="root")
    user.is_staff = True
    user.save()
    r = client.post("/admin/login/", {"username": "root", "password": PASSWORD, "next": "/admin/"})
    assert r.status_code == 302 and r["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200

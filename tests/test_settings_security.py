"""Deployment settings: CSP, HSTS and Secure cookies from the environment, the proxy header,
`serve` refusing the embedded secret key off loopback, and no `testserver` outside tests."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.test import Client

from common.management.commands import serve

ROOT = django_settings.BASE_DIR


def _settings_in_fresh_process(tmp_path, env: dict, names: list[str]) -> dict:
    """Import config.settings in a new interpreter with ``env`` and return ``names`` from it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAJLAB_", "DJANGO_", "CACHE_URL"))}
    base.update({"DATABASE_URL": "sqlite:///:memory:", "TRAJLAB_VAR_DIR": str(tmp_path / "var"), **env})
    code = ("import json, config.settings as s; "
            f"print(json.dumps({{n: getattr(s, n, None) for n in {names!r}}}, default=str))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=base, capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_csp_header_on_pages_and_api(client, make_user):
    make_user("manager", username="boss")
    for url in ("/accounts/login/", "/api/schema/", "/api/docs/"):
        csp = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
        assert "frame-ancestors 'none'" in csp


def test_api_docs_page_has_no_inline_script(client):
    page = client.get("/api/docs/").content.decode()
    assert "<script>" not in page  # every script has a src (the CSP allows no inline script)


def test_hsts_only_when_enabled(client, settings):
    assert "Strict-Transport-Security" not in client.get("/accounts/login/", secure=True)
    settings.SECURE_HSTS_SECONDS = 3600
    r = Client().get("/accounts/login/", secure=True)  # a new client reads the settings again
    assert r["Strict-Transport-Security"].startswith("max-age=3600")


def test_deployment_settings_come_from_the_environment(tmp_path):
    values = _settings_in_fresh_process(
        tmp_path,
        {"TRAJLAB_SECURE_COOKIES": "1", "TRAJLAB_HSTS_SECONDS": "31536000", "TRAJLAB_BEHIND_TLS_PROXY": "true",
         "TRAJLAB_TOKEN_LIFETIME_HOURS": "12", "CACHE_URL": "redis://127.0.0.1:6379/5"},
        ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_PROXY_SSL_HEADER",
         "TRAJLAB_TOKEN_LIFETIME_HOURS", "CACHES", "ALLOWED_HOSTS"])
    assert values["SESSION_COOKIE_SECURE"] is True and values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_HSTS_SECONDS"] == 31536000
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["TRAJLAB_TOKEN_LIFETIME_HOURS"] == 12
    assert values["CACHES"]["default"]["BACKEND"].endswith("RedisCache")
    assert "testserver" not in values["ALLOWED_HOSTS"]


def test_defaults_are_plain_http_without_testserver(tmp_path):
    values = _settings_in_fresh_process(tmp_path, {}, ["SESSION_COOKIE_SECURE", "SECURE_HSTS_SECONDS",
                                             "SECURE_PROXY_SSL_HEADER", "ALLOWED_HOSTS", "CACHES"])
    assert values["SESSION_COOKIE_SECURE"] is False and values["SECURE_HSTS_SECONDS"] == 0
    assert values["SECURE_PROXY_SSL_HEADER"] is None
    assert values["ALLOWED_HOSTS"] == ["localhost", "127.0.0.1", "[::1]"]
    assert values["CACHES"]["default"]["BACKEND"].endswith("LocMemCache")


def test_proxy_header_marks_requests_secure(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 60
    r = Client().get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert "Strict-Transport-Security" in r  # only sent on requests seen as https


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "trajlab.example.org"])
def test_serve_refuses_the_embedded_key_off_loopback(settings, monkeypatch, host):
    settings.SECRET_KEY = settings.TRAJLAB_EMBEDDED_SECRET_KEY
    monkeypatch.setattr(serve.subprocess, "Popen", lambda *a, **k: pytest.fail("started a worker"))
    with pytest.raises(CommandError, match="DJANGO_SECRET_KEY"):
        call_command("serve", "--host", host)


def test_serve_allows_loopback_or_a_real_key(settings, monkeypatch):
    started = []
    monkeypatch.setattr(serve, "call_command", lambda *a, **k: started.append(a))
    monkeypatch.setattr(serve.signal, "signal", lambda *a: None)
    settings.SECRET_KEY = settings.TRAJLAB_EMBEDDED_SECRET_KEY
    for host in ("127.0.0.1", "localhost", "::1"):
        call_command("serve", "--host", host, "--no-worker")
    settings.SECRET_KEY = "a-long-random-deployment-key"
    call_command("serve", "--host", "0.0.0.0", "--no-worker")
    assert [a[1] for a in started] == ["127.0.0.1:8000", "localhost:8000", "::1:8000", "0.0.0.0:8000"]

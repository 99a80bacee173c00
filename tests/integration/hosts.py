"""Hosts that share no disk, for the deployment tests: web processes (gunicorn on ``config.wsgi``)
and Celery workers, each with its own folder (``TRAJLAB_VAR_DIR``, the read-through cache,
``MEDIA_ROOT``), sharing only the test database, the broker and an S3 bucket; an HTTP client per
user that signs in for a token and talks to any web host; and the checks that no folder holds
another's files and that no record names a local path."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from django.apps import apps
from django.conf import settings
from django.db import models

from tests.processes import database_url_for_subprocess, stop_process_group
from tests.storage_server import S3Server, free_ports

ROOT = Path(__file__).resolve().parents[2]
WEB_START_S = 90.0


@dataclass
class Host:
    """One process standing for one machine: its name, role, folder and (for web hosts) address."""

    name: str
    role: str                        # web | cpu | gpu
    folder: Path
    proc: subprocess.Popen
    url: str = ""

    @property
    def log_path(self) -> Path:
        return self.folder / "process.log"

    def log_tail(self, n: int = 2500) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""


@dataclass
class Cluster:
    """The hosts of one deployment: the environment they all get, plus their own folders."""

    root: Path
    s3: S3Server
    storage_url: str
    hosts: list[Host] = field(default_factory=list)
    clients: list[requests.Session] = field(default_factory=list)

    def common_env(self) -> dict:
        broker = settings.CELERY_BROKER_URL
        return dict(os.environ, DATABASE_URL=database_url_for_subprocess(), CELERY_BROKER_URL=broker,
                    CACHE_URL=broker, DJANGO_SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY") or "deploy-test",
                    TRAJLAB_STORAGE_URL=self.storage_url, AWS_S3_ENDPOINT_URL=self.s3.endpoint,
                    AWS_ACCESS_KEY_ID=self.s3.access_key, AWS_SECRET_ACCESS_KEY=self.s3.secret_key,
                    AWS_DEFAULT_REGION=self.s3.region, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
                    TRAJLAB_LOG_LEVEL="INFO", DJANGO_DEBUG="0", PYTHONUNBUFFERED="1")

    def _host_env(self, folder: Path, **extra) -> dict:
        return dict(self.common_env(), TRAJLAB_VAR_DIR=str(folder / "var"),
                    TRAJLAB_STORAGE_CACHE_DIR=str(folder / "cache"), MEDIA_ROOT=str(folder / "media"), **extra)

    def _spawn(self, name: str, role: str, command: list[str], url: str = "", **extra) -> Host:
        folder = self.root / name
        folder.mkdir(parents=True)
        with open(folder / "process.log", "wb") as log:
            proc = subprocess.Popen(command, cwd=ROOT, env=self._host_env(folder, **extra), stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        host = Host(name, role, folder, proc, url)
        self.hosts.append(host)
        return host

    def start_web(self, name: str, **extra) -> Host:
        """gunicorn on ``config.wsgi`` (docs/deploy.md), one process with threads on this small machine."""
        port = free_ports(1)[0]
        gunicorn = str(Path(sys.executable).parent / "gunicorn")
        return self._spawn(name, "web", [gunicorn, "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                                         "--threads", "4", "--preload", "--timeout", "120", "--graceful-timeout", "10",
                                         "--chdir", str(ROOT)], url=f"http://127.0.0.1:{port}", **extra)

    def start_worker(self, name: str, queue: str, **extra) -> Host:
        """``celery -A config worker -Q <queue> -c 1`` (docs/deploy.md)."""
        return self._spawn(name, queue, [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "-c",
                                         "1", "--loglevel", "INFO", "-n", f"{name}-{os.getpid()}@%h",
                                         "--without-heartbeat", "--without-mingle", "--without-gossip"], **extra)

    def wait_ready(self, host: Host) -> None:
        """Until the web host's ``/readyz`` answers 200 (database, broker and bucket reachable)."""
        deadline = time.monotonic() + WEB_START_S
        while time.monotonic() < deadline:
            self.check_alive(host)
            try:
                if requests.get(f"{host.url}/readyz", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        pytest.fail(f"{host.name} was not ready in {WEB_START_S:.0f} s:\n{host.log_tail()}")

    def check_alive(self, host: Host) -> None:
        if host.proc.poll() is not None:
            pytest.fail(f"{host.name} exited ({host.proc.returncode}):\n{host.log_tail()}")

    def logs(self) -> str:
        return "\n".join(f"--- {h.name}\n{h.log_tail()}" for h in self.hosts)

    def stop_all(self, timeout: float = 15.0) -> None:
        """SIGTERM to every host's process group at once (the clients' kept-alive connections closed
        first, which a web host would wait for), then SIGKILL to what is left after ``timeout``."""
        for client in self.clients:
            client.close()
        for host in self.hosts:
            if host.proc.poll() is None:
                os.killpg(host.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for host in self.hosts:
            try:
                host.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                stop_process_group(host.proc, timeout=1)


class Api:
    """One user's HTTP client, sent to whichever web host is asked: signed in for a token from
    ``/api/auth/token/``, or (``browser``) through the sign-in form as the web UI is, its session
    cookie and CSRF token then sent with every request."""

    def __init__(self, cluster: Cluster, username: str, password: str, *, browser: bool = False, on: int = 0):
        self.cluster, self.username = cluster, username
        self.session = requests.Session()
        cluster.clients.append(self.session)
        base = self.web(on).url
        if browser:
            self.session.get(f"{base}/accounts/login/", timeout=30)
            csrf = self.session.cookies["csrftoken"]
            r = self.session.post(f"{base}/accounts/login/", timeout=30, allow_redirects=False, data={
                "username": username, "password": password, "csrfmiddlewaretoken": csrf})
            assert r.status_code == 302 and "sessionid" in self.session.cookies, (username, r.status_code, r.text[:500])
            self.session.headers["X-CSRFToken"] = self.session.cookies["csrftoken"]
            return
        r = self.session.post(f"{base}/api/auth/token/", json={"username": username, "password": password},
                              timeout=30)
        assert r.status_code == 200, (username, r.status_code, r.text)
        self.session.headers["Authorization"] = f"Token {r.json()['token']}"

    def web(self, index: int) -> Host:
        webs = [h for h in self.cluster.hosts if h.role == "web"]
        return webs[index % len(webs)]

    def call(self, method: str, path: str, *, on: int, expect: tuple[int, ...] = (200, 201, 202), **kwargs):
        """The response of ``method path`` on web host ``on``; fails the test on another status."""
        r = self.session.request(method, f"{self.web(on).url}{path}", timeout=120, **kwargs)
        if r.status_code not in expect:
            log = f"\n{self.web(on).log_tail(6000)}" if r.status_code >= 500 else ""
            pytest.fail(f"{self.username} {method} {path} on {self.web(on).name}: {r.status_code} {r.text[:2000]}{log}")
        return r


def host_files(host: Host) -> list[Path]:
    return sorted(p for p in host.folder.rglob("*") if p.is_file() or p.is_symlink())


def check_folders_apart(cluster: Cluster) -> dict[str, dict[str, int]]:
    """No folder lies inside another, holds a link to a file outside itself, shares a file (inode)
    with another, or writes another folder's path in a text file; returns each host's file count
    per second-level folder (``var/releases``, ``cache/videos``, ...)."""
    counts, owners = {}, {}
    for host in cluster.hosts:
        others = [h.folder for h in cluster.hosts if h is not host]
        assert not any(host.folder.is_relative_to(o) or o.is_relative_to(host.folder) for o in others)
        files = host_files(host)
        counts[host.name] = {}
        for path in files:
            parts = path.relative_to(host.folder).parts
            where = "/".join(parts[:min(2, len(parts) - 1)]) or "."
            counts[host.name][where] = counts[host.name].get(where, 0) + 1
            if path.is_symlink():
                assert path.resolve().is_relative_to(host.folder), f"{path} links to {path.resolve()}"
                continue
            stat = path.stat()
            owner = owners.setdefault((stat.st_dev, stat.st_ino), host.name)
            assert owner == host.name, f"{path} is also a file of {owner}"
            if path.name == "process.log" or path.suffix not in (".json", ".jsonl", ".txt", ".log", ".csv", ""):
                continue
            if stat.st_size < 5_000_000:
                text = path.read_bytes().decode("utf-8", errors="ignore")
                for other in others:
                    assert str(other) not in text, f"{path} names {other}"
    return counts


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def records_naming(roots: list[str]) -> list[str]:
    """``model.field=value`` of every text or JSON value of every row that holds one of ``roots``
    (local folders) or is itself an absolute path."""
    found = []
    for model in apps.get_models():
        names = [f.attname for f in model._meta.concrete_fields
                 if isinstance(f, (models.CharField, models.TextField, models.JSONField, models.FilePathField))]
        if not names:
            continue
        for row in model.objects.values_list("pk", *names).iterator():
            for name, value in zip(names, row[1:]):
                for text in _strings(value):
                    if any(root in text for root in roots) or (text.startswith("/") and len(text) > 1
                                                               and "/" in text[1:] and " " not in text):
                        found.append(f"{model.__name__}[{row[0]}].{name}={text[:200]!r}")
    return found


class Timeline:
    """Seconds from the start at which each step ended, printed and written as JSON."""

    def __init__(self):
        self.start, self.steps = time.monotonic(), []

    def mark(self, step: str) -> None:
        self.steps.append({"step": step, "t_s": round(time.monotonic() - self.start, 2)})
        print(f"[{self.steps[-1]['t_s']:7.2f} s] {step}", flush=True)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"steps": self.steps}, indent=2) + "\n")

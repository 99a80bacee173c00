"""``manage.py serve`` (the embedded mode): one worker per queue, so a training never waits behind a
tracker run (issue 27, finding 12), and both stop with the server."""
from __future__ import annotations

import pytest
from django.core.management import call_command

from common.management.commands import serve


class FakeWorker:
    started: list[list[str]] = []

    def __init__(self, argv, **kwargs):
        type(self).started.append(argv)
        self.pid = 1000 + len(type(self).started)
        self.signals: list[int] = []

    def poll(self):
        return None

    def send_signal(self, signum):
        self.signals.append(signum)

    def wait(self, timeout=None):
        return 0


@pytest.fixture
def served(monkeypatch):
    FakeWorker.started = []
    workers: list[FakeWorker] = []

    def popen(argv, **kwargs):
        workers.append(FakeWorker(argv, **kwargs))
        return workers[-1]

    monkeypatch.setattr(serve.subprocess, "Popen", popen)
    monkeypatch.setattr(serve, "call_command", lambda *a, **k: None)   # no real runserver
    return workers


def test_serve_runs_one_worker_per_queue_and_stops_both(served, capsys):
    call_command("serve", "--port", "8765")
    queues = sorted(argv[argv.index("-Q") + 1] for argv in FakeWorker.started)
    assert queues == ["cpu", "gpu"]
    assert all(argv[argv.index("-c") + 1] == "1" for argv in FakeWorker.started)
    names = [argv[argv.index("-n") + 1] for argv in FakeWorker.started]
    assert len(set(names)) == 2                   # distinct node names on one broker
    assert all(w.signals for w in served)         # both stopped with the server
    assert "cpu pid" in capsys.readouterr().out


def test_serve_without_workers_starts_none(served):
    call_command("serve", "--no-worker")
    assert FakeWorker.started == []

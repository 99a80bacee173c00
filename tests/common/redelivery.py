"""A worker that dies in the middle of a run, for the re-delivery tests of each run kind.

A worker killed outright (SIGKILL, the OOM killer, a lost machine) runs nothing more: the run and
its Job stay ``running`` with the delivery counted, whatever the body stored before stays, and the
broker delivers the unacknowledged task again (``acks_late``; ``reject_on_worker_lost`` when only
the pool process died, the visibility timeout when the whole worker did). :class:`WorkerDied`
stands for that death inside this process: a ``BaseException`` that ``common.jobs.runs.run_execute``
lets through, leaving the rows as the kill would. The real kills, with real worker processes, are
in ``tests/integration`` (proposals, training)."""
from __future__ import annotations

from common.jobs.runs import RunReporter


class WorkerDied(BaseException):
    """The worker process running the delivery is gone."""


def die_at_report(monkeypatch, n: int) -> dict:
    """The first delivery dies right after its ``n``-th progress report (what it stored before that
    report stays); later deliveries run undisturbed. Returns the reports seen, for the asserts."""
    original = RunReporter.__call__
    seen = {"reports": 0, "died": False}

    def report(self, fraction: float, message: str = "") -> None:
        original(self, fraction, message)
        if seen["died"]:
            return
        seen["reports"] += 1
        if seen["reports"] >= n:
            seen["died"] = True
            raise WorkerDied(f"killed after report {n}: {message}")

    monkeypatch.setattr(RunReporter, "__call__", report)
    return seen

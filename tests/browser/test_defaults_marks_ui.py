"""The training runs list in real Chromium: each run names the version of the defaults it read, and
a run on older defaults than the newest of its model kind (or from before versions were kept) is
marked beside the newer ones."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_manager_screens_ui import _snapshot_rows
from workers.models import TrainingRun

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _run(snapshot, defaults: dict) -> TrainingRun:
    return TrainingRun.objects.create(snapshot=snapshot, model_kind="vtrajembed", config={"steps": 3}, steps_total=3,
                                      steps_done=3, status="succeeded", defaults_version=defaults)


def test_runs_on_older_defaults_are_marked_in_the_list(open_page, people):
    snaps = _snapshot_rows()
    v1 = {"model_kind": "vtrajembed", "model": 1, "train": 1, "commit": "a" * 40}
    old, unrecorded, new = _run(snaps["train"], v1), _run(snaps["train"], {}), _run(snaps["train"], {**v1, "model": 2})
    page = open_page("boss")
    page.goto("/manage/training")
    table = page.get_by_role("table", name="Training runs, newest first")
    expect(table.locator("caption")).to_contain_text("† ran on older defaults")
    for run, label, marked in ((old, "vtrajembed v1, train v1", True), (unrecorded, "unrecorded", True),
                               (new, "vtrajembed v2, train v1", False)):
        row = table.get_by_role("row").filter(has=page.get_by_role("link", name=f"Run {run.pk}", exact=True))
        expect(row).to_contain_text(label)
        expect(row.locator('td[data-older-defaults="true"]')).to_have_count(1 if marked else 0)

"""The release page and the start-run forms in real Chromium against a live server on PostgreSQL.

- Publishing asks for a confirmation that says what the release will hold; with an unfinished
  audit it warns, and only "publish anyway" (ticked, then pressed) writes the release, which
  records the audit. Cancelling writes nothing.
- A release is downloaded from the browser as one .tar whose files match its SHA256SUMS, whose own
  SHA-256 is the manifest the page shows; "Verify" confirms the folder, and names a tampered file.
- Two releases of unchanged records: the page says their diff is empty.
- The training form evaluates on another snapshot by default and refuses the training snapshot
  until told so; the run it starts waits on the jobs screen with its queue position and is
  cancelled and queued again from there; the mining form starts a run that is cancelled from its row.

The benchmark (train split, two rendered videos, simulated reviewers) is built by the services.
Tasks are captured at the broker call (no worker runs here), so queued runs stay queued.
"""
from __future__ import annotations

import hashlib
import os
import re
import tarfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.benchmark.services.snapshots import relation_snapshot_create
from annotation.models import MiningRun, Release
from annotation.releases.services.audits import audit_create
from annotation.releases.services.releases import release_create
from common.models import Job
from tests.annotation.test_releases import build_rendered_benchmark
from workers.models import TrainingRun

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
BOSS_PASSWORD = "pw-for-tests"                   # build_rendered_benchmark's manager


@pytest.fixture
def train_benchmark(transactional_db, media_root, tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    return build_rendered_benchmark(tmp_path, ["train", "train"], accuracy=0.9)



def _publish_form(page, name: str, version: str) -> None:
    form = page.get_by_role("form", name="Publish a release")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Version").fill(version)
    for split in ("dev", "test"):
        form.get_by_role("checkbox", name=split).uncheck()
    form.get_by_role("checkbox", name="train").check()
    form.get_by_role("button", name="Publish the release…").click()


def test_publish_asks_for_confirmation_and_an_unfinished_audit_needs_publish_anyway(train_benchmark, open_page, shot):
    audit = audit_create(split="train", n_random=3, n_difficult=0, seed=1, kinds=["relation"],
                         created_by=train_benchmark)
    page = open_page("boss", BOSS_PASSWORD)
    page.goto("/manage/releases")
    # the confirmation says what the release holds; cancelling writes nothing
    _publish_form(page, "ui", "1.0.0")
    dialog = page.get_by_role("dialog", name="Publish ui 1.0.0?")
    expect(dialog).to_contain_text("immutable")
    expect(dialog).to_contain_text("Splits train: 2 benchmark videos")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert not Release.objects.exists()
    # Esc cancels as well, wherever the focus is (issue 27, finding 14)
    _publish_form(page, "ui", "1.0.0")
    expect(dialog).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    _publish_form(page, "ui", "1.0.0")
    expect(dialog).to_contain_text("Splits train")
    page.locator("main h1").click()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert not Release.objects.exists()
    # again: the unfinished audit is named, and "Publish anyway" waits for its box to be ticked
    _publish_form(page, "ui", "1.0.0")
    warning = dialog.get_by_role("alert")
    expect(warning).to_contain_text(f"audit {audit.pk} of train (0 of 3 samples judged)")
    publish = dialog.get_by_role("button", name="Publish anyway")
    expect(publish).to_be_disabled()
    shot(page, "30-release-confirm-unfinished-audit")
    assert not Release.objects.exists()
    dialog.get_by_role("checkbox", name="Publish anyway (the release records the unfinished audits)").check()
    publish.click()
    page.wait_for_url("**/manage/releases/*")
    release = Release.objects.get(name="ui", version="1.0.0")
    assert release.unfinished_audits == [{"id": audit.pk, "split": "train", "n_samples": 3, "n_judged": 0}]
    expect(page.get_by_role("note")).to_contain_text(
        f"Published anyway before audit {audit.pk} of train (0 of 3 samples judged) was finished.")


def test_a_release_is_downloaded_verified_and_diffed_from_the_browser(train_benchmark, open_page, shot, tmp_path):
    first = release_create(name="ui", version="1.0.0", splits=["train"], created_by=train_benchmark)
    second = release_create(name="ui", version="1.0.1", splits=["train"], created_by=train_benchmark)
    page = open_page("boss", BOSS_PASSWORD)
    page.goto(f"/manage/releases/{second.pk}")
    # unchanged records: the diff against the first release is empty, and says so
    expect(page.get_by_role("status").filter(has_text="No changes")).to_contain_text(
        "ui 1.0.0 and ui 1.0.1 hold the same records")
    # the download: one .tar whose files match its SHA256SUMS, whose SHA-256 is the page's manifest
    with page.expect_download() as info:
        page.get_by_role("link", name="Download ui-1.0.1.tar").click()
    download = info.value
    assert download.suggested_filename == "ui-1.0.1.tar"
    saved = tmp_path / "ui-1.0.1.tar"
    download.save_as(saved)
    with tarfile.open(saved) as tar:
        files = {m.name.removeprefix("ui-1.0.1/"): tar.extractfile(m).read() for m in tar.getmembers()}
    manifest = hashlib.sha256(files["SHA256SUMS"]).hexdigest()
    expect(page.locator("section", has_text="Download and verify")).to_contain_text(manifest)
    assert manifest == second.manifest_sha256
    sums = dict(line.split("  ")[::-1] for line in files["SHA256SUMS"].decode().splitlines())
    assert set(sums) == set(files) - {"SHA256SUMS"} and len(sums) > 10
    assert all(hashlib.sha256(files[path]).hexdigest() == sha for path, sha in sums.items())
    with page.expect_download() as info:
        page.get_by_role("link", name="SHA256SUMS").click()
    assert Path(info.value.path()).read_bytes() == files["SHA256SUMS"]
    # verify: the folder matches; a changed file is named
    page.get_by_role("button", name="Verify the release folder").click()
    expect(page.get_by_role("status").filter(has_text="Verified")).to_contain_text(
        "every file matches its published SHA-256")
    shot(page, "31-release-download-verify")
    target = Path(second.path) / "data" / "relations.jsonl"
    os.chmod(target, 0o644)
    target.write_bytes(target.read_bytes().replace(b'"label":1', b'"label":0', 1))
    page.get_by_role("button", name="Verify the release folder").click()
    expect(page.get_by_role("alert")).to_contain_text("data/relations.jsonl does not match its SHA-256")
    assert first.pk != second.pk


def test_the_training_form_evaluates_elsewhere_and_jobs_cancel_and_retry(train_benchmark, open_page, sent, shot):
    train = relation_snapshot_create(split="train", name="t", created_by=train_benchmark)
    page = open_page("boss", BOSS_PASSWORD)
    page.goto("/manage/training")
    form = page.get_by_role("form", name="Start a training run")
    # one snapshot only: evaluating on it is the training snapshot, refused until told so
    expect(form.get_by_role("alert")).to_contain_text("The evaluation snapshot is the training snapshot")
    start = form.get_by_role("button", name="Start training")
    expect(start).to_be_disabled()
    other = relation_snapshot_create(split="train", name="held-out", created_by=train_benchmark)
    page.reload()
    form = page.get_by_role("form", name="Start a training run")
    expect(form.get_by_role("combobox", name="Train on")).to_have_value(str(other.pk))        # the newest train snapshot
    expect(form.get_by_role("combobox", name="Evaluate on")).to_have_value(str(train.pk))     # another snapshot by default
    # another train snapshot is training data too: the server refuses it unless asked, then stamps it
    expect(form.get_by_role("alert")).to_contain_text("Both snapshots are of the train split")
    expect(form.get_by_role("button", name="Start training")).to_be_disabled()
    form.get_by_role("combobox", name="Train on").select_option(str(train.pk))
    expect(form.get_by_role("combobox", name="Evaluate on")).to_have_value(str(other.pk))     # follows the training choice
    form.get_by_role("combobox", name="Evaluate on").select_option(str(train.pk))             # the same one: refused again
    expect(form.get_by_role("alert")).to_contain_text("The evaluation snapshot is the training snapshot")
    expect(form.get_by_role("button", name="Start training")).to_be_disabled()
    form.get_by_role("combobox", name="Evaluate on").select_option(str(other.pk))
    form.get_by_label("Steps").fill("7")
    expect(form.get_by_role("button", name="Start training")).to_be_disabled()
    form.get_by_label("evaluate on training data anyway").check()
    form.get_by_role("button", name="Start training").click()
    page.wait_for_url("**/manage/training/*")
    run = TrainingRun.objects.get()
    assert (run.snapshot_id, run.eval_snapshot_id, run.status) == (train.pk, other.pk, "queued")
    assert run.eval_stamps == ["train-split"]
    assert [name for name, _, _ in sent] == ["workers.tasks.training_run_task"]
    # the jobs screen: its place in the queue, cancel, then retry on a new job
    ahead = Job.objects.create(kind="other", queue=run.job.queue)                 # queued after it: behind
    page.goto("/manage/jobs")
    row = page.locator("li.job", has_text=f"#{run.job_id} ")
    expect(row).to_contain_text(f"next on queue {run.job.queue}")
    expect(page.locator("li.job", has_text=f"#{ahead.pk} ")).to_contain_text(f"2nd on queue {run.job.queue}")
    shot(page, "32-jobs-queue-position")
    row.get_by_role("button", name="Cancel").click()
    expect(row.get_by_role("status")).to_contain_text(f"training run {run.pk} cancelled")
    run.refresh_from_db()
    assert run.status == "cancelled"
    # its job says "cancelled" in a neutral badge, not a red "failed" (issue 27, finding 14)
    badge = row.locator(".job-head .badge")
    expect(badge).to_have_text("cancelled")
    expect(badge).to_have_class(re.compile(r"\bstatus-cancelled\b"))
    assert badge.evaluate("b => getComputedStyle(b).backgroundColor") != "rgb(254, 228, 226)"  # status-failed's red
    old_job = run.job_id
    page.locator("li.job", has_text=f"#{old_job} ").get_by_role("button", name="Retry").click()
    old_row = page.locator("li.job", has_text=f"#{old_job} ")
    expect(old_row.get_by_role("status")).to_contain_text("queued again as job")
    run.refresh_from_db()
    assert run.status == "queued" and run.job_id != old_job and run.retries == 1 and len(sent) == 2
    # the confirmation stays once the list has refreshed and the run's controls left the old row
    expect(old_row.get_by_role("status")).to_have_text(f"training run {run.pk} queued again as job {run.job_id}.")
    expect(old_row.get_by_role("button", name="Retry")).to_have_count(0)
    expect(old_row.get_by_role("status")).to_have_text(f"training run {run.pk} queued again as job {run.job_id}.")
    # the old job stays cancelled (not a red "failed") and says where its run went, after a reload too
    page.reload()
    expect(old_row).to_contain_text(f"queued again as job {run.job_id}")
    expect(old_row.locator(".job-head .badge")).to_have_text("cancelled")


def test_the_mining_form_starts_a_run_that_its_row_cancels(train_benchmark, open_page, sent):
    page = open_page("boss", BOSS_PASSWORD)
    page.goto("/manage/model-runs")
    section = page.locator("section", has=page.get_by_role("button", name="Mine cross-video pairs"))
    section.get_by_role("button", name="Mine cross-video pairs").click()
    run = None
    expect(section.get_by_role("status").first).to_contain_text("queued as job")
    run = MiningRun.objects.get()
    assert run.split == "train" and run.status == "queued" and sent[-1][0] == "annotation.tasks.mining_run_task"
    row = section.get_by_role("row").filter(has=page.get_by_role("cell", name=str(run.pk), exact=True))
    row.get_by_role("button", name="Cancel").click()
    expect(row.get_by_role("status")).to_contain_text(f"mining run {run.pk} cancelled")
    run.refresh_from_db()
    assert run.status == "cancelled"

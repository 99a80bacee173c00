"""Publishing with an unfinished audit, downloading a release, and pseudonyms that stay put.

A small rendered benchmark of the train split (two videos, simulated reviewers) is built once per
module inside a transaction rolled back at the end; each test runs in a savepoint of it:
- a release of a split with an unfinished audit is refused (409 ``audit_unfinished``, nothing
  written) until it is published anyway, which the release records (row, ``release.json``, card);
- a release downloads as one ``.tar`` whose files match its ``SHA256SUMS``, whose own SHA-256 is
  the published one; a resized file on disk refuses the download;
- two releases of unchanged records diff empty; a person who first appears in a later release
  (with an older account than everyone named before) renumbers nobody, so the diff shows only them
  and their new records.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
import torch
from django.core.management import CommandError, call_command
from django.db import IntegrityError, InternalError, transaction
from django.test import override_settings

from accounts.services import user_create
from annotation.models import Release, ReviewerPseudonym
from annotation.releases.services.audits import (
    audit_create,
    audit_judgment_record,
    audit_sample_claim_next,
)
from annotation.releases.services.release_io.check import iter_records
from annotation.releases.services.releases import release_create
from common.errors import ConflictError
from tests.annotation.test_releases import build_rendered_benchmark

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture(scope="module")
def train(django_db_setup, django_db_blocker, tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("downloads")
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=root / "media", VAR_DIR=root / "var"):
        (root / "media" / "tmp").mkdir(parents=True)
        outer = transaction.atomic()
        outer.__enter__()
        try:
            # an account older than every reviewer's, who reviews nothing until after the first release
            latecomer = user_create(username="latecomer", password="pw-for-tests", roles=["auditor"])
            manager = build_rendered_benchmark(root, ["train", "train"], accuracy=0.9)
            yield {"root": root, "manager": manager, "latecomer": latecomer}
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def _audit_all(audit, auditor) -> None:
    for _ in range(audit.samples.count()):
        sample = audit_sample_claim_next(audit=audit, auditor=auditor)
        audit_judgment_record(sample=sample, auditor=auditor, verdict="correct", time_spent_ms=1000)


def test_an_unfinished_audit_needs_publish_anyway_which_the_release_records(db, train, client_for):
    manager = train["manager"]
    audit = audit_create(split="train", n_random=3, n_difficult=0, seed=1, kinds=["relation"], created_by=manager)
    client = client_for(manager)
    # the preflight names the unfinished audit before anything is published
    pre = client.get("/api/releases/preflight/?splits=train&name=demo")
    assert pre.status_code == 200, pre.content
    expected = [{"id": audit.pk, "split": "train", "n_samples": 3, "n_judged": 0}]
    assert pre.json()["unfinished_audits"] == expected and pre.json()["videos"] == 2
    assert pre.json()["parent"] is None and pre.json()["incomplete"] == {}
    assert client.get("/api/releases/preflight/?splits=nope").status_code == 400
    # refused without publish_anyway: a 409 naming the audit, nothing written
    refused = client.post("/api/releases/", {"name": "demo", "version": "1.0.0", "splits": ["train"]}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "audit_unfinished"
    assert refused.json()["extra"]["unfinished_audits"] == expected
    assert not Release.objects.exists() and not ReviewerPseudonym.objects.exists()
    with pytest.raises(CommandError, match="--publish-anyway"):
        call_command("export_release", "--name", "demo", "--release-version", "1.0.0", "--splits", "train",
                     verbosity=0)
    # published anyway: recorded on the row, in release.json and in the dataset card
    made = client.post("/api/releases/", {"name": "demo", "version": "1.0.0", "splits": ["train"],
                                          "publish_anyway": True}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["unfinished_audits"] == expected
    release = Release.objects.get(pk=made.json()["id"])
    body = json.loads((Path(release.path) / "release.json").read_text())
    assert body["unfinished_audits"] == expected
    assert f"Published before audit {audit.pk} of train was finished (0 of 3" in \
        (Path(release.path) / "README.md").read_text()
    # once the audit is finished, nothing is asked and nothing recorded
    _audit_all(audit, train["latecomer"])
    assert client.get("/api/releases/preflight/?splits=train&name=demo").json()["unfinished_audits"] == []
    again = release_create(name="demo", version="1.0.1", splits=["train"], created_by=manager)
    assert again.unfinished_audits is None
    assert "unfinished_audits" not in json.loads((Path(again.path) / "release.json").read_text())


def test_a_release_downloads_as_a_tar_that_matches_its_checksums(db, train, client_for, make_user):
    release = release_create(name="dl", version="1.0.0", splits=["train"], created_by=train["manager"])
    client = client_for(make_user("auditor"))            # managers and auditors download
    assert client_for(make_user("annotator")).get(f"/api/releases/{release.pk}/download/").status_code == 403
    assert client_for(make_user("annotator")).get(f"/api/releases/{release.pk}/SHA256SUMS").status_code == 200
    response = client.get(f"/api/releases/{release.pk}/download/")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    assert response["Content-Disposition"] == 'attachment; filename="dl-1.0.0.tar"'
    data = b"".join(response.streaming_content)
    assert len(data) == int(response["Content-Length"])
    assert response["X-Manifest-SHA256"] == release.manifest_sha256
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert all(name.startswith("dl-1.0.0/") for name in files)
    files = {name.removeprefix("dl-1.0.0/"): content for name, content in files.items()}
    assert set(files) == set(release.files.values_list("path", flat=True))
    assert hashlib.sha256(files["SHA256SUMS"]).hexdigest() == release.manifest_sha256
    sums = dict(line.split("  ")[::-1] for line in files["SHA256SUMS"].decode().splitlines())
    assert set(sums) == set(files) - {"SHA256SUMS"}
    assert all(hashlib.sha256(files[p]).hexdigest() == sha for p, sha in sums.items())
    # SHA256SUMS alone
    checksums = client.get(f"/api/releases/{release.pk}/SHA256SUMS")
    assert checksums.status_code == 200 and checksums.content == files["SHA256SUMS"]
    assert client.get("/api/releases/999999/download/").status_code == 404
    # a file on disk that is not the published size refuses the download, naming it
    target = Path(release.path) / "README.md"
    os.chmod(target, 0o644)
    target.write_text(target.read_text() + "tampered\n")
    refused = client.get(f"/api/releases/{release.pk}/download/")
    assert refused.status_code == 409 and refused.json()["code"] == "release_tampered"
    assert "README.md" in refused.json()["message"]


def test_pseudonym_numbers_are_drawn_and_tell_nothing_of_the_accounts(db, make_user):
    """Pseudonyms do not follow account ids (issue 27, finding 9): twenty accounts created in
    order get numbers in no order (the chance of a sorted draw is 1/20!), every number once, and
    a second assignment changes nobody's."""
    from annotation.releases.services.pseudonyms import reviewer_pseudonyms_assign

    people = [make_user("annotator").pk for _ in range(20)]
    first = reviewer_pseudonyms_assign(people=people)
    numbers = [ReviewerPseudonym.objects.get(user_id=pk).number for pk in people]
    assert len(set(numbers)) == 20 and numbers != sorted(numbers) and numbers != sorted(numbers, reverse=True)
    assert max(numbers) > 100                   # drawn from the whole space, not handed out in turn
    newcomer = make_user("annotator").pk
    again = reviewer_pseudonyms_assign(people=[*people, newcomer])
    assert {pk: again[pk] for pk in people} == first and again[newcomer] not in first.values()


def test_unchanged_records_diff_empty_and_a_newcomer_renumbers_nobody(db, train, client_for):
    manager, latecomer = train["manager"], train["latecomer"]
    first = release_create(name="stable", version="1.0.0", splits=["train"], created_by=manager)
    names = {r["pseudonym"] for r in iter_records(Path(first.path), "reviewers")}
    assert latecomer.pk < min(ReviewerPseudonym.objects.values_list("user_id", flat=True))
    # nothing changed: the second release diffs empty against the first
    same = release_create(name="stable", version="1.0.1", splits=["train"], created_by=manager)
    client = client_for(manager)
    diff = client.get(f"/api/releases/{first.pk}/diff/{same.pk}/").json()
    assert diff["total"] == 0 and diff["records"] == [], diff["records"][:5]
    assert all(c == {"added": 0, "removed": 0, "changed": 0} for c in same.changes.values())
    # the latecomer (the oldest account) audits: ranking accounts would renumber every vote; the
    # stored mapping gives them a number of their own and changes nothing else
    audit = audit_create(split="train", n_random=2, n_difficult=0, seed=2, kinds=["relation"], created_by=manager)
    _audit_all(audit, latecomer)
    third = release_create(name="stable", version="1.1.0", splits=["train"], created_by=manager)
    reviewers = list(iter_records(Path(third.path), "reviewers"))
    mine = ReviewerPseudonym.objects.get(user=latecomer)
    assert {r["pseudonym"] for r in reviewers} - names == {mine.pseudonym}
    assert sorted(r["id"] for r in reviewers) == sorted(ReviewerPseudonym.objects.values_list("number", flat=True))
    diff = client.get(f"/api/releases/{same.pk}/diff/{third.pk}/?limit=1000").json()
    changed = {t: c for t, c in diff["tables"].items() if any(c.values())}
    assert changed == {"reviewers": {"added": 1, "removed": 0, "changed": 0},
                       "audits": {"added": 1, "removed": 0, "changed": 0},
                       "audit_samples": {"added": 2, "removed": 0, "changed": 0},
                       "audit_judgments": {"added": 2, "removed": 0, "changed": 0}}, changed
    # the mapping never changes, by the service or by hand
    mapping = ReviewerPseudonym.objects.get(user=latecomer)
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        ReviewerPseudonym.objects.filter(pk=mapping.pk).update(number=999)
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        ReviewerPseudonym.objects.filter(pk=mapping.pk).delete()


def test_publish_refusals_write_nothing(db, train):
    audit_create(split="train", n_random=1, n_difficult=0, seed=4, kinds=["relation"], created_by=train["manager"])
    with pytest.raises(ConflictError) as refused:
        release_create(name="never", version="1.0.0", splits=["train"])
    assert refused.value.code == "audit_unfinished"
    assert not (Path(train["root"]) / "var" / "releases" / "never").exists()

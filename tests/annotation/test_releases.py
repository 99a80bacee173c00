"""Releases of a small rendered benchmark (dev and test, two videos each, simulated reviewers):
an incomplete dev/test split is refused with what is missing; a published release validates (every
checksum, every id, Croissant with mlcroissant, MOT with motmetrics); it cannot change (database,
API, files); a tampered folder is refused on import; a new version records its parent and its diff;
and a release imported into a fresh instance (SQLite, another process) exports the same bytes again
and evaluates to the same metrics.

The benchmark is built once per module inside a transaction that is rolled back at the end; each
test runs in a savepoint of it."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from django.apps import apps
from django.core.management import CommandError, call_command
from django.core.management.color import no_style
from django.db import IntegrityError, InternalError, connection, transaction
from django.test import override_settings
from rest_framework.test import APIClient

from accounts.services import user_create
from annotation.benchmark.services.descriptions import (
    description_run_create,
    description_run_execute,
)
from annotation.benchmark.services.mining import (
    completeness_report,
    completion_pairs_queue,
    mining_run_create,
    mining_run_execute,
)
from annotation.benchmark.services.queries import generation_run_create, generation_run_execute
from annotation.benchmark.services.snapshots import relation_snapshot_create, relation_snapshot_load
from annotation.curation.services.pools import pool_freeze
from annotation.demo.simulation import simulate_annotators
from annotation.demo.simulation_relations import simulate_relation_review
from annotation.models import Audit, Query, Relation, Release, ReleaseFile, WorkItem
from annotation.releases.services.audits import (
    audit_create,
    audit_judgment_record,
    audit_sample_claim_next,
)
from annotation.releases.services.release_io.check import (
    check_references,
    iter_records,
    verify_checksums,
)
from annotation.releases.services.release_io.export import file_sha256
from annotation.releases.services.release_io.shapes import EVIDENCE, conform
from annotation.releases.services.releases import release_create, release_import, release_verify
from common.errors import ApplicationError, ConflictError
from models.training.snapshot import RelationSnapshotData
from models.world.scene import GroundTruth
from tests.annotation.test_relation_chain import _gt_run, _rendered_videos
from trajectories.models import SplitGroup

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
REPO = Path(__file__).resolve().parents[2]
SPLITS = ["dev", "dev", "test", "test"]
TINY = {"d_model": 16, "d_context": 16, "agg_width": 16, "agg_ff": 32, "agg_layers": 1, "embed_dim": 16,
        "geo_hidden": 8, "heads": 2, "agg_heads": 2, "dropout": 0.0, "features": {"n_fast_max": 8}}


def sequences_follow_the_rows() -> None:
    """Each table's id sequence set to follow its rows (to 1 where a table is empty), so that a
    build gets the ids it gets in a fresh database whatever this test process ran before: the
    simulated reviewers draw from each item's id, and a test that needs one of them unsure must
    see the same draws in every order the suite runs in."""
    with connection.cursor() as cursor:
        for statement in connection.ops.sequence_reset_sql(no_style(), apps.get_models()):
            cursor.execute(statement)


def build_rendered_benchmark(root: Path, splits: list[str], *, accuracy: float, seed: int = 0):
    """Rendered videos through curation, pools, descriptions, queries and relation rows (no
    cross-video review yet); returns the manager."""
    from django.conf import settings

    sequences_follow_the_rows()
    manager = user_create(username="boss", password="pw-for-tests", roles=["manager"])
    videos = _rendered_videos(root, len(splits))
    for video, split in zip(videos, splits):
        SplitGroup.objects.filter(pk=video.split_group_id).update(split=split)
    runs = [_gt_run(v, GroundTruth.load(Path(settings.MEDIA_ROOT) / v.metadata["ground_truth"])) for v in videos]
    simulate_annotators(n_annotators=3, accuracy=1.0, seed=seed)
    pools = [pool_freeze(run=run, frozen_by=manager) for run in runs]
    description_run_execute(run=description_run_create(pools=pools, created_by=manager, queue=False))
    simulate_relation_review(accuracy=accuracy, seed=seed + 1, stage=WorkItem.Stage.DESCRIPTION)
    generation_run_execute(run=generation_run_create(pools=pools, created_by=manager, queue=False))
    simulate_relation_review(accuracy=1.0, seed=seed + 2, stage=WorkItem.Stage.RELATION)
    return manager


def review_cross_video(splits: list[str], *, accuracy: float, seed: int = 0) -> None:
    for split in sorted(set(splits)):
        mining_run_execute(run=mining_run_create(split=split, queue=False))
    simulate_relation_review(accuracy=accuracy, seed=seed + 3, stage=WorkItem.Stage.PAIR)
    for split in sorted(set(splits) & {"dev", "test"}):
        completion_pairs_queue(split=split)
    simulate_relation_review(accuracy=1.0, seed=seed + 4, stage=WorkItem.Stage.PAIR)


@pytest.fixture(scope="module")
def built(django_db_setup, django_db_blocker, tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("releases")
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=root / "media", VAR_DIR=root / "var"):
        (root / "media" / "tmp").mkdir(parents=True)
        outer = transaction.atomic()
        outer.__enter__()
        try:
            manager = build_rendered_benchmark(root, SPLITS, accuracy=0.9)
            # no cross-video review yet: a release of dev and test is refused, by the service and the API
            with pytest.raises(ConflictError) as refused:
                release_create(name="demo", version="1.0.0", splits=["dev", "test"], created_by=manager)
            client = APIClient()
            client.force_authenticate(manager)
            api_refusal = client.post("/api/releases/", {"name": "demo", "version": "1.0.0", "splits": ["dev"]},
                                      format="json")
            review_cross_video(SPLITS, accuracy=1.0)
            assert all(completeness_report(split=s)["complete"] for s in ("dev", "test"))
            # an audit of dev with an auditor's verdicts, so the release reports residual errors
            auditor = user_create(username="checker", password="pw-for-tests", roles=["auditor"])
            audit = audit_create(split="dev", n_random=4, n_difficult=2, seed=3, created_by=manager)
            for i in range(audit.samples.count()):
                sample = audit_sample_claim_next(audit=audit, auditor=auditor)
                wrong = i == 0
                audit_judgment_record(sample=sample, auditor=auditor, verdict="error" if wrong else "correct",
                                      error_type="other" if wrong else "", time_spent_ms=4000)
            release = release_create(name="demo", version="1.0.0", splits=["dev", "test"], include_media=True,
                                     description="Rendered demo scenes.", created_by=manager)
            snapshot = relation_snapshot_create(split="test", created_by=manager)
            yield {"root": root, "manager": manager, "auditor": auditor, "release": release, "refused": refused.value,
                   "api_refusal": api_refusal, "snapshot": snapshot, "audit": audit}
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def test_an_incomplete_dev_or_test_split_is_refused_with_what_is_missing(built):
    refused = built["refused"]
    assert refused.code == "incomplete_split"
    for split in ("dev", "test"):
        report = refused.extra["completeness"][split]
        assert report["missing_by_kind"]["cross_video"] > 0 and report["missing_pairs"]
        assert all(len(pair) == 2 for pair in report["missing_pairs"])
    response = built["api_refusal"]
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["code"] == "incomplete_split" and body["extra"]["completeness"]["dev"]["missing_pairs"]


def test_a_published_release_validates(db, built):
    release = built["release"]
    folder = Path(release.path)
    # every checksum matches, every id resolves, and the row lists the same files
    assert verify_checksums(folder, expect_manifest_sha256=release.manifest_sha256) == []
    assert release_verify(release=release) == []
    problems, checked = check_references(folder)
    assert problems == [] and checked["relations"] > 0 and checked["votes"] > 0
    assert ReleaseFile.objects.filter(release=release).count() == len((folder / "SHA256SUMS").read_text().splitlines()) + 1

    # the manifests: the benchmark lists every accepted query with its complete candidate list
    body = json.loads((folder / "release.json").read_text())
    assert body["splits"] == ["dev", "test"] and body["parent"] is None and body["media_included"]
    benchmark = list(iter_records(folder, "benchmark"))
    members = {}
    for m in iter_records(folder, "pool_members"):
        members.setdefault(m["pool_id"], []).append(m["trajectory_id"])
    assert benchmark and {b["split"] for b in benchmark} == {"dev", "test"}
    for b in benchmark:
        assert b["candidates"] == sorted(members[b["pool_id"]]) and b["target_id"] in b["candidates"]
    relations = list(iter_records(folder, "relations"))
    gold = {(r["query_id"], r["trajectory_id"]): r["label"] for r in relations if not r["pseudo"]}
    for b in benchmark:                                  # dev/test: every needed relation is binary
        split_candidates = [t for x in benchmark if x["split"] == b["split"] for t in x["candidates"]]
        assert all(gold.get((b["query_id"], t)) in (0, 1) for t in set(split_candidates))
    assert {r["pseudonym"] for r in iter_records(folder, "reviewers")} >= {
        v["annotator"] for v in iter_records(folder, "votes")}
    assert all(v["annotator"].startswith("reviewer-") for v in iter_records(folder, "votes"))

    # statistics: the audit's residual errors, agreement, three-vote distributions, reviewer time
    stats = json.loads((folder / "statistics.json").read_text())
    audit = stats["audits"][0]
    assert audit["judged"] == audit["samples"] == built["audit"].samples.count()
    assert sum(s["errors"] for k in audit["by_kind"].values() for s in k.values()) == 1
    assert stats["pre_adjudication_agreement"]["usability"]["n_items"] > 0
    assert stats["vote_distributions"]["description"]["panel"] == 3
    assert stats["reviewer_time"]["description"]["accepted_items"] > 0
    assert stats["completeness"]["dev"]["complete"] and stats["completeness"]["test"]["complete"]
    construction = json.loads((folder / "construction.json").read_text())
    describer = construction["describer_runs"][0]
    assert describer["backend"]["name"] == "heuristic" and describer["prompt_sha256"]
    assert describer["prompt_version"] in construction["prompts"] and construction["software"]["python"]
    card = (folder / "README.md").read_text()
    assert "## How reliable the labels are" in card and "demo 1.0.0" in card and "| `relations` |" in card

    # the Parquet and JSON Lines files hold the same records
    import pyarrow.parquet as pq

    parts = {split: pq.read_table(folder / "data" / "relations" / f"{split}.parquet").to_pylist()
             for split in ("dev", "test")}
    assert {r["query_id"] for r in parts["test"]} <= set(Query.objects.filter(
        video__split_group__split="test").values_list("id", flat=True))
    table = sorted(parts["dev"] + parts["test"], key=lambda r: (r["query_id"], r["trajectory_id"]))
    assert [(r["query_id"], r["trajectory_id"], r["label"]) for r in table] == \
        [(r["query_id"], r["trajectory_id"], r["label"]) for r in relations]
    assert [r["evidence"] for r in table] == [conform(r["evidence"], EVIDENCE) for r in relations]
    assert all(r["decided_at"].tzinfo is not None for r in table if r["decided_at"] is not None)

    # Croissant loads with mlcroissant without errors, and its record sets read back
    import mlcroissant as mlc

    dataset = mlc.Dataset(jsonld=folder / "croissant.json")
    assert not dataset.metadata.ctx.issues.errors, dataset.metadata.ctx.issues.report()
    queries = list(dataset.records(record_set="benchmark"))
    assert sorted(r["benchmark/query_id"] for r in queries) == sorted(b["query_id"] for b in benchmark)
    assert len(list(dataset.records(record_set="relations"))) == len(relations)

    # the MOT files parse with motmetrics and hold each candidate's boxes (1-based)
    import motmetrics

    for b in benchmark:
        gt = motmetrics.io.loadtxt(folder / "mot" / b["split"] / str(b["video_id"]) / "gt" / "gt.txt")
        for m in iter_records(folder, "pool_members"):
            if m["pool_id"] != b["pool_id"]:
                continue
            rows = gt.xs(m["trajectory_id"], level="Id")
            assert list(rows.index) == [f + 1 for f in m["frames"]]
            boxes = np.array(m["boxes"])
            expected = np.stack([boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]], 1)
            np.testing.assert_allclose(rows[["X", "Y", "Width", "Height"]].to_numpy(), expected, atol=2e-3)
    # the videos are in the release
    for v in iter_records(folder, "videos"):
        assert (folder / "media" / v["path"]).is_file()


def test_a_published_release_cannot_change(db, built, client_for):
    release = built["release"]
    manager = built["manager"]
    # the database refuses raw changes to the release, its files, and new files
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        Release.objects.filter(pk=release.pk).update(description="changed")
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        Release.objects.filter(pk=release.pk).delete()
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        ReleaseFile.objects.filter(release=release).update(sha256="0" * 64)
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        ReleaseFile.objects.create(release=release, path="extra.txt", sha256="0" * 64, size_bytes=1)
    # the service refuses the same version again, and an older one
    for version, code in (("1.0.0", "release_exists"), ("0.9.0", "version_not_after_parent")):
        with pytest.raises(ConflictError) as refused:
            release_create(name="demo", version=version, splits=["dev", "test"])
        assert refused.value.code == code
    # the API has no edit endpoint
    client = client_for(manager)
    for method in ("put", "patch", "delete"):
        response = getattr(client, method)(f"/api/releases/{release.pk}/", {"description": "x"}, format="json")
        assert response.status_code == 405, (method, response.status_code)
    # the files are read-only
    assert not os.access(Path(release.path) / "data" / "relations.jsonl", os.W_OK) or os.geteuid() == 0
    assert (Path(release.path) / "data" / "relations.jsonl").stat().st_mode & 0o222 == 0


def test_a_tampered_release_fails_its_checksum_check(db, built, tmp_path):
    release = built["release"]
    copy = tmp_path / "copy"
    shutil.copytree(release.path, copy)
    target = copy / "data" / "relations.jsonl"
    target.chmod(0o644)
    lines = target.read_text().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["label"] = 1 - record["label"] if record["label"] in (0, 1) else 1
    lines[0] = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    target.write_text("".join(lines))
    with pytest.raises(ConflictError) as refused:
        release_import(path=copy)
    assert refused.value.code == "release_tampered"
    assert "data/relations.jsonl does not match its SHA-256 in SHA256SUMS" in refused.value.message
    # the commands say the same
    out = io.StringIO()
    call_command("import_release", release.path, "--check-only", "--expect-sha256", release.manifest_sha256,
                 stdout=out)
    assert "in order" in out.getvalue()
    with pytest.raises(CommandError, match="data/relations.jsonl does not match its SHA-256"):
        call_command("import_release", str(copy), "--check-only")
    with pytest.raises(CommandError, match="exists and never changes"):
        call_command("export_release", "--name", "demo", "--release-version", "1.0.0", "--splits", "dev", "test")
    # a file added or removed is named too; a SHA256SUMS made to match is caught by the published hash
    (copy / "extra.txt").write_text("x")
    (copy / "README.md").chmod(0o644)
    (copy / "README.md").unlink()
    problems = verify_checksums(copy)
    assert "extra.txt is not listed in SHA256SUMS" in problems
    assert "README.md is listed in SHA256SUMS but missing" in problems
    forged = copy / "SHA256SUMS"
    forged.chmod(0o644)
    sums = [ln for ln in forged.read_text().splitlines() if not ln.endswith("README.md")]
    sums = [f"{file_sha256(target)}  data/relations.jsonl" if ln.endswith("data/relations.jsonl") else ln
            for ln in sums] + [f"{file_sha256(copy / 'extra.txt')}  extra.txt"]
    forged.write_text("\n".join(sorted(sums, key=lambda s: s.split("  ")[1])) + "\n")
    assert verify_checksums(copy) == []
    with pytest.raises(ConflictError) as refused:
        release_import(path=copy, expect_manifest_sha256=release.manifest_sha256)
    assert "not the published" in refused.value.message
    assert not Release.objects.filter(origin="imported").exists()


def test_a_new_version_records_its_parent_and_what_changed(db, built, client_for):
    release = built["release"]
    manager = built["manager"]
    # a relation is relabelled and a second audit is sampled; then version 1.1.0
    relation = Relation.objects.filter(query__video__split_group__split="dev", label=0, pseudo=False) \
        .order_by("pk").first()
    Relation.objects.filter(pk=relation.pk).update(label=1)
    audit_create(split="test", n_random=2, n_difficult=0, seed=5, kinds=["query"], created_by=manager)
    client = client_for(manager)
    body = {"name": "demo", "version": "1.1.0", "splits": ["dev", "test"]}
    refused = client.post("/api/releases/", body, format="json")       # the new audit is unjudged
    assert refused.status_code == 409 and refused.json()["code"] == "audit_unfinished"
    response = client.post("/api/releases/", body | {"publish_anyway": True}, format="json")
    assert response.status_code == 201, response.content
    new = response.json()
    assert new["parent"] == release.pk and new["parent_ref"]["manifest_sha256"] == release.manifest_sha256
    assert new["changes"]["relations"] == {"added": 0, "removed": 0, "changed": 1}
    assert new["changes"]["audits"]["added"] == 1 and new["changes"]["audit_samples"]["added"] == 2
    assert new["changes"]["videos"] == {"added": 0, "removed": 0, "changed": 0}
    diff = client.get(f"/api/releases/{release.pk}/diff/{new['id']}/?limit=50").json()
    assert diff["tables"]["relations"]["changed"] == 1
    assert {"table": "relations", "key": f"{relation.query_id}/{relation.trajectory_id}", "change": "changed"} \
        in diff["records"]
    backwards = client.get(f"/api/releases/{new['id']}/diff/{release.pk}/").json()
    assert backwards["tables"]["audits"] == {"added": 0, "removed": 1, "changed": 0}
    listed = client.get("/api/releases/?name=demo").json()
    assert [r["version"] for r in listed["results"]] == ["1.1.0", "1.0.0"]
    detail = client.get(f"/api/releases/{new['id']}/").json()
    assert {f["path"] for f in detail["files"]} >= {"SHA256SUMS", "croissant.json", "data/relations/dev.parquet"}
    assert client.get(f"/api/releases/{new['id']}/verify/").json() == {"ok": True, "problems": []}
    bad = client.post("/api/releases/", {"name": "demo", "version": "2", "splits": ["dev"]}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_version"


def test_a_release_round_trips_through_a_fresh_instance(db, built, tmp_path):
    release = built["release"]
    fresh = tmp_path / "fresh"
    out = tmp_path / "again"
    script = f"""
import json, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("import_release", {release.path!r}, "--expect-sha256", {release.manifest_sha256!r}, verbosity=0)
call_command("export_release", "--name", "demo", "--release-version", "1.0.0", "--again", "--out", {str(out)!r},
             verbosity=0)
from annotation.benchmark.services.snapshots import relation_snapshot_create, relation_snapshot_local_copy
snapshot = relation_snapshot_create(split="test")
folder = relation_snapshot_local_copy(snapshot=snapshot)      # its videos named by this instance's files
print(json.dumps({{"path": str(folder), "sha256": snapshot.content_sha256}}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "MEDIA_ROOT")}
    env.update(DATABASE_URL=f"sqlite:///{fresh}/db.sqlite3", TRAJLAB_VAR_DIR=str(fresh / "var"),
               MEDIA_ROOT=str(fresh / "media"), OMP_NUM_THREADS="1")
    fresh.mkdir()
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    imported = json.loads(done.stdout.strip().splitlines()[-1])

    # byte-identical: every file, so the SHA-256 manifest too
    original = Path(release.path)
    names = sorted(p.relative_to(original).as_posix() for p in original.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    differing = [n for n in names if (original / n).read_bytes() != (out / n).read_bytes()]
    assert differing == []

    # the same evaluation on the imported instance's test snapshot as on the original's
    mine = relation_snapshot_load(snapshot=built["snapshot"])
    theirs = RelationSnapshotData.load(imported["path"])
    assert imported["sha256"] == built["snapshot"].content_sha256 == theirs.content_sha256()
    assert all(Path(v.path).is_file() and str(fresh) in v.path for v in theirs.videos)
    from models.training.evaluation import evaluate
    from models.training.trainer import build_model

    torch.manual_seed(0)
    model = build_model("vtrajembed", TINY)
    a, b = evaluate(model, mine), evaluate(model, theirs)
    assert a["t2traj"]["n_queries"] > 0
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_release_reads_by_role(db, built, client_for, make_user):
    release = built["release"]
    annotator = client_for(make_user("annotator"))
    assert annotator.get("/api/releases/").status_code == 200
    assert annotator.get(f"/api/releases/{release.pk}/").json()["manifest_sha256"] == release.manifest_sha256
    assert annotator.post("/api/releases/", {"name": "x", "version": "1.0.0", "splits": ["dev"]},
                          format="json").status_code == 403
    assert annotator.get(f"/api/releases/{release.pk}/verify/").status_code == 403
    assert client_for(None).get("/api/releases/").status_code in (401, 403)
    assert Audit.objects.filter(pk=built["audit"].pk).exists()


def _open_pair_item(scope, annotator) -> WorkItem:
    """A cross-video pair of the release with the writer's proposal, queued for a widened panel and
    holding one annotator's vote: still open."""
    from annotation.models import CrossPair, Query, Vote
    from trajectories.models import Trajectory

    query = Query.objects.filter(pool_id__in=scope.current_pools, status=Query.Status.ACCEPTED).order_by("id").first()
    paired = CrossPair.objects.filter(query=query).values("trajectory_id")
    trajectory = (Trajectory.objects.filter(run_id__in=scope.runs).exclude(run__video_id=query.video_id)
                  .exclude(pk__in=paired).order_by("id").first())
    proposal = {"label": 1, "predicates": [], "evidence": ["secret-evidence"], "reason": "writer-says-match"}
    pair = CrossPair.objects.create(query=query, trajectory=trajectory, stratum="potential_match",
                                    strata=["potential_match"], provenance=[], similarity=0.9, proposal=proposal,
                                    review=CrossPair.Review.QUEUED)
    item = WorkItem.objects.create(stage=WorkItem.Stage.PAIR, video_id=query.video_id, pair=pair, panel_size=2,
                                   required_votes=2, prelabels={"proposal": proposal})
    Vote.objects.create(item=item, annotator=annotator, label="match", time_spent_ms=1000)
    return item


def test_a_release_withholds_the_votes_prelabels_and_proposals_of_open_items(db, built, make_user):
    from annotation.releases.services.release_io.tables import ReleaseScope

    item = _open_pair_item(ReleaseScope.of(["dev", "test"]), make_user("annotator"))
    release = release_create(name="withheld", version="1.0.0", splits=["dev", "test"], created_by=built["manager"])
    folder = Path(release.path)
    assert item.pk not in {r["item_id"] for r in iter_records(folder, "votes")}
    row = next(r for r in iter_records(folder, "work_items") if r["id"] == item.pk)
    assert row["state"] == "open" and row["prelabels"] == {} and row["disputed"] == []
    pair = next(r for r in iter_records(folder, "cross_pairs") if r["id"] == item.pair_id)
    assert pair["proposal"] == {}
    text = "".join(p.read_text(encoding="utf-8") for p in (folder / "data").glob("*.jsonl"))
    assert "writer-says-match" not in text and "secret-evidence" not in text
    withheld = json.loads((folder / "statistics.json").read_text())["withheld"]
    assert withheld["pair"] == {"open_items": 1, "votes": 1, "prelabels": 1, "proposals": 1}
    assert release.stats["withheld"] == withheld
    assert all(v["votes"] == 0 for stage, v in withheld.items() if stage != "pair")
    assert not check_references(folder)[0]
    # the agreement figures read only the votes published
    assert release.stats["reviewer_time"]["pair"]["votes"] == built["release"].stats["reviewer_time"]["pair"]["votes"]


def test_a_release_has_the_bytes_of_the_row_at_a_time_reference(db, built, make_user, tmp_path):
    """The streaming writer (COPY, a chunk at a time) against the obvious one, on the rendered benchmark
    with an open item withheld."""
    from annotation.releases.services.pseudonyms import reviewer_pseudonyms_assign
    from annotation.releases.services.release_io.export import ReleaseMeta, release_write
    from annotation.releases.services.release_io.reference import (
        reference_mot_write,
        reference_tables_write,
    )
    from annotation.releases.services.release_io.tables import ReleaseScope

    _open_pair_item(ReleaseScope.of(["dev", "test"]), make_user("annotator"))
    scope = ReleaseScope.of(["dev", "test"])
    reviewer_pseudonyms_assign(people=scope.people())
    meta = ReleaseMeta(name="bytes", version="1.0.0", description="", license="CC-BY-4.0", splits=scope.splits,
                       created_at=built["release"].created_at)
    written = release_write(tmp_path / "new", meta=meta, scope=scope)
    assert reference_tables_write(tmp_path / "old", scope) == written.counts
    reference_mot_write(tmp_path / "old", scope)
    old = sorted(p.relative_to(tmp_path / "old").as_posix() for p in (tmp_path / "old").rglob("*") if p.is_file())
    assert old and all(p.startswith(("data/", "index/", "mot/")) for p in old)
    assert [p for p in old if (tmp_path / "new" / p).read_bytes() != (tmp_path / "old" / p).read_bytes()] == []


def test_version_components_are_bounded(db, built):
    client = APIClient()
    client.force_authenticate(built["manager"])
    for version in ("99999999999999999999.0.0", "1.1000001.0", "1.0.10000000"):
        with pytest.raises(ApplicationError) as refused:
            release_create(name="demo", version=version, splits=["dev"], created_by=built["manager"])
        assert refused.value.code == "invalid_version" and refused.value.status_code == 400, version
        r = client.post("/api/releases/", {"name": "demo", "version": version, "splits": ["dev"]}, format="json")
        assert r.status_code == 400 and r.json()["code"] == "invalid_version", r.content
        assert "1000000" in r.json()["message"]
    assert not Release.objects.filter(name="demo").exclude(pk=built["release"].pk).exists()


def test_release_and_snapshot_output_shows_no_server_path(db, built):
    client = APIClient()
    client.force_authenticate(built["manager"])
    release, snapshot = built["release"], built["snapshot"]
    assert Path(release.path).is_absolute()                     # what is stored stays as it was
    for url in ("/api/releases/", f"/api/releases/{release.pk}/", "/api/snapshots/",
                f"/api/snapshots/{snapshot.pk}/"):
        r = client.get(url)
        assert r.status_code == 200, r.content
        assert str(built["root"]) not in r.content.decode(), url
    assert client.get(f"/api/releases/{release.pk}/").json()["path"] == "releases/demo/1.0.0"
    assert not client.get(f"/api/snapshots/{snapshot.pk}/").json()["path"].startswith("/")

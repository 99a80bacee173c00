"""A published release carries its scorer: ``evaluate.py`` is in the folder and in SHA256SUMS, runs
alone (no Django, no repository on the path) from the release folder, and gives exactly the figures
of the platform's own evaluation of the split's snapshot on the same rankings; the card documents
its format and the release's agreement as it is measured (dispute rates and audit agreement for
the single-review stages, no coefficient over their disputed units).

One rendered test split (two videos, simulated reviewers, an audit), built once per module inside a
transaction that is rolled back at the end."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from django.db import transaction
from django.test import override_settings

from accounts.services import user_create
from annotation.benchmark.services.snapshots import snapshot_data_build
from annotation.releases.services import release_io
from annotation.releases.services.audits import (
    audit_create,
    audit_judgment_record,
    audit_sample_claim_next,
)
from annotation.releases.services.releases import release_create
from models.training.metrics import (
    evaluate_ocvr,
    evaluate_t2traj,
    evaluate_traj2t,
    video_scores_and_relevance,
)
from tests.annotation.test_evaluation_kit import same
from tests.annotation.test_releases import build_rendered_benchmark, review_cross_video

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
SPLITS = ["test", "test"]
KIT = Path(release_io.__file__).with_name("evaluate_kit.py")
PLATFORM = {"t2traj": evaluate_t2traj, "traj2t": evaluate_traj2t, "ocvr": evaluate_ocvr}


@pytest.fixture(scope="module")
def published(django_db_setup, django_db_blocker, tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("kit")
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=root / "media", VAR_DIR=root / "var"):
        (root / "media" / "tmp").mkdir(parents=True)
        outer = transaction.atomic()
        outer.__enter__()
        try:
            manager = build_rendered_benchmark(root, SPLITS, accuracy=0.8, seed=4)
            review_cross_video(SPLITS, accuracy=0.8, seed=4)
            auditor = user_create(username="checker", password="pw-for-tests", roles=["auditor"])
            audit = audit_create(split="test", n_random=12, n_difficult=3, seed=5, kinds=["relation"],
                                 created_by=manager)
            for i in range(audit.samples.count()):
                sample = audit_sample_claim_next(audit=audit, auditor=auditor)
                wrong = i % 5 == 0
                audit_judgment_record(sample=sample, auditor=auditor, verdict="error" if wrong else "correct",
                                      error_type="other" if wrong else "", time_spent_ms=3000)
            release = release_create(name="demo", version="1.0.0", splits=["test"], created_by=manager,
                                     description="Rendered demo scenes.")
            data, _ = snapshot_data_build(split="test")
            yield {"folder": Path(release.path), "snapshot": data}
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def _rankings(data, sim: np.ndarray, task: str) -> list[dict]:
    """Each row's gallery by descending score, in the snapshot's ids."""
    relation, qids, tids = data.matrix(include_pseudo=False)
    qv = np.array([q.video_id for q in data.queries])
    tv = np.array([t.video_id for t in data.tracks])
    if task == "t2traj":
        return [{"query_id": q, "ranking": [tids[j] for j in sorted(np.flatnonzero(tv == qv[i]), key=lambda j: -sim[i, j])]}
                for i, q in enumerate(qids)]
    if task == "traj2t":
        return [{"trajectory_id": t, "ranking": [qids[i] for i in np.argsort(-sim[:, j], kind="stable")]}
                for j, t in enumerate(tids)]
    videos, best, _ = video_scores_and_relevance(sim, relation, tv)
    return [{"query_id": q, "ranking": [int(videos[k]) for k in np.argsort(-best[i], kind="stable")]}
            for i, q in enumerate(qids)]


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -I evaluate.py ...`` from the release folder: no repository, no Django settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "PYTHONPATH"))}
    return subprocess.run([sys.executable, "-I", "evaluate.py", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_release_ships_its_scorer(published):
    folder = published["folder"]
    assert (folder / "evaluate.py").read_bytes() == KIT.read_bytes()
    listed = dict(reversed(line.split("  ", 1)) for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert "evaluate.py" in listed
    card = (folder / "README.md").read_text()
    assert "## Evaluating on this release" in card and '{"query_id": 7, "ranking": [13, 11, 12]}' in card


def test_evaluate_py_gives_the_platforms_figures(published, tmp_path):
    folder, data = published["folder"], published["snapshot"]
    relation, _, _ = data.matrix(include_pseudo=False)
    tv = np.array([t.video_id for t in data.tracks])
    qv = np.array([q.video_id for q in data.queries])
    rng = np.random.default_rng(0)
    sims = [rng.normal(size=relation.shape) for _ in range(2)]                          # [E, T] each
    report = {}
    for task, platform in PLATFORM.items():
        paths = []
        for k, sim in enumerate(sims):
            path = tmp_path / f"{task}-{k}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in _rankings(data, sim, task)))
            paths.append(path)
        done = _run(folder, "--task", task, "--split", "test", "--predictions", str(paths[0]),
                    "--baseline", str(paths[1]), "--json")
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout)
        expected = platform(sims[0], relation, tv, qv)
        assert expected["n_queries"] > 0
        assert same(found["metrics"], expected), (task, found["metrics"], expected)
        assert same(found["baseline_metrics"], platform(sims[1], relation, tv, qv))
        assert set(found["difference"]) == {"R@1", "R@3", "R@5", "R@10", "mAP", "mAP@10"}
        report[task] = {"kit": {k: found["metrics"][k] for k in ("R@1", "R@5", "R@10", "mAP", "n_queries")},
                        "platform": {k: expected[k] for k in ("R@1", "R@5", "R@10", "mAP", "n_queries")},
                        "difference_mAP": found["difference"]["mAP"]}
    out = os.environ.get("TRAJLAB_KIT_REPORT")
    if out:                                           # the identity check's figures, for the notes
        Path(out).write_text(json.dumps(report, indent=2))
    # a bad file is refused in words, from the shipped file too
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query_id": "x", "ranking": []}\n')
    done = _run(folder, "--task", "t2traj", "--split", "test", "--predictions", str(bad))
    assert done.returncode == 2 and "line 1" in done.stderr and "Traceback" not in done.stderr


def test_the_card_reports_agreement_as_measured(published):
    folder = published["folder"]
    stats = json.loads((folder / "statistics.json").read_text())
    agreement = stats["pre_adjudication_agreement"]
    for stage in ("relation", "pair"):
        r = agreement[stage]
        assert r["review"]["kind"] == "single_review"
        assert r["raw_agreement"] is None and r["fleiss_kappa"] is None and r["krippendorff_alpha"] is None
        assert 0 <= r["dispute"]["n_disputed"] <= r["dispute"]["n_units"]
    # every judged random sample of a relation is one stage's: a row's candidate or a pair
    judged = agreement["relation"]["audit_agreement"]["n_judged"] + agreement["pair"]["audit_agreement"]["n_judged"]
    assert judged == stats["audits"][0]["by_kind"]["relation"]["random"]["judged"] > 0
    assert agreement["usability"]["review"]["kind"] == "panel"
    card = (folder / "README.md").read_text()
    section = card[card.index("### Pre-adjudication agreement"):]
    section = section[:section.index("\n### ", 5)]
    out = os.environ.get("TRAJLAB_KIT_REPORT")
    if out:
        Path(out).with_suffix(".agreement.md").write_text(section)
    relation_row = next(line for line in section.splitlines() if line.startswith("| relation |"))
    cells = [c.strip() for c in relation_row.strip("|").split("|")]
    dispute = agreement["relation"]["dispute"]
    assert cells[1] == str(dispute["n_units"]) and cells[3].startswith(f"{dispute['n_disputed']} (")
    assert len(cells) == 7 and not any("kappa" in line for line in section.splitlines() if line.startswith("| pair"))
    assert "Agreement between the two reviews is not reported" in section

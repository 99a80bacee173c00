"""Alignment reports (SCOUT 5.2): the candidate text encoders of a snapshot ranked before training,
through the service, the REST API (managers write, staff read) and ``manage.py alignment``; bad
input is a clear 400 or command error and stores nothing."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from django.core.management import CommandError, call_command

from workers.alignment import AlignmentReport, alignment_report_create

pytestmark = pytest.mark.django_db
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory) -> str:
    """A random-weight CLIP text tower in the Hugging Face layout (a second candidate)."""
    from transformers import CLIPConfig, CLIPModel

    from models.backends.encoders.text import packaged_minilm_path

    tiny = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
    root = tmp_path_factory.mktemp("clip")
    torch.manual_seed(0)
    CLIPModel(CLIPConfig(text_config=dict(**tiny, vocab_size=30522, max_position_embeddings=64, eos_token_id=102,
                                          bos_token_id=101, pad_token_id=0),
                         vision_config=dict(**tiny, image_size=32, patch_size=8), projection_dim=16)
              ).save_pretrained(root / "clip")
    for name in TOKENIZER_FILES:
        shutil.copy(packaged_minilm_path() + "/" + name, root / "clip" / name)
    return str(root / "clip")


@pytest.fixture
def candidates(tiny_clip, settings) -> dict:
    """The packaged MiniLM and a CLIP folder the operator registered (requests name, never a path)."""
    settings.TRAJLAB_BACKENDS = {"tiny-clip": {"path": tiny_clip}}
    return {"minilm": {}, "random-clip": {"kind": "clip", "path": "tiny-clip"}}


@pytest.fixture
def staff(make_user, client_for):
    return {role: client_for(make_user(role)) for role in ("manager", "annotator", "auditor")}


def test_the_service_ranks_the_candidates_and_stores_the_report(snapshots, var_dir, candidates):
    from common.registry import folders_resolve
    from models.retrievers.scout.alignment import METRICS, alignment_report
    from models.retrievers.scout.selection import match_pairs, snapshot_alignment
    from models.training.snapshot import RelationSnapshotData

    train = snapshots["train"]
    report = alignment_report_create(snapshot=train, text_encoders=candidates, k=3, n_folds=3)
    data = RelationSnapshotData.load(train.path)
    assert report.n_pairs == len(match_pairs(data)) >= 4 and report.snapshot_sha256 == train.content_sha256
    assert sorted(report.ranking) == ["minilm", "random-clip"] and report.best == report.ranking[0]
    for name in report.ranking:
        s = report.scores[name]
        assert 0.0 <= s["mutual_knn"] <= 1.0 and 0.0 <= s["cka"] <= 1.0 and s["ridge_r2"] <= 1.0
    for metric in METRICS:
        want = sorted(report.ranking, key=lambda c, m=metric: -report.scores[c][m])
        assert report.rankings[metric] == want
    assert report.params["k"] == 3 and set(report.params["encoders"]) == {"minilm", "random-clip"}
    # recomputed from the features, the same figures (deterministic), and a candidate that is the
    # visual side itself ranks first by every lens
    again = snapshot_alignment(data, folders_resolve(candidates), k=3, n_folds=3)   # the registered folder's path
    assert again.scores == report.scores
    x_only = alignment_report(np.eye(6)[:, :4], {"same": np.eye(6)[:, :4], "noise": np.random.default_rng(0).normal(
        size=(6, 4))}, k=2, n_folds=2)
    assert x_only.ranking[0] == "same" and x_only.scores["same"]["mutual_knn"] == 1.0


def test_managers_create_reports_and_staff_read_them(snapshots, var_dir, staff, candidates):
    body = {"snapshot": snapshots["train"].pk, "text_encoders": candidates, "k": 3, "n_folds": 3}
    r = staff["annotator"].post("/api/alignment-reports/", body, format="json")
    assert r.status_code == 403 and not AlignmentReport.objects.exists()
    r = staff["manager"].post("/api/alignment-reports/", body, format="json")
    assert r.status_code == 201, r.content
    created = r.json()
    assert created["best"] == created["ranking"][0] and set(created["scores"]) == {"minilm", "random-clip"}
    listed = staff["auditor"].get("/api/alignment-reports/", {"snapshot": snapshots["train"].pk})
    assert listed.status_code == 200 and [x["id"] for x in listed.json()["results"]] == [created["id"]]
    assert staff["annotator"].get("/api/alignment-reports/", {"snapshot": snapshots["dev"].pk}).json()["results"] == []
    detail = staff["annotator"].get(f"/api/alignment-reports/{created['id']}/")
    assert detail.status_code == 200 and detail.json()["scores"] == created["scores"]
    assert staff["manager"].get("/api/alignment-reports/999999/").status_code == 404


@pytest.mark.parametrize("change, code", [
    ({"snapshot": 999999}, None),                                           # unknown snapshot: the serializer's 400
    ({"text_encoders": {"minilm": {"kind": "minilm", "colour": "red"}}}, "invalid_candidates"),
    ({"text_encoders": {"bad": {"kind": "word2vec"}}}, "invalid_candidates"),
    ({"text_encoders": {}}, "invalid_candidates"),
    ({"k": 10_000}, "invalid_alignment"),                                   # fewer than k + 1 pairs
    # a model folder named by path: the server reads only what the operator registered
    ({"text_encoders": {"clip": {"kind": "clip", "path": "/etc"}}}, "location_in_request"),
    ({"appearance": {"kind": "hf", "path": "/etc"}}, "location_in_request"),
    ({"appearance": {"roi_projector": "/etc/passwd"}}, "location_in_request"),
])
def test_bad_input_is_a_400_and_stores_nothing(snapshots, var_dir, staff, change, code):
    body = {"snapshot": snapshots["train"].pk, "text_encoders": {"minilm": {}}, "k": 3, "n_folds": 3, **change}
    r = staff["manager"].post("/api/alignment-reports/", body, format="json")
    assert r.status_code == 400, r.content
    if code is not None:
        assert r.json()["code"] == code and r.json()["message"]
    assert not AlignmentReport.objects.exists()


def test_unsealed_snapshots_are_refused(tiny_benchmark_dir, var_dir):
    from common.errors import ApplicationError
    from tests.workers.factories import register_snapshot

    unsealed = register_snapshot(tiny_benchmark_dir / "snapshots" / "train", sealed=False)
    with pytest.raises(ApplicationError, match="not sealed"):
        alignment_report_create(snapshot=unsealed, text_encoders={"minilm": {}}, k=3, n_folds=3)
    assert not AlignmentReport.objects.exists()


def test_the_command_prints_and_stores_the_ranking(snapshots, var_dir, tmp_path, capsys, candidates):
    spec = tmp_path / "candidates.json"
    spec.write_text(json.dumps(candidates))
    call_command("alignment", "--snapshot", str(snapshots["train"].pk), "--text-encoders", str(spec), "--k", "3",
                 "--folds", "3", "--json")
    printed = json.loads(capsys.readouterr().out)
    stored = AlignmentReport.objects.get()
    assert printed["id"] == stored.pk and printed["ranking"] == stored.ranking
    call_command("alignment", "--snapshot", str(snapshots["train"].pk), "--text-encoders", '{"minilm": {}}',
                 "--k", "3", "--folds", "3")
    assert "1. minilm: mutual k-NN" in capsys.readouterr().out and AlignmentReport.objects.count() == 2
    for args, message in (
            (["--snapshot", "999999", "--text-encoders", '{"minilm": {}}'], "no such relation snapshot"),
            (["--snapshot", str(snapshots["train"].pk), "--text-encoders", '{"minilm": {"size": 3}}'], "unknown"),
            (["--snapshot", str(snapshots["train"].pk), "--text-encoders", "nowhere.json"], "neither a JSON"),
            (["--snapshot", str(snapshots["train"].pk), "--text-encoders", '{"minilm": {}}', "--k", "500"],
             "verified match pairs")):
        with pytest.raises(CommandError, match=message):
            call_command("alignment", *args)
    assert AlignmentReport.objects.count() == 2


def test_a_held_out_snapshot_is_refused_unless_asked_for_then_stamped(snapshots, var_dir):
    from common.errors import ApplicationError
    from workers.alignment import AlignmentReport, alignment_report_create

    with pytest.raises(ApplicationError) as caught:
        alignment_report_create(snapshot=snapshots["dev"], text_encoders={"minilm": {}}, k=2, n_folds=2)
    assert caught.value.code == "alignment_on_held_out" and caught.value.status_code == 400
    assert not AlignmentReport.objects.exists()
    report = alignment_report_create(snapshot=snapshots["dev"], text_encoders={"minilm": {}}, k=2, n_folds=2,
                                     allow_held_out=True)
    assert report.params["stamps"] == ["held-out"]

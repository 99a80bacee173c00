"""Text search over a snapshot with trained retrievers: the FAISS path against a brute-force
ranking of the same embeddings, video level, CombSUM fusion, reranking, the on-disk index."""
from __future__ import annotations

import json
from dataclasses import asdict

import faiss
import numpy as np
import pytest

from common.errors import ApplicationError, ConflictError
from models.backends.encoders import build_text_encoder
from models.retrievers.rerank import minmax_rows, pivot_promote
from models.training import index as index_module
from models.training.evaluation import embed_snapshot
from models.training.index import FORMAT_INLINE, TrajectoryIndex, faiss_path
from models.training.snapshot import RelationSnapshotData
from models.training.trainer import load_model
from tests.workers.factories import finished_run
from workers import search as search_module
from workers.search import encode_texts, search, search_index_build, search_index_path

pytestmark = pytest.mark.django_db
TEXT = "a person in a red top walking to the right"


@pytest.fixture(autouse=True)
def fresh_process_caches():
    search_module._loaded.clear()
    search_module._descriptions.clear()
    yield
    search_module._loaded.clear()


@pytest.fixture
def dev(snapshots) -> RelationSnapshotData:
    return RelationSnapshotData.load(snapshots["dev"].path)


def _brute_force(folder, data: RelationSnapshotData, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cosine of ``text`` with every trajectory of ``data`` by plain NumPy: (scores, ids, videos)."""
    model, _ = load_model(folder)
    _, v, _ = embed_snapshot(model, data)
    q = encode_texts(model, [text])[0]
    return v.astype(np.float64) @ q, np.array([t.id for t in data.tracks]), np.array([t.video_id for t in data.tracks])


def _ranking(scores, ids):
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))
    return [int(ids[i]) for i in order]


def test_the_text_path_matches_the_trained_query_embeddings(trained_dirs, dev):
    for kind, folder in trained_dirs.items():
        model, _ = load_model(folder)
        q, _, _ = embed_snapshot(model, dev)
        free = encode_texts(model, [query.text for query in dev.queries])
        assert np.allclose(free, q, atol=1e-5), kind


def test_trajectory_and_video_search_equal_a_brute_force_ranking(snapshots, trained_dirs, dev, var_dir):
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    scores, ids, videos = _brute_force(trained_dirs["vtrajembed"], dev, TEXT)
    out = search(run=run, text=TEXT, k=len(ids))
    assert out["snapshot"] == snapshots["dev"].pk and out["score"] == "cosine" and out["level"] == "trajectory"
    assert [r["trajectory"] for r in out["results"]] == _ranking(scores, ids)
    by_id = dict(zip(ids.tolist(), scores, strict=True))
    for r in out["results"]:
        assert r["score"] == pytest.approx(by_id[r["trajectory"]], abs=1e-5)
        assert r["video"] == videos[ids.tolist().index(r["trajectory"])]
    assert [r["rank"] for r in out["results"]] == list(range(1, len(ids) + 1))
    assert len(search(run=run, text=TEXT, k=2)["results"]) == 2
    # videos by their best trajectory
    best = {}
    for s, t, v in zip(scores, ids, videos, strict=True):
        if v not in best or s > best[v][0]:
            best[v] = (s, t)
    expected = sorted(best.items(), key=lambda item: -item[1][0])
    out = search(run=run, text=TEXT, level="video", k=10)
    assert [(r["video"], r["trajectory"]) for r in out["results"]] == [(v, t) for v, (_, t) in expected]
    assert [r["score"] for r in out["results"]] == pytest.approx([s for _, (s, _) in expected], abs=1e-5)
    # another snapshot of the run is searched with its own index
    train = RelationSnapshotData.load(snapshots["train"].path)
    out = search(run=run, text=TEXT, snapshot=snapshots["train"], k=5)
    s_train, i_train, _ = _brute_force(trained_dirs["vtrajembed"], train, TEXT)
    assert [r["trajectory"] for r in out["results"]] == _ranking(s_train, i_train)[:5]


def test_fusion_is_combsum_of_the_runs(snapshots, trained_dirs, dev, var_dir):
    runs = {kind: finished_run(snapshots, folder, kind) for kind, folder in trained_dirs.items()}
    lists = [_brute_force(trained_dirs[kind], dev, TEXT) for kind in ("vtrajembed", "scout")]
    ids, videos = lists[0][1], lists[0][2]
    fused = sum(minmax_rows(scores[None, :])[0] for scores, _, _ in lists)             # plain CombSUM
    out = search(run=runs["vtrajembed"], text=TEXT, k=len(ids), fuse_with=[runs["scout"]])
    assert out["score"] == "combsum" and out["fused_runs"] == [runs["scout"].pk]
    assert [r["trajectory"] for r in out["results"]] == _ranking(fused, ids)
    assert [r["score"] for r in out["results"]] == pytest.approx(sorted(fused, reverse=True), abs=1e-5)
    out = search(run=runs["vtrajembed"], text=TEXT, k=10, fuse_with=[runs["scout"]], level="video")
    best = {}
    for s, v in zip(fused, videos, strict=True):
        if v not in best or s > best[v]:
            best[v] = s
    assert [r["video"] for r in out["results"]] == sorted(best, key=lambda v: -best[v])


def test_reranking_orders_the_head_by_description_similarity(snapshots, trained_dirs, dev, var_dir, monkeypatch):
    monkeypatch.setattr(search_module, "RERANK_TIE_MARGIN", 0.0)
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    first = search(run=run, text=TEXT, k=10)
    out = search(run=run, text=TEXT, k=10, rerank=True)
    head = [r["trajectory"] for r in out["results"]]
    assert out["reranked"] and sorted(head) == sorted(r["trajectory"] for r in first["results"])
    m = len(head)
    assert m - 1 <= out["comparator_calls"] <= m * (m - 1) // 2
    # descriptions are the heuristic describer's reading of the pixels (the default mode reads no
    # approved record; tests/workers/test_search_invariance.py perturbs them)
    descriptions = [r["description"] for r in out["results"]]
    assert all("upper-body clothing" in d for d in descriptions)
    assert out["mode"] == "retrieval" and {r["description_source"] for r in out["results"]} == {"describer"}
    # the head is ActPair's pivot-promote over the first-stage order, comparing closeness to the query
    encoder = build_text_encoder({})
    pooled = encoder.encode([TEXT, *descriptions]).pooled
    pooled = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    closeness = dict(zip(head, (pooled[1:] @ pooled[0]).tolist(), strict=True))
    assert closeness[head[0]] == max(closeness.values())

    def compare(a, b):
        return "tie" if closeness[a] == closeness[b] else ("a" if closeness[a] > closeness[b] else "b")

    expected, calls = pivot_promote([r["trajectory"] for r in first["results"]], compare)
    assert head == expected and out["comparator_calls"] == calls


def test_the_index_is_built_once_and_kept_on_disk(snapshots, trained_dirs, var_dir):
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    built = search_index_build(run=run, snapshot=snapshots["dev"])
    path = search_index_path(run=run, snapshot=snapshots["dev"])
    assert built["built"] and built["path"] == str(path) and path.is_file()
    assert path.parent == var_dir / "search" / f"run-{run.pk}" and path.stem == snapshots["dev"].content_sha256
    assert built["n"] == len(RelationSnapshotData.load(snapshots["dev"].path).tracks) and built["dim"] == 32
    again = search_index_build(run=run, snapshot=snapshots["dev"])
    assert not again["built"] and again["n"] == built["n"]
    out = search(run=run, text=TEXT)
    assert set(out["timing_ms"]) >= {"load", "encode", "search", "total"}


def test_the_served_ivf_index_ranks_as_the_exact_path_and_old_layouts_are_rebuilt(snapshots, trained_dirs,
                                                                                  var_dir, monkeypatch):
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    path = search_index_path(run=run, snapshot=snapshots["dev"])
    n = search_index_build(run=run, snapshot=snapshots["dev"])["n"]
    exact = {level: search(run=run, text=TEXT, k=n + 3, level=level) for level in ("trajectory", "video")}
    assert exact["trajectory"]["report"]["first_stage"] == {"index": "exact"}
    assert len(exact["trajectory"]["results"]) == n
    # given the threshold lowered to this gallery and every IVF cell visited
    monkeypatch.setattr(index_module, "EXACT_MAX", 1)
    monkeypatch.setattr(index_module, "SERVED_NPROBE", 10_000)
    search_module._loaded.clear()
    # when it searches, the stored exact index is rebuilt as IVF from the stored vectors
    ivf = {level: search(run=run, text=TEXT, k=n + 3, level=level) for level in ("trajectory", "video")}
    assert json.loads(path.with_suffix(".json").read_text())["index"]["kind"] == "ivf"
    assert TrajectoryIndex.load(path).config.kind == "ivf"
    # then it answers, with the exact path's ranking
    for level in ("trajectory", "video"):
        assert ivf[level]["report"]["first_stage"] == {"index": "ivf", "nprobe": 10_000}
        got, want = ivf[level]["results"], exact[level]["results"]
        assert [(r["trajectory"], r["video"]) for r in got] == [(r["trajectory"], r["video"]) for r in want]
        assert [r["score"] for r in got] == pytest.approx([r["score"] for r in want], abs=1e-6)
    # an index in the first layout (the FAISS index inside the .npz, no format in its description)
    # is rebuilt too
    monkeypatch.setattr(index_module, "EXACT_MAX", 50_000)
    old = TrajectoryIndex.load(path, mmap=False)
    np.savez(path, format=np.array(FORMAT_INLINE), config=np.array(json.dumps(asdict(old.config))),
             index=faiss.serialize_index(old._index), ids=old.ids, videos=old.videos)
    faiss_path(path).unlink()
    path.with_suffix(".json").write_text(json.dumps({"run": run.pk, "n": n}))
    search_module._loaded.clear()
    assert search(run=run, text=TEXT, k=n)["results"] == exact["trajectory"]["results"][:n]
    assert faiss_path(path).is_file() and TrajectoryIndex.load(path).config.kind == "exact"


def test_bad_searches_are_refused(snapshots, trained_dirs, tiny_benchmark_dir, var_dir):
    from tests.workers.factories import register_snapshot
    from workers.models import TrainingRun

    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    for kwargs, code in (({"text": "  "}, "invalid_text"), ({"text": "x" * 1001}, "invalid_text"),
                         ({"text": TEXT, "k": 0}, "invalid_k"), ({"text": TEXT, "level": "frame"}, "invalid_level"),
                         ({"text": TEXT, "mode": "approved"}, "invalid_mode"),
                         ({"text": TEXT, "fuse_with": [run]}, "invalid_fuse_with")):
        with pytest.raises(ApplicationError) as err:
            search(run=run, **kwargs)
        assert err.value.code == code and err.value.status_code == 400
    queued = TrainingRun.objects.create(snapshot=snapshots["train"], model_kind="vtrajembed", config={},
                                        steps_total=3)
    for kwargs in ({"run": queued}, {"run": run, "fuse_with": [queued]},
                   {"run": run, "snapshot": register_snapshot(tiny_benchmark_dir / "snapshots" / "dev",
                                                              sealed=False)}):
        with pytest.raises(ConflictError):
            search(text=TEXT, **kwargs)
    lost = finished_run(snapshots, var_dir / "nowhere")
    with pytest.raises(ConflictError) as err:
        search(run=lost, text=TEXT)
    assert err.value.code == "checkpoint_missing"

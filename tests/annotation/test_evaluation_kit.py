"""The release's scorer (``evaluate.py``, :mod:`...release_io.evaluate_kit`) against the platform's
own evaluation (``models.training.metrics``) on random release folders: the same rankings give the
same figures, strata and bootstrap intervals; bad prediction files are refused with line numbers,
never with a traceback. The scorer on a real exported release is checked in
``test_evaluation_kit_release``."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from annotation.releases.services.release_io import evaluate_kit as kit
from models.training.metrics import (
    evaluate_ocvr,
    evaluate_t2traj,
    evaluate_traj2t,
    paired_bootstrap,
    protocol_rows,
    video_scores_and_relevance,
)

PLATFORM = {"t2traj": evaluate_t2traj, "traj2t": evaluate_traj2t, "ocvr": evaluate_ocvr}


# -- a random release folder -----------------------------------------------------------------------
def write_jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


def random_release(folder: Path, rng: np.random.Generator) -> dict:
    """A release folder with a test split (and some dev rows the scorer must leave out): videos with
    pools of 1 to 12 candidates, queries with labels 1, 0, unknown, missing, and pseudo-labels.
    Returns the test split as the platform's evaluation reads it (ids in order, the relation matrix)."""
    ids = rng.permutation(np.arange(100, 100 + 2000))
    next_id = iter(ids.tolist())
    benchmark, relations, truth = [], [], {}
    tracks: list[tuple[int, int]] = []                            # (trajectory, video) of the test split
    queries: list[tuple[int, int]] = []
    for split in ("test", "dev"):
        for _ in range(int(rng.integers(3, 7))):
            video = next(next_id)
            pool = sorted(next(next_id) for _ in range(int(rng.choice([1, 2, 3, 5, 8, 12]))))
            for _ in range(int(rng.integers(1, 4))):
                query = next(next_id)
                benchmark.append({"query_id": query, "split": split, "video_id": video, "pool_id": video + 1,
                                  "candidates": pool, "target_id": pool[0], "text": "a person"})
                if split == "test":
                    queries.append((query, video))
            if split == "test":
                tracks += [(t, video) for t in pool]
    for query, _ in queries:
        for trajectory, _ in tracks:
            label = int(rng.choice([1, 0, 0, 0, -1, 9]))          # 9: no relation recorded
            if label == 9:
                continue
            pseudo = bool(label == 0 and rng.random() < 0.1)
            relations.append({"query_id": query, "trajectory_id": trajectory, "label": label, "pseudo": pseudo,
                              "source": "human"})
            if not pseudo:
                truth[query, trajectory] = label
    rng.shuffle(relations)
    write_jsonl(folder / "data" / "benchmark.jsonl", sorted(benchmark, key=lambda r: r["query_id"]))
    write_jsonl(folder / "data" / "relations.jsonl", relations)
    (folder / "release.json").write_text(json.dumps({"name": "demo", "version": "1.0.0", "splits": ["dev", "test"]}))
    queries.sort()
    tracks.sort()
    relation = np.array([[truth.get((q, t), -1) for t, _ in tracks] for q, _ in queries], np.int8)
    return {"queries": np.array([q for q, _ in queries]), "query_video": np.array([v for _, v in queries]),
            "tracks": np.array([t for t, _ in tracks]), "track_video": np.array([v for _, v in tracks]),
            "relation": relation}


def rankings(split: dict, sim: np.ndarray, task: str) -> list[dict]:
    """What a system writes for ``sim`` [E, T]: each row's gallery by descending score."""
    q, t, qv, tv = split["queries"], split["tracks"], split["query_video"], split["track_video"]
    if task == "t2traj":
        return [{"query_id": int(q[i]), "ranking": [int(t[j]) for j in sorted(np.flatnonzero(tv == qv[i]),
                                                                               key=lambda j: -sim[i, j])]}
                for i in range(q.size)]
    if task == "traj2t":
        return [{"trajectory_id": int(t[j]), "ranking": [int(q[i]) for i in np.argsort(-sim[:, j], kind="stable")]}
                for j in range(t.size)]
    videos, best, _ = video_scores_and_relevance(sim, split["relation"], tv)
    return [{"query_id": int(q[i]), "ranking": [int(videos[k]) for k in np.argsort(-best[i], kind="stable")]}
            for i in range(q.size)]


def same(a, b) -> bool:
    """Equal figures, NaN equal to NaN (the scorer's JSON says null for it)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return a == b


@pytest.fixture
def release(tmp_path):
    def make(seed: int):
        rng = np.random.default_rng(seed)
        split = random_release(tmp_path / f"r{seed}", rng)
        return tmp_path / f"r{seed}", split, rng

    return make


# -- the same numbers ------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("task", ["t2traj", "traj2t", "ocvr"])
def test_the_kit_gives_the_platforms_figures_on_the_same_rankings(release, seed, task):
    folder, split, rng = release(seed)
    sim = rng.normal(size=split["relation"].shape)                                        # [E, T], no ties
    expected = PLATFORM[task](sim, split["relation"], split["track_video"], split["query_video"])
    write_jsonl(folder / "mine.jsonl", rankings(split, sim, task))
    found = kit.evaluate(folder, task, "test", folder / "mine.jsonl")
    assert found["metrics"]["n_queries"] > 0
    assert same(found["metrics"], json.loads(json.dumps(expected).replace("NaN", "null"))), (found, expected)
    assert same(found["metrics"], expected)


@pytest.mark.parametrize("task", ["t2traj", "traj2t", "ocvr"])
def test_the_baseline_difference_is_the_platforms_paired_bootstrap(release, task, capsys):
    folder, split, rng = release(11)
    sims = [rng.normal(size=split["relation"].shape) for _ in range(2)]
    for name, sim in zip(("mine", "theirs"), sims):
        write_jsonl(folder / f"{name}.jsonl", rankings(split, sim, task))
    found = kit.evaluate(folder, task, "test", folder / "mine.jsonl", folder / "theirs.jsonl")
    mine, theirs = (protocol_rows(s, split["relation"], split["track_video"], split["query_video"])[task]
                    for s in sims)
    assert mine["row"] == theirs["row"]
    for metric, value in kit.ROW_METRICS.items():
        boot = paired_bootstrap(theirs[value], mine[value], n_resamples=10000, seed=0)
        d = found["difference"][metric]
        assert (d["delta"], d["low"], d["high"]) == pytest.approx(
            (100 * boot["delta"], 100 * boot["low"], 100 * boot["high"]), rel=1e-12, abs=1e-12)
        assert d["p_value"] == boot["p_value"] and d["n"] == boot["n"] == len(mine["row"])
    assert same(found["baseline_metrics"], PLATFORM[task](sims[1], split["relation"], split["track_video"],
                                                         split["query_video"]))
    # the same figures as a table
    assert kit.main(["--release", str(folder), "--task", task, "--split", "test", "--predictions",
                     str(folder / "mine.jsonl"), "--baseline", str(folder / "theirs.jsonl")]) == 0
    text = capsys.readouterr().out
    assert f"{found['metrics']['mAP']:.2f}" in text and "difference from the baseline" in text
    assert f"{found['difference']['R@1']['delta']:.2f}" in text


def test_missing_rows_are_refused_unless_counted_as_misses(release, capsys):
    folder, split, rng = release(3)
    sim = rng.normal(size=split["relation"].shape)
    lines = rankings(split, sim, "t2traj")
    rows = protocol_rows(sim, split["relation"], split["track_video"], split["query_video"])["t2traj"]
    dropped = lines.pop(rows["row"][0])                           # a scored row
    write_jsonl(folder / "some.jsonl", lines)
    args = ["--release", str(folder), "--task", "t2traj", "--split", "test", "--predictions", str(folder / "some.jsonl")]
    assert kit.main(args) == kit.REFUSED
    err = capsys.readouterr().err
    assert "have no line" in err and str(dropped["query_id"]) in err and "--missing-as-misses" in err
    assert kit.main([*args, "--missing-as-misses", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["metrics"]
    # the dropped row still counts, as a miss: zero in every metric
    assert found["n_queries"] == len(rows["row"])
    for metric, value in kit.ROW_METRICS.items():
        values = np.array(rows[value])
        values[0] = 0.0
        assert found[metric] == pytest.approx(100.0 * values.mean(), rel=1e-12), metric


# -- bad files -------------------------------------------------------------------------------------
def bad_files(split: dict, good: list[dict]) -> dict[str, tuple[bytes, str]]:
    """name -> (file bytes, what the refusal must say)."""
    first, second = good[0], good[1]
    other_pool = next(int(t) for t, v in zip(split["tracks"], split["track_video"])
                      if v != split["query_video"][0])

    def lines(*records, raw: bytes = b"") -> bytes:
        return b"".join(json.dumps(r).encode() + b"\n" for r in records) + raw

    rest = good[2:]
    return {
        "not json": (lines(first) + b"{not json\n" + lines(*good[1:]), "line 2"),
        "an array": (lines(first) + b"[1, 2]\n" + lines(*good[1:]), "line 2"),
        "extra key": (lines({**first, "score": 1}, *good[1:]), "line 1"),
        "missing ranking": (lines({"query_id": first["query_id"]}, *good[1:]), "line 1"),
        "string id": (lines({**first, "query_id": str(first["query_id"])}, *good[1:]), "line 1"),
        "float id": (lines({**first, "query_id": float(first["query_id"])}, *good[1:]), "line 1"),
        "bool in ranking": (lines({**first, "ranking": [True, *first["ranking"][1:]]}, *good[1:]), "line 1"),
        "unknown query": (lines(first, {**second, "query_id": 1}, *rest), "line 2"),
        "duplicate query": (lines(first, second, first, *rest), "line 3"),
        "unknown trajectory": (lines({**first, "ranking": [*first["ranking"][:-1], 7]}, *good[1:]), "line 1"),
        "another pool's trajectory": (lines({**first, "ranking": [*first["ranking"][:-1], other_pool]},
                                            *good[1:]), "line 1"),
        "repeated trajectory": (lines({**first, "ranking": first["ranking"] + first["ranking"][:1]}, *good[1:]),
                                "line 1"),
        "incomplete ranking": (lines(*good[:-1], {**good[-1], "ranking": good[-1]["ranking"][:-1]})
                               if len(good[-1]["ranking"]) > 1 else lines(*good[:-1], {**good[-1], "ranking": []}),
                               f"line {len(good)}"),
        "ranking not a list": (lines({**first, "ranking": {"a": 1}}, *good[1:]), "line 1"),
        "NaN": (lines(first) + b'{"query_id": NaN, "ranking": []}\n' + lines(*good[1:]), "line 2"),
        "duplicate key": (b'{"query_id": 1, "query_id": 2, "ranking": []}\n' + lines(*good[1:]), "line 1"),
        "not UTF-8": (lines(first) + b"\xff\xfe\n" + lines(*good[1:]), "line 2"),
        "deep nesting": (lines(first) + b"[" * 100000 + b"\n" + lines(*good[1:]), "line 2"),
        "empty file": (b"", "no line"),
        "binary": (bytes(range(256)) * 4, "line 1"),
    }


def test_bad_files_are_refused_with_line_numbers(release, capsys):
    folder, split, rng = release(5)
    good = rankings(split, rng.normal(size=split["relation"].shape), "t2traj")
    for name, (data, said) in bad_files(split, good).items():
        path = folder / "bad.jsonl"
        path.write_bytes(data)
        code = kit.main(["--release", str(folder), "--task", "t2traj", "--split", "test", "--predictions", str(path)])
        err = capsys.readouterr().err
        assert code == kit.REFUSED, (name, err)
        assert said in err and "Traceback" not in err, (name, err)
    for args, said in ((["--predictions", str(folder / "nowhere.jsonl")], "cannot be read"),
                       (["--predictions", str(folder)], "cannot be read"),
                       (["--predictions", str(folder / "bad.jsonl"), "--split", "train"], "not train")):
        argv = ["--release", str(folder), "--task", "t2traj", "--split", "test", *args]
        assert kit.main(argv) == kit.REFUSED
        assert said in capsys.readouterr().err


@pytest.mark.parametrize("task", ["t2traj", "traj2t", "ocvr"])
def test_mangled_files_never_raise(release, task, capsys):
    folder, split, rng = release(7)
    good = b"".join(json.dumps(r).encode() + b"\n"
                    for r in rankings(split, rng.normal(size=split["relation"].shape), task))
    junk = [b"", b"{", b"}", b"[", b"]", b",", b'"', b"\\", b"-", b"0", b"1e999", b"null", b"\n", b"\xc3", b"\x00"]
    path = folder / "mangled.jsonl"
    codes = []
    for _ in range(150):
        data = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(data)))
            cut = int(rng.integers(0, 6))
            data[at:at + cut] = junk[int(rng.integers(0, len(junk)))]
        path.write_bytes(bytes(data))
        code = kit.main(["--release", str(folder), "--task", task, "--split", "test", "--predictions", str(path)])
        captured = capsys.readouterr()
        assert code in (0, kit.REFUSED) and "Traceback" not in captured.err, captured.err
        if code == kit.REFUSED:
            assert "line " in captured.err or "no line" in captured.err, captured.err
        codes.append(code)
    assert kit.REFUSED in codes

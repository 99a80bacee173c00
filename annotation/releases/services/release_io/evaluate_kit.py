#!/usr/bin/env python3
"""Score rankings against this release's ground truth, with the platform's own metrics.

Shipped in every release folder as ``evaluate.py``; it needs Python 3.10+ and NumPy only::

    python evaluate.py --task t2traj --split test --predictions mine.jsonl [--baseline theirs.jsonl] [--json]

Predictions are JSON Lines, one object per ranking row, each with exactly two keys:

- ``t2traj``: ``{"query_id": Q, "ranking": [trajectory ids, best first]}``, every candidate of the
  query's frozen pool (``benchmark.candidates``) once;
- ``traj2t``: ``{"trajectory_id": T, "ranking": [query ids, best first]}``, for every candidate of
  the split, every query of the split (``benchmark`` rows) once;
- ``ocvr``: ``{"query_id": Q, "ranking": [video ids, best first]}``, every video of the split once.

Every row of the split needs its line; a missing row is refused, or, with ``--missing-as-misses``,
scored as a miss (zero in every metric). A line that is not such an object, an id that is not an
integer, an unknown or repeated id, a ranking that leaves out or repeats an item: each is refused
with its line number, and nothing is scored (exit status 2).

Ground truth is read from ``data/benchmark.jsonl`` (the split's accepted queries, their videos and
complete candidate lists) and ``data/relations.jsonl`` (binary, non-pseudo labels; anything else
is unknown). Relevance and metrics are the platform's (``models.training.metrics``): an item whose
label is unknown leaves that row's gallery; a row without a relevant item is not scored; a video
is relevant to a query when one of its candidates matches, irrelevant when all are confirmed
mismatches, unknown otherwise. Figures are percent: ``R@1``, ``R@3``, ``R@5``, ``R@10``, ``mAP``,
``mAP@10``, ``n_queries`` (rows scored), per pool-size ``strata``, ``random_R@1`` (T2Traj) and
``n_videos`` (OCVR). With ``--baseline`` the paired bootstrap over rows (10,000 resamples, seed 0)
gives each metric's difference (predictions minus baseline) with its 95 % interval and p-value.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

KS = (1, 3, 5, 10)
STRATA = (("<2", 0, 1), ("2", 2, 2), ("3-5", 3, 5), ("6-10", 6, 10), (">10", 11, math.inf))
ROW_METRICS = {"R@1": "R@1", "R@3": "R@3", "R@5": "R@5", "R@10": "R@10", "mAP": "AP", "mAP@10": "AP@10"}
TASKS = {"t2traj": ("query_id", "trajectory"), "traj2t": ("trajectory_id", "query"), "ocvr": ("query_id", "video")}
CHUNK_ELEMENTS = 1 << 22
MAX_MESSAGES = 20
REFUSED = 2
INTERNAL = 3


class Refused(Exception):
    """What is wrong with the input, one message per problem (line numbers included)."""

    def __init__(self, messages: list[str]):
        super().__init__("\n".join(messages))
        self.messages = messages


# -- the release's ground truth ----------------------------------------------------------------------------------
def _records(path: Path):
    """(line number, object) of a release table's JSON Lines file."""
    if not path.is_file():
        raise Refused([f"{path}: not found; run evaluate.py from a release folder or give --release"])
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if raw.strip():
                try:
                    yield number, json.loads(raw)
                except ValueError as exc:
                    raise Refused([f"{path} line {number}: not JSON ({exc}); the release is damaged "
                                   "(sha256sum -c SHA256SUMS)"]) from None


class Gallery:
    """One split's ranking problem, as the platform's snapshot of it: queries by id, candidates
    (the current pools' members) by trajectory id, videos by id, and the relation matrix."""

    def __init__(self, folder: Path, split: str):
        rows = []
        for number, r in _records(folder / "data" / "benchmark.jsonl"):
            try:
                if r["split"] == split:
                    rows.append((int(r["query_id"]), int(r["video_id"]), [int(t) for t in r["candidates"]]))
            except (KeyError, TypeError, ValueError):
                raise Refused([f"data/benchmark.jsonl line {number}: not a benchmark row"]) from None
        if not rows:
            raise Refused([f"the release has no {split} queries (its benchmark table lists none)"])
        rows.sort()
        self.queries = np.array([q for q, _, _ in rows], np.int64)                        # [E]
        self.query_video = np.array([v for _, v, _ in rows], np.int64)                    # [E]
        video_of = {}
        for _, video, candidates in rows:
            video_of.update(dict.fromkeys(candidates, video))
        self.tracks = np.array(sorted(video_of), np.int64)                                # [T]
        self.track_video = np.array([video_of[t] for t in self.tracks.tolist()], np.int64)  # [T]
        self.videos, track_video_index, sizes = np.unique(self.track_video, return_inverse=True, return_counts=True)
        self.pool_size = dict(zip(self.videos.tolist(), sizes.tolist()))                  # video -> |pool|
        self.query_index = {q: i for i, q in enumerate(self.queries.tolist())}
        self.track_index = {t: i for i, t in enumerate(self.tracks.tolist())}
        self.relation = np.full((self.queries.size, self.tracks.size), -1, np.int8)      # [E, T]
        for _, r in _records(folder / "data" / "relations.jsonl"):
            if not isinstance(r, dict) or r.get("pseudo") is not False or r.get("label") not in (0, 1):
                continue                                             # pseudo-labels and unknowns are not truth
            i, j = self.query_index.get(r.get("query_id")), self.track_index.get(r.get("trajectory_id"))
            if i is not None and j is not None:
                self.relation[i, j] = r["label"]
        # candidates of each video in trajectory order, as the platform lays out a query's pool
        order = np.argsort(track_video_index, kind="stable")                              # [T]
        self.members = {int(v): order[track_video_index[order] == k] for k, v in enumerate(self.videos.tolist())}

    def problem(self, task: str) -> dict:
        """The task's rows (ids), each row's gallery (item ids and relevance) and pool size."""
        if task == "t2traj":
            ids = {v: self.tracks[m] for v, m in self.members.items()}      # one array per pool, shared by its rows
            galleries = [(ids[v], self.relation[i, self.members[v]]) for i, v in enumerate(self.query_video.tolist())]
            width = max(len(self.members[v]) for v in self.query_video.tolist())
            return {"rows": self.queries, "galleries": galleries, "width": width,
                    "pool": np.array([self.pool_size[v] for v in self.query_video.tolist()], np.int64)}
        if task == "traj2t":
            galleries = [(self.queries, self.relation[:, j]) for j in range(self.tracks.size)]
            return {"rows": self.tracks, "galleries": galleries, "width": int(self.queries.size),
                    "pool": np.array([self.pool_size[v] for v in self.track_video.tolist()], np.int64)}
        match = np.zeros((self.queries.size, self.videos.size), bool)                      # [E, V]
        mismatch = np.ones((self.queries.size, self.videos.size), bool)                    # [E, V]
        for k, v in enumerate(self.videos.tolist()):
            block = self.relation[:, self.members[v]]                                      # [E, |pool|]
            match[:, k] = (block == 1).any(axis=1)
            mismatch[:, k] = (block == 0).all(axis=1)
        video_rel = np.where(match, 1, np.where(mismatch, 0, -1)).astype(np.int8)         # [E, V]
        return {"rows": self.queries, "galleries": [(self.videos, video_rel[i]) for i in range(self.queries.size)],
                "width": int(self.videos.size),
                "pool": np.array([self.pool_size.get(v, 0) for v in self.query_video.tolist()], np.int64)}


# -- predictions ---------------------------------------------------------------------------------------------------
def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _unique_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"the key {sorted(k for k in keys if keys.count(k) > 1)[0]!r} appears twice")
    return dict(pairs)


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_rankings(path: Path, task: str, problem: dict, *, missing_as_misses: bool) -> dict[int, np.ndarray]:
    """Each row's ranking as positions into its gallery, checked line by line (see the module
    docstring); raises :class:`Refused` with every problem found (up to ``MAX_MESSAGES``)."""
    key, item = TASKS[task]
    rows = {r: i for i, r in enumerate(problem["rows"].tolist())}
    positions_of: dict[int, dict[int, int]] = {}                          # a gallery's item -> position, per gallery
    where = [positions_of.setdefault(id(ids), {g: k for k, g in enumerate(ids.tolist())})
             for ids, _ in problem["galleries"]]
    known_items = set().union(*positions_of.values())
    problems: list[str] = []
    seen: dict[int, int] = {}
    rankings: dict[int, np.ndarray] = {}

    def bad(number: int, message: str) -> None:
        problems.append(f"line {number}: {message}")

    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise Refused([f"{path}: cannot be read ({exc.strerror or exc})"]) from None
    with fh:
        for number, raw in enumerate(fh, 1):
            if len(problems) > MAX_MESSAGES:
                break
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                bad(number, "not UTF-8 text")
                continue
            text = text.lstrip("\ufeff") if number == 1 else text
            if not text.strip():
                continue
            try:
                record = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
            except (ValueError, RecursionError) as exc:
                bad(number, f"not a JSON object ({str(exc)[:120]})")
                continue
            if not isinstance(record, dict) or set(record) != {key, "ranking"}:
                got = sorted(map(str, record)) if isinstance(record, dict) else type(record).__name__
                bad(number, f'a {task} line is {{"{key}": id, "ranking": [{item} ids]}}; got {got}')
                continue
            row_id, ranking = record[key], record["ranking"]
            if not _is_id(row_id):
                bad(number, f"{key} must be an integer, got {json.dumps(row_id)[:40]}")
                continue
            if row_id not in rows:
                bad(number, f"{key} {row_id} is not a {task} row of this split")
                continue
            if row_id in seen:
                bad(number, f"{key} {row_id} was ranked already on line {seen[row_id]}")
                continue
            seen[row_id] = number
            if not isinstance(ranking, list) or not all(_is_id(x) for x in ranking):
                bad(number, f"ranking must be a list of integer {item} ids")
                continue
            i = rows[row_id]
            positions = [where[i].get(x) for x in ranking]
            if None in positions:
                outside = [x for x, p in zip(ranking, positions) if p is None][:5]
                unknown = [x for x in outside if x not in known_items]
                what = (f"unknown {item} ids {unknown}" if unknown else
                        f"{item} ids {outside} are not in the gallery of {key} {row_id}")
                bad(number, what)
                continue
            if len(set(positions)) != len(positions):
                repeated = sorted({x for x in ranking if ranking.count(x) > 1})[:5]
                bad(number, f"{item} ids {repeated} appear more than once in the ranking")
                continue
            if len(positions) != len(where[i]):
                left_out = sorted(set(where[i]) - set(ranking))
                bad(number, f"the ranking leaves out {len(left_out)} of the {len(where[i])} {item}s of "
                            f"{key} {row_id} (e.g. {left_out[:5]}); rank every one")
                continue
            rankings[i] = np.asarray(positions, np.int64)
    missing = [r for r, i in rows.items() if i not in rankings and r not in seen]
    if missing and not missing_as_misses and not problems:
        problems.append(f"{len(missing)} {key}s of the split have no line (e.g. {missing[:5]}); rank them, or "
                        "pass --missing-as-misses to score them as misses")
    if problems:
        extra = len(problems) - MAX_MESSAGES
        raise Refused(problems[:MAX_MESSAGES] + ([f"... and more ({extra}+)"] if extra > 0 else []))
    return rankings


# -- metrics (models.training.metrics) -----------------------------------------------------------------------------
def _sorted_relevance(problem: dict, rankings: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's relevance in its ranking's order, unknown items and padding last (as the
    platform's sort leaves them), width the task's gallery width; and which rows were ranked."""
    n_rows, width = len(problem["galleries"]), problem["width"]
    out = np.full((n_rows, width), -1, np.int8)                                            # [Q, N]
    ranked = np.zeros(n_rows, bool)                                                        # [Q]
    for i, positions in rankings.items():
        rel = problem["galleries"][i][1][positions]                                         # [n_i]
        kept = rel[rel != -1]
        out[i, :kept.size] = kept
        ranked[i] = True
    return out, ranked


def per_row_metrics(sorted_rel: np.ndarray) -> dict[str, np.ndarray]:
    """Per row: ``n_rel`` and, as fractions, ``R@k``, ``AP``, ``AP@10`` of an already ranked
    relevance matrix (the platform's ``_per_query_chunk`` after its sort)."""
    n_rows, n_items = sorted_rel.shape
    parts = []
    step = max(1, CHUNK_ELEMENTS // max(1, n_items))
    for start in range(0, n_rows, step):
        rel = sorted_rel[start:start + step] == 1                                          # [q, N]
        hits = np.cumsum(rel, axis=1)                                                      # [q, N]
        ranks = np.arange(1, n_items + 1)                                                  # [N]
        precision_at_rel = np.where(rel, hits / ranks, 0.0)                                # [q, N]
        n_rel = hits[:, -1] if n_items else np.zeros(rel.shape[0], int)                    # [q]
        part = {"n_rel": n_rel, "AP": precision_at_rel.sum(axis=1) / np.maximum(n_rel, 1),
                "AP@10": precision_at_rel[:, :10].sum(axis=1) / np.maximum(np.minimum(n_rel, 10), 1)}
        for k in KS:
            part[f"R@{k}"] = rel[:, :k].any(axis=1).astype(np.float64)
        parts.append(part)
    if not parts:
        return {key: np.zeros(0) for key in ("n_rel", "AP", "AP@10", *(f"R@{k}" for k in KS))}
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def _summary(per_row: dict[str, np.ndarray], rows: np.ndarray | None = None) -> dict:
    scored = per_row["n_rel"] > 0
    if rows is not None:
        scored = scored & rows
    n = int(scored.sum())

    def pct(key: str) -> float:
        return float(100.0 * per_row[key][scored].mean()) if n else math.nan

    return {**{f"R@{k}": pct(f"R@{k}") for k in KS}, "mAP": pct("AP"), "mAP@10": pct("AP@10"), "n_queries": n}


def score(problem: dict, rankings: dict[int, np.ndarray], task: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The task's figures and each row's values (rows not ranked count as misses)."""
    sorted_rel, ranked = _sorted_relevance(problem, rankings)
    per_row = per_row_metrics(sorted_rel)
    truth = np.array([int((rel == 1).sum()) for _, rel in problem["galleries"]], np.int64)  # [Q]
    per_row["n_rel"] = np.where(ranked, per_row["n_rel"], truth)                          # a miss still counts
    for key in ("AP", "AP@10", *(f"R@{k}" for k in KS)):
        per_row[key] = np.where(ranked, per_row[key], 0.0)
    out = _summary(per_row)
    pool = problem["pool"]
    scored = per_row["n_rel"] > 0
    if task == "t2traj":
        out["random_R@1"] = float(100.0 * (1.0 / pool[scored]).mean()) if scored.any() else math.nan
    if task == "ocvr":
        out["n_videos"] = problem["width"]
    strata = {}
    for label, low, high in STRATA:
        rows = (pool >= low) & (pool <= high)
        if label == "<2" and not rows.any():
            continue
        strata[label] = _summary(per_row, rows)
    out["strata"] = strata
    return out, per_row


def paired_bootstrap(a, b, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0) -> dict:
    """``models.training.metrics.paired_bootstrap``: the mean of ``b - a`` over rows, its
    percentile interval over ``n_resamples`` resamples of the rows, and the two-sided p-value."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise ValueError("a and b must be 1-D of the same, non-zero length")
    d = y - x                                                                              # [Q]
    n = d.size
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)                                                          # [R]
    chunk = max(1, CHUNK_ELEMENTS // n)
    for start in range(0, n_resamples, chunk):
        stop = min(n_resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))                                   # [r, Q]
        means[start:stop] = d[idx].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    p = 2.0 * min(float((means <= 0).mean()), float((means >= 0).mean()))
    return {"delta": float(d.mean()), "low": float(low), "high": float(high), "p_value": min(1.0, p), "n": int(n)}


def compare(mine: dict[str, np.ndarray], baseline: dict[str, np.ndarray], *, seed: int = 0,
            n_resamples: int = 10000) -> dict:
    """Per metric, predictions minus baseline over the scored rows (percent points)."""
    scored = mine["n_rel"] > 0
    if not scored.any():
        return {}
    out = {}
    for metric, value in ROW_METRICS.items():
        boot = paired_bootstrap(baseline[value][scored], mine[value][scored], n_resamples=n_resamples, seed=seed)
        out[metric] = {"delta": 100.0 * boot["delta"], "low": 100.0 * boot["low"], "high": 100.0 * boot["high"],
                       "p_value": boot["p_value"], "n": boot["n"]}
    return out


# -- the command ---------------------------------------------------------------------------------------------------
def _plain(value):
    """JSON without NaN: an undefined figure (no row scored) is null."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def evaluate(folder: Path, task: str, split: str, predictions: Path, baseline: Path | None = None, *,
             missing_as_misses: bool = False, seed: int = 0, n_resamples: int = 10000) -> dict:
    """Everything ``--json`` prints."""
    release = json.loads((folder / "release.json").read_text(encoding="utf-8")) \
        if (folder / "release.json").is_file() else {}
    splits = release.get("splits") or []
    if splits and split not in splits:
        raise Refused([f"this release holds the splits {', '.join(splits)}, not {split}"])
    problem = Gallery(folder, split).problem(task)
    metrics, rows = score(problem, read_rankings(predictions, task, problem, missing_as_misses=missing_as_misses),
                          task)
    out = {"release": f"{release.get('name', '?')} {release.get('version', '?')}", "task": task, "split": split,
           "metrics": metrics}
    if baseline is not None:
        try:
            theirs, their_rows = score(problem, read_rankings(baseline, task, problem,
                                                              missing_as_misses=missing_as_misses), task)
        except Refused as exc:
            raise Refused([f"--baseline {baseline}: {m}" for m in exc.messages]) from None
        out["baseline_metrics"] = theirs
        out["difference"] = compare(rows, their_rows, seed=seed, n_resamples=n_resamples)
    return _plain(out)


def _table(result: dict) -> str:
    def f(x):
        return "n/a" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))

    m = result["metrics"]
    lines = [f"{result['release']}: {result['task']} on {result['split']} ({m['n_queries']} rows scored)"]
    lines += [f"  {k:<10} {f(m[k])}" for k in (*ROW_METRICS, "random_R@1", "n_videos") if k in m]
    if result.get("difference"):
        lines.append("  difference from the baseline (percentage points, paired bootstrap over rows):")
    for metric, d in (result.get("difference") or {}).items():
        lines.append(f"  {metric:<10} {f(d['delta']):>7}  95% CI [{f(d['low'])}, {f(d['high'])}]  "
                     f"p = {d['p_value']:.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score rankings against this release's ground truth "
                                                 "(see the docstring at the top of this file for the formats).")
    parser.add_argument("--task", required=True, choices=list(TASKS))
    parser.add_argument("--split", required=True, help="dev or test (a split the release holds)")
    parser.add_argument("--predictions", required=True, type=Path, help="JSON Lines rankings")
    parser.add_argument("--baseline", type=Path, help="a second system's rankings: paired bootstrap of the difference")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--missing-as-misses", action="store_true",
                        help="score rows without a line as misses instead of refusing the file")
    parser.add_argument("--release", type=Path, default=Path(__file__).resolve().parent,
                        help="the release folder (default: the folder holding this file)")
    args = parser.parse_args(argv)
    try:
        result = evaluate(args.release, args.task, args.split, args.predictions, args.baseline,
                          missing_as_misses=args.missing_as_misses)
    except Refused as exc:
        print("evaluate.py: refused:", *exc.messages, sep="\n  ", file=sys.stderr)
        return REFUSED
    except (OSError, MemoryError, ValueError) as exc:
        print(f"evaluate.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        return REFUSED
    except Exception as exc:                                   # a scorer answers in words, never a traceback
        print(f"evaluate.py: internal error ({type(exc).__name__}: {exc}); please report it", file=sys.stderr)
        return INTERNAL
    print(json.dumps(result, indent=2, sort_keys=True) if args.json else _table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cross-video mining: the FAISS miner against the brute-force reference, and each rule of the
strata (own video, split, known pairs, budgets, sampling, provenance) on small random data."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from models.curation.mining import STRATA_PRIORITY, MiningConfig, merge_results
from models.curation.mining_search import mine, mine_bruteforce

SPLITS = np.array(["train", "dev", "test"])


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_data(seed: int, n_traj: int = 600, n_query: int = 80, n_videos: int = 24, d: int = 16,
              n_spaces: int = 1, n_known: int = 100, clustered: bool = True) -> dict:
    """Random trajectories in videos (each video in one split) and queries written near some of
    them, so that the top of a query's list is partly its own video."""
    rng = np.random.default_rng(seed)
    t_video = rng.integers(0, n_videos, n_traj)
    q_video = rng.integers(0, n_videos, n_query)
    split_of = SPLITS[rng.integers(0, 3, n_videos)]
    t_ids = rng.permutation(10 * n_traj)[:n_traj] + 1
    q_ids = rng.permutation(10 * n_query)[:n_query] + 5
    q_emb, t_emb = [], []
    for _ in range(n_spaces):
        if clustered:
            centers = rng.normal(size=(8, d))
            t = unit(centers[rng.integers(0, 8, n_traj)] + 0.7 * rng.normal(size=(n_traj, d)))
            q = unit(t[rng.integers(0, n_traj, n_query)] + 0.3 * rng.normal(size=(n_query, d)))
        else:
            t, q = unit(rng.normal(size=(n_traj, d))), unit(rng.normal(size=(n_query, d)))
        t_emb.append(t)
        q_emb.append(q)
    known = np.stack([q_ids[rng.integers(0, n_query, n_known)], t_ids[rng.integers(0, n_traj, n_known)]], axis=1)
    return dict(query_ids=q_ids, query_videos=q_video, query_splits=split_of[q_video],
                query_emb=q_emb[0] if n_spaces == 1 else q_emb, traj_ids=t_ids, traj_videos=t_video,
                traj_splits=split_of[t_video], traj_emb=t_emb[0] if n_spaces == 1 else t_emb, known_pairs=known)


def ranked_rows(result, strata=(0, 1)) -> list[tuple]:
    """(query, trajectory, stratum, rank) of every provenance row in the given strata."""
    keep = np.isin(result.prov_stratum, strata)
    pair = result.prov_pair[keep]
    return sorted(zip(result.query_ids[pair].tolist(), result.trajectory_ids[pair].tolist(),
                      result.prov_stratum[keep].tolist(), result.prov_rank[keep].tolist()))


def rows_by_query(result, stratum: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    keep = result.prov_stratum == stratum
    for q, t in zip(result.query_ids[result.prov_pair[keep]], result.trajectory_ids[result.prov_pair[keep]]):
        out.setdefault(int(q), []).append(int(t))
    return out


def exact_similarity(data: dict, cfg: MiningConfig) -> np.ndarray:
    """[Q, T] float64 fused similarity Σ w_i cos_i, straight from the definition."""
    qs = [data["query_emb"]] if isinstance(data["query_emb"], np.ndarray) else data["query_emb"]
    ts = [data["traj_emb"]] if isinstance(data["traj_emb"], np.ndarray) else data["traj_emb"]
    return sum(w * (q.astype(np.float64) @ t.astype(np.float64).T) for q, t, w in zip(qs, ts, cfg.weights))


CONFIGS = [
    MiningConfig(potential_k=4, hard_k=6, easy_k=3, easy_max=0.0, random_k=2),
    MiningConfig(potential_k=3, potential_min=0.55, hard_k=5, hard_min=0.3, easy_k=3, easy_max=0.1, random_k=2),
    MiningConfig(potential_k=2, potential_min=0.2, hard_k=4, easy_k=0, easy_max=None, random_k=0),
    MiningConfig(potential_k=0, hard_k=7, hard_min=0.5, easy_k=0, easy_max=None, random_k=0),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=["top-k", "thresholds", "low-cut", "hard-only"])
def test_potential_and_hard_strata_match_bruteforce(cfg):
    data = make_data(1)
    fast = mine(cfg, **data, chunk=16)
    slow = mine_bruteforce(cfg, **data)
    assert ranked_rows(fast) == ranked_rows(slow)
    assert len(ranked_rows(slow)) > 0
    # the same similarities
    a = {(q, t): s for q, t, s in zip(fast.query_ids, fast.trajectory_ids, fast.similarity)}
    for q, t, s in zip(slow.query_ids, slow.trajectory_ids, slow.similarity):
        assert a[(q, t)] == pytest.approx(s, abs=1e-12)


def test_search_deepens_when_the_cut_is_wider_than_the_first_search():
    # given: a potential threshold below most similarities, so the cut holds most of the split
    data = make_data(2, clustered=False, d=8)
    cfg = MiningConfig(potential_k=2, potential_min=-0.5, hard_k=3, easy_k=0, easy_max=None, random_k=0)
    fast = mine(cfg, **data, chunk=7)
    # then: FAISS was asked again with a deeper k, and the strata still equal the reference's
    assert fast.log["deepened_queries"] > 0
    assert fast.log["potential_overflow"] > 0
    assert ranked_rows(fast) == ranked_rows(mine_bruteforce(cfg, **data))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_videos=st.integers(2, 12), pk=st.integers(0, 6), hk=st.integers(0, 8),
       pmin=st.one_of(st.none(), st.floats(-0.2, 0.9)), hmin=st.one_of(st.none(), st.floats(-0.5, 0.5)),
       spaces=st.integers(1, 2), chunk=st.integers(1, 50))
def test_fast_miner_equals_bruteforce_on_random_inputs(seed, n_videos, pk, hk, pmin, hmin, spaces, chunk):
    if pmin is not None and hmin is not None and hmin > pmin:
        hmin = pmin
    weights = (1.0,) if spaces == 1 else (0.3, 0.7)
    cfg = MiningConfig(encoders=tuple(f"enc{i}" for i in range(spaces)), weights=weights, potential_k=pk,
                       potential_min=pmin, hard_k=hk, hard_min=hmin, easy_k=0, easy_max=None, random_k=0)
    data = make_data(seed, n_traj=120, n_query=25, n_videos=n_videos, d=6, n_spaces=spaces, n_known=40)
    assert ranked_rows(mine(cfg, **data, chunk=chunk)) == ranked_rows(mine_bruteforce(cfg, **data))


def test_ties_go_to_the_lower_input_position():
    # given: exactly representable unit vectors, so equal similarities are exactly equal
    rows = np.array([[1, 0, 0, 0], [0.5, 0.5, 0.5, 0.5], [0, 1, 0, 0], [0.5, 0.5, 0.5, -0.5]], np.float32)
    pick = np.array([1, 0, 1, 3, 1, 2, 1, 3, 1, 0, 1, 2])
    data = dict(query_ids=np.array([0, 1]), query_videos=np.array([9, 9]), query_splits=np.array(["train"] * 2),
                query_emb=rows[[1, 0]], traj_ids=np.arange(100, 100 + pick.size), traj_videos=np.arange(pick.size),
                traj_splits=np.array(["train"] * pick.size), traj_emb=rows[pick])
    cfg = MiningConfig(potential_k=3, hard_k=2, easy_k=0, easy_max=None, random_k=0)
    fast, slow = mine(cfg, **data), mine_bruteforce(cfg, **data)
    assert ranked_rows(fast) == ranked_rows(slow)
    # then: query 0 (same as row 1) gets the first copies of row 1, in input order
    assert sorted(rows_by_query(fast, 0)[0]) == [100, 102, 104]
    assert sorted(rows_by_query(fast, 1)[0]) == [106, 108]


def test_own_video_split_and_known_pairs_are_never_mined():
    data = make_data(3)
    cfg = MiningConfig(potential_k=5, hard_k=5, easy_k=5, easy_max=0.2, random_k=5)
    result = mine(cfg, **data)
    q_at = {int(q): i for i, q in enumerate(data["query_ids"])}
    t_at = {int(t): i for i, t in enumerate(data["traj_ids"])}
    qi = np.array([q_at[int(q)] for q in result.query_ids])
    ti = np.array([t_at[int(t)] for t in result.trajectory_ids])
    assert len(result) > 0
    assert not np.any(data["query_videos"][qi] == data["traj_videos"][ti]), "a query's own video was mined"
    assert np.all(data["query_splits"][qi] == data["traj_splits"][ti]), "a pair crosses splits"
    known = set(map(tuple, data["known_pairs"].tolist()))
    assert not known & set(zip(result.query_ids.tolist(), result.trajectory_ids.tolist()))
    assert result.log["known_pairs"]["in_scope"] > 0


def test_own_video_exclusion_skips_the_most_similar_trajectories():
    # given: a query whose own video holds exact copies of it, and one other video
    rng = np.random.default_rng(4)
    q = unit(rng.normal(size=(1, 8)))
    others = unit(q + 0.8 * rng.normal(size=(10, 8)))
    data = dict(query_ids=np.array([7]), query_videos=np.array([1]), query_splits=np.array(["dev"]),
                query_emb=q, traj_ids=np.arange(13), traj_videos=np.array([1, 1, 1] + [2] * 10),
                traj_splits=np.array(["dev"] * 13), traj_emb=np.concatenate([q, q, q, others]))
    cfg = MiningConfig(potential_k=2, hard_k=3, easy_k=0, easy_max=None, random_k=0)
    result = mine(cfg, **data)
    sims = (others.astype(np.float64) @ q[0].astype(np.float64))
    expected = (np.argsort(-sims, kind="stable")[:5] + 3).tolist()
    # then: the five most similar trajectories of the other video, the own copies nowhere
    assert sorted(rows_by_query(result, 0)[7]) == sorted(expected[:2])
    assert sorted(rows_by_query(result, 1)[7]) == sorted(expected[2:])


def test_known_pairs_are_skipped_without_using_budget():
    data = make_data(5, n_known=0)
    cfg = MiningConfig(potential_k=3, hard_k=4, easy_k=0, easy_max=None, random_k=0)
    before = mine(cfg, **data)
    first = rows_by_query(before, 0)
    # given: the current potential matches of every query are known pairs now
    known = np.array([(q, t) for q, ts in first.items() for t in ts])
    after = mine(cfg, **data | {"known_pairs": known})
    for q, ts in rows_by_query(after, 0).items():
        assert not set(ts) & set(first[q])
        assert len(ts) == 3
    # then: the old hard negatives move up into the potential stratum
    hard_before = rows_by_query(before, 1)
    pot_after = rows_by_query(after, 0)
    rank = {(int(q), int(t)): int(r) for q, t, r in
            zip(before.query_ids[before.prov_pair], before.trajectory_ids[before.prov_pair], before.prov_rank)}
    assert all(sorted(pot_after[q]) == sorted(sorted(hard_before[q], key=lambda t, q=q: rank[(q, t)])[:3])
               for q in pot_after)


def test_budgets_and_stratum_definitions():
    data = make_data(6)
    cfg = MiningConfig(potential_k=3, potential_min=0.5, hard_k=4, hard_min=0.25, easy_k=5, easy_max=0.0,
                       random_k=4)
    result = mine(cfg, **data)
    sims = exact_similarity(data, cfg)
    q_at = {int(q): i for i, q in enumerate(data["query_ids"])}
    t_at = {int(t): i for i, t in enumerate(data["traj_ids"])}
    for code, budget in enumerate((3, 4, 5, 4)):
        per_query = rows_by_query(result, code)
        assert per_query, f"no {STRATA_PRIORITY[code]} pairs at all"
        assert max(len(v) for v in per_query.values()) <= budget
        values = [sims[q_at[q], t_at[t]] for q, ts in per_query.items() for t in ts]
        if code == 0:
            assert min(values) >= 0.5
        elif code == 1:
            assert min(values) >= 0.25 and max(values) < 0.5
        elif code == 2:
            assert max(values) < 0.0
    # every query with enough low-similarity candidates gets its full easy budget
    easy = rows_by_query(result, 2)
    allowed = (data["query_videos"][:, None] != data["traj_videos"][None, :]) & \
        (data["query_splits"][:, None] == data["traj_splits"][None, :])
    known = set(map(tuple, data["known_pairs"].tolist()))
    for q, i in q_at.items():
        n_low = sum(1 for j in np.flatnonzero(allowed[i] & (sims[i] < 0.0))
                    if (q, int(data["traj_ids"][j])) not in known)
        assert len(easy.get(q, [])) == min(5, n_low)


def test_easy_negatives_from_a_small_low_tail_are_all_found():
    # given: a threshold so low that each query has only a handful of easy candidates
    data = make_data(7, clustered=False, d=4, n_known=0)
    sims = exact_similarity(data, MiningConfig())
    cfg = MiningConfig(potential_k=0, hard_k=0, easy_k=6, easy_max=-0.93, random_k=0)
    result = mine(cfg, **data)
    easy = rows_by_query(result, 2)
    allowed = (data["query_videos"][:, None] != data["traj_videos"][None, :]) & \
        (data["query_splits"][:, None] == data["traj_splits"][None, :])
    short = 0
    for i, q in enumerate(data["query_ids"]):
        low = set(data["traj_ids"][allowed[i] & (sims[i] < -0.93)].tolist())
        got = set(easy.get(int(q), []))
        assert got <= low
        assert len(got) == min(6, len(low))
        short += len(low) < 6
    # then: the exact fallback ran for the queries that rejection sampling could not fill
    assert short > 0 and result.log["sampling_fallbacks"] > 0


def test_random_pairs_are_uniform_over_the_candidates():
    # given: 400 queries of one video and 20 candidates in another, 5 random pairs each
    rng = np.random.default_rng(8)
    n_q, n_t = 400, 20
    data = dict(query_ids=np.arange(n_q), query_videos=np.zeros(n_q, int), query_splits=np.array(["train"] * n_q),
                query_emb=unit(rng.normal(size=(n_q, 4))), traj_ids=np.arange(n_t), traj_videos=np.ones(n_t, int),
                traj_splits=np.array(["train"] * n_t), traj_emb=unit(rng.normal(size=(n_t, 4))))
    cfg = MiningConfig(potential_k=0, hard_k=0, easy_k=0, easy_max=None, random_k=5, seed=3)
    result = mine(cfg, **data)
    per_query = rows_by_query(result, 3)
    assert all(len(set(v)) == 5 for v in per_query.values()) and len(per_query) == n_q
    counts = np.bincount(result.trajectory_ids, minlength=n_t)
    assert chisquare(counts).pvalue > 0.001
    # and the same queries under a larger budget than there are candidates get all of them
    every = mine(replace(cfg, random_k=30), **data)
    assert all(sorted(v) == list(range(n_t)) for v in rows_by_query(every, 3).values())


def test_same_seed_same_pairs_chunking_and_query_order_do_not_matter():
    data = make_data(9)
    cfg = MiningConfig(potential_k=3, hard_k=4, easy_k=4, easy_max=0.1, random_k=3, seed=11)
    a = mine(cfg, **data, chunk=1000)
    b = mine(cfg, **data, chunk=7)
    perm = np.random.default_rng(0).permutation(data["query_ids"].size)
    shuffled = data | {k: data[k][perm] for k in ("query_ids", "query_videos", "query_splits", "query_emb")}
    c = mine(cfg, **shuffled, chunk=13)
    for other in (b, c):
        for name in ("query_ids", "trajectory_ids", "stratum", "similarity", "prov_stratum", "prov_rank"):
            assert np.array_equal(getattr(a, name), getattr(other, name)), name
    d = mine(replace(cfg, seed=12), **data)
    sampled = a.prov_stratum >= 2
    assert ranked_rows(a) == ranked_rows(d)
    assert set(zip(a.query_ids[a.prov_pair[sampled]], a.trajectory_ids[a.prov_pair[sampled]])) != \
        set(zip(d.query_ids[d.prov_pair[d.prov_stratum >= 2]], d.trajectory_ids[d.prov_pair[d.prov_stratum >= 2]]))


def test_a_pair_mined_twice_is_returned_once_with_both_provenances():
    data = make_data(10, n_traj=150, n_query=30, n_videos=6)
    # given: random budgets as large as the candidate lists, so every potential match is also random
    cfg = MiningConfig(potential_k=3, hard_k=0, easy_k=0, easy_max=None, random_k=1000, run_name="first")
    result = mine(cfg, **data)
    pairs = list(zip(result.query_ids.tolist(), result.trajectory_ids.tolist()))
    assert len(pairs) == len(set(pairs))
    assert result.log["duplicates_merged"] == int((result.stratum == 0).sum()) > 0
    i = int(np.flatnonzero(result.stratum == 0)[0])
    pair = result.pair(i)
    assert pair.stratum == "potential_match" and pair.strata == ("potential_match", "random")
    assert [p["stratum"] for p in pair.provenance] == ["potential_match", "random"]
    assert {p["run"] for p in pair.provenance} == {"first"}
    # and across runs with another encoder: one pair, provenance from both runs
    other = MiningConfig(encoders=("desc-text",), potential_k=3, hard_k=2, easy_k=0, easy_max=None,
                         random_k=0, run_name="second")
    data2 = data | {"query_emb": unit(data["query_emb"] + 0.3), "traj_emb": unit(data["traj_emb"] - 0.1)}
    second = mine(other, **data2)
    merged = merge_results([result, second])
    both = set(pairs) & set(zip(second.query_ids.tolist(), second.trajectory_ids.tolist()))
    assert both
    assert len(merged) == len(set(pairs) | set(zip(second.query_ids.tolist(), second.trajectory_ids.tolist())))
    records = {(r["query_id"], r["trajectory_id"]): r for r in merged.to_records()}
    for key in both:
        runs = {p["run"] for p in records[key]["provenance"]}
        assert runs == {"first", "second"}
        assert records[key]["provenance"][0]["stratum"] == records[key]["stratum"]
    assert {p["encoder"] for r in records.values() for p in r["provenance"]} == {"all-MiniLM-L6-v2", "desc-text"}
    # merging a run with itself changes nothing
    again = merge_results([result, result])
    assert np.array_equal(again.prov_pair, result.prov_pair) and len(again.configs) == 1


def test_fused_similarity_is_the_weighted_sum_of_cosines():
    data = make_data(11, n_spaces=2, d=12)
    cfg = MiningConfig(encoders=("traj-tower", "desc-text"), weights=(0.25, 0.75), potential_k=2, hard_k=2,
                       easy_k=2, easy_max=0.0, random_k=2)
    result = mine(cfg, **data)
    sims = exact_similarity(data, cfg)
    q_at = {int(q): i for i, q in enumerate(data["query_ids"])}
    t_at = {int(t): i for i, t in enumerate(data["traj_ids"])}
    expected = [sims[q_at[int(q)], t_at[int(t)]] for q, t in zip(result.query_ids, result.trajectory_ids)]
    np.testing.assert_allclose(result.similarity, expected, atol=1e-6)
    assert result.log["encoder"] == "traj-tower*0.25+desc-text*0.75"
    assert result.log["config"]["weights"] == [0.25, 0.75]


def test_config_and_log_are_echoed():
    data = make_data(12)
    cfg = MiningConfig(potential_k=2, hard_k=3, easy_k=1, easy_max=0.0, random_k=1, seed=5)
    result = mine(cfg, **data)
    assert result.configs == (cfg,)
    assert MiningConfig.from_dict(result.log["config"]) == cfg
    assert result.log["config_hash"] == cfg.config_hash()
    assert set(result.log["strata_definition"]) >= set(STRATA_PRIORITY)
    assert sum(result.log["pairs_by_stratum"].values()) == len(result)
    assert sum(v["queries"] for v in result.log["splits"].values()) == data["query_ids"].size
    assert cfg.config_hash() != replace(cfg, seed=6).config_hash()


def test_a_split_without_trajectories_gives_its_queries_nothing():
    data = make_data(13)
    data["query_splits"] = data["query_splits"].astype("<U16")
    data["query_splits"][:5] = "holdout"
    result = mine(MiningConfig(), **data)
    assert not set(result.query_ids.tolist()) & set(data["query_ids"][:5].tolist())
    assert result.log["splits"]["holdout"] == {"queries": 5, "trajectories": 0, "videos": 0}


@pytest.mark.parametrize("change, message", [
    (lambda d: d["query_emb"].__setitem__((0, 0), np.nan), "NaN"),
    (lambda d: d["traj_emb"].__setitem__(3, d["traj_emb"][3] * 1.1), "norm"),
    (lambda d: d.__setitem__("traj_emb", unit(d["traj_emb"][:, :5])), "d="),
    (lambda d: d.__setitem__("query_videos", d["query_videos"][:-1]), "query_videos"),
    (lambda d: d.__setitem__("traj_splits", d["traj_splits"][:-1]), "traj_splits"),
    (lambda d: d.__setitem__("traj_ids", np.zeros_like(d["traj_ids"])), "duplicates"),
    (lambda d: d.__setitem__("query_ids", -d["query_ids"]), "non-negative"),
    (lambda d: d.__setitem__("query_ids", d["query_ids"].astype(float)), "integers"),
    (lambda d: d.__setitem__("query_emb", [d["query_emb"], d["query_emb"]]), "spaces"),
    (lambda d: d.__setitem__("known_pairs", np.zeros((3, 3), int)), "known_pairs"),
    (lambda d: d.__setitem__("traj_emb", d["traj_emb"][None]), "shape"),
])
def test_bad_input_is_refused(change, message):
    data = make_data(14, n_traj=60, n_query=10)
    data = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in data.items()}
    change(data)
    with pytest.raises(ValueError, match=message):
        mine(MiningConfig(), **data)
    with pytest.raises(ValueError, match=message):
        mine_bruteforce(MiningConfig(), **data)


@pytest.mark.parametrize("kwargs, message", [
    ({"weights": (0.5, 0.6), "encoders": ("a", "b")}, "sum to 1"),
    ({"weights": (1.0,), "encoders": ("a", "b")}, "weights"),
    ({"encoders": ()}, "encoders"),
    ({"easy_k": 3, "easy_max": None}, "easy_max"),
    ({"potential_min": 0.2, "hard_min": 0.4}, "hard_min"),
    ({"hard_min": 0.1, "easy_max": 0.3}, "easy_max"),
    ({"potential_k": -1}, "potential_k"),
    ({"seed": 1.5}, "seed"),
    ({"potential_min": 1.5}, "potential_min"),
])
def test_bad_config_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MiningConfig(**kwargs)


def test_bad_chunk_is_refused():
    with pytest.raises(ValueError, match="chunk"):
        mine(MiningConfig(), **make_data(15, n_traj=30, n_query=5), chunk=0)

"""Structured mining strata (Appendix E.3.2): the encoded compatibility against the plain reading
through ``predicate_support``, and the FAISS miner's structured strata against the brute-force
reference, on random predicates and facts."""
from __future__ import annotations

import numpy as np
import pytest

from models.curation.compatibility import (
    COMPATIBILITY,
    COMPATIBLE,
    DEFINITE_CONFLICT,
    POSSIBLE_CONFLICT,
    Compatibility,
    classify_pair,
)
from models.curation.mining import STRATA_PRIORITY, MiningConfig
from models.curation.mining_search import mine, mine_bruteforce
from models.facts import Fact
from tests.models.test_mining import make_data, ranked_rows

COLOURS = ("red", "blue", "green", "red and white", "striped")
CATEGORIES = ("person", "bicycle")


def random_facts(rng: np.random.Generator) -> list[Fact]:
    """A trajectory's approved facts: whole or interval-scoped colours (some multi-coloured or
    changing), a category, sometimes unknown values and a walking direction; often nothing."""
    facts: list[Fact] = []
    if rng.random() < 0.15:
        return facts
    for name in ("upper_colour", "lower_colour"):
        for _ in range(rng.integers(0, 3)):
            whole = rng.random() < 0.7
            start = 0 if whole else int(rng.integers(0, 50))
            facts.append(Fact(id=f"f{len(facts)}", kind="attribute", name=name, value=str(rng.choice(COLOURS)),
                              start_frame=start, end_frame=start + 50, scope="whole" if whole else "interval",
                              known=bool(rng.random() < 0.9)))
    if rng.random() < 0.7:
        facts.append(Fact(id=f"f{len(facts)}", kind="attribute", name="category",
                          value=str(rng.choice(CATEGORIES)), start_frame=0, end_frame=100))
    if rng.random() < 0.5:
        facts.append(Fact(id=f"f{len(facts)}", kind="event", name="walks", value=str(rng.choice(["left", "right"])),
                          start_frame=10, end_frame=40, scope="interval"))
    return facts


def random_predicates(rng: np.random.Generator) -> list[dict]:
    pool = [("upper_colour", c) for c in COLOURS[:3]] + [("lower_colour", c) for c in COLOURS[:3]] + \
        [("category", c) for c in CATEGORIES] + [("walks", "left"), ("walks", "right")]
    picks = rng.choice(len(pool), size=int(rng.integers(1, 4)), replace=False)
    return [{"name": pool[i][0], "value": pool[i][1], "fact_ids": ["f0"]} for i in picks]


def structure_for(data: dict, seed: int) -> Compatibility:
    rng = np.random.default_rng(seed)
    return Compatibility([random_predicates(rng) for _ in data["query_ids"]],
                         [random_facts(rng) for _ in data["traj_ids"]])


def test_the_encoded_classes_are_the_plain_reading_of_predicate_support():
    rng = np.random.default_rng(0)
    preds = [random_predicates(rng) for _ in range(60)]
    facts = [random_facts(rng) for _ in range(90)]
    comp = Compatibility(preds, facts)
    qpos, tpos = np.meshgrid(np.arange(60), np.arange(90), indexing="ij")
    fast = comp.classify(qpos, tpos)                                            # [60, 90]
    slow = np.array([[classify_pair(preds[q], facts[t]) for t in range(90)] for q in range(60)])
    np.testing.assert_array_equal(fast, slow)
    assert set(np.unique(slow)) == {COMPATIBLE, POSSIBLE_CONFLICT, DEFINITE_CONFLICT}   # every class occurs


def test_classes_follow_the_appendix_e_rules():
    red = [{"name": "upper_colour", "value": "red", "fact_ids": ["f0"]}]

    def top(value, scope="whole", known=True):
        return Fact(id="f0", kind="attribute", name="upper_colour", value=value, start_frame=0, end_frame=50,
                    scope=scope, known=known)

    assert classify_pair(red, [top("blue")]) == DEFINITE_CONFLICT          # a definite colour conflict
    assert classify_pair(red, [top("red")]) == COMPATIBLE
    assert classify_pair(red, []) == COMPATIBLE                            # an omission never conflicts
    assert classify_pair(red, [top("blue", known=False)]) == COMPATIBLE
    assert classify_pair(red, [top("blue and white")]) == POSSIBLE_CONFLICT   # multi-coloured: possible only
    changing = [top("blue"), Fact(id="f1", kind="attribute", name="upper_colour", value="green", start_frame=50,
                                  end_frame=90)]
    assert classify_pair(red, changing) == POSSIBLE_CONFLICT                # a changing colour: possible only
    assert classify_pair(red, [top("blue", scope="interval")]) == POSSIBLE_CONFLICT
    comp = Compatibility([red], [[top("blue")], [top("red")], [], [top("blue and white")]])
    assert comp.classify(0, np.arange(4)).tolist() == [DEFINITE_CONFLICT, COMPATIBLE, COMPATIBLE, POSSIBLE_CONFLICT]
    assert comp.explain(0, 0) == {"compatibility": "definite_conflict", "possible": [],
                                  "definite": [{"name": "upper_colour", "value": "red", "facts": ["blue"]}]}


CONFIGS = [
    MiningConfig(potential_k=4, hard_k=6, easy_k=3, easy_max=None, random_k=2, structured=True),
    MiningConfig(potential_k=3, potential_min=0.4, hard_k=5, hard_min=0.2, easy_k=3, easy_max=0.1, random_k=0,
                 structured=True),
    MiningConfig(potential_k=0, hard_k=7, easy_k=0, easy_max=None, random_k=0, structured=True),
]


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_structured_strata_match_the_bruteforce_reference(cfg, seed):
    data = make_data(seed)
    structure = structure_for(data, seed)
    fast = mine(cfg, **data, chunk=17, structure=structure)
    slow = mine_bruteforce(cfg, **data, structure=structure)
    assert ranked_rows(fast) == ranked_rows(slow)
    assert len(ranked_rows(fast)) > 0
    keep = np.isin(fast.prov_stratum, (0, 1))
    order = np.lexsort((fast.prov_stratum[keep], fast.trajectory_ids[fast.prov_pair[keep]],
                        fast.query_ids[fast.prov_pair[keep]]))
    slow_order = np.lexsort((slow.prov_stratum, slow.trajectory_ids[slow.prov_pair], slow.query_ids[slow.prov_pair]))
    np.testing.assert_array_equal(fast.prov_compat[keep][order], slow.prov_compat[slow_order])


def test_strata_respect_the_structure_and_the_budgets():
    data = make_data(3)
    structure = structure_for(data, 3)
    cfg = CONFIGS[0]
    result = mine(cfg, **data, structure=structure)
    q_pos = {int(q): i for i, q in enumerate(data["query_ids"])}
    t_pos = {int(t): i for i, t in enumerate(data["traj_ids"])}
    classes = structure.classify([q_pos[int(q)] for q in result.query_ids[result.prov_pair]],
                                 [t_pos[int(t)] for t in result.trajectory_ids[result.prov_pair]])
    np.testing.assert_array_equal(classes, result.prov_compat)                 # recorded per provenance row
    wanted = {"potential_match": COMPATIBLE, "hard_negative": POSSIBLE_CONFLICT, "easy_negative": DEFINITE_CONFLICT}
    for stratum, cls in wanted.items():
        rows = result.prov_stratum == STRATA_PRIORITY.index(stratum)
        assert rows.any(), stratum
        assert (result.prov_compat[rows] == cls).all(), stratum
    # a definite conflict is never a potential match, whatever else it was mined as
    assert not ((result.stratum == 0) & (result.prov_compat[np.searchsorted(result.prov_pair, np.arange(len(result)))]
                                         == DEFINITE_CONFLICT)).any()
    for stratum, budget in (("potential_match", 4), ("hard_negative", 6), ("easy_negative", 3)):
        rows = result.prov_stratum == STRATA_PRIORITY.index(stratum)
        _, per_query = np.unique(result.query_ids[result.prov_pair[rows]], return_counts=True)
        assert per_query.max() <= budget, stratum
    pair = next(p for p in result.pairs() if p.stratum == "easy_negative")
    assert pair.provenance[0]["compatibility"] == "definite_conflict"
    assert set(COMPATIBILITY) >= {p["compatibility"] for p in pair.provenance}


def test_structured_config_and_structure_go_together():
    data = make_data(0, n_traj=50, n_query=5)
    with pytest.raises(ValueError, match="need a structure"):
        mine(CONFIGS[0], **data)
    with pytest.raises(ValueError, match="need a structure"):
        mine(MiningConfig(), **data, structure=structure_for(data, 0))
    with pytest.raises(ValueError, match="Compatibility of 5 queries"):
        mine(CONFIGS[0], **data, structure=Compatibility([[]], [[]]))
    with pytest.raises(ValueError, match="need easy_max"):
        MiningConfig(easy_k=3, easy_max=None)


def test_many_distinct_values_read_the_same_as_few():
    """Past 512 distinct values the known values are looked up in sorted keys instead of bit sets."""
    rng = np.random.default_rng(5)
    colours = [f"colour {i}" for i in range(1100)]
    preds = [[{"name": "upper_colour", "value": str(rng.choice(colours[:20]))}] for _ in range(40)]
    facts = [[Fact(id="f0", kind="attribute", name="upper_colour", value=colours[i] if i % 4 else colours[i % 20],
                   start_frame=0, end_frame=10, scope=str(rng.choice(["whole", "interval"])))] for i in range(1100)]
    comp = Compatibility(preds, facts)
    assert comp._bits is None                                                    # the sorted-key path
    qpos, tpos = np.meshgrid(np.arange(40), np.arange(1100), indexing="ij")
    slow = np.array([[classify_pair(preds[q], facts[t]) for t in range(1100)] for q in range(40)])
    assert set(np.unique(slow)) == {COMPATIBLE, POSSIBLE_CONFLICT, DEFINITE_CONFLICT}
    np.testing.assert_array_equal(comp.classify(qpos, tpos), slow)

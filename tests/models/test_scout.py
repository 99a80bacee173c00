"""SCOUT predictor, loss, class-balanced batches and ScoutITM on small synthetic data."""
from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from models.retrievers.scout.itm import (
    ScoutITMConfig,
    build_scout_itm,
    itm_pairs,
    mine_hard_negatives,
)
from models.retrievers.scout.model import (
    ScoutConfig,
    build_scout,
    make_optimizer,
    pad_tokens,
    retrieval_scores,
    warmup_cosine,
)
from models.retrievers.scout.sampler import ClassBalancedBatchSampler
from models.training.losses import info_nce

SMALL = dict(d_in=12, d_text=10, d_model=32, n_layers=2, n_heads=4, ff_mult=2, n_prompts=4, max_tokens=8)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    torch.manual_seed(0)


def small_model(**overrides):
    return build_scout({**SMALL, **overrides}).eval()


def test_outputs_are_unit_vectors_in_the_text_space():
    model = small_model()
    tokens, mask = pad_tokens([torch.randn(n, 12) for n in (1, 5, 8, 3)])
    out = model(tokens, mask)
    assert out.shape == (4, 10)
    assert torch.allclose(out.norm(dim=1), torch.ones(4), atol=1e-6)
    text = torch.randn(4, 10) * 7
    assert torch.allclose(model.encode_queries(text).norm(dim=1), torch.ones(4), atol=1e-6)
    assert retrieval_scores(model.encode_queries(text), out).shape == (4, 4)


@pytest.mark.parametrize("causal", [True, False])
def test_padding_does_not_change_a_prediction(causal):
    model = small_model(causal=causal)
    track = torch.randn(3, 12)
    alone = model(track.unsqueeze(0))
    tokens, mask = pad_tokens([track, torch.randn(8, 12)])
    padded = model(tokens, mask)[0:1]
    assert torch.allclose(alone, padded, atol=1e-5)
    # the mask matters: the same padded batch without it is another input
    assert not torch.allclose(model(tokens)[0:1], alone, atol=1e-3)


def test_prompt_readout_concatenates_the_k_prompt_slots():
    model = small_model()
    tokens, mask = pad_tokens([torch.randn(n, 12) for n in (2, 6)])
    slots = model.prompt_outputs(tokens, mask)
    assert slots.shape == (2, 4, 32)
    assert model.readout.in_features == 4 * 32
    expected = F.normalize(slots.flatten(1) @ model.readout.weight.T + model.readout.bias, dim=-1)
    assert torch.allclose(model(tokens, mask), expected, atol=1e-6)
    # each prompt keeps its own slot: swapping two slots changes the prediction (a mean would not)
    swapped = slots[:, [1, 0, 2, 3]]
    assert not torch.allclose(model.readout(swapped.flatten(1)), model.readout(slots.flatten(1)), atol=1e-4)


def test_info_nce_of_the_model_matches_a_hand_computation():
    # a 2-pair batch written out: s = [[0.6, 0.8], [0.0, 1.0]] after normalisation, tau = 0.5
    pred = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    target = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    tau = 0.5
    s = [[0.6, 0.8], [0.0, 1.0]]
    e = [[math.exp(v / tau) for v in row] for row in s]
    i2t = math.log(e[0][0] / (e[0][0] + e[0][1])) + math.log(e[1][1] / (e[1][0] + e[1][1]))
    t2i = math.log(e[0][0] / (e[0][0] + e[1][0])) + math.log(e[1][1] / (e[0][1] + e[1][1]))
    expected = -(i2t + t2i) / (2 * 2)
    assert float(info_nce(pred, target, tau)) == pytest.approx(expected, rel=1e-6)
    # and the model's training loss is that loss on its predictions and the normalised captions
    model = small_model()
    tokens, mask = pad_tokens([torch.randn(n, 12) for n in (2, 6, 4)])
    text = torch.randn(3, 10)
    got = model.training_loss(tokens, mask, text)["loss"].detach()
    want = info_nce(model(tokens, mask), F.normalize(text, dim=-1), 0.07).detach()
    assert float(got) == pytest.approx(float(want), rel=1e-6)


def test_every_parameter_gets_a_gradient():
    model = build_scout(SMALL).train()
    tokens, mask = pad_tokens([torch.randn(n, 12) for n in (3, 5, 2, 5)])
    model.training_loss(tokens, mask, torch.randn(4, 10))["loss"].backward()
    for name, p in model.named_parameters():
        grad = p.grad[:5] if name == "positions" else p.grad          # only 5 positions are used
        assert grad is not None and float(grad.abs().sum()) > 0, name
    assert float(model.positions.grad[5:].abs().sum()) == 0.0


def test_class_balanced_batches_give_every_class_an_equal_share():
    labels = np.array([0] * 90 + [1] * 10)                             # 9:1, like normal:anomalous
    sampler = ClassBalancedBatchSampler(labels, batch_size=8, n_batches=40, seed=1)
    batches = list(sampler)
    assert len(batches) == 40
    for batch in batches:
        assert len(batch) == 8 and len(set(batch)) == 8
        assert Counter(labels[batch].tolist()) == {0: 4, 1: 4}
    # the small class is cycled through completely before an item repeats
    draws = [i for b in batches[:3] for i in b if labels[i] == 1]             # 12 draws, 10 items
    assert set(draws) == set(range(90, 100))
    assert [b for b in ClassBalancedBatchSampler(labels, 8, 40, seed=1)] == batches
    sampler.set_epoch(1)
    assert list(sampler) != batches

    # three classes, 8 seats: 3/3/2 with the extra seats rotating, equal over three batches
    labels3 = np.array(["walk"] * 30 + ["stand"] * 5 + ["run"] * 12)
    sampler3 = ClassBalancedBatchSampler(labels3, batch_size=8, n_batches=30, seed=2)
    totals = Counter()
    for batch in sampler3:
        counts = Counter(labels3[batch].tolist())
        assert sorted(counts.values()) == [2, 3, 3] and len(set(batch)) == 8
        totals.update(counts)
    assert totals == {"walk": 80, "stand": 80, "run": 80}


def test_sampler_refuses_a_class_smaller_than_its_share():
    with pytest.raises(ValueError, match="fewer items than their per-batch share"):
        ClassBalancedBatchSampler([0] * 20 + [1] * 3, batch_size=8)
    with pytest.raises(ValueError, match="smaller than the number of classes"):
        ClassBalancedBatchSampler([0, 1, 2], batch_size=2)


def test_config_is_plain_data_with_paper_defaults():
    config = ScoutConfig()
    assert (config.n_layers, config.n_prompts, config.tau, config.d_text) == (24, 64, 0.07, 768)
    assert (config.lr, config.betas, config.warmup_steps, config.total_steps) == (2e-5, (0.9, 0.95), 600, 6000)
    assert ScoutConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(ValueError, match="unknown ScoutConfig keys"):
        ScoutConfig.from_dict({"n_prompt": 3})
    with pytest.raises(ValueError, match="divisible"):
        ScoutConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="more than the model's 8"):
        small_model()(torch.randn(1, 9, 12))
    with pytest.raises(ValueError, match="width 11"):
        small_model()(torch.randn(1, 3, 11))


def test_warmup_cosine_schedule():
    assert warmup_cosine(0, 600, 6000) == pytest.approx(1 / 600)
    assert warmup_cosine(599, 600, 6000) == 1.0
    assert warmup_cosine(600, 600, 6000) == 1.0
    assert warmup_cosine(3300, 600, 6000) == pytest.approx(0.5)
    assert warmup_cosine(6000, 600, 6000) == 0.0
    optimizer, schedule = make_optimizer(small_model(), ScoutConfig(**SMALL, warmup_steps=2, total_steps=10))
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2e-5 / 2)
    optimizer.step()
    schedule.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2e-5)


def synthetic_pairs(n: int, seed: int, d_in=12, d_text=10, d_latent=6):
    """Tracks whose tokens are noisy linear images of a latent, captions another image of it."""
    maps = torch.Generator().manual_seed(123)
    to_tokens = torch.randn(d_latent, d_in, generator=maps)
    to_text = torch.randn(d_latent, d_text, generator=maps)
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d_latent, generator=g)
    lengths = torch.randint(2, 8, (n,), generator=g)
    tracks = [z[i] @ to_tokens + 0.3 * torch.randn(int(lengths[i]), d_in, generator=g) for i in range(n)]
    text = z @ to_text
    labels = (z[:, 0] > 0.8).long()                                     # a rarer "anomalous" class
    return tracks, text, labels


def test_tiny_training_run_retrieves_well_above_chance():
    torch.manual_seed(0)
    train_tracks, train_text, train_labels = synthetic_pairs(256, seed=1)
    test_tracks, test_text, _ = synthetic_pairs(64, seed=2)
    model = build_scout({**SMALL, "tau": 0.1}).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sampler = ClassBalancedBatchSampler(train_labels, batch_size=32, n_batches=20, seed=0)
    for epoch in range(6):
        sampler.set_epoch(epoch)
        for batch in sampler:
            tokens, mask = pad_tokens([train_tracks[i] for i in batch])
            loss = model.training_loss(tokens, mask, train_text[batch])["loss"]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        gallery = model.encode_tracks(*pad_tokens(test_tracks))
        scores = retrieval_scores(model.encode_queries(test_text), gallery)        # [64, 64]
    r1 = float((scores.argmax(dim=1) == torch.arange(64)).float().mean())
    assert r1 > 0.5, f"R@1 {r1:.2f} against chance {1 / 64:.3f}"


# -- ScoutITM -------------------------------------------------------------------------------------
def test_hard_negative_mining_takes_the_top_scored_mismatches_only():
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.1, 0.5],
                           [0.1, 0.2, 0.3, 0.4, 0.5]])
    relevance = torch.tensor([[1, -1, 0, 0, 0],
                              [0, 1, -1, -1, -1]])
    idx, valid = mine_hard_negatives(scores, relevance, 2)
    assert idx[0].tolist() == [2, 4] and valid[0].tolist() == [True, True]
    assert idx[1, 0].item() == 0 and valid[1].tolist() == [True, False]    # one mismatch only
    q, i, label = itm_pairs(scores, relevance, 2)
    assert sorted(zip(q.tolist(), i.tolist(), label.tolist())) == [
        (0, 0, 1), (0, 2, 0), (0, 4, 0), (1, 0, 0), (1, 1, 1)]


def itm_data(n_per_combo: int, seed: int):
    """Tracks and queries with two attributes (a, b) in 0..3; the visual tokens and the text tokens
    carry each attribute in their own token, through different random codes."""
    codes = torch.Generator().manual_seed(7)
    vis_a, vis_b = torch.randn(4, 8, generator=codes), torch.randn(4, 8, generator=codes)
    txt_a, txt_b = torch.randn(4, 6, generator=codes), torch.randn(4, 6, generator=codes)
    g = torch.Generator().manual_seed(seed)
    ab = torch.tensor([(a, b) for a in range(4) for b in range(4)] * n_per_combo)
    noise = lambda *s: 0.3 * torch.randn(*s, generator=g)  # noqa: E731
    visual = torch.stack([vis_a[ab[:, 0]], vis_b[ab[:, 1]]], dim=1) + noise(len(ab), 2, 8)
    text = torch.stack([txt_a[ab[:, 0]], txt_b[ab[:, 1]]], dim=1) + noise(len(ab), 2, 6)
    relevance = (ab[:, None, :] == ab[None, :, :]).all(-1).long()            # [Q, N] 1 / 0
    retriever = (ab[:, None, 0] == ab[None, :, 0]).float() + 0.01 * torch.rand(len(ab), len(ab), generator=g)
    return visual, text, relevance, retriever


def test_scout_itm_learns_to_separate_mined_hard_negatives():
    torch.manual_seed(0)
    # given a retriever that sees attribute a only, its top mismatches share a and differ in b
    visual, text, relevance, retriever = itm_data(3, seed=1)
    q, i, label = itm_pairs(retriever, relevance, n_negatives=3)
    assert bool((label == 0).any())
    model = build_scout_itm(ScoutITMConfig(d_visual=8, d_text=6, d_model=32, n_layers=2, n_heads=4, ff_mult=2,
                                           max_visual_tokens=4, max_text_tokens=4)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(150):
        pick = torch.randint(0, len(label), (64,), generator=g)
        loss = model.training_loss(visual[i[pick]], None, text[q[pick]], None, label[pick])["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # then on fresh samples it ranks the match above the retriever's hard negatives
    model.eval()
    visual, text, relevance, retriever = itm_data(1, seed=2)
    hard, valid = mine_hard_negatives(retriever, relevance, 3)
    match = relevance.argmax(dim=1, keepdim=True)                             # [Q, 1]
    shortlist = torch.cat([match, hard], dim=1)                               # [Q, 4]
    probs = model.score_shortlist(visual, None, text, None, shortlist)        # [Q, 4]
    assert probs.shape == (16, 4) and bool(valid.all())
    auc = float((probs[:, :1] > probs[:, 1:]).float().mean())
    assert auc > 0.9, f"match above hard negative in {auc:.2f} of the pairs"
    retriever_auc = float((retriever.gather(1, match) > retriever.gather(1, hard)).float().mean())
    assert retriever_auc < 0.7                                               # the retriever alone cannot


def test_default_scout_itm_is_about_the_papers_size():
    n_params = sum(p.numel() for p in build_scout_itm().parameters())
    assert abs(n_params - 29.73e6) / 29.73e6 < 0.05, n_params


# -- the retriever of models.training.trainer -------------------------------------------------------------
def hand_batch(targets: list[int], matches: list[tuple[int, int]]):
    """A TrainBatch of groups (target, target, target, negative 99) with the given verified
    (query row, target row) matches across groups; every other cross-group pair is ⊥."""
    from models.training.batching import TrainBatch

    b = len(targets)
    records = [r for t in targets for r in ((t, 0), (t, 1), (t, 0), (99, 0))]
    relation = torch.full((b, 4 * b), -1, dtype=torch.int8)
    group = torch.full((b, 4 * b), -1, dtype=torch.int8)
    for i in range(b):
        relation[i, 4 * i: 4 * i + 4] = torch.tensor([1, 1, 1, 0])
        group[i, 4 * i: 4 * i + 4] = torch.tensor([1, 1, 1, 0])
    for i, j in matches:
        relation[i, 4 * j] = 1
    return TrainBatch(step=0, query_ids=list(range(b)), query_videos=[1] * b, records=records,
                      record_videos=[1] * (4 * b), group=group, relation=relation)


def test_contrastive_pairs_leave_out_false_in_batch_negatives():
    from models.retrievers.scout.data import contrastive_pairs

    # row 2 has row 0's target; row 3's query is a verified match of row 1's target
    batch = hand_batch([10, 11, 10, 12, 13], matches=[(3, 1)])
    assert contrastive_pairs(batch).tolist() == [True, True, False, False, True]
    # the other direction counts too: row 0's query matches row 4's target
    assert contrastive_pairs(hand_batch([10, 11, 12, 13, 14], matches=[(0, 4)])).tolist() == [True] * 4 + [False]
    assert contrastive_pairs(hand_batch([10, 11], matches=[])).tolist() == [True, True]


TINY_RETRIEVER = {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_prompts": 4}}


@pytest.fixture(scope="module")
def demo_train_split(tmp_path_factory):
    """Two rendered training videos of the demo benchmark and a feature cache folder."""
    from models.demo.benchmark import DemoBenchmarkConfig, build_split

    root = tmp_path_factory.mktemp("demo")
    snapshot = build_split(DemoBenchmarkConfig(videos={"train": 2}), "train", root,
                           {"video": 1, "track": 1, "query": 1})
    return snapshot, str(root / "cache")


@pytest.mark.slow
def test_scout_retriever_fits_a_batch_and_round_trips_through_the_trainer(demo_train_split, tmp_path):
    from models.retrievers.scout.data import contrastive_pairs
    from models.training.batching import BatchingConfig, TrainingPlan
    from models.training.evaluation import evaluate
    from models.training.trainer import StepContext, build_model, load_model, train

    snapshot, cache = demo_train_split
    model = build_model("scout", TINY_RETRIEVER)
    data = model.prepare(snapshot, None, cache_dir=cache)
    records = [(t.id, 0) for t in snapshot.tracks]
    assert model.encode_tracks(data, records).shape == (len(records), model.text_encoder.dim)
    # given one batch, the predictor fits its pairs
    batch = TrainingPlan(snapshot, BatchingConfig(noisy_gt=False), seed=0).batch(0, 8)
    kept = contrastive_pairs(batch)
    targets = [batch.records[batch.target_columns[i]][0] for i in range(8) if kept[i]]
    assert len(set(targets)) == len(targets) >= 2
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    first = None
    for step in range(30):
        out = model.training_loss(data, batch, StepContext(step=step))
        first = first if first is not None else float(out["loss"].detach())
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
    assert out["pairs"] == len(targets) and float(out["loss"].detach()) < 0.2 * first
    # through the trainer: trains, checkpoints, reloads the same weights, evaluates
    result = train(snapshot, "scout", {"steps": 3, "batch_size": 4, "checkpoint_every": 2, "device": "cpu",
                                       "cache_dir": cache, "eval_at_end": False,
                                       "batching": {"noisy_gt": False}, "model": TINY_RETRIEVER}, tmp_path / "run")
    assert result["status"] == "finished" and result["step"] == 3 and result["last"]["pairs"] >= 1
    loaded, meta = load_model(tmp_path / "run")
    again, _ = load_model(tmp_path / "run")
    assert meta["model_kind"] == "scout"
    with torch.no_grad():
        v1, v2 = loaded.encode_tracks(data, records), again.encode_tracks(data, records)
        fresh = build_model("scout", TINY_RETRIEVER).eval().encode_tracks(data, records)
    assert torch.equal(v1, v2) and not torch.allclose(v1, fresh)
    metrics = evaluate(loaded, snapshot, cache_dir=cache)
    assert metrics["t2traj"]["n_queries"] > 0 and 0.0 <= metrics["t2traj"]["R@1"] <= 100.0


def random_observations(model, batch):
    """Random frozen features for every record and query of ``batch``, in the retriever's shapes."""
    from models.retrievers.features import TextFeatures
    from models.retrievers.scout.data import ObservationData

    g = torch.Generator().manual_seed(1)
    keys = sorted(set(batch.records))
    d_in, n = model.predictor.config.d_in, model.predictor.config.max_tokens
    qids = sorted(set(batch.query_ids))
    enc = model.text_encoder
    text = TextFeatures(qids, [f"q{q}" for q in qids], torch.randn(len(qids), enc.dim, generator=g).numpy(),
                        torch.randn(len(qids), 5, enc.token_dim, generator=g).numpy(), np.ones((len(qids), 5), bool))
    return ObservationData(rows={k: i for i, k in enumerate(keys)}, tokens=torch.randn(len(keys), n, d_in, generator=g),
                           mask=torch.ones(len(keys), n, dtype=torch.bool), text=text,
                           query_video={q: 1 for q in qids}, query_predicates={q: [] for q in qids})


@pytest.fixture(scope="module")
def tiny_retriever():
    from models.training.trainer import build_model

    torch.manual_seed(0)
    return build_model("scout", {**TINY_RETRIEVER, "features": {"n_fast_max": 6}})


def test_without_gathering_each_rank_chooses_its_own_pairs(tiny_retriever):
    from models.retrievers.scout.data import contrastive_pairs
    from models.training.losses import info_nce
    from models.training.trainer import StepContext

    model = tiny_retriever
    # rank 1's groups (2, 3) repeat the targets of rank 0's: they conflict only with the other rank's
    batch = hand_batch([10, 11, 10, 11], matches=[])
    data = random_observations(model, batch)
    out = model.training_loss(data, batch, StepContext(step=0, rank=1, world_size=2, gather=False))
    assert out["pairs"] == 2 and out["dropped_pairs"] == 0
    assert contrastive_pairs(batch).tolist() == [True, True, False, False]
    assert contrastive_pairs(batch, slice(2, 4)).tolist() == [False, False, True, True]
    assert contrastive_pairs(hand_batch([10, 11, 10, 12], [(3, 2)]), slice(2, 4)).tolist() == [False, False, True, False]
    pred = model.encode_tracks(data, [(10, 0), (11, 0)])
    target = model.encode_queries(data, [2, 3])
    torch.testing.assert_close(out["loss"], info_nce(pred, target, model.predictor.config.tau))


def test_a_rank_without_pairs_returns_a_zero_loss_that_reaches_every_parameter(tiny_retriever):
    from models.training.trainer import StepContext

    model = tiny_retriever
    empty = hand_batch([], matches=[])                                   # no group left for this process
    out = model.training_loss(random_observations(model, hand_batch([10], [])), empty, StepContext(step=0))
    assert out["pairs"] == 0 and float(out["loss"].detach()) == 0.0
    model.zero_grad(set_to_none=True)
    out["loss"].backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and float(g.abs().sum()) == 0.0 for g in grads)


def test_the_trainer_takes_scouts_recipe_where_the_config_leaves_defaults(tiny_retriever):
    from models.training.trainer import TrainConfig, parameter_groups, resolve_config

    model = tiny_retriever
    c = model.predictor.config
    cfg, taken = resolve_config(TrainConfig(steps=1000), model)
    assert (cfg.lr, cfg.betas, cfg.warmup_steps) == (2e-5, (0.9, 0.95), 100)          # 600 of 6000: a tenth
    assert cfg.batching == {"noisy_gt": False} and taken["lr"] == c.lr
    # a value the caller set wins, field by field and batching key by batching key
    cfg, taken = resolve_config(TrainConfig.from_dict({"steps": 50, "lr": 1e-3, "batching": {"noisy_gt": True}}), model)
    assert (cfg.lr, cfg.betas, cfg.warmup_steps, cfg.batching) == (1e-3, (0.9, 0.95), 5, {"noisy_gt": True})
    assert "lr" not in taken and "batching" not in taken
    groups = parameter_groups(model, 0.01)
    no_decay = {id(p) for p in groups[1]["params"]}
    assert id(model.predictor.prompts) in no_decay and id(model.predictor.positions) in no_decay
    assert id(model.predictor.readout.weight) not in no_decay and id(model.predictor.readout.bias) in no_decay

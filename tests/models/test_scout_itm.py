"""ScoutITM trained after SCOUT's contrastive steps on identity-hard negatives and negatives mined by
the trained first stage: the mined pairs, the training through the trainer, the checkpoint and the
leak-free scoring method."""
from __future__ import annotations

import pytest
import torch

TINY_ITM_RETRIEVER = {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_prompts": 4},
                      "features": {"n_fast_max": 6},
                      "itm": {"enabled": True, "model": {"d_model": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2},
                              "n_negatives": 3, "steps": 200, "batch_size": 16, "lr": 3e-4}}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_mined_pairs_are_the_first_stages_top_verified_mismatches():
    from models.retrievers.scout.itm_training import mined_pairs

    scores = torch.tensor([[0.9, 0.8, 0.7, 0.1], [0.2, 0.9, 0.3, 0.8], [0.5, 0.5, 0.5, 0.5]])
    relevance = torch.tensor([[1, -1, 0, 0], [0, 1, 0, -1], [0, 0, 0, 0]])
    q, i, label = mined_pairs(scores, relevance, 10)                        # capped at the gallery
    pos = sorted(zip(q[label == 1].tolist(), i[label == 1].tolist()))
    neg = sorted(zip(q[label == 0].tolist(), i[label == 0].tolist()))
    assert pos == [(0, 0), (1, 1)]
    assert neg == [(0, 2), (0, 3), (1, 0), (1, 2)]                          # no unknown; query 2 has no match
    q, i, label = mined_pairs(scores, relevance, 1)
    assert sorted(zip(q[label == 0].tolist(), i[label == 0].tolist())) == [(0, 2), (1, 2)]


def test_itm_config_is_validated():
    from models.training.trainer import build_model

    with pytest.raises(ValueError, match="unknown"):
        build_model("scout", {"itm": {"enabled": True, "negatives": 3}})
    with pytest.raises(ValueError, match="follow from the encoders"):
        build_model("scout", {"itm": {"enabled": True, "model": {"d_visual": 8}}})
    assert build_model("scout", {"predictor": TINY_ITM_RETRIEVER["predictor"]}).itm is None


@pytest.fixture(scope="module")
def demo_train_split(tmp_path_factory):
    from models.demo.benchmark import DemoBenchmarkConfig, build_split

    root = tmp_path_factory.mktemp("demo")
    snapshot = build_split(DemoBenchmarkConfig(videos={"train": 2}), "train", root,
                           {"video": 1, "track": 1, "query": 1})
    return snapshot, str(root / "cache")


@pytest.mark.slow
def test_itm_trains_on_mined_negatives_joins_the_checkpoint_and_scores_shortlists(demo_train_split, tmp_path):
    from models.retrievers.scout.itm_training import mined_pairs
    from models.training.trainer import build_model, load_model, train

    snapshot, cache = demo_train_split
    config = {"steps": 4, "batch_size": 4, "checkpoint_every": 2, "device": "cpu", "cache_dir": cache,
              "eval_at_end": False, "model": TINY_ITM_RETRIEVER}
    result = train(snapshot, "scout", config, tmp_path / "run")
    itm = result["after_training"]["itm"]
    assert result["status"] == "finished" and itm["steps"] == 200
    assert itm["positives"] > 0 and itm["negatives"] > 0 and itm["last_loss"] < itm["first_loss"]
    assert itm["identity_negatives"] > 0 and itm["mined_negatives"] > 0                   # the paper's mix
    assert itm["identity_negatives"] + itm["mined_negatives"] == itm["negatives"]

    loaded, _ = load_model(tmp_path / "run")
    data = loaded.prepare(snapshot, None, cache_dir=cache)
    # the mined negatives are verified mismatches ranked high by the trained first stage
    matrix, qids, tids = snapshot.matrix(include_pseudo=False)
    records = [(t, 0) for t in tids]
    scores = loaded.first_stage_scores(data, qids, records)
    q, i, label = mined_pairs(scores, torch.from_numpy(matrix).long(), 3)
    assert int((label == 1).sum()) == itm["positives"]
    assert all(matrix[a, b] == 0 for a, b in zip(q[label == 0].tolist(), i[label == 0].tolist()))

    # the trained head separates matches from the mined negatives better than the head as built
    probs = loaded.itm_scores(data, qids, [records] * len(qids))                      # [Q, T]
    assert probs.shape == (len(qids), len(tids)) and ((probs >= 0) & (probs <= 1)).all()
    fresh = build_model("scout", TINY_ITM_RETRIEVER).eval()
    with pytest.raises(ValueError, match="never trained"):
        fresh.itm_scores(data, qids, [records] * len(qids))
    fresh.itm_trained.fill_(True)
    before = fresh.itm_scores(data, qids, [records] * len(qids))

    def margin(p):
        return float(p[q[label == 1], i[label == 1]].mean() - p[q[label == 0], i[label == 0]].mean())

    assert margin(probs) > margin(before) and margin(probs) > 0
    # a short list in its own order: the same probabilities, row by row
    short = [[records[j] for j in (2, 0)] for _ in qids]
    torch.testing.assert_close(loaded.itm_scores(data, qids, short), probs[:, [2, 0]])
    # reloading gives the same head; a resume does not train it again
    again, _ = load_model(tmp_path / "run")
    torch.testing.assert_close(again.itm_scores(data, qids, short), probs[:, [2, 0]])
    resumed = train(snapshot, "scout", config, tmp_path / "run")
    assert resumed["after_training"] == {"itm": "trained before this resume"}
    third, _ = load_model(tmp_path / "run")
    torch.testing.assert_close(third.itm_scores(data, qids, short), probs[:, [2, 0]])
    with pytest.raises(ValueError, match=r"\[Q\]\[M\]"):
        loaded.itm_scores(data, qids, short[:-1])

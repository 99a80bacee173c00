"""VTrajEmbed: greedy Slow pruning against a plain loop, the zero gate (fusion is a no-op at init),
zeroed padded slots, ``K_r = ⌈n_f/4⌉``, the permutation-invariant Slow resampler, shapes through
``prepare`` on a rendered video, and the causal-LM aggregator with LoRA on a tiny random-weight
model saved and reloaded."""
from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.backends.encoders import EncoderConfigError, packaged_minilm_path
from models.retrievers.vtrajembed.model import (
    AttentionPool,
    VTrajEmbed,
    VTrajEmbedConfig,
    greedy_prune,
)
from models.training.snapshot import (
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)
from models.training.trainer import trained_state

torch.set_num_threads(1)
SMALL = {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "agg_layers": 1, "embed_dim": 16,
         "geo_hidden": 16, "heads": 2, "agg_heads": 2, "dropout": 0.0, "features": {"n_fast_max": 8}}


def prune_loop(g: np.ndarray, valid: np.ndarray, tau: float) -> list[bool]:
    """The paper's rule, one frame at a time."""
    kept: list[int] = []
    for j in range(len(g)):
        if valid[j] and all(float(g[j] @ g[i]) < tau for i in kept):
            kept.append(j)
    return [j in kept for j in range(len(g))]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), s=st.integers(1, 6), tau=st.floats(-0.5, 1.0))
def test_greedy_prune_equals_the_loop(seed, s, tau):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(1, 3))
    g = base + rng.normal(scale=rng.uniform(0.05, 1.5), size=(s, 3))            # some near-duplicates
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    valid = rng.random(s) < 0.8
    keep = greedy_prune(torch.tensor(g[None], dtype=torch.float32), torch.tensor(valid[None]), tau)
    assert keep[0].tolist() == prune_loop(g.astype(np.float32), valid, tau)


def test_greedy_prune_keeps_representatives():
    # f1 is a near-copy of f0 (dropped); f2 is close to f1 but not to f0: f1 is no representative, so f2 stays
    angles = np.radians([0.0, 15.0, 30.0, 31.0])
    g = torch.tensor(np.stack([np.cos(angles), np.sin(angles)], axis=1)[None], dtype=torch.float32)
    keep = greedy_prune(g, torch.ones(1, 4, dtype=torch.bool), tau=math.cos(math.radians(20)))
    assert keep[0].tolist() == [True, False, True, False]
    # an invalid first frame: the first valid one is kept and now covers both later frames
    keep = greedy_prune(g, torch.tensor([[False, True, True, True]]), tau=math.cos(math.radians(20)))
    assert keep[0].tolist() == [False, True, False, False]
    with pytest.raises(ValueError):
        greedy_prune(g[0], torch.ones(4, dtype=torch.bool), 0.9)


@pytest.fixture(scope="module")
def model() -> VTrajEmbed:
    torch.manual_seed(0)
    return VTrajEmbed(SMALL).eval()


def inputs(model: VTrajEmbed, n_obs: list[int], seed: int = 0) -> dict:
    """Random packed features for len(n_obs) records with that many Fast observations each."""
    g = torch.Generator().manual_seed(seed)
    p, n, d_a = len(n_obs), model.n_max, model.d_fast
    valid = torch.arange(n)[None, :] < torch.tensor(n_obs)[:, None]                  # [P, N]
    s = 4
    glob = torch.nn.functional.normalize(torch.randn(p, s, d_a, generator=g), dim=-1)
    pos = torch.stack([torch.tensor([min(i * 2, k - 1) for i in range(s)]) for k in n_obs])
    return {"appearance": torch.rand(p, n, d_a, generator=g) * valid[..., None],
            "geometry": torch.rand(p, n, 8, generator=g) * valid[..., None], "obs_valid": valid,
            "slow_positions": pos, "slow_valid": torch.ones(p, s, dtype=torch.bool), "context_global": glob,
            "context_tokens": torch.randn(p, s, 16, d_a, generator=g), "context_mask": torch.ones(p, s, 16, dtype=torch.bool)}


def test_fusion_is_a_no_op_at_init_and_the_gate_learns_first(model):
    assert float(model.alpha.detach()) == 0.0
    x = inputs(model, [8, 5, 2])
    other = dict(x, context_tokens=torch.randn_like(x["context_tokens"]),
                 context_global=torch.nn.functional.normalize(torch.randn_like(x["context_global"]), dim=-1))
    with torch.no_grad():
        assert torch.equal(model.forward_tracks(**x), model.forward_tracks(**other))
    # at α = 0 the Slow residual's parameters get no gradient; the gate does
    model.zero_grad()
    model.forward_tracks(**x).sum().backward()
    assert float(model.slow_proj.weight.grad.abs().sum()) == 0.0
    assert float(model.slow_query.weight.grad.abs().sum()) == 0.0
    assert float(model.alpha.grad.abs()) > 0
    model.zero_grad()
    with torch.no_grad():
        model.alpha.fill_(0.5)
        try:
            assert not torch.allclose(model.forward_tracks(**x), model.forward_tracks(**other))
        finally:
            model.alpha.fill_(0.0)


def test_blocks_padding_and_shapes(model):
    assert model.k_max == 2 and model.n_max == 8
    for n in range(1, 9):
        x = inputs(model, [n])
        z, slot_valid = model.fuse(**x)
        assert int(slot_valid.sum()) == math.ceil(n / 4)                         # K_r = ⌈n_f / 4⌉
        assert z.shape == (1, 2, 32)
        assert torch.all(z[0, int(slot_valid.sum()):] == 0)                       # padded slots are zero
    x = inputs(model, [3, 8])
    garbage = dict(x, appearance=x["appearance"] + 5.0 * (~x["obs_valid"])[..., None],
                   geometry=x["geometry"] - 3.0 * (~x["obs_valid"])[..., None])
    with torch.no_grad():
        v, v2 = model.forward_tracks(**x), model.forward_tracks(**garbage)
    torch.testing.assert_close(v, v2, rtol=1e-5, atol=1e-6)                       # padding never leaks in
    assert v.shape == (2, 16)
    torch.testing.assert_close(v.norm(dim=1), torch.ones(2))


def test_slow_resampler_is_permutation_invariant(model):
    pool = AttentionPool(12, 8, 2, 0.0).eval()
    x = torch.randn(3, 4, 12)
    valid = torch.tensor([[True, True, True, False], [True, False, True, True], [True, True, True, True]])
    perm = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        torch.testing.assert_close(pool(x, valid), pool(x[:, perm], valid[:, perm]), rtol=1e-5, atol=1e-6)
    # end to end: with the gate open and no pruning, the order of the Slow frames does not matter
    x = inputs(model, [8])
    with torch.no_grad():
        model.alpha.fill_(1.0)
        try:
            permuted = dict(x, slow_positions=x["slow_positions"][:, perm], context_global=x["context_global"][:, perm],
                            context_tokens=x["context_tokens"][:, perm])
            torch.testing.assert_close(model.forward_tracks(**x), model.forward_tracks(**permuted), rtol=1e-5, atol=1e-6)
        finally:
            model.alpha.fill_(0.0)


def test_prepare_encode_and_score_on_a_rendered_video(model, rendered_small, tmp_path):
    gt = rendered_small.gt
    video = SnapshotVideo(1, str(rendered_small.path), gt.width, gt.height, gt.fps, gt.n_frames)
    tracks = [SnapshotTrack(10 + p.id, 1, p.frames(), p.boxes_array()[p.frames()]) for p in gt.people]
    queries = [SnapshotQuery(1, 1, "a person in a red top"), SnapshotQuery(2, 1, "someone in yellow walking left")]
    snap = RelationSnapshotData("test", [video], tracks, queries, [])
    t0 = tracks[0]
    data = model.prepare(snap, {(t0.id, 1): (t0.frames[:5], t0.boxes[:5])}, cache_dir=str(tmp_path))
    assert set(data.rows) == {(t.id, 0) for t in tracks} | {(t0.id, 1)}
    assert data.appearance.shape == (len(tracks) + 1, 8, model.d_fast)
    assert int(data.obs_valid[data.rows[(t0.id, 1)]].sum()) == 5
    with torch.no_grad():
        v = model.encode_tracks(data, [(t.id, 0) for t in reversed(tracks)] + [(t0.id, 1)])
        q = model.encode_queries(data, [2, 1])
        v_single = model.encode_tracks(data, [(tracks[-1].id, 0)])
    assert v.shape == (len(tracks) + 1, 16) and q.shape == (2, 16)
    torch.testing.assert_close(v[:1], v_single, rtol=1e-5, atol=1e-6)                 # row order kept
    torch.testing.assert_close(model.score(q, v), 20.0 * q @ v.T)                     # exp(ℓ) = 20 at init
    assert float(model.logit_scale().detach()) == pytest.approx(20.0)
    with pytest.raises(KeyError, match="not prepared"):
        model.encode_tracks(data, [(999, 0)])


def test_config_is_checked():
    with pytest.raises(ValueError, match="unknown key"):
        VTrajEmbedConfig.from_dict({"dmodel": 3})
    with pytest.raises(ValueError, match="aggregator"):
        VTrajEmbedConfig(aggregator="rnn")
    with pytest.raises(ValueError, match="both be 0"):
        VTrajEmbedConfig(lambda_g=0.0, lambda_bi=0.0)
    with pytest.raises(ValueError, match="multiple of heads"):
        VTrajEmbedConfig(d_model=30, heads=4)
    assert VTrajEmbedConfig().as_dict()["logit_scale_init"] == pytest.approx(math.log(20))


# -- the causal-LM aggregator with LoRA -------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("lm")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=30522, hidden_size=16, intermediate_size=32, num_hidden_layers=10,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=101, eos_token_id=102, pad_token_id=0)
    LlamaForCausalLM(config).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(packaged_minilm_path() + "/" + name, folder / name)
    return folder


def test_causal_lm_with_lora_on_the_last_eight_layers(tiny_lm, tmp_path):
    torch.manual_seed(0)
    cfg = {**SMALL, "aggregator": "hf_lm", "lm_path": str(tiny_lm)}
    model = VTrajEmbed(cfg)
    assert model.text_encoder is None                                # the LM reads the query itself
    lora = {n for n, p in model.named_parameters() if "lora_" in n}
    layers = sorted({int(n.split("layers.")[1].split(".")[0]) for n in lora})
    assert layers == list(range(2, 10))                              # the last eight of ten
    assert {n.split(".")[-4] for n in lora} == {"q_proj", "v_proj"}      # ...q_proj.lora_A.default.weight
    assert all(p.requires_grad for n, p in model.named_parameters() if "lora_" in n)
    frozen = [n for n, p in model.named_parameters() if n.startswith("aggregator.") and "lora_" not in n]
    assert frozen and not any(dict(model.named_parameters())[n].requires_grad for n in frozen)
    peft_cfg = model.aggregator.lm.peft_config["default"]
    assert (peft_cfg.r, peft_cfg.lora_alpha, peft_cfg.lora_dropout) == (8, 16, 0.05)
    state = trained_state(model)
    assert any("lora_B" in k for k in state) and not any(k in state for k in frozen)

    model.eval()
    with torch.no_grad():
        both = model.forward_texts_lm(["a person", "someone in a red shirt walking to the left"])
        alone = model.forward_texts_lm(["a person"])
    assert both.shape == (2, 16)
    torch.testing.assert_close(both[:1], alone, rtol=1e-4, atol=1e-5)     # left padding changes nothing
    x = inputs(model, [8, 3])
    with torch.no_grad():
        v = model.forward_tracks(**x)
    assert v.shape == (2, 16)
    torch.testing.assert_close(v.norm(dim=1), torch.ones(2))

    model.train()
    loss = (model.forward_texts_lm(["a person", "someone"]) @ model.forward_tracks(**x).T).sum()
    loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if "lora_B" in n]
    assert any(g is not None and float(g.abs().sum()) > 0 for g in grads)
    assert all(p.grad is None for n, p in model.named_parameters() if n in frozen)

    with pytest.raises(EncoderConfigError, match="not found"):
        VTrajEmbed({**cfg, "lm_path": str(tmp_path / "missing")})


@pytest.fixture(scope="module")
def tiny_lm_bf16(tiny_lm, tmp_path_factory):
    """The tiny causal LM saved in bfloat16 (config.json then says dtype bfloat16)."""
    from transformers import LlamaForCausalLM

    folder = tmp_path_factory.mktemp("lm_bf16")
    LlamaForCausalLM.from_pretrained(tiny_lm, dtype=torch.float32).to(torch.bfloat16).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(tiny_lm / name, folder / name)
    return folder


@pytest.mark.parametrize("lm_dtype", [None, "bfloat16"])
def test_causal_lm_saved_in_bfloat16_meets_float32_modules(tiny_lm_bf16, lm_dtype):
    torch.manual_seed(0)
    cfg = {**SMALL, "aggregator": "hf_lm", "lm_path": str(tiny_lm_bf16)}
    model = VTrajEmbed(cfg if lm_dtype is None else {**cfg, "lm_dtype": lm_dtype})   # default: float32
    lm_dtype = lm_dtype or "float32"
    frozen = [p for n, p in model.named_parameters() if n.startswith("aggregator.") and "lora_" not in n]
    assert {p.dtype for p in frozen} == {getattr(torch, lm_dtype)}                 # loaded as asked, not as saved
    assert {p.dtype for p in model.parameters() if p.requires_grad} == {torch.float32}  # LoRA, slots, readouts
    x = inputs(model, [8, 3])
    q = model.forward_texts_lm(["a person", "someone in a red shirt walking to the left"])
    v = model.forward_tracks(**x)
    assert q.dtype == v.dtype == torch.float32 and q.shape == v.shape == (2, 16)
    torch.testing.assert_close(v.norm(dim=1), torch.ones(2))
    (q @ v.T).sum().backward()
    assert any(float(p.grad.abs().sum()) > 0 for n, p in model.named_parameters() if "lora_B" in n)
    with pytest.raises(ValueError, match="lm_dtype"):
        VTrajEmbedConfig(lm_dtype="int8")

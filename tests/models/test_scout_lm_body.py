"""SCOUT's predictor body initialised from a local Hugging Face model (SCOUT 3.2: a decoder
initialised from Qwen3.5-0.8B), with tiny random-weight causal LM and encoder configs saved here
with ``save_pretrained`` and loaded back; a missing or corrupt folder is refused clearly."""
from __future__ import annotations

import json

import pytest
import torch

from models.retrievers.scout.model import ScoutConfig, ScoutPredictor, make_optimizer

SMALL = {"d_in": 8, "d_text": 12, "max_tokens": 6, "n_prompts": 3}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_decoder(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("decoder")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=500, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("encoder")
    torch.manual_seed(1)
    BertModel(BertConfig(vocab_size=300, hidden_size=20, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=40, max_position_embeddings=64)).save_pretrained(folder)
    return folder


def _saved(folder, name: str) -> torch.Tensor:
    from safetensors.torch import load_file

    state = load_file(str(folder / "model.safetensors"))
    return next(v for k, v in state.items() if k.endswith(name))


def test_the_body_starts_from_the_saved_decoder_and_is_trained(tiny_decoder):
    torch.manual_seed(0)
    predictor = ScoutPredictor(ScoutConfig(**SMALL, lm_path=str(tiny_decoder)))
    assert predictor.width == 16 and predictor.prompts.shape == (3, 16) and predictor.readout.in_features == 48
    lm = predictor.body.model
    # the saved weights, not a fresh initialisation
    torch.testing.assert_close(lm.layers[2].mlp.down_proj.weight, _saved(tiny_decoder, "layers.2.mlp.down_proj.weight"))
    torch.testing.assert_close(lm.norm.weight, _saved(tiny_decoder, "model.norm.weight"))
    assert lm.get_input_embeddings().weight.shape == (1, 16)            # the 500-row token table is not kept
    assert not any("lm_head" in k for k in predictor.state_dict())
    assert all(p.requires_grad for p in predictor.parameters())

    tokens = torch.randn(4, 6, 8)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3, [True] * 5 + [False], [True] + [False] * 5])
    predictor.eval()
    with torch.no_grad():
        y = predictor(tokens, mask)
        alone = predictor(tokens[1:2, :3])                              # the same item without padding
    assert y.shape == (4, 12)
    torch.testing.assert_close(y.norm(dim=1), torch.ones(4))
    torch.testing.assert_close(y[1:2], alone, rtol=1e-4, atol=1e-5)     # padding changes nothing

    predictor.train()
    optimizer, _ = make_optimizer(predictor, predictor.config)
    before = lm.layers[0].self_attn.q_proj.weight.detach().clone()
    out = predictor.training_loss(tokens, mask, torch.randn(4, 12))
    out["loss"].backward()
    assert lm.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    optimizer.step()
    assert not torch.equal(before, lm.layers[0].self_attn.q_proj.weight)


def test_a_checkpoint_reloads_over_the_same_folder(tiny_decoder):
    torch.manual_seed(0)
    config = ScoutConfig(**SMALL, lm_path=str(tiny_decoder))
    trained = ScoutPredictor(config)
    with torch.no_grad():
        trained.body.model.layers[1].mlp.up_proj.weight.add_(0.5)      # as if trained
    again = ScoutPredictor(ScoutConfig.from_dict(config.as_dict()))
    again.load_state_dict(trained.state_dict())
    tokens = torch.randn(2, 5, 8)
    trained.eval(), again.eval()
    with torch.no_grad():
        torch.testing.assert_close(again(tokens), trained(tokens))


def test_an_encoder_folder_works_too(tiny_encoder):
    torch.manual_seed(0)
    predictor = ScoutPredictor(ScoutConfig(**SMALL, lm_path=str(tiny_encoder))).eval()
    assert predictor.width == 20
    torch.testing.assert_close(predictor.body.model.encoder.layer[1].output.dense.weight,
                               _saved(tiny_encoder, "encoder.layer.1.output.dense.weight"))
    tokens = torch.randn(2, 4, 8)
    mask = torch.tensor([[True] * 4, [True] * 2 + [False] * 2])
    with torch.no_grad():
        y = predictor(tokens, mask)
        alone = predictor(tokens[1:2, :2])
    torch.testing.assert_close(y[1:2], alone, rtol=1e-4, atol=1e-5)


def test_the_scout_retriever_takes_the_folder_from_its_predictor_settings(tiny_decoder):
    from models.training.trainer import build_model

    model = build_model("scout", {"predictor": {"n_prompts": 2, "lm_path": str(tiny_decoder)},
                                  "features": {"n_fast_max": 6}})
    assert model.predictor.width == 16 and model.predictor.config.lm_path == str(tiny_decoder)


def test_a_missing_or_corrupt_folder_is_refused_clearly(tiny_decoder, tmp_path):
    with pytest.raises(ValueError, match="not found or without config.json"):
        ScoutPredictor(ScoutConfig(**SMALL, lm_path=str(tmp_path / "nowhere")))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="not found or without config.json"):
        ScoutPredictor(ScoutConfig(**SMALL, lm_path=str(empty)))
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="cannot load the pretrained body"):
        ScoutPredictor(ScoutConfig(**SMALL, lm_path=str(garbled)))
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "config.json").write_text((tiny_decoder / "config.json").read_text())
    (truncated / "model.safetensors").write_bytes((tiny_decoder / "model.safetensors").read_bytes()[:200])
    with pytest.raises(ValueError, match="cannot load the pretrained body"):
        ScoutPredictor(ScoutConfig(**SMALL, lm_path=str(truncated)))
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text(json.dumps(json.loads((tiny_decoder / "config.json").read_text())))
    with pytest.raises(ValueError, match="cannot load the pretrained body"):
        ScoutPredictor(ScoutConfig(**SMALL, lm_path=str(no_weights)))
    with pytest.raises(ValueError, match="lm_path must be a folder path"):
        ScoutConfig(**SMALL, lm_path=3)

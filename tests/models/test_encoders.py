"""Frozen encoders: the handcrafted appearance encoder against hand-made images, the HF loaders with
tiny random-weight models saved and reloaded through the real loading code (outputs checked
against the transformers model called directly), the packaged MiniLM against
sentence-transformers' own ``encode``, and the content-keyed feature cache."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from models.backends.encoders import (
    EncoderConfigError,
    FeatureCache,
    HandcraftedAppearanceEncoder,
    HandcraftedConfig,
    ImageEncoder,
    TextEncoder,
    build_image_encoder,
    build_text_encoder,
    cache_key,
    packaged_minilm_path,
)

torch.set_num_threads(1)
RED, BLUE, WHITE = (40, 35, 200), (190, 85, 30), (238, 238, 238)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def two_tone(upper, lower, h: int = 64, w: int = 24, noise: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = np.zeros((h, w, 3), np.float64)
    img[: h // 2] = upper
    img[h // 2:] = lower
    return np.clip(img + rng.normal(0, noise, img.shape), 0, 255).astype(np.uint8)


# -- handcrafted -------------------------------------------------------------------------------------
def test_handcrafted_dimensions_and_parts():
    enc = HandcraftedAppearanceEncoder()
    assert isinstance(enc, ImageEncoder)
    assert enc.dim == 2 * 100 + 288 + 2 == 490
    out = enc.encode_crops([two_tone(RED, BLUE), two_tone(WHITE, RED, h=40, w=40)])
    assert out.shape == (2, 490) and out.dtype == np.float32
    # each half's histogram is square-rooted and sums to one: unit Euclidean norm
    np.testing.assert_allclose(np.linalg.norm(out[:, :100], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(out[:, 100:200], axis=1), 1.0, rtol=1e-5)
    # geometry: log aspect and log size
    np.testing.assert_allclose(out[0, -2:], [np.log(64 / 24), np.log(np.sqrt(64 * 24) / 64)], rtol=1e-5)
    np.testing.assert_allclose(out[1, -2:], [0.0, np.log(40 / 64)], rtol=1e-5, atol=1e-6)


def test_handcrafted_tells_upper_from_lower_colours():
    enc = HandcraftedAppearanceEncoder()
    red_blue, red_blue2, blue_red = enc.encode_crops([two_tone(RED, BLUE), two_tone(RED, BLUE, seed=1),
                                                      two_tone(BLUE, RED)])
    upper, lower = slice(0, 100), slice(100, 200)
    # the same clothing under different noise matches; swapped halves do not
    assert red_blue[upper] @ red_blue2[upper] > 0.9
    assert red_blue[upper] @ blue_red[upper] < 0.1
    assert red_blue[upper] @ blue_red[lower] > 0.9
    # neutral white falls in the middle chroma bins, red does not
    white = enc.encode_crops([two_tone(WHITE, WHITE)])[0]
    assert white[upper] @ red_blue[upper] < 0.1


def test_handcrafted_frames_tokens_and_name():
    enc = HandcraftedAppearanceEncoder(HandcraftedConfig(grid=3))
    frame = two_tone(RED, BLUE, h=90, w=120)
    out = enc.encode_frames([frame, frame[::-1].copy()])
    assert out.global_features.shape == (2, 490) and out.tokens.shape == (2, 9, 490)
    np.testing.assert_allclose(np.linalg.norm(out.global_features, axis=1), 1.0, rtol=1e-5)
    assert out.token_mask.all()
    # the geometry entries of a token are its cell centre
    np.testing.assert_allclose(out.tokens[0, 0, -2:], [20 / 120, 15 / 90], rtol=1e-5)
    np.testing.assert_allclose(out.tokens[0, 8, -2:], [100 / 120, 75 / 90], rtol=1e-5)
    # settings are part of the name; the same settings give the same name
    assert enc.name == HandcraftedAppearanceEncoder(HandcraftedConfig(grid=3)).name
    assert enc.name != HandcraftedAppearanceEncoder().name


def test_handcrafted_rejects_bad_input():
    enc = HandcraftedAppearanceEncoder()
    with pytest.raises(ValueError, match="crop 1"):
        enc.encode_crops([two_tone(RED, BLUE), np.zeros((5, 5), np.uint8)])
    with pytest.raises(ValueError, match="hog_size"):
        HandcraftedConfig(hog_size=(30, 64))
    with pytest.raises(ValueError, match="unknown key"):
        HandcraftedConfig.from_dict({"bins": 3})


# -- Hugging Face vision towers ----------------------------------------------------------------------
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory):
    """Tiny random-weight models saved in the Hugging Face folder layout."""
    from transformers import (
        CLIPConfig,
        CLIPModel,
        Siglip2VisionConfig,
        Siglip2VisionModel,
        SiglipVisionConfig,
        SiglipVisionModel,
        VJEPA2Config,
        VJEPA2Model,
    )

    root = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    SiglipVisionModel(SiglipVisionConfig(**TINY, image_size=32, patch_size=8)).save_pretrained(root / "siglip")
    Siglip2VisionModel(Siglip2VisionConfig(**TINY, num_patches=16, patch_size=8)).save_pretrained(root / "siglip2")
    VJEPA2Model(VJEPA2Config(crop_size=32, patch_size=8, tubelet_size=2, frames_per_clip=2, hidden_size=32,
                             num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2.0, pred_hidden_size=16,
                             pred_num_hidden_layers=1, pred_num_attention_heads=2, pred_num_mask_tokens=2)
                ).save_pretrained(root / "vjepa2")
    clip = CLIPModel(CLIPConfig(text_config=dict(**TINY, vocab_size=30522, max_position_embeddings=64,
                                                 eos_token_id=102, bos_token_id=101, pad_token_id=0),
                                vision_config=dict(**TINY, image_size=32, patch_size=8), projection_dim=16))
    clip.save_pretrained(root / "clip")
    for name in TOKENIZER_FILES:                       # a BERT word-piece tokenizer for the tiny CLIP text tower
        shutil.copy(packaged_minilm_path() + "/" + name, root / "clip" / name)
    return root


def preprocess(img: np.ndarray, size: int, mean, std) -> torch.Tensor:
    """The documented preprocessing, written independently: BGR→RGB, resize, scale, normalise."""
    import cv2

    rgb = cv2.cvtColor(cv2.resize(img, (size, size), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB)
    x = (rgb / 255.0 - np.asarray(mean)) / np.asarray(std)
    return torch.tensor(x.transpose(2, 0, 1)[None], dtype=torch.float32)


def test_siglip_loader_matches_the_model(hf_models):
    from transformers import SiglipVisionModel

    enc = build_image_encoder({"kind": "hf", "path": str(hf_models / "siglip")})
    crop = two_tone(RED, BLUE)
    frame = two_tone(WHITE, BLUE, h=90, w=160)
    got = enc.encode_crops([crop])
    ref = SiglipVisionModel.from_pretrained(str(hf_models / "siglip")).eval()
    with torch.no_grad():
        want = ref(pixel_values=preprocess(crop, 32, [0.5] * 3, [0.5] * 3)).pooler_output.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    frames = enc.encode_frames([frame])
    assert frames.tokens.shape == (1, 16, 32) and frames.token_mask.all()
    np.testing.assert_allclose(np.linalg.norm(frames.global_features, axis=1), 1.0, rtol=1e-5)
    assert enc.dim == 32 and enc.token_dim == 32
    assert enc.name.startswith("hf-vision:siglip_vision_model:") and ":s32" in enc.name


def test_clip_vision_and_text_load_from_a_full_checkpoint(hf_models):
    from transformers import CLIPModel

    path = str(hf_models / "clip")
    full = CLIPModel.from_pretrained(path).eval()
    crop = two_tone(RED, BLUE)
    vision = build_image_encoder({"kind": "hf", "path": path})
    mean, std = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
    with torch.no_grad():
        want = full.vision_model(pixel_values=preprocess(crop, 32, mean, std)).pooler_output.numpy()
    np.testing.assert_allclose(vision.encode_crops([crop]), want, rtol=1e-4, atol=1e-5)
    assert vision.encode_frames([crop]).tokens.shape == (1, 16, 32)       # patch tokens, class token dropped

    text = build_text_encoder({"kind": "clip", "path": path})
    assert isinstance(text, TextEncoder) and text.dim == 16 and text.token_dim == 32
    out = text.encode(["a person in red", "blue trousers walking left"])
    batch = text.tokenizer(["a person in red", "blue trousers walking left"], padding=True, return_tensors="pt")
    with torch.no_grad():
        want = full.get_text_features(**batch)
        want = (want.pooler_output if hasattr(want, "pooler_output") else want)
    want = torch.nn.functional.normalize(want, dim=-1).numpy()
    np.testing.assert_allclose(out.pooled, want, rtol=1e-4, atol=1e-5)
    assert out.tokens.shape[:2] == out.mask.shape and out.mask.sum(1).tolist() == batch["attention_mask"].sum(1).tolist()


def test_siglip2_keeps_aspect_within_the_patch_budget(hf_models):
    enc = build_image_encoder({"kind": "hf", "path": str(hf_models / "siglip2")})
    tall, wide = two_tone(RED, BLUE, h=96, w=24), two_tone(RED, BLUE, h=24, w=96)
    out = enc.encode_frames([tall, wide])
    n_tall, n_wide = out.token_mask.sum(axis=1)
    assert 1 <= n_tall <= 16 and 1 <= n_wide <= 16
    assert enc._siglip2_grid(96, 24)[0] > enc._siglip2_grid(96, 24)[1]      # more rows than columns
    assert enc.encode_crops([tall, wide]).shape == (2, 32)
    # batching pads with a mask: a crop alone gives the same vector as in a batch
    np.testing.assert_allclose(enc.encode_crops([wide]), enc.encode_crops([tall, wide])[1:], rtol=1e-4, atol=1e-5)


def test_vjepa2_reads_an_image_as_a_clip(hf_models):
    enc = build_image_encoder({"kind": "hf", "path": str(hf_models / "vjepa2")})
    crops = [two_tone(RED, BLUE), two_tone(BLUE, RED)]
    out = enc.encode_crops(crops)
    assert out.shape == (2, 32) and not np.allclose(out[0], out[1])
    assert enc.encode_frames(crops).tokens.shape == (2, 16, 32)


def test_weights_change_the_name_and_missing_paths_fail_clearly(hf_models, tmp_path):
    copy = tmp_path / "siglip"
    shutil.copytree(hf_models / "siglip", copy)
    first = build_image_encoder({"kind": "hf", "path": str(copy)}).name
    from transformers import SiglipVisionModel

    model = SiglipVisionModel.from_pretrained(str(copy))
    with torch.no_grad():
        next(iter(model.parameters())).add_(1.0)
    model.save_pretrained(copy)
    assert build_image_encoder({"kind": "hf", "path": str(copy)}).name != first
    with pytest.raises(EncoderConfigError, match="not found"):
        build_image_encoder({"kind": "hf", "path": str(tmp_path / "nowhere")})
    with pytest.raises(EncoderConfigError, match="no model path"):
        build_image_encoder({"kind": "hf"})
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(EncoderConfigError, match="not a supported vision tower"):
        build_image_encoder({"kind": "hf", "path": str(tmp_path / "bert")})
    with pytest.raises(EncoderConfigError, match="not found"):
        build_text_encoder({"kind": "clip", "path": str(tmp_path / "nowhere")})


# -- the packaged MiniLM --------------------------------------------------------------------------------
def test_minilm_matches_sentence_transformers_encode():
    from sentence_transformers import SentenceTransformer

    enc = build_text_encoder()
    assert isinstance(enc, TextEncoder) and enc.dim == 384 and enc.token_dim == 384
    texts = ["a person in a red shirt walking to the left", "someone in blue trousers", "x"]
    out = enc.encode(texts)
    ref = SentenceTransformer(packaged_minilm_path(), device="cpu", local_files_only=True)
    np.testing.assert_allclose(out.pooled, ref.encode(texts), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(out.pooled, axis=1), 1.0, rtol=1e-5)
    assert out.tokens.shape == (3, out.mask.shape[1], 384)
    assert out.mask[0].sum() > out.mask[2].sum() >= 3                      # [CLS] x [SEP]
    assert not out.tokens[2][~out.mask[2]].any()                            # padding is zero
    # the name carries the weights digest
    assert enc.name.startswith("st:") and len(enc.name.split(":")[2]) == 16
    with pytest.raises(ValueError, match="text 1"):
        enc.encode(["fine", "  "])


# -- feature cache ---------------------------------------------------------------------------------------
def test_feature_cache_computes_once(tmp_path):
    cache = FeatureCache(tmp_path / "cache")
    calls = []

    def compute():
        calls.append(1)
        return {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.asarray(7)}

    parts = {"encoder": "enc-v1", "video": "ab" * 32, "frames": [1, 2, 3]}
    first = cache.get_or_compute(parts, compute)
    second = cache.get_or_compute(dict(reversed(list(parts.items()))), compute)   # key order does not matter
    assert len(calls) == 1 and cache.stats == {"hits": 1, "misses": 1}
    np.testing.assert_array_equal(first["a"], second["a"])
    assert int(second["n"]) == 7
    cache.get_or_compute({**parts, "encoder": "enc-v2"}, compute)                   # another encoder: new entry
    assert len(calls) == 2
    # a damaged entry is recomputed, never trusted
    cache.path(cache_key(parts)).write_bytes(b"not an npz")
    cache.get_or_compute(parts, compute)
    assert len(calls) == 3
    # no folder: nothing is kept
    nothing = FeatureCache(None)
    nothing.get_or_compute(parts, compute)
    nothing.get_or_compute(parts, compute)
    assert len(calls) == 5
    with pytest.raises(ValueError, match="plain JSON"):
        cache_key({"x": object()})

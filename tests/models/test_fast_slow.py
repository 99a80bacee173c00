"""VTrajEmbed's Fast and Slow inputs (paper C.2-C.5): pixel budgets, ROI-aligned features of tapped
layers of tiny random-weight HF vision towers (saved and reloaded) against a plain-loop bilinear
reference, the handcrafted encoder reading boxes from full frames at P_f, the cache keyed on every
encoder, the "without Fast" ablation and 16 Fast observations trained and evaluated, the retained
Slow counts reported per step and per run, epochs instead of steps, and bad configs refused."""
from __future__ import annotations

import json
import math

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.backends.encoders import (
    HandcraftedAppearanceEncoder,
    ImageEncoderConfig,
    build_image_encoder,
)
from models.backends.encoders.base import budget_grid, region
from models.demo.benchmark import build_demo_benchmark
from models.retrievers.features import FeatureConfig, FeatureExtractor, clip_box
from models.retrievers.vtrajembed.model import VTrajEmbed, VTrajEmbedConfig, greedy_prune
from models.training.trainer import TrainConfig, epoch_steps, train

torch.set_num_threads(1)
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2}
SMALL = {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "agg_layers": 1, "embed_dim": 16,
         "geo_hidden": 16, "heads": 2, "agg_heads": 2, "dropout": 0.0}


# -- pixel budgets ----------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(h=st.integers(1, 2000), w=st.integers(1, 2000), budget=st.integers(64, 300_000), m=st.sampled_from([1, 8, 14]))
def test_budget_grid_stays_within_the_budget_and_keeps_the_aspect(h, w, budget, m):
    if budget < m * m:
        return
    rows, cols = budget_grid(h, w, budget, m)
    assert rows >= 1 and cols >= 1 and rows * cols * m * m <= budget
    assert rows * m <= max(h, m) and cols * m <= max(w, m)                      # never enlarged
    if rows > 4 and cols > 4:                                                   # aspect kept up to rounding
        assert abs(math.log((rows / cols) / (h / w))) < 0.5
    up_rows, up_cols = budget_grid(h, w, budget, m, upscale=True)
    assert up_rows * up_cols * m * m <= budget and up_rows >= rows and up_cols >= cols


def test_budget_grid_examples():
    assert budget_grid(360, 640, 65_536, 16) == (12, 21)                        # 192 × 336 px of a 360p frame
    assert budget_grid(448, 448, 200_704, 14) == (32, 32)                       # P_s = 448²: a 448² frame as it is
    assert budget_grid(100, 100, 65_536, 16) == (6, 6)                          # small frames are not enlarged
    with pytest.raises(ValueError, match="smaller than one"):
        budget_grid(100, 100, 100, 16)


# -- tiny HF towers -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def towers(tmp_path_factory):
    from transformers import (
        CLIPVisionConfig,
        CLIPVisionModel,
        Siglip2VisionConfig,
        Siglip2VisionModel,
        SiglipVisionConfig,
        SiglipVisionModel,
    )

    root = tmp_path_factory.mktemp("towers")
    torch.manual_seed(0)
    SiglipVisionModel(SiglipVisionConfig(**TINY, image_size=32, patch_size=8)).save_pretrained(root / "siglip")
    Siglip2VisionModel(Siglip2VisionConfig(**TINY, num_patches=16, patch_size=8)).save_pretrained(root / "siglip2")
    CLIPVisionModel(CLIPVisionConfig(**TINY, image_size=32, patch_size=8)).save_pretrained(root / "clip")
    return root


def frame(seed: int, h: int = 96, w: int = 160) -> np.ndarray:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)           # smooth, so positions matter


def bilinear(fmap: np.ndarray, y: float, x: float) -> np.ndarray:
    """torchvision's bilinear sample of ``fmap`` ``[D, H, W]`` at ``(y, x)`` (feature j's centre at j)."""
    _, hh, ww = fmap.shape
    if y < -1 or y > hh or x < -1 or x > ww:
        return np.zeros(fmap.shape[0])
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    y1, x1 = min(y0 + 1, hh - 1), min(x0 + 1, ww - 1)
    if y0 >= hh - 1:
        y0 = y1 = hh - 1
        y = float(y0)
    if x0 >= ww - 1:
        x0 = x1 = ww - 1
        x = float(x0)
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * fmap[:, y0, x0] + (1 - ly) * lx * fmap[:, y0, x1]
            + ly * (1 - lx) * fmap[:, y1, x0] + ly * lx * fmap[:, y1, x1])


def roi_bins(fmap: np.ndarray, box, bins: int, samples: int = 2) -> np.ndarray:
    """ROI-align of a box in grid units: each bin the mean of its ``samples²`` bilinear samples
    (pixel-centre aligned): ``[D, bins, bins]``."""
    x1, y1, x2, y2 = (float(v) - 0.5 for v in box)
    step_y, step_x = (y2 - y1) / (bins * samples), (x2 - x1) / (bins * samples)
    out = np.zeros((fmap.shape[0], bins, bins))
    for by in range(bins):
        for bx in range(bins):
            values = [bilinear(fmap, y1 + (by * samples + i + 0.5) * step_y, x1 + (bx * samples + j + 0.5) * step_x)
                      for i in range(samples) for j in range(samples)]
            out[:, by, bx] = np.mean(values, axis=0)
    return out


def test_roi_features_of_tapped_layers_match_a_plain_reference(towers):
    from transformers import SiglipVisionModel

    enc = build_image_encoder({"kind": "hf", "path": str(towers / "siglip"), "pixel_budget": 4096, "roi_size": 3})
    assert enc.roi_layers == [2, 3, 4]                                           # depth·½, ·¾, last (12, 18, 24 of 24)
    assert (enc.roi_bins, enc.roi_channels, enc.roi_dim) == (3, 96, 96 * 9)      # 3 taps × 32 channels × 3 × 3 bins
    assert ":s32b4096:roi2-3-4r3flatx96" in enc.name
    frames = [frame(0), frame(1)]
    boxes = [np.array([[10, 20, 60, 90], [100, 5, 150, 40]], np.float32), np.array([[30, 30, 70, 80]], np.float32)]
    shapes = []
    forward = enc.model.forward
    enc.model.forward = lambda **kw: (shapes.append(tuple(kw["pixel_values"].shape)), forward(**kw))[1]
    got = enc.encode_rois(frames, boxes)
    enc.model.forward = forward
    assert got.shape == (3, 96 * 9)
    rows, cols = 6, 10                                                           # 48 × 80 px <= 4096, aspect 0.6
    assert shapes == [(2, 3, rows * 8, cols * 8)]                                # the pixel budget is respected

    # the reference: the documented preprocessing, hidden states, per-token LayerNorm, bilinear ROI
    # bins, the taps stacked per bin and flattened channel-major (no pooling over the bins)
    ref_model = SiglipVisionModel.from_pretrained(str(towers / "siglip")).eval()
    want = []
    for img, img_boxes in zip(frames, boxes):
        rgb = cv2.cvtColor(cv2.resize(img, (cols * 8, rows * 8), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB)
        x = torch.tensor(((rgb / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None], dtype=torch.float32)
        with torch.no_grad():
            hidden = ref_model(pixel_values=x, interpolate_pos_encoding=True, output_hidden_states=True).hidden_states
        maps = []
        for layer in (2, 3, 4):
            h = torch.nn.functional.layer_norm(hidden[layer][0], (32,))              # [rows·cols, 32]
            maps.append(h.numpy().T.reshape(32, rows, cols))
        for b in img_boxes:
            grid_box = b * np.array([cols / 160, rows / 96, cols / 160, rows / 96])
            want.append(np.concatenate([roi_bins(m, grid_box, 3) for m in maps]).reshape(-1))
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-4, atol=1e-4)
    # another box gives another vector; a box's vector does not depend on the other boxes asked with it
    np.testing.assert_allclose(enc.encode_rois(frames[:1], boxes[0][1:]), got[1:2], rtol=1e-5, atol=1e-5)
    assert not np.allclose(got[0], got[1], atol=1e-3)


def test_taps_projector_and_budget_are_part_of_the_name(towers, tmp_path):
    path = str(towers / "siglip")
    base = build_image_encoder({"kind": "hf", "path": path, "pixel_budget": 4096})
    taps = build_image_encoder({"kind": "hf", "path": path, "pixel_budget": 4096, "roi_layers": [1, 4]})
    bins = build_image_encoder({"kind": "hf", "path": path, "pixel_budget": 4096, "roi_size": 5})
    budget = build_image_encoder({"kind": "hf", "path": path, "pixel_budget": 2048})
    assert len({base.name, taps.name, bins.name, budget.name}) == 4
    f, b = [frame(2)], [np.array([[20, 10, 90, 80]], np.float32)]
    flat = base.encode_rois(f, b)                                                # [1, 96 · 7 · 7]
    # a channel map from a file maps each bin's taps: its rows set the channels, its digest the name
    weight = np.random.default_rng(0).normal(size=(7, 3 * 32)).astype(np.float32)
    np.save(tmp_path / "proj.npy", weight)
    loaded = build_image_encoder({"kind": "hf", "path": path, "pixel_budget": 4096,
                                  "roi_projector": str(tmp_path / "proj.npy")})
    assert (loaded.roi_channels, loaded.roi_dim) == (7, 7 * 49) and ":roi2-3-4r7file" in loaded.name
    want = np.einsum("cd,dhw->chw", weight, flat.reshape(96, 7, 7)).reshape(1, -1)
    np.testing.assert_allclose(loaded.encode_rois(f, b), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"\[out, 64\]"):
        build_image_encoder({"kind": "hf", "path": path, "roi_layers": [1, 4], "roi_projector": str(tmp_path / "proj.npy")})
    with pytest.raises(ValueError, match="roi_layers"):
        build_image_encoder({"kind": "hf", "path": path, "roi_layers": [2, 5]})         # a 4-layer tower
    with pytest.raises(ValueError, match="smaller than one 8x8 patch"):
        build_image_encoder({"kind": "hf", "path": path, "pixel_budget": 32})


def test_siglip2_and_clip_read_full_frames_at_the_budget(towers):
    f = [frame(3), frame(4, 120, 60)]
    b = [np.array([[0, 0, 80, 96], [80, 0, 160, 96]], np.float32), np.array([[5, 5, 50, 100]], np.float32)]
    for name in ("siglip2", "clip"):
        enc = build_image_encoder({"kind": "hf", "path": str(towers / name), "pixel_budget": 1024})
        out = enc.encode_rois(f, b)
        assert out.shape == (3, enc.roi_dim) and np.all(np.isfinite(out))
        frames = enc.encode_frames(f)
        grids = [budget_grid(96, 160, 1024, 8), budget_grid(120, 60, 1024, 8)]
        assert [int(m.sum()) for m in frames.token_mask] == [r * c for r, c in grids]   # one token per patch
        assert all(r * c * 64 <= 1024 for r, c in grids)


# -- the handcrafted encoder reads boxes from full frames --------------------------------------------------
def test_handcrafted_rois_read_the_full_frame_at_the_budget():
    img = np.zeros((360, 640, 3), np.uint8)
    img[100:200, 300:350] = (0, 0, 255)                                          # red top
    img[200:300, 300:350] = (255, 0, 0)                                          # blue bottom
    box = np.array([[300, 100, 350, 300]], np.float32)
    native = HandcraftedAppearanceEncoder()
    np.testing.assert_array_equal(native.encode_rois([img], [box]), native.encode_crops([region(img, box[0])]))
    fast = HandcraftedAppearanceEncoder(pixel_budget=65_536)
    assert fast.name == native.name + "-b65536"
    a = fast.encode_rois([img], [box])[0]
    crop = native.encode_crops([region(img, box[0])])[0]
    c = native.colour_bins
    for half in (slice(0, c), slice(c, 2 * c)):                                 # the same colours (Hellinger affinity)
        assert float(a[half] @ crop[half]) > 0.95
    rows, cols = budget_grid(360, 640, 65_536, 1)
    assert rows * cols <= 65_536 and cols == 341
    scale = math.sqrt(rows * cols / (360 * 640))
    assert a[-1] == pytest.approx(crop[-1] + math.log(scale), abs=0.03)         # its size at that resolution
    with pytest.raises(ValueError, match="x1 < x2"):
        fast.encode_rois([img], [np.array([[10, 10, 5, 20]], np.float32)])


def test_vtrajembed_features_come_from_full_frames_and_every_encoder_keys_the_cache(rendered_small, tmp_path):
    from models.media.video import FrameReader
    from models.training.snapshot import RelationSnapshotData, SnapshotTrack, SnapshotVideo

    gt = rendered_small.gt
    video = SnapshotVideo(1, str(rendered_small.path), gt.width, gt.height, gt.fps, gt.n_frames)
    tracks = [SnapshotTrack(10 + p.id, 1, p.frames(), p.boxes_array()[p.frames()]) for p in gt.people]
    snap = RelationSnapshotData("test", [video], tracks, [], [])
    model = VTrajEmbed({**SMALL, "features": {"n_fast_max": 16}})
    assert model.fast_encoder.pixel_budget == 65_536 and model.slow_encoder.pixel_budget == 200_704
    fx = model.feature_extractor(str(tmp_path))
    feats = fx.snapshot_tracks(snap)
    t = tracks[0]
    f = feats[(t.id, 0)]
    assert f.appearance.shape == (16, model.d_fast)
    with FrameReader(video.path) as reader:
        full = [reader.read(int(i)) for i in f.frames]
    boxes = [clip_box(b, video.width, video.height)[None] for b in f.boxes]     # the box's pixels
    want = HandcraftedAppearanceEncoder(pixel_budget=65_536).encode_rois(full, boxes)
    np.testing.assert_allclose(f.appearance, want, rtol=1e-6)
    # another pruning encoder, Slow budget or Fast budget: another entry (computed again)
    for change in ({"pruning": {"handcrafted": {"lightness_bins": 2}}}, {"slow": {"pixel_budget": 50_176}},
                   {"fast": {"pixel_budget": 16_384}}):
        other = VTrajEmbed({**SMALL, "features": {"n_fast_max": 16}, **change}).feature_extractor(str(tmp_path))
        other.snapshot_tracks(snap)
        assert other.cache.stats["misses"] == len(tracks) and other.cache.stats["hits"] == 0, change
    again = model.feature_extractor(str(tmp_path))
    again.snapshot_tracks(snap)
    assert again.cache.stats["hits"] == len(tracks)
    # a separate pruning encoder gives the global features; the Slow encoder still the tokens
    pruned = VTrajEmbed({**SMALL, "pruning": {"handcrafted": {"lightness_bins": 2}}})
    pf = pruned.feature_extractor(None).snapshot_tracks(snap)[(t.id, 0)]
    assert pruned.pruning_encoder.dim != pruned.slow_encoder.dim
    assert pf.context_global.shape[1] == pruned.pruning_encoder.dim
    assert pf.context_tokens.shape[2] == pruned.slow_encoder.token_dim
    np.testing.assert_allclose(np.linalg.norm(pf.context_global, axis=1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="Fast or a Slow"):
        FeatureExtractor(FeatureConfig(), None)


# -- training: without Fast, 16 observations, retained counts, epochs --------------------------------------
@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    snaps = build_demo_benchmark(root, {"videos": {"train": 6, "dev": 0, "test": 2}, "include_demo_scenes": False,
                                        "width": 192, "height": 108, "n_frames": 24}, save=False)
    return snaps, str(root / "features")


def run_config(cache: str, model: dict, **kw) -> dict:
    return {"steps": 3, "batch_size": 4, "lr": 3e-3, "device": "cpu", "checkpoint_every": 2, "cache_dir": cache,
            "model": {**SMALL, **model}, **kw}


def test_without_fast_trains_and_evaluates(bench, tmp_path):
    snaps, cache = bench
    model = VTrajEmbed({**SMALL, "use_fast": False})
    assert model.fast_encoder is None and model.d_fast == 0 and float(model.alpha.detach()) == 1.0
    result = train(snaps["train"], "vtrajembed", run_config(cache, {"use_fast": False}), tmp_path / "nofast",
                   eval_snapshot=snaps["test"])
    assert result["status"] == "finished" and result["step"] == 3
    assert set(result["metrics"]) >= {"t2traj", "traj2t", "ocvr"} and result["metrics"]["t2traj"]["n_queries"] > 0
    # the context reaches the embedding from the start: other Slow frames, other v
    data = model.prepare(snaps["test"].model_inputs(), None, cache_dir=cache)
    assert data.appearance.shape[2] == 0
    records = [(t.id, 0) for t in snaps["test"].tracks[:3]]
    with torch.no_grad():
        v = model.eval().encode_tracks(data, records)
        data.frame_tokens = torch.randn_like(data.frame_tokens)
        assert not torch.allclose(v, model.encode_tracks(data, records))


def test_sixteen_observations_and_the_retained_slow_counts(bench, tmp_path):
    snaps, cache = bench
    steps = []
    cfg = run_config(cache, {"features": {"n_fast_max": 16}, "prune_tau": 0.86})
    result = train(snaps["train"], "vtrajembed", cfg, tmp_path / "obs16", eval_snapshot=snaps["test"],
                   on_step=steps.append)
    assert result["status"] == "finished" and result["metrics"]["t2traj"]["n_queries"] > 0
    assert all(1.0 <= r["slow_retained_mean"] <= 4.0 for r in steps)
    model = VTrajEmbed(cfg["model"])
    assert model.n_max == 16 and model.k_max == 4
    data = model.prepare(snaps["test"].model_inputs(), None, cache_dir=cache)
    assert int(data.obs_valid.sum(dim=1).max()) == 16
    # the run's summary of the evaluated snapshot: m_s(r) of each record by the paper's loop
    counts = []
    for row in range(len(data.rows)):
        g = data.frame_global[data.slow_frames[row]].numpy()
        kept: list[int] = []
        for j in np.flatnonzero(data.slow_valid[row].numpy()):
            if all(float(g[j] @ g[i]) < cfg["model"]["prune_tau"] for i in kept):
                kept.append(int(j))
        counts.append(len(kept))
    summary = result["data_summary"]["eval"]["slow_retained"]
    assert summary["records"] == len(snaps["test"].tracks) == len(counts)
    assert summary["mean"] == pytest.approx(np.mean(counts))
    assert (summary["min"], summary["max"]) == (min(counts), max(counts))
    assert summary["histogram"] == {str(k): counts.count(k) for k in sorted(set(counts))}
    assert len(summary["histogram"]) > 1         # MobileNetV2 cosines of a track's Slow frames are 0.75-0.93 here: τ = 0.86 keeps some, not all
    assert result["data_summary"]["train"]["slow_retained"]["records"] >= len(snaps["train"].tracks)
    written = json.loads((tmp_path / "obs16" / "result.json").read_text())
    assert written["data_summary"] == result["data_summary"]
    # the batch mean is the pruning's own count (the rule of fuse)
    keep = greedy_prune(data.frame_global[data.slow_frames], data.slow_valid, cfg["model"]["prune_tau"])
    assert keep.sum(dim=1).tolist() == counts


def test_epochs_set_the_steps_and_a_run_resumes(bench, tmp_path):
    snaps, cache = bench
    assert epoch_steps(3, 10, 4) == 8 and epoch_steps(1, 4, 4) == 1
    from models.training.batching import BatchingConfig, TrainingPlan

    n = len(TrainingPlan(snaps["train"], BatchingConfig(), seed=0).groups)
    cfg = run_config(cache, {"use_slow": False}, epochs=1, steps=999, eval_at_end=False)
    first = train(snaps["train"], "vtrajembed", cfg, tmp_path / "ep")
    assert first["steps"] == first["step"] == math.ceil(n / 4) and first["epochs"] == 1
    assert first["epochs_done"] == pytest.approx(first["step"] * 4 / n) and first["data_summary"] == {"train": {}}
    second = train(snaps["train"], "vtrajembed", {**cfg, "epochs": 2}, tmp_path / "ep")
    assert second["resumed_from"] == first["step"] and second["step"] == math.ceil(2 * n / 4)
    assert len((tmp_path / "ep" / "steps.jsonl").read_text().splitlines()) == second["step"]


def test_bad_configs_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="use_fast and use_slow cannot both be False"):
        VTrajEmbedConfig(use_fast=False, use_slow=False)
    with pytest.raises(ValueError, match="pixel_budget must be in"):
        VTrajEmbed({**SMALL, "fast": {"pixel_budget": 0}})
    with pytest.raises(ValueError, match="roi_layers apply to kind 'hf' only"):
        ImageEncoderConfig(roi_layers=[12, 18, 24])
    with pytest.raises(ValueError, match="roi_layers must be distinct"):
        ImageEncoderConfig(kind="hf", roi_layers=[3, 3])
    with pytest.raises(ValueError, match="fast_input"):
        FeatureConfig(fast_input="tubes")
    with pytest.raises(ValueError, match="epochs"):
        TrainConfig(epochs=0)

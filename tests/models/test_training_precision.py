"""Mixed precision in the trainer (``TrainConfig.precision``): a few bfloat16-autocast steps of each
model kind on the CPU give finite losses close to float32's, reach the model as bfloat16
activations and leave the weights and the AdamW state float32; fp16 or an unknown precision is
refused up front, and a resume in another precision is refused like any other change of the run
(a checkpoint from before the setting resumes as float32)."""
from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch

from models.training.trainer import TrainConfig, train
from tests.gpu.tiny_data import tiny_snapshot

torch.set_num_threads(1)
# each kind at a width of 32 (the packaged MiniLM as the frozen text encoder)
SMALL = {
    "vtrajembed": {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "agg_layers": 1, "embed_dim": 32,
                   "geo_hidden": 16, "heads": 2, "agg_heads": 2, "features": {"n_fast_max": 8}},
    "scout": {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_prompts": 4},
              "features": {"n_fast_max": 8}},
    "actpair": {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_actions": 6},
                "features": {"n_fast_max": 8}},
}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """One rendered 40-frame scene of three people (the GPU smoke's), six queries, verified relations."""
    return tiny_snapshot(tmp_path_factory.mktemp("tiny"))


def config(kind: str, cache: str, **kw) -> dict:
    return {"steps": 3, "batch_size": 4, "checkpoint_every": 3, "device": "cpu", "eval_at_end": False,
            "cache_dir": cache, "model": SMALL[kind], **kw}


def losses(out_dir) -> list[float | None]:
    return [json.loads(line)["loss"] for line in (out_dir / "steps.jsonl").read_text().splitlines()]


def output_dtypes(fn) -> Counter:
    """The dtypes of every tensor a module returned while ``fn()`` ran (feature extraction included)."""
    seen: Counter = Counter()

    def count(module, args, output) -> None:
        if isinstance(output, torch.Tensor):
            seen[output.dtype] += 1

    hook = torch.nn.modules.module.register_module_forward_hook(count)
    try:
        fn()
    finally:
        hook.remove()
    return seen


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_bf16_steps_of_each_kind_are_finite_and_keep_float32_weights(kind, snapshot, tmp_path):
    cache = str(tmp_path / "features")
    result = {}
    seen = output_dtypes(lambda: result.update(train(snapshot, kind, config(kind, cache, precision="bf16"),
                                                     tmp_path / "bf16")))
    assert result["status"] == "finished" and result["step"] == 3 and result["precision"] == "bf16"
    bf16 = losses(tmp_path / "bf16")
    assert len(bf16) == 3 and all(v is not None and math.isfinite(v) for v in bf16)
    # autocast reached the model: some module outputs were bfloat16 (the frozen encoders ran in float32)
    assert seen[torch.bfloat16] > 0 and seen[torch.float32] > 0
    ckpt = torch.load(tmp_path / "bf16" / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert ckpt["train_config"]["precision"] == "bf16"
    assert {v.dtype for v in ckpt["model"].values() if v.is_floating_point()} == {torch.float32}
    moments = [v for state in ckpt["optimizer"]["state"].values() for k, v in state.items() if k.startswith("exp_avg")]
    assert moments and {m.dtype for m in moments} == {torch.float32}
    # the same first step in float32 (same seed, same batch): no bfloat16 output, the same loss to bf16's precision
    seen = output_dtypes(lambda: train(snapshot, kind, config(kind, cache, steps=1), tmp_path / "fp32"))
    assert seen[torch.bfloat16] == 0
    assert losses(tmp_path / "fp32")[0] == pytest.approx(bf16[0], rel=0.03)


def test_precision_is_checked_and_defaults_to_float32():
    assert TrainConfig().precision == "fp32"
    assert TrainConfig.from_dict({"precision": "bf16"}).as_dict()["precision"] == "bf16"
    for bad in ("fp16", "float16", "BF16", ""):
        with pytest.raises(ValueError, match=f"precision must be one of fp32, bf16, got '{bad}'"):
            TrainConfig.from_dict({"precision": bad})


def test_a_resume_in_another_precision_is_refused(snapshot, tmp_path):
    cfg = config("scout", str(tmp_path / "features"), steps=2, checkpoint_every=2)
    train(snapshot, "scout", cfg, tmp_path / "run")
    with pytest.raises(ValueError, match="precision: 'fp32' != 'bf16'"):
        train(snapshot, "scout", {**cfg, "steps": 3, "precision": "bf16"}, tmp_path / "run")
    # a checkpoint written before the setting existed was trained in float32, and resumes so
    path = tmp_path / "run" / "checkpoint.pt"
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    del ckpt["train_config"]["precision"]
    torch.save(ckpt, path)
    with pytest.raises(ValueError, match="precision: 'fp32' != 'bf16'"):
        train(snapshot, "scout", {**cfg, "steps": 3, "precision": "bf16"}, tmp_path / "run")
    result = train(snapshot, "scout", {**cfg, "steps": 3}, tmp_path / "run")
    assert result["status"] == "finished" and result["resumed_from"] == 2 and result["step"] == 3

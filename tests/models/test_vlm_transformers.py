"""The local Hugging Face describer with a tiny random-weight Qwen2-VL built from a config.

The model, its byte-level BPE tokenizer (trained here on a few lines) and its processor (the
real Qwen2-VL image processor and a Qwen-style chat template) are saved with ``save_pretrained``
and loaded back through the describer's own loader, so the code path is the one a real
Qwen2-VL / Qwen2.5-VL folder takes. Random weights write garbage: the describer must retry within
its budget, keep every raw text and report a failure.

Other tests import the builders: ``from tests.models.test_vlm_transformers import build_tiny_tokenizer``.
"""
from __future__ import annotations

import json

import pytest
import torch

from models.backends.llm.hf_local import ModelPathError
from models.backends.vlm import DescribeBudget, DescribeRequest, build_describer
from models.backends.vlm.transformers_backend import TransformersDescriber, TransformersVLMConfig
from models.demo.describe_eval import truth_track

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]
# The Qwen chat layout: <|im_start|>role\n...<|im_end|>, images as vision_start/image_pad/vision_end.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CORPUS = [
    '{"appearance": "A person in a red top.", "motion": "Walks to the left.", "facts": [{"id": "f1", '
    '"kind": "attribute", "name": "upper_colour", "value": "red", "start_frame": 0, "end_frame": 10}]}',
    "system user assistant crop frame target marked the video has frames per second boxes",
    "walks left right towards away stands still slow normal fast enters leaves from to the",
    '{"queries": [{"text": "a person", "predicates": [{"name": "walks", "value": "left", "fact_ids": ["f1"]}]}]}',
]


def build_tiny_tokenizer(vocab_size: int = 400):
    """A byte-level BPE tokenizer trained on CORPUS with the Qwen special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_qwen2_vl(folder, *, seed: int = 0) -> str:
    """Save a random-weight Qwen2-VL (2 text layers of width 32, 1 vision block) with its processor."""
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    tokenizer = build_tiny_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tokenizer,
                                 video_processor=Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE)
    config = Qwen2VLConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
                     "max_position_embeddings": 4096, "bos_token_id": ids["<|endoftext|>"],
                     "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|endoftext|>"],
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}},
        vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    torch.set_num_threads(1)
    folder = build_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny_qwen2_vl"))
    return TransformersDescriber(TransformersVLMConfig(model_path=folder, device="cpu", crop_max_side=56,
                                                       frame_max_side=84))


def test_garbage_is_retried_within_the_budget_and_kept(tiny_vlm, rendered_small):
    frames, boxes = truth_track(rendered_small.gt.people[0])
    budget = DescribeBudget(max_crops=2, max_full_frames=1, max_new_tokens=12, max_attempts=2)
    result = tiny_vlm.describe(DescribeRequest(str(rendered_small.path), frames, boxes, budget=budget))
    assert result.failed and result.description is None
    assert result.attempts == 2 and len(result.raw_texts) == 2 and all(isinstance(t, str) for t in result.raw_texts)
    assert len(result.errors) == 2 and all(e.startswith(f"attempt {i}:") for i, e in enumerate(result.errors, 1))
    assert result.backend == "transformers" and result.model == tiny_vlm.model
    assert result.prompt_version == "describe-v2" and len(result.prompt_sha256) == 64
    assert result.crop_frames == [int(frames[0]), int(frames[-1])] and len(result.full_frames) == 1
    assert result.settings["model_type"] == "qwen2_vl" and len(result.settings["config_sha256"]) == 64
    json.dumps(result.to_dict())


def test_the_images_reach_the_model_through_the_chat_template(tiny_vlm, rendered_small, monkeypatch):
    frames, boxes = truth_track(rendered_small.gt.people[1])
    budget = DescribeBudget(max_crops=3, max_full_frames=2, max_new_tokens=4, max_attempts=2)
    seen = []
    original = tiny_vlm.prepare

    def spy(messages):
        inputs = original(messages)
        seen.append((messages, inputs))
        return inputs

    monkeypatch.setattr(tiny_vlm, "prepare", spy)
    tiny_vlm.describe(DescribeRequest(str(rendered_small.path), frames, boxes, budget=budget))
    assert len(seen) == 2
    messages, inputs = seen[0]
    # five images (three crops, two marked frames), each expanded into its image-pad tokens
    grid = inputs["image_grid_thw"]
    assert grid.shape == (5, 3)
    pad_id = tiny_vlm.processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((inputs["input_ids"] == pad_id).sum()) == int(grid.prod(dim=1).sum()) // 4
    texts = [p["text"] for p in messages[1]["content"] if p["type"] == "text"]
    assert texts[0].startswith("Crop of frame") and "Return one JSON object" in texts[-1]
    # the second attempt carries the first answer and the correction turn
    second = seen[1][0]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[3]["content"][0]["text"].startswith("That answer cannot be used")


def test_a_missing_or_incomplete_model_folder_fails_clearly(tmp_path):
    with pytest.raises(ModelPathError, match="does not exist"):
        build_describer("transformers", {"model_path": str(tmp_path / "nowhere")})
    with pytest.raises(ModelPathError, match="no model path"):
        build_describer("transformers", {})
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelPathError, match="no config.json"):
        build_describer("transformers", {"model_path": str(tmp_path / "empty")})
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(ModelPathError, match="no weights"):
        build_describer("transformers", {"model_path": str(tmp_path / "empty")})
    with pytest.raises(ValueError, match="dtype"):
        TransformersVLMConfig(model_path="x", dtype="float64")


def test_unknown_prompt_versions_are_refused(tiny_vlm, rendered_small):
    frames, boxes = truth_track(rendered_small.gt.people[0])
    with pytest.raises(ValueError, match="unknown describing prompt version"):
        tiny_vlm.describe(DescribeRequest(str(rendered_small.path), frames, boxes, prompt_version="describe-v0"))

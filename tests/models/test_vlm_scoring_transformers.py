"""The local Hugging Face scorer with a tiny random-weight Qwen2-VL built from a config.

The model is saved with ``save_pretrained`` and loaded back through the describing backend's
loader (``tests.models.test_vlm_transformers.build_tiny_qwen2_vl``), so the code path is the one a
real Qwen2-VL folder takes. Its tokenizer spells "yes" and "no" in one or several tokens, so both
ways of reading log P(yes) run; the teacher-forced reading is checked against a token-by-token
reference. Random weights write no JSON: the decomposed answer must be an invalid mark, counted.
"""
from __future__ import annotations

import json
import math

import pytest
import torch

from models.backends.vlm import ScoreRequest, build_scorer
from models.backends.vlm.transformers_scorer import TransformersScorer
from models.demo.describe_eval import truth_track
from tests.models.test_vlm_transformers import build_tiny_qwen2_vl


@pytest.fixture(scope="module")
def tiny_scorer(tmp_path_factory) -> TransformersScorer:
    torch.set_num_threads(1)
    folder = build_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny_qwen2_vl_scorer"))
    return build_scorer("transformers", {"model_path": folder, "device": "cpu", "crop_max_side": 56,
                                         "frame_max_side": 84, "max_crops": 2, "max_full_frames": 1,
                                         "max_new_tokens": 12})


def request_for(video, person: int = 0, query: str = "a person in a red top walking right") -> ScoreRequest:
    frames, boxes = truth_track(video.gt.people[person])
    return ScoreRequest(query, str(video.path), frames, boxes, trajectory_id=person)


def test_log_p_yes_comes_from_the_logits_and_garbage_scores_are_invalid(tiny_scorer, rendered_small):
    before = tiny_scorer.counts.requests
    result = tiny_scorer.score(request_for(rendered_small))
    assert result.holistic_source == "logprob"
    assert math.isfinite(result.log_p_yes) and result.log_p_yes <= 0
    log_p_no = result.details["log_p_no"]
    assert math.isfinite(log_p_no) and log_p_no <= 0
    assert math.exp(result.log_p_yes) + math.exp(log_p_no) <= 1.0 + 1e-9      # disjoint answers
    # the tiny tokenizer spells some of the words in one token and some in several
    lengths = {len(ids) for spellings in tiny_scorer.spellings.values() for ids in spellings}
    assert 1 in lengths and max(lengths) > 1
    # random weights: the decomposed answer is no JSON object, so it is an invalid mark
    with pytest.raises(ValueError):
        json.loads(result.raw_texts[1])
    assert result.appearance is result.action is result.scene is None
    assert [r.split(":")[0] for r in result.invalid] == ["scores"]
    assert tiny_scorer.counts.requests == before + 1 and tiny_scorer.counts.invalid.get("scores", 0) >= 1
    assert result.calls == 2 and result.prompt_version == "score-v1" and len(result.prompt_sha256) == 64
    assert result.details["settings"]["model_type"] == "qwen2_vl"
    json.dumps(result.to_dict())


def test_a_spelling_of_several_tokens_matches_a_token_by_token_reference(tiny_scorer, rendered_small, monkeypatch):
    seen = []
    original = tiny_scorer.vlm.prepare

    def spy(messages):
        inputs = original(messages)
        seen.append(inputs)
        return inputs

    monkeypatch.setattr(tiny_scorer.vlm, "prepare", spy)
    result = tiny_scorer.score(request_for(rendered_small, 1))
    inputs = seen[0]                              # the yes/no question's inputs
    assert inputs["image_grid_thw"].shape == (3, 3)   # two crops and one marked frame

    @torch.inference_mode()
    def next_logprobs(prefix: list[int]) -> torch.Tensor:
        """The next token's log-probabilities after the prompt and ``prefix``, from a fresh pass."""
        n = inputs["input_ids"].shape[1]
        grown = dict(inputs)
        extra = torch.tensor([prefix], dtype=torch.long)                        # [1, j]
        for key, value in inputs.items():
            if isinstance(value, torch.Tensor) and value.shape == (1, n):
                tail = extra if key == "input_ids" else (torch.ones_like(extra) if key == "attention_mask"
                                                         else torch.zeros_like(extra))
                grown[key] = torch.cat([value, tail.to(value.dtype)], dim=1)
        return torch.log_softmax(tiny_scorer.vlm.net(**grown).logits[0, -1].float(), dim=-1)   # [V]

    for answer in ("yes", "no"):
        reference = []
        for ids in tiny_scorer.spellings[answer]:
            reference.append(sum(float(next_logprobs(list(ids[:j]))[ids[j]]) for j in range(len(ids))))
        assert result.details["spelling_logprobs"][answer] == pytest.approx(reference, abs=1e-4)
        total = math.log(sum(math.exp(v) for v in reference))
        assert (result.log_p_yes if answer == "yes" else result.details["log_p_no"]) == pytest.approx(total, abs=1e-4)


def test_the_question_quotes_the_query_and_a_json_answer_is_read(tiny_scorer, rendered_small, monkeypatch):
    asked = []

    def answer(messages, *, max_new_tokens):
        asked.append(messages)
        return 'Scores: {"appearance": 85, "action": 40, "scene": 100}'

    monkeypatch.setattr(tiny_scorer.vlm, "generate", answer)
    result = tiny_scorer.score(request_for(rendered_small, 0, "someone in a red top walking right"))
    assert (result.appearance, result.action, result.scene) == (85.0, 40.0, 100.0) and result.invalid == []
    question = asked[0][1]["content"][-1]["text"]
    assert '"someone in a red top walking right"' in question and '"appearance"' in question
    assert [p["type"] for p in asked[0][1]["content"]].count("image") == 3

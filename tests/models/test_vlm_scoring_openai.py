"""The chat-completions scorer against a small local HTTP server with canned answers
(``tests.models.test_vlm_openai.ChatServer``): once with top log-probabilities, once without
(the answer fallback, recorded), and with garbage answers (counted invalid, never raised)."""
from __future__ import annotations

import json
import math

import pytest

from models.backends.llm.openai_chat import EndpointError
from models.backends.vlm import ScoreRequest, build_scorer
from models.backends.vlm.chat_scoring import ChatScorer, YesNo
from models.demo.describe_eval import truth_track
from tests.models.test_vlm_openai import ChatServer

SCORES = '{"appearance": 90, "action": 75, "scene": 100}'


def with_logprobs(content: str, first: tuple[str, float], top: list[tuple[str, float]]) -> tuple[str, bytes]:
    """A 200 reply whose first answer token carries top log-probabilities (the vLLM / OpenAI form)."""
    token, logprob = first
    payload = {"id": "x", "object": "chat.completion", "model": "tiny-vl",
               "choices": [{"index": 0, "finish_reason": "length",
                            "message": {"role": "assistant", "content": content},
                            "logprobs": {"content": [{
                                "token": token, "logprob": logprob,
                                "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}]}}]}
    return ("raw", json.dumps(payload).encode())


def request_for(video, person: int = 0) -> ScoreRequest:
    frames, boxes = truth_track(video.gt.people[person])
    return ScoreRequest("a person in a red top walking right", str(video.path), frames, boxes)


def scorer_for(server: ChatServer, **settings):
    return build_scorer("openai", {"base_url": server.url, "model": "tiny-vl", "timeout_s": 5, "max_crops": 2,
                                   "max_full_frames": 1, "top_logprobs": 5, **settings})


def test_log_p_yes_is_read_from_the_top_logprobs(rendered_small, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    top = [("Yes", math.log(0.55)), ("yes", math.log(0.15)), ("No", math.log(0.25)), (" Maybe", math.log(0.02))]
    with ChatServer([with_logprobs("Yes", top[0], top), SCORES]) as server:
        scorer = scorer_for(server, json_mode=True)
        result = scorer.score(request_for(rendered_small))
    assert result.holistic_source == "logprob" and result.invalid == []
    assert result.log_p_yes == pytest.approx(math.log(0.70))
    assert result.details["log_p_no"] == pytest.approx(math.log(0.25))
    assert (result.appearance, result.action, result.scene) == (90.0, 75.0, 100.0)
    (_, holistic), (_, scores) = server.requests
    assert holistic["logprobs"] is True and holistic["top_logprobs"] == 5 and holistic["max_tokens"] == 1
    assert "response_format" not in holistic and scores["response_format"] == {"type": "json_object"}
    assert "logprobs" not in scores and scores["max_tokens"] == 64
    images = [p for p in holistic["messages"][1]["content"] if p["type"] == "image_url"]
    assert len(images) == 3 and images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert '"a person in a red top walking right"' in holistic["messages"][1]["content"][-1]["text"]
    assert scorer.counts.requests == 1 and scorer.counts.calls == 2 and scorer.counts.holistic_sources == {"logprob": 1}


def test_without_logprobs_the_answer_is_read_and_recorded(rendered_small):
    # a server that ignores logprobs; then one whose top-k holds neither word
    neither = with_logprobs("Yes", ("Sure", -0.2), [("Sure", -0.2), ("Ok", -2.0)])
    with ChatServer(["No.", SCORES, neither, SCORES]) as server:
        scorer = scorer_for(server)
        plain = scorer.score(request_for(rendered_small))
        sure = scorer.score(request_for(rendered_small, 1))
    assert plain.holistic_source == "answer" and plain.log_p_yes == pytest.approx(math.log(0.01))
    assert sure.holistic_source == "answer" and sure.log_p_yes == pytest.approx(math.log(0.99))
    assert plain.invalid == [] and sure.details["top_logprobs"] == [["Sure", -0.2], ["Ok", -2.0]]
    assert scorer.counts.holistic_sources == {"answer": 2} and scorer.counts.requests == 2


def test_garbage_answers_are_counted_invalid_not_raised(rendered_small):
    with ChatServer(["Hard to say from these images.", "I would rate it highly.",
                     "Perhaps", '{"appearance": 180, "action": 40}']) as server:
        scorer = scorer_for(server)
        first = scorer.score(request_for(rendered_small))
        second = scorer.score(request_for(rendered_small, 1))
    assert first.log_p_yes is None and first.holistic_source is None
    assert first.appearance is first.action is first.scene is None
    assert [r.split(":")[0] for r in first.invalid] == ["holistic", "scores"]
    assert first.vlm_inputs() == (math.log(0.5), 50.0, 50.0, 50.0)
    assert second.action == 40.0 and [r.split(":")[0] for r in second.invalid] == ["holistic", "appearance", "scene"]
    assert scorer.counts.requests == 2 and scorer.counts.invalid_results == 2
    assert scorer.counts.invalid == {"holistic": 2, "scores": 1, "appearance": 1, "scene": 1}


def test_transport_failures_raise(rendered_small):
    with ChatServer([("status", 503)]) as server:
        scorer = scorer_for(server)
        with pytest.raises(EndpointError, match="HTTP 503"):
            scorer.score(request_for(rendered_small))


class _Answers(ChatScorer):
    """A chat scorer whose model answers the yes/no question with the given log P(yes)."""

    name, model = "fixed", "fixed"

    def __init__(self, log_p_yes: float):
        super().__init__()
        self.log_p_yes = log_p_yes

    def yes_no(self, messages):
        return YesNo(text="yes", log_p_yes=self.log_p_yes)

    def generate(self, messages, *, max_new_tokens):
        return SCORES


@pytest.mark.parametrize("log_p_yes", [math.nan, math.inf, -math.inf])
def test_a_non_finite_log_probability_is_counted_invalid_not_read_as_certain(rendered_small, log_p_yes):
    scorer = _Answers(log_p_yes)
    result = scorer.score(request_for(rendered_small))
    assert result.log_p_yes is None and result.holistic_source is None
    assert any("non-finite" in reason for reason in result.invalid), result.invalid
    assert result.vlm_inputs()[0] == math.log(0.5)  # the neutral log P(yes), not log 1
    assert (result.appearance, result.action, result.scene) == (90.0, 75.0, 100.0)

"""The chat-completions describer against a small local HTTP server with canned answers.

The server (``ChatServer``, a threading ``http.server``) records every request it gets and
answers from a script: a canned assistant message, an HTTP error, or a delay. Other tests import
it: ``from tests.models.test_vlm_openai import ChatServer``.
"""
from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cv2
import numpy as np
import pytest

from models.backends.llm.openai_chat import ChatEndpointConfig, EndpointError, chat_completion
from models.backends.vlm import DescribeBudget, DescribeRequest, build_describer
from models.backends.vlm.openai_backend import OpenAIDescriber, OpenAIVLMConfig
from models.demo.describe_eval import truth_track


class ChatServer:
    """A local chat-completions server answering from a script of replies, one per request.

    A reply is a string (the assistant's content), ``("status", code)`` for an HTTP error,
    ``("sleep", seconds, content)`` to answer late, or ``("raw", bytes)`` for a 200 reply with that
    body. With the script used up, the server answers HTTP 500. ``requests`` holds ``(headers, body)`` pairs.
    """

    def __init__(self, replies: list):
        self.replies = list(replies)
        self.requests: list[tuple[dict, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):                 # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                server.requests.append((dict(self.headers), body))
                reply = server.replies.pop(0) if server.replies else ("status", 500)
                if isinstance(reply, tuple) and reply[0] == "status":
                    self.send_response(reply[1])
                    self.end_headers()
                    self.wfile.write(b'{"error": "scripted failure"}')
                    return
                if isinstance(reply, tuple) and reply[0] == "sleep":
                    time.sleep(reply[1])
                    reply = reply[2]
                if isinstance(reply, tuple) and reply[0] == "raw":
                    data = reply[1]
                else:
                    payload = {"id": "x", "object": "chat.completion", "model": body.get("model"),
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": reply}}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
                    data = json.dumps(payload).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            def do_GET(self):
                self.send_response(404)
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def valid_answer(frames: np.ndarray) -> str:
    first, end = int(frames[0]), int(frames[-1]) + 1
    return json.dumps({
        "appearance": "A person in a red top and blue trousers.",
        "motion": "Walks to the right.",
        "facts": [
            {"id": "f1", "kind": "attribute", "name": "upper_colour", "value": "red", "start_frame": first,
             "end_frame": end, "evidence_frames": [first], "scope": "whole", "known": True},
            {"id": "f2", "kind": "event", "name": "walks", "value": "right", "start_frame": first,
             "end_frame": end, "evidence_frames": [first, end - 1], "scope": "interval", "known": True},
        ]})


def request_for(video, person_id=0, **budget):
    frames, boxes = truth_track(video.gt.people[person_id])
    budget = DescribeBudget(**{"max_crops": 3, "max_full_frames": 1, "max_new_tokens": 300, "max_attempts": 3,
                               **budget})
    return DescribeRequest(str(video.path), frames, boxes, budget=budget)


def describer_for(server: ChatServer, **settings) -> OpenAIDescriber:
    return build_describer("openai", {"base_url": server.url, "model": "tiny-vl", "timeout_s": 5, **settings})


def test_an_invalid_answer_is_retried_and_the_valid_one_kept(rendered_small, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    request = request_for(rendered_small)
    with ChatServer(["Sure! The person wears red.", valid_answer(request.frames)]) as server:
        result = describer_for(server).describe(request)
    assert not result.failed and result.attempts == 2
    assert result.raw_texts[0] == "Sure! The person wears red." and len(result.raw_texts) == 2
    assert len(result.errors) == 1 and "not valid JSON" in result.errors[0]
    assert [f.value for f in result.description.facts] == ["red", "right"]
    assert result.backend == "openai" and result.model == "tiny-vl"
    # what went over the wire
    (headers, first), (_, second) = server.requests
    assert "Authorization" not in headers
    assert first["model"] == "tiny-vl" and first["max_tokens"] == 300
    assert first["temperature"] == 0.0 and first["seed"] == 0 and "response_format" not in first
    assert first["messages"][0]["role"] == "system" and isinstance(first["messages"][0]["content"], str)
    parts = first["messages"][1]["content"]
    images = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert len(images) == len(result.crop_frames) + len(result.full_frames) == 4
    for url in images:
        assert url.startswith("data:image/jpeg;base64,")
        image = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
        assert image is not None and max(image.shape[:2]) <= 768
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert second["messages"][2]["content"] == "Sure! The person wears red."
    assert "not valid JSON" in second["messages"][3]["content"][0]["text"]


def test_answers_that_break_the_schema_or_leave_the_video_exhaust_the_budget(rendered_small):
    request = request_for(rendered_small, max_attempts=3)
    good = json.loads(valid_answer(request.frames))
    outside = json.loads(valid_answer(request.frames))
    outside["facts"][0]["end_frame"] = 500                   # the video has 48 frames
    wrong_kind = json.loads(valid_answer(request.frames))
    wrong_kind["facts"][1]["kind"] = "attribute"             # walks is an event
    missing = {k: v for k, v in good.items() if k != "motion"}
    with ChatServer([json.dumps(missing), json.dumps(outside), json.dumps(wrong_kind)]) as server:
        result = describer_for(server).describe(request)
    assert result.failed and result.description is None and result.attempts == 3
    assert "motion" in result.errors[0] and "after the video" in result.errors[1] and "not an attribute" in result.errors[2]
    assert len(result.raw_texts) == 3 and len(server.requests) == 3


def test_a_fenced_answer_and_the_json_mode_and_key(rendered_small, monkeypatch):
    monkeypatch.setenv("TRAJLAB_TEST_VLM_KEY", "sekrit")
    request = request_for(rendered_small, max_attempts=1)
    fenced = "```json\n" + valid_answer(request.frames) + "\n```"
    with ChatServer([fenced]) as server:
        describer = describer_for(server, json_mode=True, api_key_env="TRAJLAB_TEST_VLM_KEY")
        result = describer.describe(request)
    assert not result.failed and result.attempts == 1
    headers, body = server.requests[0]
    assert headers["Authorization"] == "Bearer sekrit"
    assert body["response_format"] == {"type": "json_object"}
    assert "sekrit" not in json.dumps(result.to_dict())     # the key is never recorded


def test_transport_failures_raise_endpoint_errors(rendered_small):
    request = request_for(rendered_small, max_attempts=2)
    with ChatServer([("status", 503)]) as server:
        with pytest.raises(EndpointError, match="HTTP 503"):
            describer_for(server).describe(request)
    with ChatServer([("sleep", 2.0, "{}")]) as server:
        with pytest.raises(EndpointError, match="no answer within"):
            describer_for(server, timeout_s=0.3).describe(request)
    closed = ChatServer([])
    url = closed.url
    closed.httpd.server_close()                              # nothing listens there any more
    with pytest.raises(EndpointError, match="cannot connect"):
        build_describer("openai", {"base_url": url, "model": "m", "timeout_s": 2}).describe(request)


def test_a_reply_that_is_not_a_chat_completion_is_an_endpoint_error():
    messages = [{"role": "user", "content": "hi"}]
    with ChatServer([("raw", b"<html>gateway</html>"), ("raw", b'{"choices": []}'), "ok"]) as server:
        config = ChatEndpointConfig(base_url=server.url, model="m", timeout_s=2)
        for _ in range(2):
            with pytest.raises(EndpointError, match="not a chat-completions response"):
                chat_completion(config, messages, max_tokens=5)
        answer = chat_completion(config, messages, max_tokens=5)
        assert (answer.text, answer.finish_reason, answer.usage["completion_tokens"]) == ("ok", "stop", 5)
        with pytest.raises(EndpointError, match="HTTP 500"):      # the script is used up
            chat_completion(config, messages, max_tokens=5)
    with pytest.raises(ValueError, match="max_tokens"):
        chat_completion(ChatEndpointConfig(model="m"), messages, max_tokens=0)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="model must name"):
        OpenAIVLMConfig(model="")
    with pytest.raises(ValueError, match="base_url"):
        OpenAIVLMConfig(model="m", base_url="localhost:8000")
    with pytest.raises(ValueError, match="timeout_s"):
        OpenAIVLMConfig(model="m", timeout_s=0)
    with pytest.raises(ValueError, match="unknown settings"):
        build_describer("openai", {"model": "m", "base_ulr": "http://x"})

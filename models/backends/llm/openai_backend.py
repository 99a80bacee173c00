"""An OpenAI-compatible chat-completions endpoint as the language backend (vLLM, llama.cpp server).

Each chat of :class:`models.backends.llm.chat.ChatLLM` is one request (greedy by default)::

    llm = OpenAILLM(ChatEndpointConfig(base_url="http://gpu-box:8000/v1", model="Qwen2.5-7B-Instruct"))

The API key is read from the environment variable named by ``api_key_env`` and never recorded.
Transport failures raise :class:`models.backends.llm.openai_chat.EndpointError`; what the model writes,
however wrong, is handled by the retry loop.
"""
from __future__ import annotations

from models.backends.llm.chat import ChatLLM
from models.backends.llm.openai_chat import ChatEndpointConfig, chat_completion


class OpenAILLM(ChatLLM):
    """The four language tasks through a chat-completions endpoint (see the module docstring)."""

    name = "openai"

    def __init__(self, config: ChatEndpointConfig):
        self.config = config
        self.model = config.model

    def settings(self) -> dict:
        return self.config.to_dict()

    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:
        return chat_completion(self.config, messages, max_tokens=max_new_tokens).text

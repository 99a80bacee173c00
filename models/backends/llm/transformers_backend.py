"""A local Hugging Face causal language model as the language backend (Qwen, Llama, ...).

The real-model language backend. The folder is loaded with ``AutoTokenizer`` and
``AutoModelForCausalLM`` (local files only); each chat of :class:`models.backends.llm.chat.ChatLLM` goes
through the tokenizer's chat template (a folder without one gets a plain "role: text" layout)
and is decoded greedily within the task's token budget::

    llm = TransformersLLM(TransformersLLMConfig(model_path="weights/Qwen2.5-7B-Instruct"))
    result = llm.generate_queries(approved_facts, GenerationBudget(max_queries=3))
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.backends.llm.chat import ChatLLM
from models.backends.llm.hf_local import check_model_folder, resolve_device, resolve_dtype
from models.config import UNKNOWN_SETTINGS, PlainConfig


@dataclass
class TransformersLLMConfig(PlainConfig):
    """Settings of the local Hugging Face language backend (plain data; recorded with results)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    # local Hugging Face folder of a causal language model (an instruct model with a chat template)
    model_path: str = ""
    # "auto" (CUDA when available), "cpu", "cuda" or "cuda:N"
    device: str = "auto"
    # "auto" (bfloat16 on CUDA, float32 on CPU), "float32", "bfloat16" or "float16"
    dtype: str = "auto"
    # attention kernel passed to from_pretrained ("sdpa", "eager", "flash_attention_2"; None: default)
    attn_implementation: str | None = None

    def __post_init__(self) -> None:
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"TransformersLLMConfig: dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")


class TransformersLLM(ChatLLM):
    """The four language tasks with a local causal LM (see the module docstring)."""

    name = "transformers"

    def __init__(self, config: TransformersLLMConfig):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.fingerprint = check_model_folder(config.model_path)
        self.model = self.fingerprint["model_path"]
        self.device = resolve_device(config.device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model, local_files_only=True)
        kwargs = {"dtype": resolve_dtype(config.dtype, self.device), "local_files_only": True}
        if config.attn_implementation:
            kwargs["attn_implementation"] = config.attn_implementation
        self.net = AutoModelForCausalLM.from_pretrained(self.model, **kwargs).to(self.device).eval()

    def settings(self) -> dict:
        return {**self.config.to_dict(), **self.fingerprint}

    def render(self, messages: list[dict]) -> str:
        """The prompt text: the tokenizer's chat template, or "role: text" lines without one."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        lines = [f"{m['role']}: {m['content']}" for m in messages]
        return "\n\n".join(lines) + "\n\nassistant:"

    @torch.inference_mode()
    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:
        inputs = self.tokenizer(self.render(messages), return_tensors="pt", add_special_tokens=False)
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        out = self.net.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
        new = out[0, inputs["input_ids"].shape[1]:]                        # [T]
        return self.tokenizer.decode(new, skip_special_tokens=True)

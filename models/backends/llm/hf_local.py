"""Loading Hugging Face models from local folders: the checks and choices both model kinds share.

Nothing is downloaded: a folder must hold ``config.json`` (and the weights and tokenizer or
processor files next to it), and loading runs with ``local_files_only=True``. A missing or
incomplete folder is a :class:`ModelPathError` naming what is missing.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch


class ModelPathError(ValueError):
    """A local model folder that does not exist or does not hold a Hugging Face model."""


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def check_model_folder(path: str) -> dict:
    """Check that ``path`` is a local Hugging Face model folder; returns a fingerprint
    ``{"model_path", "model_type", "config_sha256"}`` for the records."""
    if not path:
        raise ModelPathError("no model path given: set model_path to a local Hugging Face model folder")
    folder = Path(path)
    if not folder.exists():
        raise ModelPathError(f"model path {folder} does not exist (models are never downloaded: copy the "
                             "Hugging Face folder there first)")
    if not folder.is_dir():
        raise ModelPathError(f"model path {folder} is a file; give the Hugging Face model folder")
    config = folder / "config.json"
    if not config.is_file():
        raise ModelPathError(f"{folder} holds no config.json: not a Hugging Face model folder")
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        raise ModelPathError(f"{folder} holds no weights ({', '.join(WEIGHT_FILES)})")
    text = config.read_bytes()
    try:
        model_type = str(json.loads(text).get("model_type", ""))
    except ValueError:
        raise ModelPathError(f"{config} is not valid JSON") from None
    return {"model_path": str(folder.resolve()), "model_type": model_type,
            "config_sha256": hashlib.sha256(text).hexdigest()}


def resolve_device(device: str) -> torch.device:
    """'auto' (CUDA when available), 'cpu', 'cuda' or 'cuda:N'."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" or device.startswith("cuda"):
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but CUDA is not available")
        return torch.device(device)
    raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {device!r}")


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """'auto' (bfloat16 on CUDA, float32 on CPU), 'float32', 'bfloat16' or 'float16'."""
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in table:
        raise ValueError(f"dtype must be 'auto' or one of {', '.join(table)}, got {dtype!r}")
    return table[dtype]

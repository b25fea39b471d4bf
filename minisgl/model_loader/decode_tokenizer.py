"""The tokenizer of the scheduler and detokenizer processes, which only turn token ids into text.

The detokenizer decodes every step's new tokens; the scheduler decodes an output's tail to look for stop
strings. Neither encodes or applies a chat template. Importing transformers costs about 1.4 s of CPU per
process (its `__init__` reads the source of every model it knows), paid again by every process of every
server start. So where the tokenizer's folder holds a `tokenizer.json` that transformers itself would only
wrap, these two processes read it with the `tokenizers` library alone, and decode exactly as
transformers' fast tokenizer does:

    text = backend.decode(ids, skip_special_tokens)       # the Rust tokenizer, as transformers calls it
    if clean_up_tokenization_spaces and not BPE: text = clean_up_tokenization(text)

Anything else (a class transformers decodes its own way, added tokens the file does not hold, a GGUF whose
tokenizer is not converted yet) goes through transformers (`load_tokenizer`), as before.
tests/model_loader/test_decode_tokenizer.py holds both to the same text.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

# tokenizer_config.json classes whose decode is transformers' generic fast-tokenizer decode
GENERIC_CLASSES = frozenset({"TokenizersBackend", "PreTrainedTokenizerFast"})

# transformers' clean-up of the spaces a WordPiece decode leaves before punctuation and contractions
_CLEAN_UP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
             (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]


def clean_up_tokenization(text: str) -> str:
    for before, after in _CLEAN_UP:
        text = text.replace(before, after)
    return text


class DecodeTokenizer:
    """`decode(ids, skip_special_tokens=False)` as transformers' fast tokenizer gives it."""

    def __init__(self, backend, clean_up: bool):
        self.backend_tokenizer = backend
        self.clean_up = clean_up

    def decode(self, token_ids, skip_special_tokens: bool = False) -> str:
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        text = self.backend_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        return clean_up_tokenization(text) if self.clean_up else text


def load_decode_tokenizer(src):
    """A tokenizer with transformers' `decode` for the ModelSource `src`: a DecodeTokenizer where the folder
    allows it, else transformers' own tokenizer."""
    try:
        tokenizer = from_folder(_folder(src))
    except (OSError, ValueError, KeyError, TypeError) as e:
        tokenizer = None
        logger.debug("decode tokenizer: %s; using transformers", e)
    if tokenizer is not None:
        return tokenizer
    from minisgl.model_loader.loader import load_tokenizer

    return load_tokenizer(src)


def _folder(src) -> Path | None:
    if src.kind != "gguf":
        return src.path
    from minisgl.model_loader.tokenizer_cache import cache_dir, cache_key

    return cache_dir() / cache_key(src.path)  # the converted tokenizer, once a first load has made it


def from_folder(folder: Path | None) -> DecodeTokenizer | None:
    """The folder's tokenizer.json as a DecodeTokenizer, or None where transformers would decode otherwise."""
    if folder is None or not (folder / "tokenizer.json").is_file():
        return None
    config_file = folder / "tokenizer_config.json"
    if not config_file.is_file():  # transformers would pick the class from the model's config.json
        return None
    config = json.loads(config_file.read_text())
    if config.get("tokenizer_class") not in GENERIC_CLASSES:
        return None
    from tokenizers import Tokenizer

    backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for key, token in config.get("added_tokens_decoder", {}).items():  # transformers would add these
        held = backend.get_added_tokens_decoder().get(int(key))
        if held is None or held.content != token["content"] or held.special != token.get("special", False):
            return None
    clean_up = bool(config.get("clean_up_tokenization_spaces", False))
    if clean_up and type(backend.model).__name__ == "BPE":  # transformers skips it for BPE, unless forced
        clean_up = bool(config.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"))
    return DecodeTokenizer(backend, clean_up)

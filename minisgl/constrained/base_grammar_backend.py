"""The grammar backend's interface (SGLang's constrained/base_grammar_backend.py): what a request's grammar
object does each round, and a backend that compiles grammars on a thread of its own, once per text."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch


class BaseGrammarObject:
    """One request's matcher: where its output stands in the grammar."""

    def accept_token(self, token: int) -> bool:
        """Advance by the token the request kept; False if the grammar does not allow it."""
        raise NotImplementedError

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        """Write into row idx of the batch's mask which tokens may come next."""
        raise NotImplementedError

    def is_terminated(self) -> bool:
        """The grammar is complete and its stop token accepted: the request is done."""
        raise NotImplementedError


class BaseGrammarBackend:
    """Compiles (kind, text) keys on one worker thread; `compile` is the backend's own, `new_grammar` makes a
    fresh matcher over a compiled grammar for each request."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grammar")

    def submit(self, key: tuple[str, str]) -> Future:
        return self.executor.submit(self.compile, *key)

    def compile(self, kind: str, text: str) -> Any:
        raise NotImplementedError

    def new_grammar(self, compiled: Any) -> BaseGrammarObject:
        raise NotImplementedError

    def allocate_vocab_mask(self, batch_size: int) -> torch.Tensor:
        raise NotImplementedError

    def apply_vocab_mask(self, logits: torch.Tensor, vocab_mask: torch.Tensor, rows: list[int]) -> None:
        raise NotImplementedError

    def allowed_counts(self, vocab_mask: torch.Tensor, rows: list[int]) -> list[int]:
        raise NotImplementedError

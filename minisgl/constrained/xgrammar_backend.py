"""The xgrammar backend (SGLang's default, constrained/xgrammar_backend.py). xgrammar is imported, and the
model's tokenizer loaded through transformers, on the grammar thread when the first grammar is compiled:
a server that never sees one never pays for either."""

from __future__ import annotations

import re
from typing import Any

import torch

from minisgl.constrained.base_grammar_backend import BaseGrammarBackend, BaseGrammarObject


class InvalidGrammar(ValueError):
    """The grammar text does not compile (a bad schema, regex or EBNF)."""


class XGrammarGrammar(BaseGrammarObject):
    def __init__(self, matcher: Any):
        self.matcher = matcher

    def accept_token(self, token: int) -> bool:
        return self.matcher.accept_token(token)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()


class XGrammarGrammarBackend(BaseGrammarBackend):
    def __init__(self, source: Any, vocab_size: int, eos_token_ids: set[int]):
        super().__init__()
        self.source, self.vocab_size, self.eos_token_ids = source, vocab_size, eos_token_ids
        self.compiler = None  # made on the grammar thread, at the first compile

    def _make_compiler(self):
        import xgrammar as xgr

        from minisgl.model_loader.loader import load_tokenizer

        info = xgr.TokenizerInfo.from_huggingface(load_tokenizer(self.source), vocab_size=self.vocab_size,
                                                  stop_token_ids=sorted(self.eos_token_ids))
        return xgr.GrammarCompiler(info, max_threads=1)

    def compile(self, kind: str, text: str) -> Any:
        if self.compiler is None:
            self.compiler = self._make_compiler()
        try:
            if kind == "json_schema":
                return self.compiler.compile_json_schema(text)
            if kind == "regex":
                return self.compiler.compile_regex(text)
            return self.compiler.compile_grammar(text)  # ebnf
        except (RuntimeError, ValueError) as e:
            # xgrammar's C++ message starts "[hh:mm:ss] file.cc:line: ": keep what comes after it
            why = re.sub(r"^\[[\d:]+\] \S+:\d+: ", "", str(e).strip().splitlines()[0])
            raise InvalidGrammar(f"invalid {kind}: {why}") from None

    def new_grammar(self, compiled: Any) -> XGrammarGrammar:
        import xgrammar as xgr

        return XGrammarGrammar(xgr.GrammarMatcher(compiled))

    def allocate_vocab_mask(self, batch_size: int) -> torch.Tensor:
        import xgrammar as xgr

        return xgr.allocate_token_bitmask(batch_size, self.vocab_size)

    def apply_vocab_mask(self, logits: torch.Tensor, vocab_mask: torch.Tensor, rows: list[int]) -> None:
        import xgrammar as xgr

        xgr.apply_token_bitmask_inplace(logits, vocab_mask, vocab_size=self.vocab_size, indices=rows)

    def allowed_counts(self, vocab_mask: torch.Tensor, rows: list[int]) -> list[int]:
        """How many tokens each row's mask leaves (bits set over the vocabulary)."""
        bits = vocab_mask[rows].view(torch.uint8).unsqueeze(-1).bitwise_and(
            torch.tensor([1 << b for b in range(8)], dtype=torch.uint8)).ne(0)
        return bits.flatten(1)[:, :self.vocab_size].sum(dim=1).tolist()


def create_grammar_backend(grammar_backend: str, source: Any, vocab_size: int,
                           eos_token_ids: set[int]) -> BaseGrammarBackend | None:
    """--grammar-backend: xgrammar (the default) or none (a request with a grammar is refused)."""
    if grammar_backend == "none":
        return None
    return XGrammarGrammarBackend(source, vocab_size, eos_token_ids)

"""Keep only the rows whose next token is sampled, then project them to vocabulary logits.

In EXTEND a request contributes many rows but only its last one predicts a new token: the seeds' nine
input rows of R1 and R2 give two logit rows. TARGET_VERIFY (speculative decoding) keeps every row: each
draft token is checked against the argmax of the row before it. A request that asks for its prompt's
logprobs keeps the logits of its other prompt rows too (ForwardBatch.input_logits).

With tensor parallelism each rank holds a slice of the vocabulary (ParallelLMHead): it computes the
logits of its own tokens, and an all-gather puts every rank's slices side by side (the padding cut off).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minisgl import kernels
from minisgl.distributed.communication_op import tensor_model_parallel_all_gather
from minisgl.distributed.parallel_state import get_tensor_model_parallel_world_size
from minisgl.layers.linear import pack_weight, packed_linear
from minisgl.model_executor.forward_batch_info import ForwardBatch


class LogitsProcessor(nn.Module):
    def __init__(self, vocab_size: int | None = None):
        super().__init__()
        self.vocab_size = vocab_size  # the real vocabulary: what is left after gathering the padded slices
        self.tp_size = get_tensor_model_parallel_world_size()
        self.packed_lm_head = None  # lm_head's weight packed for oneDNN, if pack() could
        self.quantized_lm_head = None  # or a module whose matmul() is the product (--quantization gguf)

    @property
    def packed_lm_head(self) -> torch.Tensor | None:
        return self._packed_lm_head

    @packed_lm_head.setter
    def packed_lm_head(self, packed: torch.Tensor | None) -> None:
        """Setting it chooses the product once: oneDNN's with the packed copy, or F.linear."""
        self._packed_lm_head = packed
        self._project = self._project_native if packed is None else self._project_packed

    def pack(self, lm_head_weight: torch.Tensor | None) -> bool:
        """A packed copy of its own: a tied lm_head shares its weight with the embedding, not its layout."""
        if self.quantized_lm_head is not None:
            return False
        self.packed_lm_head = pack_weight(lm_head_weight)
        return self.packed_lm_head is not None

    def use_quantized(self, head: nn.Module) -> None:
        """Multiply by `head.matmul(x)` (quantized blocks, layers/quantization/) instead of a weight."""
        self.quantized_lm_head = head
        self._project = self._project_quantized

    def forward(self, hidden_states: torch.Tensor, lm_head_weight: torch.Tensor,
                forward_batch: ForwardBatch) -> torch.Tensor:
        if forward_batch.input_logprob_rows:  # a prompt's logprobs: those rows' logits, kept aside
            forward_batch.input_logits = self._logits(hidden_states[forward_batch.input_logprob_rows],
                                                      lm_head_weight)
        if forward_batch.forward_mode.is_extend():  # not TARGET_VERIFY: all its rows are scored
            hidden_states = hidden_states[forward_batch.last_row_indices()]
        return self._logits(hidden_states, lm_head_weight)

    def _logits(self, hidden_states: torch.Tensor, lm_head_weight: torch.Tensor) -> torch.Tensor:
        logits = self._project(hidden_states, lm_head_weight)
        if self.tp_size > 1:
            logits = tensor_model_parallel_all_gather(logits)[:, : self.vocab_size]
        return logits.float()

    def _project_native(self, hidden_states: torch.Tensor, lm_head_weight: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden_states, lm_head_weight)

    def _project_quantized(self, hidden_states: torch.Tensor, lm_head_weight: None) -> torch.Tensor:
        logits = self.quantized_lm_head.matmul(hidden_states)  # the C++ kernel's: it makes them float32 too
        return kernels.bf16_to_f32(logits) if logits.dtype == torch.bfloat16 else logits

    def _project_packed(self, hidden_states: torch.Tensor, lm_head_weight: torch.Tensor) -> torch.Tensor:
        return packed_linear(hidden_states, self._packed_lm_head, None)

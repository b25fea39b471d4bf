"""Keep only the rows whose next token is sampled, then project them to vocabulary logits.

In EXTEND a request contributes many rows but only its last one predicts a new token: the seeds' nine
input rows of R1 and R2 give two logit rows.
"""

from __future__ import annotations

import torch
from torch import nn

from minisgl.model_executor.forward_batch_info import ForwardBatch


class LogitsProcessor(nn.Module):
    def forward(self, hidden_states: torch.Tensor, lm_head_weight: torch.Tensor, forward_batch: ForwardBatch) -> torch.Tensor:
        if forward_batch.forward_mode.is_extend():
            hidden_states = hidden_states[forward_batch.last_row_indices()]
        return torch.nn.functional.linear(hidden_states, lm_head_weight).float()

"""The embedding and the output head split by vocabulary (SGLang's `VocabParallelEmbedding`,
`ParallelLMHead`).

Rank r holds the rows of tokens [r * V/N, (r + 1) * V/N) (the vocabulary padded up to a multiple of N).
Embedding: each rank looks up the ids that fall in its rows, writes zeros for the others, and an
all-reduce sums the ranks' rows into every token's embedding. Output head: each rank computes the logits
of its own tokens; the logits processor gathers them (layers/logits_processor.py). With one rank this is
a plain embedding lookup over the whole table.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minisgl.distributed.communication_op import tensor_model_parallel_all_reduce
from minisgl.distributed.parallel_state import (
    get_tensor_model_parallel_rank,
    get_tensor_model_parallel_world_size,
)


class VocabParallelEmbedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.tp_rank, self.tp_size = get_tensor_model_parallel_rank(), get_tensor_model_parallel_world_size()
        self.num_embeddings = num_embeddings
        self.num_embeddings_per_partition = -(-num_embeddings // self.tp_size)  # padded up
        self.vocab_start_index = self.tp_rank * self.num_embeddings_per_partition
        self.vocab_end_index = min(self.vocab_start_index + self.num_embeddings_per_partition, num_embeddings)
        # an empty weight: the checkpoint fills it (nn.Embedding's default would draw random numbers first)
        self.weight = nn.Parameter(torch.empty(self.num_embeddings_per_partition, embedding_dim),
                                   requires_grad=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self.tp_size == 1:
            return F.embedding(input_ids, self.weight)
        outside = (input_ids < self.vocab_start_index) | (input_ids >= self.vocab_end_index)
        local_ids = (input_ids - self.vocab_start_index).masked_fill(outside, 0)
        out = F.embedding(local_ids, self.weight).masked_fill(outside.unsqueeze(-1), 0)
        return tensor_model_parallel_all_reduce(out)

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id=None) -> None:
        if list(loaded_weight.shape) != [self.num_embeddings, param.shape[1]]:
            raise ValueError(f"expected {[self.num_embeddings, param.shape[1]]}")
        rows = loaded_weight[self.vocab_start_index : self.vocab_end_index]
        param[: rows.shape[0]].copy_(rows)
        param[rows.shape[0] :].zero_()  # the padding rows: logits the gather cuts off

    def extra_repr(self) -> str:
        return (f"num_embeddings={self.num_embeddings_per_partition} of {self.num_embeddings}, "
                f"embedding_dim={self.weight.shape[1]}, tp_rank={self.tp_rank}")


class ParallelLMHead(VocabParallelEmbedding):
    """The output projection's weight, split like the embedding; only a weight holder (no forward):
    the logits processor multiplies by it and gathers every rank's logits."""

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("ParallelLMHead holds the output weight; LogitsProcessor computes the logits")

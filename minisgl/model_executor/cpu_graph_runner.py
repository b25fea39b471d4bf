"""CpuGraphRunner: decode forwards replayed from a recording, the CPU's counterpart of SGLang's
CudaGraphRunner.

SGLang captures the decode forward of each batch size as a CUDA graph once, with its inputs in fixed
("static") buffers; each later decode round copies its inputs into those buffers and replays the graph,
so the GPU runs the whole step without waiting on Python to launch each kernel. On a CPU the cost is the
same in kind: with a 135M model a batch-1 decode step spent 7 to 12 ms of its 27 to 33 in Python (choosing
the next layer, making tensors, converting kernel arguments), not in the C++ kernels.

Here a graph is the list of C++ kernel calls of one decode forward (kernels/graph.py records them, and
csrc/graph.cpp replays them in one call):
1. capture: the first DECODE round of a batch size runs the ordinary forward on static copies of its
   inputs (token ids, positions, KV slots, request rows, lengths) while every kernel call is recorded;
   that forward's logits are the round's answer.
2. check: the next round of that size replays the graph and also runs the ordinary forward, on new
   inputs, and compares the two logits bit for bit. A torch op left in the forward (a layer running its
   torch code, say) would be missing from the replay and show up here: the runner then turns itself off
   with a warning and every forward is the ordinary one.
3. replay: every later round copies its inputs into the static buffers and replays.

It runs where every op of the decode forward has a kernel: the C++ kernels on, GGUF blocks kept
(--quantization gguf, which is also the default for a .gguf model in bfloat16), one tensor-parallel rank.
--disable-cpu-graph turns it off; --cpu-graph-max-bs caps the batch sizes it records (SGLang's
--disable-cuda-graph and --cuda-graph-max-bs); a graph holds the activations its calls write, about
0.7 MiB a row for the bundled model. Speculative decoding's TARGET_VERIFY forwards of one request are
recorded and replayed the same way (SGLang captures those too): their rows are the request's last token
and its drafts, read by attention as decode queries of their own (ForwardBatch.row_seq_lens). Graphs are
kept per DECODE batch size, or per number of TARGET_VERIFY rows, and per thread count.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from minisgl.kernels import graph as kernel_graph
from minisgl.model_executor.forward_batch_info import ForwardBatch

if TYPE_CHECKING:
    from minisgl.model_executor.model_runner import ModelRunner

logger = logging.getLogger(__name__)

_INPUTS = ("input_ids", "positions", "out_cache_loc", "req_pool_indices", "seq_lens")
_VERIFY_INPUTS = _INPUTS + ("row_req_pool_indices", "row_seq_lens")  # verify rows read as decode queries


@dataclass
class _Graph:
    inputs: ForwardBatch  # the static buffers the recorded calls read
    graph: kernel_graph.KernelGraph
    logits: torch.Tensor  # where the replay leaves the logits
    checked: bool = False


class CpuGraphRunner:
    def __init__(self, model_runner: ModelRunner):
        self.model_runner = model_runner
        self.max_bs = model_runner.server_args.cpu_graph_max_bs
        self.graphs: dict[tuple, _Graph] = {}  # by _key: (forward mode, batch size or rows, threads)
        self.disabled_reason: str | None = None
        self.replays = 0

    @staticmethod
    def why_not(model_runner: ModelRunner) -> str | None:
        """Why this runner cannot replay the model's decode forwards at all; None where it can."""
        args = model_runner.server_args
        if args.disable_cpu_graph:
            return "--disable-cpu-graph"
        if args.cpu_graph_max_bs < 1:
            return "--cpu-graph-max-bs is below 1"
        if not model_runner.use_cpu_kernels:
            return "the C++ kernels are off"
        if model_runner.tp_size > 1:
            return "tensor parallelism (the all-reduce is not a kernel)"
        if getattr(model_runner.model.logits_processor, "quantized_lm_head", None) is None:
            return "the logits are a torch product (GGUF blocks are not kept: --quantization none)"
        return None

    def can_run(self, forward_batch: ForwardBatch) -> bool:
        """DECODE rounds up to --cpu-graph-max-bs requests; TARGET_VERIFY rounds of one request (with more,
        each mix of draft counts would need a graph of its own)."""
        fb, mode = forward_batch, forward_batch.forward_mode
        verify = mode.is_target_verify() and fb.row_seq_lens is not None and fb.batch_size == 1
        return (self.disabled_reason is None
                and ((mode.is_decode() and fb.batch_size <= self.max_bs) or verify))

    @staticmethod
    def _key(forward_batch: ForwardBatch) -> tuple:
        """What a graph is recorded for: a DECODE batch size, or a TARGET_VERIFY batch's rows per request."""
        fb = forward_batch
        rows = fb.batch_size if fb.forward_mode.is_decode() else tuple(fb.extend_seq_lens)
        return fb.forward_mode.name, rows, torch.get_num_threads()

    def forward(self, forward_batch: ForwardBatch) -> torch.Tensor:
        key = self._key(forward_batch)
        entry = self.graphs.get(key)
        if entry is None:
            entry, logits = self._capture(forward_batch)
            self.graphs[key] = entry
            return logits
        for name in _inputs(forward_batch):
            getattr(entry.inputs, name).copy_(getattr(forward_batch, name))
        entry.graph.replay()
        self.replays += 1
        logits = entry.logits.clone()  # the next replay overwrites the static one
        if not entry.checked:
            return self._check(entry, logits, forward_batch)
        return logits

    def _capture(self, forward_batch: ForwardBatch) -> tuple[_Graph, torch.Tensor]:
        inputs = {name: getattr(forward_batch, name).clone() for name in _inputs(forward_batch)}
        static = replace(forward_batch, **inputs, seq_lens_cpu=list(forward_batch.seq_lens_cpu))
        with kernel_graph.record() as recorder:
            logits = self.model_runner.forward_eager(static)
        entry = _Graph(static, recorder.graph(), logits)
        logger.info("cpu graph: recorded the %s forward of %s, %d threads: %d kernel calls, %.1f MiB of "
                    "buffers", *self._key(forward_batch), len(entry.graph), self._own_bytes(entry) / 2**20)
        return entry, logits.clone()

    def _own_bytes(self, entry: _Graph) -> int:
        """The memory a graph holds of its own: the activations its calls write (not the weights or the
        pools)."""
        runner, pool = self.model_runner, self.model_runner.token_to_kv_pool
        held = [*pool.k_buffer, *pool.v_buffer, runner.req_to_token_pool.req_to_token]
        for module in runner.model.modules():  # parameters, buffers and tables such as rotary's
            held += _tensors_of(module)
        shared = {t.untyped_storage().data_ptr() for t in held}
        own = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in entry.graph.tensors}
        return sum(n for ptr, n in own.items() if ptr not in shared)

    def memory_bytes(self) -> int:
        """What all recorded graphs hold of their own."""
        return sum(self._own_bytes(entry) for entry in self.graphs.values())

    def _check(self, entry: _Graph, replayed: torch.Tensor, forward_batch: ForwardBatch) -> torch.Tensor:
        """The ordinary forward on the same inputs; it also rewrites the round's KV rows, so the pool holds
        what the ordinary forward wrote whatever the replay did."""
        eager = self.model_runner.forward_eager(forward_batch)
        if torch.equal(replayed, eager):
            entry.checked = True
            return replayed
        self.disabled_reason = ("its replay of %s %s differed from the ordinary forward: some op of that "
                                "forward has no C++ kernel" % self._key(forward_batch)[:2])
        logger.warning("cpu graph off: %s", self.disabled_reason)
        self.graphs.clear()
        return eager


def _inputs(forward_batch: ForwardBatch) -> tuple[str, ...]:
    return _INPUTS if forward_batch.forward_mode.is_decode() else _VERIFY_INPUTS


def _tensors_of(module: torch.nn.Module) -> list[torch.Tensor]:
    """The tensors a module holds in its attributes, directly or in a dict, tuple or list."""
    found = []
    for value in vars(module).values():
        items = (value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list))
                 else [value])
        found += [v for v in items if isinstance(v, torch.Tensor)]
    return found

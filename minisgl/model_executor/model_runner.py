"""ModelRunner: owns the model, the two memory pools and the attention backend; runs one ForwardBatch.

Everything that depends on the machine is decided here, once, when the runner is built: whether the
CPU kernels run (each layer's `forward_cpu` or `forward_native`, see layers/custom_op.py) and which
attention backend reads the KV cache. A forward pass then only runs what was chosen.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os

import torch

from minisgl import kernels
from minisgl.configs.model_config import ModelConfig
from minisgl.layers.attention.base_attn_backend import AttentionBackend
from minisgl.layers.attention.cpu_paged_backend import CpuPagedAttnBackend
from minisgl.layers.attention.hybrid_attn_backend import HybridAttnBackend
from minisgl.layers.attention.torch_native_backend import TorchNativeAttnBackend
from minisgl.layers.custom_op import CustomOp
from minisgl.layers.quantization.gguf import check_supported, quantize_linears
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
from minisgl.model_executor.cpu_graph_runner import CpuGraphRunner
from minisgl.model_executor.forward_batch_info import ForwardBatch
from minisgl.model_loader.loader import ModelSource, iter_weights
from minisgl.models.registry import ModelRegistry
from minisgl.server_args import ServerArgs

logger = logging.getLogger(__name__)

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def resolve_dtype(name: str, device: str) -> torch.dtype:
    if name == "auto":
        # on CPU: 1.6-2.3x faster than float32 here; greedy tokens may part from float32 at near-ties
        # (tests/scheduler/test_bf16_default_path.py states and checks what bfloat16 promises)
        return torch.bfloat16
    return _DTYPES[name]


def resolve_device(name: str) -> torch.device:
    if name == "npu":
        try:
            import torch_npu  # noqa: F401  (registers the npu device with torch)
        except ImportError as e:
            raise RuntimeError("--device npu needs torch_npu: pip install 'minisgl[npu]'") from e
    elif name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda asked for, but torch sees no CUDA device")
    return torch.device(name)


class ModelRunner:
    def __init__(self, model_config: ModelConfig, source: ModelSource, server_args: ServerArgs,
                 model: torch.nn.Module | None = None, tp_rank: int = 0):
        """`model`: weights already loaded by another runner (same dtype and device) to share. This runner
        runs them through its own module objects (see share_modules), so its kernel choice is its own.
        `tp_rank`: this process's rank of --tp-size (each rank builds its own runner over its slice)."""
        self.model_config = model_config
        self.server_args = server_args
        self.source = source
        self.tp_rank, self.tp_size = tp_rank, server_args.tp_size
        self.device = resolve_device(server_args.device)
        if self.tp_size > 1:
            self.init_torch_distributed()
        self.dtype = resolve_dtype(server_args.dtype, server_args.device)
        self.context_len = server_args.context_length or model_config.context_len
        self.model = share_modules(model) if model is not None else self._load_model(source)
        # which GGUF products dequantize their blocks for oneDNN's GEMM, from how many rows (shared weights:
        # the products, and so their choice, are shared too)
        self.dequant_gemm_rows = self._choose_products() if model is None else model.dequant_gemm_rows
        self._init_memory_pool()
        self.use_cpu_kernels = self._want_cpu_kernels()
        set_kernel_layers(self.model, self.use_cpu_kernels)
        self.verify_model = self._verify_model()  # after the kernel choice, which its module objects copy
        self.attn_backend = create_attn_backend(self.use_cpu_kernels)
        logger.info("attention backend: %r", self.attn_backend)
        self.token_to_kv_pool.use_kernel = self.use_cpu_kernels
        # DECODE forwards replayed from a recording (cpu_graph_runner.py)
        why_not = CpuGraphRunner.why_not(self)
        self.graph_runner = CpuGraphRunner(self) if why_not is None else None
        logger.info("cpu graph: %s", "on" if why_not is None else f"off ({why_not})")

    def _verify_model(self) -> torch.nn.Module | None:
        """With speculative decoding in float32 on the CPU: the model's weights packed once more, for
        products of K + 1 rows per request, which its TARGET_VERIFY forwards run on (models/llama.py
        verify_view). It doubles the weights' memory; None (verify on the model itself) elsewhere."""
        args = self.server_args
        if args.speculative_algorithm is None or self.dtype != torch.float32 or self.device.type != "cpu":
            return None
        view = self.model.verify_view(args.speculative_num_draft_tokens + 1)
        logger.info("speculative verify forwards: %s",
                    "oneDNN packed float32 weights" if view else "F.linear")
        return view

    def init_torch_distributed(self) -> None:
        """Join the other ranks (SGLang's name): every rank's layers then hold only their slice."""
        from minisgl.distributed.parallel_state import (
            init_distributed_environment,
            model_parallel_is_initialized,
        )

        if not model_parallel_is_initialized():
            init_distributed_environment(self.tp_size, self.tp_rank,
                                         f"tcp://{self.server_args.dist_init_addr}", self.server_args.device,
                                         self.tp_rank % self.server_args.tp_size_per_node)

    def _want_cpu_kernels(self) -> bool:
        """--cpu-kernels: auto uses them where they build and fit (cpu, float32 or bfloat16); on insists."""
        mode = self.server_args.cpu_kernels
        if mode == "off":
            return False
        if not kernels.supports(self.dtype, self.device):
            if mode == "on":
                raise RuntimeError(f"--cpu-kernels on needs --device cpu and float32 or bfloat16, not "
                                   f"{self.device.type} {str(self.dtype).removeprefix('torch.')}")
            return False
        if not kernels.load() and mode == "on":
            raise RuntimeError(f"--cpu-kernels on: {kernels.unavailable_reason()}")
        return kernels.available()

    def _choose_products(self) -> dict[str, int | None]:
        from minisgl.kernels import dequant_gemm

        products = dequant_gemm.model_products(self.model)
        chosen = dequant_gemm.choose(products, self.server_args.dequant_gemm_rows)
        if chosen:
            logger.info("GGUF products: %s", dequant_gemm.describe(products, chosen))
        self.model.dequant_gemm_rows = chosen
        return chosen

    def _load_model(self, source: ModelSource) -> torch.nn.Module:
        cls = ModelRegistry[self.model_config.architecture]
        quantize = check_supported(self.server_args.quantization, source.kind, self.device, self.dtype)
        quantize = quantize and self.tp_size == 1  # whole blocks cannot be split (launch.py refuses the flag)
        with torch.device("meta"):
            model = cls(self.model_config)
        # built on the meta device (no random init), given empty float32 storage, then filled from the
        # checkpoint
        _materialize_empty(model)
        model.model.rotary_emb.build_cache()
        kept = set()
        if quantize:  # the int4 layers take their blocks as stored; those weights are then not dequantized
            from minisgl.model_loader.gguf_weights import read_gguf_linear_blocks

            # they run Q8_0 and Q4 blocks
            cpu_kernels = self.server_args.cpu_kernels != "off" and kernels.load()
            if cpu_kernels or self.server_args.quantization == "gguf":  # no flag: only with the C++ kernels
                blocks = read_gguf_linear_blocks(source.path, self.model_config)
                kept = quantize_linears(model, blocks, self.dtype, cpu_kernels)
        model.load_weights(iter_weights(source, self.model_config, skip=kept))
        model = model.to(device=self.device, dtype=self.dtype).eval()
        model.pack_weights()  # once, after the last dtype change: a no-op where oneDNN can't help
        return model

    def _init_memory_pool(self) -> None:
        c, args = self.model_config, self.server_args
        kv_heads = c.num_key_value_heads // self.tp_size  # this rank's heads (the model checked they divide)
        per_token = TokenToKVPool.bytes_per_token(c.num_hidden_layers, kv_heads, c.head_dim, self.dtype)
        if args.max_total_tokens is not None:
            size = args.max_total_tokens
        else:
            size = int(_available_memory_bytes(self.device) * args.mem_fraction_static // per_token)
            size = min(size, args.max_running_requests * self.context_len)
            if self.tp_size > 1:  # every rank must schedule alike: all take the smallest rank's pool
                from minisgl.distributed.communication_op import all_reduce_min_int

                size = all_reduce_min_int(size)
        self.max_total_num_tokens = size
        self.req_to_token_pool = ReqToTokenPool(args.max_running_requests, self.context_len, self.device)
        self.token_to_kv_pool = TokenToKVPool(
            size, c.num_hidden_layers, kv_heads, c.head_dim, self.dtype, self.device
        )
        logger.info("KV cache: %d slots, %.1f MiB", size, size * per_token / 2**20)

    @torch.inference_mode()
    def forward(self, forward_batch: ForwardBatch) -> torch.Tensor:
        """Returns float32 logits: one row per request (its last row in EXTEND/MIXED); every row in
        TARGET_VERIFY."""
        if self.graph_runner is not None and self.graph_runner.can_run(forward_batch):
            return self.graph_runner.forward(forward_batch)
        return self.forward_eager(forward_batch)

    @torch.inference_mode()
    def forward_eager(self, forward_batch: ForwardBatch) -> torch.Tensor:
        """The forward pass layer by layer, in Python (what a graph records)."""
        forward_batch.attn_backend = self.attn_backend
        self.attn_backend.init_forward_metadata(forward_batch)
        verify = self.verify_model is not None and forward_batch.forward_mode.is_target_verify()
        return (self.verify_model if verify else self.model)(
            forward_batch.input_ids.to(self.device), forward_batch.positions.to(self.device), forward_batch
        )

    @staticmethod
    def sample_greedy(logits: torch.Tensor) -> torch.Tensor:
        return logits.max(dim=-1).indices  # argmax, first index on ties; faster on the CPU


def set_kernel_layers(model: torch.nn.Module, on: bool) -> None:
    """Point every layer that has a CPU kernel (RMSNorm, SiluAndMul, RotaryEmbedding) at it, or back at
    torch."""
    for module in model.modules():
        if isinstance(module, CustomOp):
            module.use_kernel = on


def create_attn_backend(use_cpu_kernels: bool) -> AttentionBackend:
    """Torch's SDPA for every round; with the CPU kernels, decode rounds read the pool in place instead."""
    if not use_cpu_kernels:
        return TorchNativeAttnBackend()
    return HybridAttnBackend(prefill_backend=TorchNativeAttnBackend(), decode_backend=CpuPagedAttnBackend())


def share_modules(model: torch.nn.Module) -> torch.nn.Module:
    """A new tree of module objects over the same parameters, buffers and packed weights (no tensor is
    copied). Two runners may share one model's weights and still each choose their own kernels once."""
    view = copy.copy(model)  # a new object whose attributes are the old one's: tensors shared
    view._parameters = dict(model._parameters)
    view._buffers = dict(model._buffers)
    view._modules = {name: share_modules(child) for name, child in model._modules.items()}
    for name, value in vars(model).items():  # a path chosen once (CustomOp, Linear) is a bound method
        if inspect.ismethod(value) and value.__self__ is model:
            setattr(view, name, value.__func__.__get__(view))
    return view


def _available_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 4 * 2**30


def _materialize_empty(model: torch.nn.Module) -> None:
    """Give every meta parameter and buffer empty float32 CPU storage of its shape. (`Module.to_empty` does
    the same through torch's meta decompositions, whose first use imports seconds of modules.)"""
    for module in model.modules():
        for name, p in module._parameters.items():
            if p is not None:
                module._parameters[name] = torch.nn.Parameter(torch.empty(p.shape),
                                                              requires_grad=p.requires_grad)
        for name, b in module._buffers.items():
            if b is not None:
                module._buffers[name] = torch.empty(b.shape,
                                                    dtype=torch.float32 if b.is_floating_point() else b.dtype)

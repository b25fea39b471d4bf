"""ServerArgs: every engine flag in one dataclass, with SGLang's flag names."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

LOAD_BALANCE_METHODS = ("round_robin", "shortest_queue")
UNSUPPORTED_LOAD_BALANCE_METHODS = ("minimum_tokens", "follow_bootstrap_room")  # SGLang's, not built here


@dataclass
class ServerArgs:
    model: str | None = None  # .gguf file, Hugging Face folder, or None for the bundled SmolLM2
    dtype: str = "auto"  # auto | bfloat16 | float16 | float32
    device: str = "cpu"  # cpu | cuda | npu
    max_total_tokens: int | None = None  # KV slots; None: derived from --mem-fraction-static
    mem_fraction_static: float = 0.05  # share of free memory given to the KV pool when the above is None
    max_running_requests: int = 64
    context_length: int | None = None  # None: the model's own
    allow_auto_truncate: bool = False  # the server shortens a prompt or max_new_tokens that would not fit
    random_seed: int = 0
    cpu_kernels: str = "auto"  # auto | on | off: the C++ kernels of minisgl/kernels on the cpu
    # decode forwards replayed from a recording where they can be (SGLang: cuda graph)
    disable_cpu_graph: bool = False
    cpu_graph_max_bs: int = 8  # the largest decode batch recorded (a graph holds about 0.7 MiB a row)
    # "gguf": Q4_0/Q4_1/Q8_0 blocks kept (cpu, bf16); "none": dequantize; None: see help
    quantization: str | None = None
    dequant_gemm_rows: str = "auto"  # auto | off | N: GGUF products of N rows or more make their blocks whole
    # scheduler
    chunked_prefill_size: int | None = 512  # rows one prompt may take per round; None or -1: no chunking
    max_prefill_tokens: int = 4096  # prefill rows per round, over all admitted requests
    schedule_policy: str = "fcfs"  # fcfs | lpm (longest cached prefix first)
    disable_radix_cache: bool = False
    enable_mixed_chunk: bool = False
    stream_interval: int = 1
    grammar_backend: str = "xgrammar"  # structured output (json_schema, regex, ebnf): xgrammar | none
    # the overlap loop (off by default: it does not win on a 2-core cpu)
    enable_overlap_schedule: bool = False
    disable_overlap_schedule: bool = False  # SGLang's flag: the normal loop (already the default here)
    # data parallelism: N scheduler processes, each with its own model copy and KV pool
    dp_size: int = 1  # 1: no DataParallelController, the TokenizerManager talks to the one scheduler
    load_balance_method: str = "round_robin"  # how the DataParallelController picks a rank
    # speculative decoding (n-gram drafts from the request's own tokens; greedy requests only)
    speculative_algorithm: str | None = None  # None | "NGRAM"
    speculative_num_draft_tokens: int = 4  # most draft tokens per request per round (K; K + 1 rows verified)
    # off: every round drafts up to K; on (default), a request starts at 1 draft token, doubles while all are
    # accepted and drops to the number accepted after a rejection (speculative/ngram_worker.py)
    disable_adaptive_draft: bool = False
    # shortest suffix that may match (SGLang's default is 1; on a CPU every verified row costs about half a
    # decode step, and 1-token matches are right too rarely to pay for theirs: benchmarks/bench_spec.py)
    speculative_ngram_min_match_window_size: int = 3
    speculative_ngram_max_match_window_size: int = 12  # longest suffix tried first
    # tensor parallelism (minisgl/distributed/): ranks, and the machines ("nodes") they run on
    tp_size: int = 1
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: str | None = None  # host:port where the ranks meet; None: a free local port (one node)
    # prefill/decode disaggregation (minisgl/disaggregation/): null | prefill | decode
    disaggregation_mode: str = "null"
    disaggregation_bootstrap_port: int = 8998  # prefill: where its bootstrap server listens
    disaggregation_transfer_backend: str = "zmq"
    # seconds a PD request may wait for its peer: its decode half's registration, the KV's ack or arrival
    disaggregation_bootstrap_timeout: float = 300.0
    disaggregation_transfer_timeout: float = 300.0

    @property
    def tp_size_per_node(self) -> int:
        return self.tp_size // self.nnodes

    def __post_init__(self) -> None:
        if self.chunked_prefill_size is not None and self.chunked_prefill_size <= 0:
            self.chunked_prefill_size = None
        # as SGLang: a decode server's KV comes whole, not from a tree
        if self.disaggregation_mode == "decode":
            self.disable_radix_cache = True

    def overlap_schedule(self) -> bool:
        """Whether the scheduler runs event_loop_overlap (forward on its own thread, results a round late)."""
        return self.enable_overlap_schedule and not self.disable_overlap_schedule

    def validate(self) -> None:
        if self.dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise ValueError(f"--dtype must be auto, bfloat16, float16 or float32, not {self.dtype!r}")
        if self.device not in ("cpu", "cuda", "npu"):
            raise ValueError(f"--device must be cpu, cuda or npu, not {self.device!r}")
        if self.cpu_kernels not in ("auto", "on", "off"):
            raise ValueError(f"--cpu-kernels must be auto, on or off, not {self.cpu_kernels!r}")
        if self.cpu_graph_max_bs < 1:
            raise ValueError(f"--cpu-graph-max-bs must be at least 1, not {self.cpu_graph_max_bs} "
                             "(--disable-cpu-graph turns the cpu graph off)")
        rows = str(self.dequant_gemm_rows)
        if rows not in ("auto", "off") and not (rows.isdigit() and int(rows) >= 1):
            raise ValueError(f"--dequant-gemm-rows must be auto, off or a number of rows >= 1, not {rows!r}")
        if self.quantization not in (None, "none", "gguf"):
            raise ValueError(f"--quantization must be none or gguf, not {self.quantization!r}")
        if self.quantization == "gguf" and self.dtype == "float32":
            raise ValueError("--quantization gguf runs bfloat16 activations; --dtype float32 is the exact, "
                             "dequantized reference path: drop one of the two flags")
        if self.quantization == "gguf" and (self.dtype not in ("auto", "bfloat16") or self.device != "cpu"):
            raise ValueError(f"--quantization gguf needs --device cpu and --dtype bfloat16 (or auto), not "
                             f"{self.device} {self.dtype}")
        if self.max_total_tokens is not None and self.max_total_tokens < 1:
            raise ValueError(f"--max-total-tokens must be >= 1, not {self.max_total_tokens}")
        if self.max_running_requests < 1:
            raise ValueError(f"--max-running-requests must be >= 1, not {self.max_running_requests}")
        if not 0 < self.mem_fraction_static < 1:
            raise ValueError(f"--mem-fraction-static must be in (0, 1), not {self.mem_fraction_static}")
        if self.max_prefill_tokens < 1:
            raise ValueError(f"--max-prefill-tokens must be >= 1, not {self.max_prefill_tokens}")
        if self.schedule_policy not in ("fcfs", "lpm"):
            raise ValueError(f"--schedule-policy must be fcfs or lpm, not {self.schedule_policy!r}")
        if self.stream_interval < 1:
            raise ValueError(f"--stream-interval must be >= 1, not {self.stream_interval}")
        if self.enable_overlap_schedule and self.disable_overlap_schedule:
            raise ValueError("--enable-overlap-schedule and --disable-overlap-schedule contradict each "
                             "other: give one of them")
        if self.dp_size < 1:
            raise ValueError(f"--dp-size must be >= 1, not {self.dp_size}")
        if self.load_balance_method in UNSUPPORTED_LOAD_BALANCE_METHODS:
            raise ValueError(f"--load-balance-method {self.load_balance_method} is SGLang's but not "
                             f"implemented in minisgl; use {' or '.join(LOAD_BALANCE_METHODS)}")
        if self.load_balance_method not in LOAD_BALANCE_METHODS:
            raise ValueError(f"--load-balance-method must be {' or '.join(LOAD_BALANCE_METHODS)}, not "
                             f"{self.load_balance_method!r}")
        if self.speculative_algorithm not in (None, "NGRAM"):
            raise ValueError(f"--speculative-algorithm must be NGRAM, not {self.speculative_algorithm!r}")
        if self.speculative_num_draft_tokens < 1:
            raise ValueError("--speculative-num-draft-tokens must be >= 1, not "
                             f"{self.speculative_num_draft_tokens}")
        lo, hi = self.speculative_ngram_min_match_window_size, self.speculative_ngram_max_match_window_size
        if not 1 <= lo <= hi:
            raise ValueError(f"--speculative-ngram-min-match-window-size ({lo}) must be >= 1 and at most "
                             f"--speculative-ngram-max-match-window-size ({hi})")
        if self.speculative_algorithm is not None and self.overlap_schedule():
            raise ValueError("--speculative-algorithm and --enable-overlap-schedule cannot be combined: a "
                             "round's drafts come from the tokens of the round before, which the overlap "
                             "loop has not processed yet when it forms the next round")
        from minisgl.disaggregation.utils import validate_disaggregation_args
        from minisgl.distributed.launch import validate_parallel_args

        validate_parallel_args(self)
        validate_disaggregation_args(self)

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        d = ServerArgs()
        g = parser.add_argument_group("model and memory")
        g.add_argument("--model", "--model-path", dest="model", default=d.model,
                       help="a .gguf file or a Hugging Face folder (default: the bundled "
                            "SmolLM2-135M-Instruct)")
        g.add_argument("--dtype", default=d.dtype, choices=["auto", "bfloat16", "float16", "float32"],
                       help="weights and KV dtype (auto: bfloat16 on cpu)")
        g.add_argument("--device", default=d.device, choices=["cpu", "cuda", "npu"],
                       help="where the model runs")
        g.add_argument("--cpu-kernels", default=d.cpu_kernels, choices=["auto", "on", "off"],
                       help="C++ kernels for RMSNorm, rotary, SiLU-and-mul, paged decode attention and "
                            "greedy sampling on the cpu, built with g++ at first use (auto: use them if they "
                            "build; off: torch ops only)")
        g.add_argument("--disable-cpu-graph", action="store_true", default=d.disable_cpu_graph,
                       help="run every decode forward layer by layer in Python; by default, where every op "
                            "of the decode forward has a C++ kernel (--quantization gguf, one rank), each "
                            "batch size's decode forward is recorded once and replayed in one C call "
                            "(SGLang's CUDA graphs; SGLang's flag is --disable-cuda-graph)")
        g.add_argument("--cpu-graph-max-bs", type=int, default=d.cpu_graph_max_bs,
                       help="the largest decode batch size the cpu graph records; each graph holds about 0.7 "
                            "MiB of activations a row for the bundled model (SGLang: --cuda-graph-max-bs)")
        g.add_argument("--quantization", default=d.quantization, choices=["none", "gguf"],
                       help="gguf: keep a .gguf model's Q4_0/Q4_1/Q8_0 weights as stored and multiply them "
                            "in the C++ kernels (torch's int4 kernel for Q4 without them; --dtype bfloat16 "
                            "on the cpu only; other types are dequantized, with a message); none: dequantize "
                            "every weight; default: gguf where it applies and the C++ kernels build "
                            "(bfloat16, cpu, a .gguf model, --tp-size 1), else none (--dtype float32 is the "
                            "exact, dequantized path)")
        g.add_argument("--dequant-gemm-rows", default=d.dequant_gemm_rows, metavar="auto|off|N",
                       help="with GGUF blocks kept: a product of at least this many rows (a prefill, a large "
                            "decode batch) makes its blocks whole in bfloat16 instead of running the GGUF "
                            "kernel: a block at a time on AMX tiles where the CPU has them, else a tile of "
                            "the weight at a time for oneDNN's GEMM; auto (default): the row counts from "
                            "which each is faster, timed once per machine and product shape; off: the GGUF "
                            "kernel at every row count")
        g.add_argument("--max-total-tokens", type=int, default=d.max_total_tokens,
                       help="KV cache size in tokens (default: from --mem-fraction-static)")
        g.add_argument("--mem-fraction-static", type=float, default=d.mem_fraction_static,
                       help="share of free memory for the KV cache when --max-total-tokens is not given")
        g.add_argument("--max-running-requests", type=int, default=d.max_running_requests,
                       help="requests that may hold a request slot at once")
        g.add_argument("--context-length", type=int, default=d.context_length,
                       help="longest sequence (prompt + output); default: the model's")
        g.add_argument("--allow-auto-truncate", action="store_true",
                       help="a request longer than the context is shortened, not refused: the prompt keeps "
                            "its first tokens, max_new_tokens is cut to what fits (a warning is logged)")
        g.add_argument("--random-seed", type=int, default=d.random_seed, help="seed for unseeded sampling")
        g = parser.add_argument_group("scheduler")
        g.add_argument("--chunked-prefill-size", type=int, default=d.chunked_prefill_size,
                       help="most prompt rows one request may run per round; -1 disables chunking")
        g.add_argument("--max-prefill-tokens", type=int, default=d.max_prefill_tokens,
                       help="most prefill rows per round, over all admitted requests")
        g.add_argument("--schedule-policy", default=d.schedule_policy, choices=["fcfs", "lpm"],
                       help="order of the waiting queue: first come first served, or longest cached prefix")
        g.add_argument("--disable-radix-cache", action="store_true",
                       help="no prefix sharing between requests")
        g.add_argument("--enable-mixed-chunk", action="store_true",
                       help="let running requests' decode steps ride along in prefill rounds (MIXED)")
        g.add_argument("--stream-interval", type=int, default=d.stream_interval,
                       help="send streamed tokens every N tokens")
        g.add_argument("--grammar-backend", default=d.grammar_backend, choices=["xgrammar", "none"],
                       help="structured output (json_schema, regex, ebnf; OpenAI's response_format): "
                            "xgrammar compiles each grammar once and masks the logits; none refuses them")
        g.add_argument("--enable-overlap-schedule", action="store_true",
                       help="SGLang's overlap scheduler: round N's forward runs on a thread of its own while "
                            "the scheduler processes round N-1's result and forms round N+1 (results and "
                            "finishing one round late; same greedy tokens). Off by default: on a 2-core cpu "
                            "torch's threads and the scheduler's compete for the cores and it did not win "
                            "(0.82-1.07x, benchmarks/bench_overlap.py); it pays where the forward runs "
                            "elsewhere (a GPU)")
        g.add_argument("--disable-overlap-schedule", action="store_true",
                       help="SGLang's flag: run the normal loop (one round after the other); the default "
                            "here")
        g = parser.add_argument_group("data parallelism")
        g.add_argument("--dp-size", type=int, default=d.dp_size,
                       help="scheduler processes (ranks), each with its own model copy and KV cache, behind "
                            "a DataParallelController process; 1 (default): one scheduler, no controller")
        g.add_argument("--load-balance-method", default=d.load_balance_method,
                       help="how the DataParallelController picks a rank for a request that names none: "
                            "round_robin (in turn) or shortest_queue (fewest running and waiting requests); "
                            "a request's routed_dp_rank (or X-Data-Parallel-Rank header) always wins")
        g = parser.add_argument_group("speculative decoding")
        g.add_argument("--speculative-algorithm", default=d.speculative_algorithm, choices=["NGRAM"],
                       help="NGRAM: draft tokens copied from n-gram matches in each greedy request's own "
                            "prompt and output, verified in one forward (no draft model); default: off")
        g.add_argument("--speculative-num-draft-tokens", type=int, default=d.speculative_num_draft_tokens,
                       help="most draft tokens per request per round; the verify forward runs K + 1 rows")
        g.add_argument("--disable-adaptive-draft", action="store_true", default=d.disable_adaptive_draft,
                       help="draft up to K tokens every round; by default a request starts at 1, doubles "
                            "while all its drafts are accepted and drops to the number accepted after a "
                            "rejection")
        g.add_argument("--speculative-ngram-min-match-window-size", type=int,
                       default=d.speculative_ngram_min_match_window_size,
                       help="shortest suffix of the request's tokens that must match earlier tokens to draft")
        g.add_argument("--speculative-ngram-max-match-window-size", type=int,
                       default=d.speculative_ngram_max_match_window_size,
                       help="longest suffix tried first (the longest match wins, then the most recent)")

        from minisgl.disaggregation.utils import add_disaggregation_cli_args
        from minisgl.distributed.launch import add_parallel_cli_args

        add_parallel_cli_args(parser, d)
        add_disaggregation_cli_args(parser, d)

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> ServerArgs:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})

"""What a few more rows cost a float32 matrix product on this CPU: torch's F.linear against oneDNN's packed
path, at the model's shapes, side by side in one run.

    python benchmarks/bench_matmul_rows.py                 # one thread, rows 1, 2, 5, 16, 64
    python benchmarks/bench_matmul_rows.py --threads 2 --rows 1,5

Speculative decoding's verify forward multiplies K + 1 rows where a decode step multiplies one; it only
pays if the extra rows are cheap, as they are on a GPU. For each of SmolLM2-135M's projection shapes
(q/o, k/v, gate/up, down, lm_head) this times F.linear (torch's CPU BLAS) and
torch.ops.mkldnn._linear_pointwise on a weight packed once by _reorder_linear_weight, interleaved,
median of --repeats, and prints milliseconds, the cost of R rows relative to one row, and the oneDNN /
F.linear ratio. Also printed: the largest difference between the two paths' outputs (float32 sums in
another order). Random weights: the time does not depend on the values.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

SHAPES = {  # name -> (out_features, in_features) of SmolLM2-135M
    "q_proj / o_proj": (576, 576),
    "k_proj / v_proj": (192, 576),
    "gate_proj / up_proj": (1536, 576),
    "down_proj": (576, 1536),
    "lm_head": (49152, 576),
}


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--rows", default="1,2,5,16,64", help="rows per product, comma-separated (default 1,2,5,16,64)")
    ap.add_argument("--repeats", type=int, default=21, help="timed calls per cell, median kept (default 21)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = [int(r) for r in args.rows.split(",")]
    onednn = hasattr(torch.ops.mkldnn, "_reorder_linear_weight") and torch.backends.mkldnn.is_available()
    print(f"torch {torch.__version__}, {args.threads} thread(s), BLAS: "
          f"{'MKL' if torch.backends.mkl.is_available() else 'other'}, oneDNN packed path: {onednn}")
    print(f"{'shape':22s} {'rows':>4s} {'F.linear ms':>11s} {'x 1 row':>8s} {'oneDNN ms':>10s} {'x 1 row':>8s} "
          f"{'oneDNN/F.linear':>15s} {'max diff':>9s}")
    gen = torch.Generator().manual_seed(0)
    for name, (n, k) in SHAPES.items():
        w = torch.randn(n, k, generator=gen)
        packed = torch.ops.mkldnn._reorder_linear_weight(w, max(rows)) if onednn else None
        base_plain = base_packed = None
        for m in rows:
            x = torch.randn(m, k, generator=gen)
            reps = max(3, args.repeats // (8 if n > 10000 else 1))
            plain = timed(lambda: torch.nn.functional.linear(x, w), reps)
            base_plain = base_plain or plain
            line = f"{name:22s} {m:4d} {plain:11.3f} {plain / base_plain:8.2f}"
            if packed is not None:
                fast = timed(lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""), reps)
                base_packed = base_packed or fast
                diff = (torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
                        - torch.nn.functional.linear(x, w)).abs().max().item()
                line += f" {fast:10.3f} {fast / base_packed:8.2f} {fast / plain:15.2f} {diff:9.1e}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

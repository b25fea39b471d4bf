"""The tensor-parallel layers on two real gloo ranks (torch.multiprocessing spawn) against the unsplit
products: each rank loads its slice of the same random weights through the layer's own weight_loader.
float64, compared at assert_close's float64 tolerance: a matmul over a different number of output columns
may block its sums differently, so the last bit may differ; the lookups are compared exactly."""

from __future__ import annotations

import socket

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

TP = 2


def _rank_main(rank: int, sock: socket.socket) -> None:
    torch.set_num_threads(1)
    from minisgl.distributed import parallel_state
    from minisgl.distributed.communication_op import tensor_model_parallel_all_gather
    from minisgl.distributed.parallel_state import (
        destroy_distributed_environment,
        init_distributed_environment,
    )
    from minisgl.layers.linear import (
        ColumnParallelLinear,
        MergedColumnParallelLinear,
        QKVParallelLinear,
        RowParallelLinear,
    )
    from minisgl.layers.vocab_parallel_embedding import VocabParallelEmbedding

    # as `minisgl serve` does: rank 0's store listens on a socket bound before the ranks start (no race)
    port = sock.getsockname()[1]
    parallel_state.LISTEN_SOCKET = sock if rank == 0 else None
    init_distributed_environment(TP, rank, f"tcp://127.0.0.1:{port}", "cpu")
    try:
        g = torch.Generator().manual_seed(0)  # the same "checkpoint" on both ranks
        x = torch.randn(5, 8, generator=g, dtype=torch.float64)
        with torch.no_grad():
            # column: each rank's slice of the outputs, gathered = the whole product
            w, b = torch.randn(6, 8, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)
            col = ColumnParallelLinear(8, 6, bias=True, gather_output=True).double()
            col.weight_loader(col.weight, w)
            col.weight_loader(col.bias, b)
            assert col.weight.shape == (3, 8)
            torch.testing.assert_close(col(x), F.linear(x, w, b))

            # merged gate/up: rank r holds gate's and up's r-th halves side by side
            gate, up = torch.randn(4, 8, generator=g, dtype=torch.float64), torch.randn(4, 8, generator=g, dtype=torch.float64)
            merged = MergedColumnParallelLinear(8, [4, 4], bias=False).double()
            merged.weight_loader(merged.weight, gate, 0)
            merged.weight_loader(merged.weight, up, 1)
            out = merged(x)
            torch.testing.assert_close(out[:, :2], F.linear(x, gate)[:, rank * 2:(rank + 1) * 2])
            torch.testing.assert_close(out[:, 2:], F.linear(x, up)[:, rank * 2:(rank + 1) * 2])

            # qkv: 4 query heads, 2 kv heads of size 3; rank r holds query heads 2r, 2r+1 and kv head r
            q, k, v = (torch.randn(n, 8, generator=g, dtype=torch.float64) for n in (12, 6, 6))
            qkv = QKVParallelLinear(8, 3, 4, 2, bias=False).double()
            for shard, t in zip("qkv", (q, k, v)):
                qkv.weight_loader(qkv.weight, t, shard)
            ql, kl, vl = qkv(x).split([6, 3, 3], dim=-1)
            torch.testing.assert_close(ql, F.linear(x, q)[:, rank * 6:(rank + 1) * 6])
            torch.testing.assert_close(kl, F.linear(x, k)[:, rank * 3:(rank + 1) * 3])
            torch.testing.assert_close(vl, F.linear(x, v)[:, rank * 3:(rank + 1) * 3])

            # row: each rank multiplies its half of the inputs; the all-reduce sums; the bias is added once
            w2, b2 = torch.randn(7, 8, generator=g, dtype=torch.float64), torch.randn(7, generator=g, dtype=torch.float64)
            row = RowParallelLinear(8, 7, bias=True).double()
            row.weight_loader(row.weight, w2)
            row.weight_loader(row.bias, b2)
            torch.testing.assert_close(row(x[:, rank * 4:(rank + 1) * 4]), F.linear(x, w2, b2))

            # vocabulary-parallel embedding with an odd vocabulary (11 -> 6 rows per rank, one padding row)
            table = torch.randn(11, 8, generator=g, dtype=torch.float64)
            emb = VocabParallelEmbedding(11, 8).double()
            emb.weight_loader(emb.weight, table)
            ids = torch.tensor([0, 5, 6, 10, 3])
            torch.testing.assert_close(emb(ids), F.embedding(ids, table), rtol=0, atol=0)  # a lookup: exact
            # the output head: each rank's logits of its own tokens, gathered and cut to the vocabulary
            logits = tensor_model_parallel_all_gather(F.linear(x, emb.weight))[:, :11]
            torch.testing.assert_close(logits, F.linear(x, table))
    finally:
        destroy_distributed_environment()


def test_parallel_layers_equal_the_unsplit_products():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(TP)
        mp.spawn(_rank_main, args=(sock,), nprocs=TP, join=True)


def test_a_tp_size_that_does_not_divide_the_heads_is_refused():
    import pytest

    from minisgl.distributed.launch import check_heads
    from minisgl.server_args import ServerArgs

    with pytest.raises(ValueError, match=r"--tp-size 2 does not divide the model's 9 attention heads"):
        check_heads(ServerArgs(tp_size=2), 9, 3)
    check_heads(ServerArgs(tp_size=3), 9, 3)  # SmolLM2-135M: 3 divides both


def test_parallel_flags_are_validated():
    import pytest

    from minisgl.server_args import ServerArgs

    for args, message in [
        (ServerArgs(tp_size=0), "--tp-size must be >= 1"),
        (ServerArgs(tp_size=3, nnodes=2, dist_init_addr="h:1"), "--nnodes 2 must divide --tp-size 3"),
        (ServerArgs(tp_size=2, nnodes=2, node_rank=2, dist_init_addr="h:1"), r"--node-rank must be in \[0, 1\]"),
        (ServerArgs(tp_size=2, nnodes=2), "--nnodes > 1 needs --dist-init-addr"),
        (ServerArgs(tp_size=2, dist_init_addr="nohost"), "--dist-init-addr must be host:port"),
        (ServerArgs(tp_size=2, nnodes=2, node_rank=1, dist_init_addr="h:0"), "port 0 is for node 0"),
        (ServerArgs(tp_size=3, quantization="gguf"), "--quantization gguf .* cannot be split"),
        (ServerArgs(tp_size=3, dp_size=2), "--tp-size > 1 with --dp-size > 1 is not supported"),
        (ServerArgs(tp_size=3, enable_overlap_schedule=True), "drop --enable-overlap-schedule"),
    ]:
        with pytest.raises(ValueError, match=message):
            args.validate()
    ServerArgs(tp_size=2, nnodes=2, dist_init_addr="127.0.0.1:0").validate()  # node 0 picks the port


def test_node_0_given_port_0_binds_a_free_port_and_keeps_it():
    """--dist-init-addr HOST:0 on node 0: the port is bound before any rank starts (so no other process can
    take it) and named in the address the other nodes are told; a port given, or a node other than 0, binds
    nothing."""
    import socket

    from minisgl.distributed.launch import with_dist_init_addr
    from minisgl.server_args import ServerArgs

    args, sock = with_dist_init_addr(ServerArgs(tp_size=2, nnodes=2, dist_init_addr="127.0.0.1:0"))
    try:
        host, _, port = args.dist_init_addr.rpartition(":")
        assert host == "127.0.0.1" and int(port) == sock.getsockname()[1] > 0
        with socket.create_connection((host, int(port)), timeout=5):  # listening already
            pass
    finally:
        sock.close()
    for given in (ServerArgs(tp_size=2, nnodes=2, dist_init_addr="127.0.0.1:29500"),
                  ServerArgs(tp_size=2, nnodes=2, node_rank=1, dist_init_addr="127.0.0.1:29500")):
        assert with_dist_init_addr(given) == (given, None)


def test_serve_refuses_a_tp_size_that_does_not_divide_the_bundled_models_heads():
    """SmolLM2-135M's 9 query and 3 key/value heads: `--tp-size 2` stops `minisgl serve` with exit 2 and one
    line, before any scheduler process starts."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "minisgl.cli", "serve", "--tp-size", "2", "--port", "0"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == ("minisgl serve: error: --tp-size 2 does not divide the model's 9 attention "
                                  "heads; use a divisor of both 9 and 3")
    assert "starting the scheduler" not in out.stdout

"""Tensor parallelism on real processes (gloo on cpu): the bundled model on three ranks against one, and a
tiny model on two ranks across two "nodes".

SmolLM2-135M has 9 query heads and 3 key/value heads: 3 is the only size > 1 that divides both (2 is
refused, see test_parallel_layers.py). Its --tp-size 3 server is the tensor_parallel scenario's (one node
running the three ranks, rank 0 broadcasting its inputs), read here; `--nnodes` runs on a tiny Llama whose
heads split in two.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

TP = 3
NEW_TOKENS = 16


def _greedy_at_once(url: str, prompts: list[list[int]]) -> list[list[int]]:
    """Each prompt's NEW_TOKENS greedy tokens through /generate, all prompts sent at once (they share batches)."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    params = {"max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}

    def generate(ids: list[int]) -> list[int]:
        r = httpx.post(f"{url}/generate", json={"input_ids": ids, "sampling_params": params}, timeout=300)
        return r.json()["output_ids"]

    with ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(generate, prompts))


def test_the_tensor_parallel_scenario_gives_tp1s_text_and_leaves_nothing(scenario_runs, base_engine):
    """--tp-size 3 on one node is the tensor_parallel scenario's server, run once for the session: its chat
    completion gives tp=1's float32 greedy text, every rank ran every forward with its collectives, the trace
    checks (every rank held to rank 0) and replays, and the server's SIGINT ended the three ranks and the
    detokenizer (the run fails if any process or its sockets' folder is left)."""
    from minisgl.scenarios.tensor_parallel import MAX_TOKENS, QUESTION
    from tests.server.conftest import replay_opens_to_the_end
    from tracer.check import check_trace

    ran = scenario_runs("tensor_parallel")
    alone = base_engine.generate([{"role": "user", "content": QUESTION}],
                                 {"max_new_tokens": MAX_TOKENS, "temperature": 0})
    assert ran.outcome.results["R1"]["text"] == alone["text"]
    assert ran.outcome.server_processes >= TP + 1
    trace = ran.trace
    assert sorted(trace.tp_rank_events) == [f"scheduler_tp{r}" for r in range(1, TP)]
    assert check_trace(trace) == []
    forwards = [ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "E"]
    assert forwards and all(ev.get("tp_size") == TP and ev.get("all_reduce") > 0 for ev in forwards)
    replay_opens_to_the_end(trace)  # it shows rank 0's scheduler, as for one rank


def _end_worker(proc) -> str:
    """A worker node's output once it ended on its own (after node 0 stopped), or after a SIGINT."""
    import subprocess

    try:
        return proc.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=60)[0] + "\n(ended only after SIGINT)"


def test_tp2_on_two_nodes_on_a_model_whose_heads_split_in_two(tmp_path, tokenizer):
    """--tp-size 2 needs heads that 2 divides, which the bundled model lacks: a tiny Llama folder with random
    weights (4 query heads, 2 key/value heads, the bundled tokenizer beside it), served by two "nodes" on
    localhost (`--nnodes 2`): node 0 serves HTTP with rank 0 and picks the port where the ranks meet
    (`--dist-init-addr 127.0.0.1:0`), node 1 runs only rank 1 and is told that address. The float32 greedy
    tokens, the prompts sent at once (so they share batches), equal transformers' on the same folder; the
    one trace folder of both nodes checks and replays; when node 0 stops, node 1 says its rank lost its peer
    and ends, and nothing is left running."""
    import subprocess
    import sys

    import psutil
    import transformers as tf

    from tests.model_executor.test_hf_folders import TINY
    from tests.server.conftest import ENV, ServeProcess, replay_opens_to_the_end
    from tracer.check import check_trace
    from tracer.reader import load_trace

    torch.manual_seed(0)
    hf = tf.LlamaForCausalLM(tf.LlamaConfig(**{**TINY, "vocab_size": 512}, tie_word_embeddings=False)).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p) if name.endswith("norm.weight") else 0.1 * torch.randn_like(p))
    folder = tmp_path / "tiny-llama"
    hf.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)  # the server needs one; every id below is < 512, so it decodes them
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 512, (n,), generator=g).tolist() for n in (5, 13, 9)]
    want = []
    for ids in prompts:
        with torch.inference_mode():
            out = hf.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                              max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0)
        want.append(out[0, len(ids):].tolist())

    trace_dir = tmp_path / "trace"
    common = ["--model", str(folder), "--dtype", "float32", "--tp-size", "2", "--nnodes", "2",
              "--max-total-tokens", "256", "--trace", str(trace_dir), "--log-level", "warning"]
    srv = ServeProcess([*common, "--node-rank", "0", "--dist-init-addr", "127.0.0.1:0"])
    node1 = None
    try:
        meet = _said(srv, r"node 0 of 2: the ranks meet at (127\.0\.0\.1:\d+)")
        node1 = subprocess.Popen([sys.executable, "-m", "minisgl.cli", "serve", *common, "--node-rank", "1",
                                  "--dist-init-addr", meet], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, env=ENV)
        srv.wait_ready()
        kids = psutil.Process(node1.pid).children(recursive=True)
        assert "scheduler" in srv.pids and "scheduler_tp1" not in srv.pids, srv.pids  # rank 1 is on node 1
        assert _greedy_at_once(srv.url, prompts) == want
    finally:
        code = srv.stop(signal.SIGINT)
        out = _end_worker(node1) if node1 is not None else ""
    assert code == 0, srv.output()[-3000:]
    # node 0 gone, node 1's rank loses its peer and ends: the node says so and exits 1
    assert node1.returncode == 1 and "scheduler_tp1" in out and "died" in out, out
    assert "node 1 of 2: starting scheduler ranks 1, meeting at " + meet in out, out
    assert srv.alive_descendants() == []  # rank 0, the detokenizer and the resource tracker are gone
    assert srv.ipc_dir and not Path(srv.ipc_dir).exists()
    # node 1's own children (its rank, torch's resource tracker) end by themselves; one may still be exiting
    # when its node's process has already returned, so give them a bounded moment
    _, alive = psutil.wait_procs(kids, timeout=30)
    assert not [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], alive
    trace = load_trace(trace_dir)
    assert sorted(trace.tp_rank_events) == ["scheduler_tp1"] and check_trace(trace) == []
    forwards = [ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "E"]
    assert forwards and all(ev.get("tp_size") == 2 and ev.get("all_reduce") > 0 for ev in forwards)
    replay_opens_to_the_end(trace)


def _said(srv, pattern: str, timeout: float = 300) -> str:
    """The first group of `pattern` once the server's output has a line that matches it."""
    import re
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and srv.proc.poll() is None:
        for line in list(srv.lines):
            if m := re.search(pattern, line):
                return m.group(1)
        time.sleep(0.1)
    raise AssertionError(f"the server never said {pattern!r}:\n{srv.output()[-3000:]}")

"""Tensor parallelism on the real model: --tp-size 3 on gloo (cpu) against --tp-size 1.

SmolLM2-135M has 9 query heads and 3 key/value heads: 3 is the only size > 1 that divides both (2 is
refused, see test_parallel_layers.py). Each rank is a real process: three `minisgl serve`
"nodes" on localhost, one scheduler rank each, rank 0 broadcasting its inputs.
"""

from __future__ import annotations

import signal
import socket
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_three_nodes_serve_tp1s_greedy_tokens_and_their_trace_checks(base_engine, runner_fp32, chat_prompt_ids,
                                                                    tmp_path):
    """--tp-size 3 --nnodes 3 on localhost: node 0 serves HTTP with rank 0; nodes 1 and 2 run only ranks 1 and
    2 and meet it at --dist-init-addr. The chat prompts' float32 greedy tokens (sent at once, so they share
    batches) equal tp=1's, a chat completion gives tp=1's text, the one trace folder of all three nodes
    checks and replays, and when node 0 stops the other nodes say so and nothing is left running.
    (One node running all three ranks, `--tp-size 3` alone, is the tensor_parallel scenario's run.)"""
    import subprocess
    import sys

    import psutil
    from openai import OpenAI

    from minisgl.model_executor.static_generate import greedy_generate
    from tests.server.conftest import (
        ENGINE_FLAGS,
        ENV,
        OneThreadEngine,
        ServeProcess,
        replay_opens_to_the_end,
        serve_flags,
    )
    from tracer.check import check_trace
    from tracer.reader import load_trace

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    ref = OneThreadEngine(base_engine.fork(**ENGINE_FLAGS)).generate(messages, {"max_new_tokens": NEW_TOKENS,
                                                                                "temperature": 0})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        want = greedy_generate(runner_fp32, chat_prompt_ids, NEW_TOKENS)  # no EOS cut: ignore_eos below
    finally:
        torch.set_num_threads(threads)
    trace_dir = tmp_path / "trace"
    common = [*serve_flags(ENGINE_FLAGS), "--tp-size", str(TP), "--nnodes", str(TP),
              "--dist-init-addr", f"127.0.0.1:{_free_port()}", "--trace", str(trace_dir), "--log-level", "warning"]
    workers = [subprocess.Popen([sys.executable, "-m", "minisgl.cli", "serve", *common, "--node-rank", str(k)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
               for k in range(1, TP)]
    srv = ServeProcess([*common, "--node-rank", "0"])
    try:
        srv.wait_ready()
        kids = [c for w in workers for c in psutil.Process(w.pid).children(recursive=True)]
        client = OpenAI(base_url=f"{srv.url}/v1", api_key="none", max_retries=0, timeout=300)
        model = client.models.list().data[0].id
        resp = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=NEW_TOKENS)
        assert resp.choices[0].message.content == ref["text"]
        assert resp.usage.completion_tokens == ref["usage"]["completion_tokens"]
        assert _greedy_at_once(srv.url, chat_prompt_ids) == want
    finally:
        code = srv.stop(signal.SIGINT)
        outs = [_end_worker(w) for w in workers]
    assert code == 0, srv.output()[-3000:]
    # node 0 gone, the other nodes' ranks lose their peer and end: each node says so and exits 1
    assert all(w.returncode == 1 and "scheduler_tp" in out and "died" in out for w, out in zip(workers, outs)), outs
    assert all(f"node {k} of {TP}: starting scheduler ranks {k}" in out for k, out in enumerate(outs, 1)), outs
    assert srv.alive_descendants() == []  # rank 0, the detokenizer and the resource tracker are gone
    assert srv.ipc_dir and not Path(srv.ipc_dir).exists()
    # the other nodes' own children (their ranks, torch's resource tracker) end by themselves; one may still
    # be exiting when its node's process has already returned, so give them a bounded moment
    _, alive = psutil.wait_procs(kids, timeout=30)
    assert not [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], alive

    trace = load_trace(trace_dir)
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


def test_tp2_on_a_model_whose_heads_split_in_two(tmp_path, tokenizer):
    """--tp-size 2 needs heads that 2 divides, which the bundled model lacks: a tiny Llama folder with random
    weights (4 query heads, 2 key/value heads, the bundled tokenizer beside it) served by two scheduler
    ranks. Its float32 greedy tokens, the prompts sent at once, equal transformers' on the same folder, and its
trace checks and replays."""

    import transformers as tf

    from tests.model_executor.test_hf_folders import TINY
    from tests.server.conftest import ServeProcess, replay_opens_to_the_end
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
    srv = ServeProcess(["--model", str(folder), "--dtype", "float32", "--tp-size", "2", "--max-total-tokens", "256",
                        "--trace", str(trace_dir), "--log-level", "warning"]).wait_ready()
    try:
        assert "scheduler_tp1" in srv.pids and "scheduler_tp2" not in srv.pids, srv.pids  # two ranks
        assert _greedy_at_once(srv.url, prompts) == want
    finally:
        code = srv.stop(signal.SIGINT)
    assert code == 0, srv.output()[-3000:]
    assert srv.alive_descendants() == []
    trace = load_trace(trace_dir)
    assert sorted(trace.tp_rank_events) == ["scheduler_tp1"] and check_trace(trace) == []
    replay_opens_to_the_end(trace)

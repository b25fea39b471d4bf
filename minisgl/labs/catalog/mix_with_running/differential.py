"""The mix_with_running lab's differential check: your ScheduleBatch.mix_with_running and the engine's, each
given its own copy of the same two batches as get_new_batch_prefill hands them over (a prefill batch after
prepare_for_extend: each request's extend rows after its cached prefix; a running batch after
prepare_for_decode: one row and one new KV slot per request), generated with 1-3 prefill requests and 0-3
running ones. After the call: every field of the mixed batch, the requests in it and its decoding_reqs,
and each running request's fill_ids and extend_input_len."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from minisgl.labs.differential import Log, call, same

PREFILL = st.lists(st.tuples(st.integers(1, 6), st.integers(0, 5)), min_size=1, max_size=3)  # (len, prefix)
RUNNING = st.lists(st.tuples(st.integers(1, 5), st.integers(1, 4)), max_size=3)  # (prompt len, outputs)
OPS = st.tuples(PREFILL, RUNNING)


def operations():
    return OPS


# always tried first: no running request (mixing adds nothing), and a prefill behind a cache hit
EXAMPLES = [([(3, 0)], []), ([(5, 4)], [(2, 1), (4, 3)])]

FIELDS = ("forward_mode", "input_ids", "out_cache_loc", "prefix_lens", "extend_lens", "seq_lens",
          "req_pool_indices")


def batches(prefill, running):
    """The two batches, built from the generated sizes (token ids, pool indices and KV slots numbered in
    turn, as the pools would hand them out)."""
    from minisgl.model_executor.forward_batch_info import ForwardMode
    from minisgl.sampling.sampling_params import SamplingParams
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch

    params = SamplingParams(max_new_tokens=8, ignore_eos=True)
    slot, new = 1, ScheduleBatch.init_new([], None, None, None)
    new.forward_mode, new.input_ids, new.req_pool_indices, slots = ForwardMode.EXTEND, [], [], []
    new.prefix_lens, new.extend_lens, new.seq_lens = [], [], []
    for i, (length, prefix) in enumerate(prefill):
        prefix = min(prefix, length - 1)
        req = Req(f"p{i}", [10 * i + t for t in range(length)], params, eos_token_ids=set())
        req.fill_ids, req.extend_input_len, req.req_pool_idx = list(req.origin_input_ids), length - prefix, i
        new.reqs.append(req)
        new.input_ids += req.origin_input_ids[prefix:]
        new.prefix_lens.append(prefix)
        new.extend_lens.append(length - prefix)
        new.seq_lens.append(length)
        new.req_pool_indices.append(i)
        slots += range(slot, slot + length - prefix)
        slot += length - prefix
    new.out_cache_loc = torch.tensor(slots, dtype=torch.int64)
    run = ScheduleBatch.init_new([], None, None, None)
    for j, (length, outputs) in enumerate(running):
        req = Req(f"r{j}", [100 + 10 * j + t for t in range(length)], params, eos_token_ids=set())
        req.output_ids = [200 + 10 * j + t for t in range(outputs)]
        req.req_pool_idx = len(prefill) + j
        run.reqs.append(req)
    run.forward_mode = ForwardMode.DECODE
    run.input_ids = [r.output_ids[-1] for r in run.reqs]
    run.seq_lens = [r.seqlen for r in run.reqs]
    run.req_pool_indices = [r.req_pool_idx for r in run.reqs]
    run.prefix_lens, run.extend_lens = [], []
    run.out_cache_loc = torch.arange(slot, slot + len(run.reqs), dtype=torch.int64)
    return new, run


def seen(batch, run) -> dict:
    out = {f"batch.{f}": getattr(batch, f) for f in FIELDS}
    out["batch.forward_mode"] = batch.forward_mode.name
    out["batch.out_cache_loc"] = batch.out_cache_loc.tolist()
    out["the rids of batch.reqs"] = [r.rid for r in batch.reqs]
    out["the rids of batch.decoding_reqs"] = [r.rid for r in batch.decoding_reqs]
    out["each running request's (fill_ids, extend_input_len)"] = [(r.fill_ids, r.extend_input_len)
                                                                   for r in run.reqs]
    return out


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    prefill, running = ops
    ref_new, ref_run = batches(prefill, running)
    my_new, my_run = batches(prefill, running)
    log.step(f"# prefill requests (prompt length, cached prefix): {prefill}; running requests "
             f"(prompt length, outputs): {running}")
    code = "new_batch.mix_with_running(running_batch)"
    call(code, lambda: ref_ns.mix_with_running(ref_new, ref_run),
         lambda: mine_ns.mix_with_running(my_new, my_run))
    log.step(code)
    want, got = seen(ref_new, ref_run), seen(my_new, my_run)
    for what in want:
        same(f"after mix_with_running, {what}", want[what], got[what])

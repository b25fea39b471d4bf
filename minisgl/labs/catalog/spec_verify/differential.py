"""The spec_verify lab's differential check: your accept_lengths and verify and the engine's, each on its own
real CacheManager, pools and Req objects, driven through the same verify rounds: three requests with their
draft limits, each round their drafts (0 to K = 3 tokens) and the token every row gave. After every round:
accept_lengths' answer, the result's draft_lens and accept_lens, the KV slots freed (with their reason, in
order), each request's next draft limit, the worker's stats and the batch's mode."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from minisgl.labs.differential import Log, call, same

K = 3
RIDS = ("A", "B", "C")
TOKEN = st.integers(0, 2)  # a small alphabet: drafts are often right, sometimes not

# one request's part of a round: its drafts and the tokens of its 1 + len(drafts) rows
PART = st.lists(TOKEN, max_size=K).flatmap(lambda draft: st.tuples(
    st.just(draft), st.lists(TOKEN, min_size=len(draft) + 1, max_size=len(draft) + 1)))
ROUNDS = st.tuples(
    st.lists(st.integers(1, K), min_size=len(RIDS), max_size=len(RIDS)),  # the requests' draft limits
    st.booleans(),  # adaptive drafting
    st.lists(st.lists(PART, min_size=len(RIDS), max_size=len(RIDS)), min_size=1, max_size=4),
)


def operations():
    return ROUNDS


# always tried first: every draft right (the bonus row after the last), a first draft wrong, no drafts at all
EXAMPLES = [([1, 2, 3], True, [[([1], [1, 0]), ([1, 1], [1, 1, 2]), ([0, 1, 2], [0, 1, 2, 0])],
                               [([2, 2], [0, 2, 2]), ([], [1]), ([1], [1, 1])]]),
            ([3, 3, 3], False, [[([], [0]), ([], [1]), ([2, 2, 2], [2, 2, 1, 0])]])]


class _Side:
    """One side's engine state: a CacheManager with its pools, the worker and the three requests."""

    def __init__(self, limits: list[int], adaptive: bool):
        from minisgl.mem_cache.cache_manager import CacheManager
        from minisgl.mem_cache.chunk_cache import ChunkCache
        from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
        from minisgl.sampling.sampling_params import SamplingParams
        from minisgl.scheduler.req import Req
        from minisgl.server_args import ServerArgs
        from minisgl.speculative.ngram_worker import NGRAMWorker

        kv = TokenToKVPool(128, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
        self.cm = CacheManager(ChunkCache(), ReqToTokenPool(4, 8), kv)
        args = ServerArgs(speculative_algorithm="NGRAM", speculative_num_draft_tokens=K,
                          disable_adaptive_draft=not adaptive)
        self.worker = NGRAMWorker(None, self.cm, args)
        params = SamplingParams(max_new_tokens=64, temperature=0)
        self.reqs = [Req(rid, [1, 2, 3], params, eos_token_ids=set()) for rid in RIDS]
        for req, limit in zip(self.reqs, limits):
            req.spec_draft_limit = limit

    def round(self, drafts: list[list[int]], rows: list[int]):
        """A TARGET_VERIFY batch as prepare_for_verify leaves it (a fresh KV slot per row), and its result."""
        from minisgl.model_executor.forward_batch_info import ForwardMode
        from minisgl.scheduler.schedule_batch import ScheduleBatch
        from minisgl.scheduler.utils import GenerationBatchResult
        from minisgl.speculative.spec_info import NgramVerifyInput

        cm = self.cm
        batch = ScheduleBatch.init_new(self.reqs, cm.req_to_token_pool, cm.token_to_kv_pool, cm)
        batch.forward_mode, batch.spec_info = ForwardMode.TARGET_VERIFY, NgramVerifyInput(drafts)
        batch.out_cache_loc = self.cm.alloc_token_slots(len(rows))
        result = GenerationBatchResult(next_token_ids=list(rows), logprobs=[0.0] * len(rows),
                                       forward_time=0.0)
        self.cm.journal = []
        return batch, result

    def seen(self, batch, result) -> dict:
        return {"result.draft_lens": result.draft_lens, "result.accept_lens": result.accept_lens,
                "KV freed (reason, slots)": [(op.reason, op.slots.tolist()) for op in self.cm.journal
                                             if op.kind == "free"],
                "the requests' spec_draft_limit": [r.spec_draft_limit for r in self.reqs],
                "worker.stats (verify_rounds, proposed, accepted)": (
                    self.worker.stats.verify_rounds, self.worker.stats.proposed, self.worker.stats.accepted),
                "batch.forward_mode, batch.spec_info": (batch.forward_mode.name, batch.spec_info)}


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    import minisgl.speculative.ngram_worker as home

    limits, adaptive, rounds = ops
    ref, mine = _Side(limits, adaptive), _Side(limits, adaptive)
    log.step(f"# three requests {list(RIDS)}, draft limits {limits}, K = {K}, adaptive {adaptive}")
    for n, parts in enumerate(rounds, 1):
        drafts = [list(d) for d, _ in parts]
        rows = [t for _, r in parts for t in r]
        code = f"accept_lengths({drafts}, {rows})"
        call(code, lambda: ref_ns.accept_lengths(drafts, rows), lambda: mine_ns.accept_lengths(drafts, rows))
        log.step(code, ref_ns.accept_lengths(drafts, rows))
        rb, rr = ref.round(drafts, rows)
        mb, mr = mine.round(drafts, rows)
        saved = home.accept_lengths  # the engine's verify finds accept_lengths in its module: the engine's
        home.accept_lengths = ref_ns.accept_lengths
        try:
            call(f"verify(worker, batch, result)  # round {n}", lambda: ref_ns.verify(ref.worker, rb, rr),
                 lambda: mine_ns.verify(mine.worker, mb, mr))
        finally:
            home.accept_lengths = saved
        log.step(f"verify(worker, batch, result)  # round {n}: drafts {drafts}, row tokens {rows}")
        want, got = ref.seen(rb, rr), mine.seen(mb, mr)
        for what in want:
            same(f"after round {n}, {what}", want[what], got[what])

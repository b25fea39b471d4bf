"""Unit tests of the spec_verify lab: your accept_lengths and NGRAMWorker.verify under
`minisgl lab test spec_verify`, else the engine's.

Real pools, a real RadixCache and CacheManager, real Req objects and the engine's own prepare_for_decode and
prepare_for_verify (drafts from n-gram matches in the prompts below); no model: each test says which token
every verify row gave, as the sampler would have.
"""

import torch

from minisgl.labs.testing import component
from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
from minisgl.mem_cache.radix_cache import RadixCache
from minisgl.model_executor.forward_batch_info import ForwardMode
from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.req import Req
from minisgl.scheduler.schedule_batch import ScheduleBatch
from minisgl.scheduler.utils import GenerationBatchResult
from minisgl.server_args import ServerArgs
from minisgl.speculative.ngram_worker import NGRAMWorker

LAB = component("spec_verify")  # installs your verify on NGRAMWorker (under `minisgl lab test`)
COUNTING = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]  # after [1, 2] came [3, 4, 1]: the drafts
PLAIN = [50, 51, 52]  # nothing repeats: no draft


def engine(k=3, adaptive=True):
    r2t = ReqToTokenPool(8, 64)
    kv = TokenToKVPool(64, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
    cm = CacheManager(RadixCache(), r2t, kv)
    args = ServerArgs(speculative_algorithm="NGRAM", speculative_num_draft_tokens=k,
                      disable_adaptive_draft=not adaptive, speculative_ngram_min_match_window_size=1)
    return cm, NGRAMWorker(None, cm, args)  # verify needs no target worker: the tests give the rows' tokens


def running(cm: CacheManager, rid: str, prompt: list[int], limit: int, max_new: int = 32) -> Req:
    """Prefilled (every prompt token has KV) with its first token sampled; its draft limit set."""
    req = Req(rid, list(prompt[:-1]), SamplingParams(max_new_tokens=max_new, ignore_eos=True, temperature=0),
              eos_token_ids=set())
    req.init_next_round_input(cm.tree_cache)
    cm.tree_cache.inc_lock_ref(req.last_node)
    (req.req_pool_idx,) = cm.req_to_token_pool.alloc(1)
    row, p = cm.req_to_token_pool.req_to_token[req.req_pool_idx], len(req.prefix_indices)
    row[p : len(req.origin_input_ids)] = cm.alloc_token_slots(len(req.origin_input_ids) - p)
    req.output_ids.append(prompt[-1])  # the prompt's last token stands for the first sampled one
    req.spec_draft_limit = limit
    return req


def verify_round(worker: NGRAMWorker, cm: CacheManager, reqs: list[Req], rows: list[int]):
    """A decode round made TARGET_VERIFY by the engine, then `rows` as the sampled tokens, then verify."""
    batch = ScheduleBatch.init_new(reqs, cm.req_to_token_pool, cm.token_to_kv_pool, cm)
    batch.prepare_for_decode()
    worker.prepare_for_verify(batch)
    assert batch.forward_mode == ForwardMode.TARGET_VERIFY, "the test's prompts should give drafts"
    slots = batch.out_cache_loc.tolist()
    result = GenerationBatchResult(next_token_ids=list(rows), logprobs=[0.0] * len(rows), forward_time=0.0)
    cm.journal = []
    worker.verify(batch, result)
    return batch, result, slots


def freed(cm: CacheManager) -> list[tuple[str, list[int]]]:
    return [(op.reason, op.slots.tolist()) for op in cm.journal if op.kind == "free"]


# ---- accept_lengths ----------------------------------------------------------------------------------
def test_the_longest_run_of_right_drafts_from_the_first():
    assert LAB.accept_lengths([[5, 6, 7]], [5, 6, 8, 9]) == [2]
    assert LAB.accept_lengths([[5, 6, 7]], [5, 6, 7, 9]) == [3], "all right: the last row is the bonus token"
    assert LAB.accept_lengths([[5, 6, 7]], [4, 6, 7, 9]) == [0], "a wrong first draft keeps none"
    assert LAB.accept_lengths([[5, 6, 7]], [5, 0, 7, 9]) == [1], "a right draft after a wrong one is not kept"


def test_each_request_reads_its_own_rows():
    # rows: [5, 6, 8, 1] for the first (3 drafts), [2] for the second (none), [3, 4] for the third (1 draft)
    assert LAB.accept_lengths([[5, 6, 7], [], [3]], [5, 6, 8, 1, 2, 3, 4]) == [2, 0, 1]
    assert LAB.accept_lengths([[], []], [7, 7]) == [0, 0], "a request with no draft keeps 0"
    assert LAB.accept_lengths([[7], [7]], [7, 1, 2, 7]) == [1, 0], "the second request's rows start at 2"


# ---- verify --------------------------------------------------------------------------------------------
def test_the_result_says_each_requests_drafts_and_accepted():
    cm, worker = engine()
    a, b = running(cm, "A", COUNTING, limit=3), running(cm, "B", PLAIN, limit=3)
    _, result, _ = verify_round(worker, cm, [a, b], rows=[3, 4, 9, 0, 60])
    assert result.draft_lens == [3, 0]
    assert result.accept_lens == [2, 0]
    assert [result.rows_of(i) for i in range(2)] == [range(0, 3), range(4, 5)]


def test_the_rows_after_the_kept_ones_give_their_kv_back():
    cm, worker = engine()
    a, b = running(cm, "A", COUNTING, limit=3), running(cm, "B", COUNTING, limit=3)
    before = cm.token_to_kv_pool.available_size()
    # A keeps 1 draft (rows 0-1 give tokens; rows 2-3 were for drafts it lost), B keeps all 3
    _, _, slots = verify_round(worker, cm, [a, b], rows=[3, 9, 1, 2, 3, 4, 1, 5])
    assert freed(cm) == [("rejected", slots[2:4])], "only A's rows after its bonus token are freed"
    assert cm.token_to_kv_pool.available_size() == before - len(slots) + 2  # the round took one per row


def test_each_request_frees_its_own_rejected_rows_in_batch_order():
    cm, worker = engine()
    a, b = running(cm, "A", COUNTING, limit=3), running(cm, "B", COUNTING, limit=2)
    _, _, slots = verify_round(worker, cm, [a, b], rows=[0, 4, 1, 2] + [9, 4, 1])
    assert freed(cm) == [("rejected", slots[1:4]), ("rejected", slots[5:7])]


def test_the_draft_limit_is_earned():
    cm, worker = engine(k=3)
    a, b, c = (running(cm, rid, COUNTING, limit=n) for rid, n in (("A", 2), ("B", 3), ("C", 3)))
    d = running(cm, "D", PLAIN, limit=2)
    verify_round(worker, cm, [a, b, c, d], rows=[3, 4, 9] + [3, 4, 1, 9] + [3, 0, 1, 2] + [60])
    assert a.spec_draft_limit == 3, "all 2 drafts right: twice the limit, at most K = 3"
    assert b.spec_draft_limit == 3, "all 3 right at K: it stays at K"
    assert c.spec_draft_limit == 1, "1 of 3 right: the number accepted"
    assert d.spec_draft_limit == 2, "no draft this round: the limit is not touched"


def test_a_rejected_first_draft_still_leaves_one():
    cm, worker = engine(k=3)
    a = running(cm, "A", COUNTING, limit=2)
    verify_round(worker, cm, [a], rows=[9, 4, 1])
    assert a.spec_draft_limit == 1


def test_without_adaptive_drafting_the_limit_is_left_alone():
    cm, worker = engine(k=3, adaptive=False)
    a = running(cm, "A", COUNTING, limit=3)
    verify_round(worker, cm, [a], rows=[0, 4, 1, 2])
    assert a.spec_draft_limit == 3


def test_the_stats_add_up_over_rounds():
    cm, worker = engine()
    a, b = running(cm, "A", COUNTING, limit=3), running(cm, "B", PLAIN, limit=3)
    verify_round(worker, cm, [a, b], rows=[3, 4, 9, 0, 60])
    c = running(cm, "C", COUNTING, limit=1)
    verify_round(worker, cm, [c], rows=[3, 7])
    assert (worker.stats.verify_rounds, worker.stats.proposed, worker.stats.accepted) == (2, 4, 3)


def test_the_batch_decodes_next_round():
    cm, worker = engine()
    batch, _, _ = verify_round(worker, cm, [running(cm, "A", COUNTING, limit=2)], rows=[3, 4, 1])
    assert batch.forward_mode == ForwardMode.DECODE
    assert batch.spec_info is None

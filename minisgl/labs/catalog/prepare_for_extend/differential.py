"""The prepare_for_extend lab's differential check: your ScheduleBatch.prepare_for_extend and the engine's,
each on its own engine (real pools, a real RadixCache and CacheManager, real Req objects), driven through
the same rounds the scheduler makes: requests arrive, are admitted with their cached prefix (none, part, or
all but the last token), a long prompt is prefilled in chunks, a request finishes or is retracted and
comes back with its output tokens. After each prepare_for_extend: every field of the batch and each
request's req_pool_idx; after every step: the whole req_to_token table, both pools' free lists, the radix
tree and what the CacheManager did (its journal: allocs, frees, inserts, evictions)."""

from __future__ import annotations

from hypothesis import strategies as st

from minisgl.labs.differential import Log, Mismatch, call, same

REQ_SLOTS, CONTEXT, KV_SLOTS = 4, 16, 12  # a small KV pool: rounds often evict the radix cache


def _prompt(length: int, code: int) -> list[int]:
    return [1 + code // 3**i % 3 for i in range(length)]


# 1 to 6 tokens of a 3-token alphabet (prefixes are shared often), drawn as one number: fast to generate
PROMPT = st.builds(_prompt, st.integers(1, 6), st.integers(0, 3**6 - 1))
NEW = st.tuples(PROMPT, st.integers(0, 4))  # (prompt, rows per chunk; 0: the whole prompt in one round)
OPS = st.one_of(
    st.tuples(st.just("round"), st.lists(NEW, max_size=3)),  # these arrive, then a round is planned
    st.tuples(st.just("finish"), st.integers(0, 3)),  # one of the running requests finishes
    st.tuples(st.just("retract"), st.integers(0, 3)),  # one is retracted: it waits again, output kept
)


def operations():
    return st.lists(OPS, min_size=1, max_size=8)


class World:
    """One engine's scheduler state: the CacheManager and the requests waiting, chunked and running."""

    def __init__(self):
        import torch

        from minisgl.mem_cache.cache_manager import CacheManager
        from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
        from minisgl.mem_cache.radix_cache import RadixCache

        kv = TokenToKVPool(KV_SLOTS, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
        self.cm = CacheManager(RadixCache(), ReqToTokenPool(REQ_SLOTS, CONTEXT), kv)
        self.cm.journal = []
        self.waiting, self.running, self.chunked, self.chunk = [], [], None, {}
        self.count = 0

    def arrive(self, prompt: list[int], chunk: int) -> str:
        from minisgl.sampling.sampling_params import SamplingParams
        from minisgl.scheduler.req import Req

        rid = f"r{self.count}"
        self.count += 1
        self.waiting.append(Req(rid, list(prompt), SamplingParams(max_new_tokens=4, ignore_eos=True), set()))
        self.chunk[rid] = chunk
        return f"{rid} = Req({rid!r}, {prompt}, SamplingParams(max_new_tokens=4, ignore_eos=True), set())"

    def admit(self) -> tuple[list, list[str]]:
        """The round's requests, as the scheduler admits them (the chunked prompt first, then the waiting
        queue while there is KV room and a request slot), and the code that did it."""
        cm, tree = self.cm, self.cm.tree_cache
        reqs, code, claimed = [], [], 0
        room = lambda: cm.token_to_kv_pool.available_size() + tree.evictable_size() - claimed  # noqa: E731
        if self.chunked is not None:
            req = self.chunked
            req.init_next_round_input()
            prefix, take = len(req.prefix_indices), min(req.extend_input_len, self.chunk[req.rid], room())
            if take > 0:
                req.set_extend_range(prefix, prefix + take)
                reqs.append(req)
                claimed += take
                code.append(f"{req.rid}.init_next_round_input(); {req.rid}.set_extend_range({prefix}, "
                            f"{prefix + take})")
        free_slots = cm.req_to_token_pool.available_size()
        for req in list(self.waiting):
            req.init_next_round_input(tree)
            line = f"{req.rid}.init_next_round_input(cm.tree_cache)"
            prefix, end = len(req.prefix_indices), len(req.fill_ids)
            if 0 < self.chunk[req.rid] < end - prefix and self.chunked is None:
                end = prefix + self.chunk[req.rid]
            if free_slots < 1 or end - prefix > room() - prefix:  # locking its prefix may take that much
                code.append(f"{line}  # no room this round")
                continue
            tree.inc_lock_ref(req.last_node)
            line += f"; cm.tree_cache.inc_lock_ref({req.rid}.last_node)"
            if end < len(req.fill_ids):
                req.set_extend_range(prefix, end)
                line += f"; {req.rid}.set_extend_range({prefix}, {end})"
                self.chunked = req
            self.waiting.remove(req)
            reqs.append(req)
            claimed += end - prefix
            free_slots -= 1
            code.append(line)
        return reqs, code

    def plan(self, reqs):
        from minisgl.scheduler.schedule_batch import ScheduleBatch

        return ScheduleBatch.init_new(reqs, self.cm.req_to_token_pool, self.cm.token_to_kv_pool, self.cm)

    def results(self, reqs) -> list[str]:
        """After the round: an intermediate chunk is cached; any other request samples a token and its
        prompt enters the tree (process_batch_result_prefill)."""
        code = []
        for req in reqs:
            if len(req.fill_ids) < len(req.origin_input_ids) + len(req.output_ids):
                self.cm.cache_unfinished_req(req)
                code.append(f"cm.cache_unfinished_req({req.rid})  # an intermediate chunk")
                continue
            if req is self.chunked:
                self.chunked = None
            token = 1 + len(req.fill_ids) % 3
            req.output_ids.append(token)
            self.cm.cache_unfinished_req(req)
            self.running.append(req)
            code.append(f"{req.rid}.output_ids.append({token}); cm.cache_unfinished_req({req.rid})")
        return code

    def leave(self, op: str, i: int) -> str | None:
        if not self.running:
            return None
        req = self.running.pop(i % len(self.running))
        if op == "finish":
            self.cm.cache_finished_req(req)
            return f"cm.cache_finished_req({req.rid})"
        self.cm.cache_finished_req(req, free_reason="retracted")
        req.reset_for_retract()
        self.waiting.insert(0, req)
        return f"cm.cache_finished_req({req.rid}, free_reason='retracted'); {req.rid}.reset_for_retract()"


def batch_fields(b) -> dict:
    return {"reqs": [r.rid for r in b.reqs], "forward_mode": b.forward_mode.name,
            "input_ids": list(b.input_ids), "req_pool_indices": list(b.req_pool_indices),
            "prefix_lens": list(b.prefix_lens), "extend_lens": list(b.extend_lens),
            "seq_lens": list(b.seq_lens),
            "out_cache_loc": b.out_cache_loc.tolist(), "out_cache_loc.dtype": b.out_cache_loc.dtype,
            "each req's req_pool_idx": [r.req_pool_idx for r in b.reqs]}


def state(w: World) -> dict:
    cm = w.cm
    journal = [(op.kind, op.slots.tolist(), op.reason, op.rid) for op in cm.journal]
    cm.journal.clear()
    return {"req_to_token (the whole table)": cm.req_to_token_pool.req_to_token.tolist(),
            "req_to_token_pool.free_slots": list(cm.req_to_token_pool.free_slots),
            "token_to_kv_pool.free_slots": cm.token_to_kv_pool.free_slots.tolist(),
            "the CacheManager's journal (kind, slots, reason, rid)": journal,
            "the radix tree's nodes": cm.tree_cache.tree_nodes()}


def on_mine(what: str, fn):
    """The engine's own code on your side's objects: it must not fail where it did not on the engine's."""
    try:
        return fn()
    except Exception as e:
        raise Mismatch(what, "no error", f"{type(e).__name__}: {e}") from None


def compare(step: str, exp: dict, got: dict) -> None:
    for k in exp:
        same(f"after {step}, {k}", exp[k], got[k])


SETUP = ("import torch", "from minisgl.mem_cache.cache_manager import CacheManager",
         "from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool",
         "from minisgl.mem_cache.radix_cache import RadixCache",
         "from minisgl.sampling.sampling_params import SamplingParams",
         "from minisgl.scheduler.req import Req",
         "from minisgl.scheduler.schedule_batch import ScheduleBatch",
         f"cm = CacheManager(RadixCache(), ReqToTokenPool({REQ_SLOTS}, {CONTEXT}), "
         f"TokenToKVPool({KV_SLOTS}, 1, 1, 1, torch.float32))")


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    for line in SETUP:
        log.step(line)
    ref, mine = World(), World()
    for op, arg in ops:
        if op == "round":
            for prompt, chunk in arg:
                log.step(ref.arrive(prompt, chunk))
                mine.arrive(prompt, chunk)
            (reqs, code), (my_reqs, _) = ref.admit(), on_mine("admitting the next round", mine.admit)
            for line in code:
                log.step(line)
            if not reqs:
                continue
            names = ", ".join(r.rid for r in reqs)
            log.step(f"b = ScheduleBatch.init_new([{names}], cm.req_to_token_pool, cm.token_to_kv_pool, cm)")
            rb, mb = ref.plan(reqs), mine.plan(my_reqs)
            call("prepare_for_extend(b)", lambda: ref_ns.prepare_for_extend(rb),
                 lambda: mine_ns.prepare_for_extend(mb), lambda _: None)  # what it returns is not used
            exp = batch_fields(rb)
            log.step("prepare_for_extend(b)", ", ".join(f"{k} {v}" for k, v in list(exp.items())[2:8]))
            compare("prepare_for_extend(b)", exp, on_mine("reading the batch", lambda: batch_fields(mb)))
            compare("prepare_for_extend(b)", state(ref), state(mine))
            lines = ref.results(reqs)
            for line in lines:
                log.step(line)
            on_mine("; ".join(lines), lambda: mine.results(my_reqs))
        else:
            line = ref.leave(op, arg)
            on_mine(str(line), lambda: mine.leave(op, arg))
            if line is None:
                continue
            log.step(line)
        compare(log.lines[-1].split("#")[0].strip(), state(ref), state(mine))

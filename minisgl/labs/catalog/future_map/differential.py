"""The future_map lab's differential check: your FutureMap and the engine's, made with the same
max_running_requests, driven through the same rounds the overlap loop makes: each round allocates one index
per row, stores the round's sampled tokens at them, and the next round's input ids (real ids and the last
round's placeholders) are resolved. After every call: its answer, then the ring's size, future_ct and the
buffer. Then split_launched_rows on launched rounds of requests in every state a row can meet a round late
(still waiting, finished meanwhile, retracted, retracted and re-admitted, the chunked prompt), each with or
without a newer placeholder behind: its (keep, late) and every request's future_token_ids after."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from minisgl.labs.differential import Log, call, same
from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.finish_reason import FINISH_LENGTH
from minisgl.scheduler.req import Req

ROUND = st.tuples(st.integers(1, 4),  # rows in the round (at most max_running_requests, 4 at most)
                  st.lists(st.integers(0, 49151), min_size=4, max_size=4),  # tokens its rows sample
                  st.lists(st.integers(0, 3), max_size=4))  # real input ids mixed into the next round's
STATES = ("waiting", "finished", "retracted", "readmitted", "chunked")
ROW = st.tuples(st.sampled_from(STATES), st.booleans())  # the request's state, a newer placeholder behind
OPS = st.tuples(st.integers(1, 4), st.lists(ROUND, min_size=1, max_size=12),
                st.lists(st.lists(ROW, min_size=1, max_size=4), max_size=3))


def operations():
    return OPS


# always tried first: a ring of 4 indices that a batch straddles, and one batch exactly the ring's size
EXAMPLES = [(1, [(3, [5, 6, 7, 8], []), (2, [9, 10, 11, 12], [0]), (1, [1, 2, 3, 4], [3])],
             [[("waiting", True), ("finished", False), ("retracted", False), ("chunked", False)],
              [("readmitted", False), ("finished", True), ("waiting", False)]]),
            (1, [(4, [1, 2, 3, 4], [2, 0]), (4, [5, 6, 7, 8], [])], [])]


def state(fm) -> tuple:
    return fm.size, fm.future_ct, fm.token_ids_buf.tolist()


def launched_round(rows) -> tuple[list[Req], list[int], Req | None, list[str]]:
    """Requests in the given states, the round's placeholders, its chunked request, and the code that
    makes them (for the printed example)."""
    reqs, placeholders, chunked, code = [], [], None, []
    for i, (state, newer) in enumerate(rows):
        req = Req(f"r{i}", [1, 2, 3], SamplingParams(max_new_tokens=8, ignore_eos=True), set())
        mine = -(i + 1)  # this row's placeholder
        pending = {"waiting": [mine], "finished": [mine], "readmitted": [mine - 10]}.get(state, [])
        if newer and state != "chunked":
            pending.append(mine - 20)
        req.future_token_ids = pending
        code.append(f"r{i} = Req('r{i}', [1, 2, 3], SamplingParams(max_new_tokens=8), set()); "
                    f"r{i}.future_token_ids = {pending}")
        if state == "finished":
            req.finished_reason = FINISH_LENGTH(length=8)
            code.append(f"r{i}.finished_reason = FINISH_LENGTH(length=8)")
        if state == "chunked" and chunked is None:
            chunked = req
        reqs.append(req)
        placeholders.append(mine)
    return reqs, placeholders, chunked, code


def drive_split(rounds, mine_ns, ref_ns, log: Log) -> None:
    for rows in rounds:
        ref_reqs, placeholders, ref_chunked, code = launched_round(rows)
        mine_reqs, _, mine_chunked, _ = launched_round(rows)
        for line in code:
            log.step(line)
        chunked = "None" if ref_chunked is None else ref_chunked.rid
        names = ", ".join(r.rid for r in ref_reqs)
        step = f"split_launched_rows([{names}], {placeholders}, {chunked})"
        got, _ = call(step, lambda: ref_ns.split_launched_rows(ref_reqs, placeholders, ref_chunked),
                      lambda: mine_ns.split_launched_rows(mine_reqs, placeholders, mine_chunked),
                      lambda answer: (list(answer[0]), list(answer[1])), "-> (keep, late)")
        log.step(step, got)
        for ref, mine in zip(ref_reqs, mine_reqs):
            same(f"after {step}, {ref.rid}.future_token_ids", ref.future_token_ids, mine.future_token_ids)


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    max_running, rounds, launched = ops
    code = f"fm = FutureMap({max_running})"
    ref, mine = call(code, lambda: ref_ns.FutureMap(max_running), lambda: mine_ns.FutureMap(max_running),
                     state, "-> (size, future_ct, token_ids_buf)")
    log.step(code)
    last: list[int] = []
    for bs, tokens, real in rounds:
        bs = min(bs, max_running)
        if last:  # this round's input ids: the last round's placeholders among real ids
            ids = [-k for k in last] + list(real)
            code = f"fm.resolve_future_token_ids(torch.tensor({ids}))"
            call(code, lambda: ref.resolve_future_token_ids(torch.tensor(ids)),
                 lambda: mine.resolve_future_token_ids(torch.tensor(ids)), lambda t: t.tolist())
            log.step(code, ref.resolve_future_token_ids(torch.tensor(ids)).tolist())
        code = f"fm.alloc_future_indices({bs})"
        got, _ = call(code, lambda: ref.alloc_future_indices(bs), lambda: mine.alloc_future_indices(bs))
        log.step(code, got)
        code = f"fm.store_to_future_map({got}, {tokens[:bs]})"
        call(code, lambda: ref.store_to_future_map(got, tokens[:bs]),
             lambda: mine.store_to_future_map(got, tokens[:bs]))
        log.step(code)
        same(f"after {code}, (size, future_ct, token_ids_buf)", state(ref), state(mine))
        last = got
    drive_split(launched, mine_ns, ref_ns, log)

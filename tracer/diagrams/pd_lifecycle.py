"""One request's lifecycle across a prefill/decode pair (a merged trace, `minisgl trace merge`).

Each server's part is its own lifecycle (its processes, its rounds), drawn in lanes named after the server
(prefill: Scheduler, decode: Scheduler …); one message joins them: the KV rows and the first token, from the
prefill's `disagg.kv_sent` to the decode's `disagg.kv_received`. Both parts keep the merged timeline's order.
"""

from __future__ import annotations

from tracer import schema as S
from tracer.diagrams.handoffs import Lifecycle, Link, lifecycle
from tracer.reader import Trace
from tracer.servers import server_names, server_view


def any_lifecycle(trace: Trace, rid: str, all_rounds: bool = False, keep: int | None = None) -> Lifecycle:
    """The lifecycle of `rid`: across every server of a merged trace, else as `lifecycle` draws it."""
    servers = server_names(trace)
    if not servers:
        return lifecycle(trace, rid, all_rounds, keep)
    handoffs, links, folded = [], [], []
    for name in sorted(servers, key=lambda n: n != "prefill"):  # the prefill half first
        view = server_view(trace, name, reindex=False)
        if not view.by_rid(rid):
            continue
        part = lifecycle(view, rid, all_rounds, keep)
        for h in part.handoffs:
            h.id, h.lane = f"{name}_{h.id}", f"{name}/{h.lane}"
        for lk in part.links:
            lk.src, lk.dst = f"{name}_{lk.src}", f"{name}_{lk.dst}"
        handoffs += part.handoffs
        links += part.links
        folded += part.folded
    holding = {ev.name: h for h in handoffs for ev in h.events
               if ev.name in (S.DISAGG_KV_SENT, S.DISAGG_KV_RECEIVED)}
    sent, received = holding.get(S.DISAGG_KV_SENT), holding.get(S.DISAGG_KV_RECEIVED)
    if sent is not None and received is not None:
        ev = next(e for e in sent.events if e.name == S.DISAGG_KV_SENT)
        links.append(Link("message", sent.id, received.id, "KV rows + first token",
                          [f"room {ev.get('room')}", f"{ev.get('nbytes')} bytes"], at=ev.index))
    return Lifecycle(rid, handoffs, links, sorted(set(folded)), offline=False)

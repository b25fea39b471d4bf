"""One request's lifecycle as handoffs (the request's type in one lane at one moment) and the links
between them (messages between processes, calls from the Scheduler into the ModelRunner).

Both the Graphviz lifecycle view and the Mermaid sequence diagram draw this same list, so the two
pictures always agree. Runs of plain decode rounds are folded into one summary handoff per lane.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracer import schema as S
from tracer.diagrams import facts as F
from tracer.diagrams.lanes import causal_rounds, folded_runs, lane_of
from tracer.diagrams.text import token_texts
from tracer.event import Event
from tracer.reader import Trace
from tracer.tp_ranks import tp_ranks_by_round


@dataclass
class Handoff:
    id: str
    lane: str
    type: str  # the request's type here (ScheduleBatch, ...), or Req for a change of its state
    what: str  # a few words: "round 2 · EXTEND", "retracted"
    facts: list[str]
    round: int | None  # the scheduler round it belongs to (inherited through messages in other lanes)
    events: list[Event]  # the trace events it stands for
    folded: tuple[int, int] | None = None  # a summary of rounds first..last


@dataclass
class Link:
    kind: str  # "message" (between processes), "call" (Scheduler <-> ModelRunner), "lane" (then, same lane)
    src: str
    dst: str
    label: str
    facts: list[str] = field(default_factory=list)
    count: int = 1
    at: int = 0  # index of the event that drew it, for timeline order


@dataclass
class Lifecycle:
    rid: str
    handoffs: list[Handoff]
    links: list[Link]
    folded: list[tuple[int, int]]
    offline: bool  # an Engine trace: every lane in one process
    tp_procs: list[str] = field(default_factory=list)  # a --tp-size trace: ranks 1.. (scheduler_tp1, …)

    def in_lane(self, lane: str) -> list[Handoff]:
        return [h for h in self.handoffs if h.lane == lane]

    def timeline(self) -> list[Handoff | Link]:
        """Handoffs and message/call links in the order they happened (what a sequence diagram draws)."""
        # a link drawn by the same event as a handoff (a call) comes first: the arrow, then the note
        items: list[tuple[int, int, Handoff | Link]] = [(h.events[0].index, 1, h) for h in self.handoffs]
        items += [(lk.at, 0, lk) for lk in self.links if lk.kind != "lane"]
        return [item for _, _, item in sorted(items, key=lambda x: (x[0], x[1]))]


class _Builder:
    def __init__(self, trace: Trace, rid: str, all_rounds: bool, keep: int | None):
        self.trace, self.rid = trace, rid
        self.texts = token_texts(trace)
        self.events = [ev for ev in trace.by_rid(rid) if lane_of(ev) is not None]
        self.rounds = causal_rounds(self.events)
        self.folded = [] if all_rounds else folded_runs(self.events, self.rounds, rid, keep)
        self.kept_tokens = {ev.round for ev in self.events if ev.name == S.SCHED_OUTPUT_APPENDED}
        self.handoffs: list[Handoff] = []
        self.links: list[Link] = []
        self.last: dict[str, Handoff] = {}  # the latest handoff of each lane
        self.made: dict[str, int] = {}  # handoffs made per lane (not summaries), for their ids
        # facts (and events) for the lane's next handoff
        self.pending: dict[str, list[tuple[str, Event]]] = {}
        self.sent: dict[str, tuple[Link, Event]] = {}  # flow id -> its message and ipc.send, until received
        self.awaiting: dict[str, list[tuple[Link, Event, int | None]]] = {}  # lane -> received, no dst yet
        self.summaries: dict[tuple[tuple[int, int], str], Handoff] = {}
        self.forward: Handoff | None = None  # this round's ForwardBatch, for the call back
        self.batch: Handoff | None = None  # this round's ScheduleBatch, for the call into the runner
        self.tp_ranks = tp_ranks_by_round(trace)  # --tp-size: the ranks that ran each round's forward

    # ---- making handoffs ---------------------------------------------------------------------------
    def run_of(self, r: int | None) -> tuple[int, int] | None:
        return next((run for run in self.folded if r is not None and run[0] <= r <= run[1]), None)

    def handoff(self, ev: Event, lane: str, type_: str, what: str, facts: list[str],
                r: int | None) -> Handoff:
        run = self.run_of(r)
        if run is not None:  # one summary per lane for the whole folded run
            h = self.summaries.get((run, lane))
            if h is None:
                h = Handoff(f"{lane}_{run[0]}_{run[1]}", lane, type_, "", [], r, [ev], folded=run)
                self.summaries[(run, lane)] = h
                self._place(h, lane)
            else:
                h.events.append(ev)
                for msg, _, _ in self.awaiting.pop(lane, []):
                    msg.dst = h.id
            return h
        self.made[lane] = self.made.get(lane, 0) + 1
        before = self.pending.pop(lane, [])
        h = Handoff(f"{lane}_{self.made[lane]}", lane, type_, what,
                    F.merge_repeats([f for f, _ in before]) + facts, r,
                    [ev] + [e for _, e in before if e is not ev])
        self._place(h, lane)
        return h

    def _place(self, h: Handoff, lane: str) -> None:
        prev = self.last.get(lane)
        if prev is not None:
            self.links.append(Link("lane", prev.id, h.id, "", at=h.events[0].index))
        self.handoffs.append(h)
        self.last[lane] = h
        for msg, _, _ in self.awaiting.pop(lane, []):
            msg.dst = h.id

    def fold(self, ev: Event, lane: str, fact: str) -> None:
        """A fact about the request's latest handoff in this lane (it changed no type)."""
        h = self.last.get(lane)
        if h is None:
            self.pending.setdefault(lane, []).append((fact, ev))
        else:
            h.facts.append(fact)
            h.events.append(ev)

    # ---- the pass ----------------------------------------------------------------------------------
    def build(self) -> Lifecycle:
        for ev, r in zip(self.events, self.rounds):
            lane = lane_of(ev)
            assert lane is not None
            if ev.name == S.IPC_SEND:
                self.send(ev, lane, r)
            elif ev.name == S.IPC_RECV:
                self.recv(ev, lane, r)
            else:
                self.event(ev, lane, r)
        self.finish()
        return Lifecycle(self.rid, self.handoffs, _merge_links(self.links), self.folded,
                         offline=all(ev.proc == "engine" for ev in self.events),
                         tp_procs=sorted(self.trace.tp_rank_events))

    def event(self, ev: Event, lane: str, r: int | None) -> None:
        name, rid, texts = ev.name, self.rid, self.texts
        if self.run_of(r) is not None and (name in F.PENDING or name in F.FOLDED):
            self.handoff(ev, lane, "", "", [], r)  # the run's summary counts it
            return
        if name in F.PENDING:  # facts for the lane's next handoff (the prefix match and admission)
            self.pending.setdefault(lane, []).append((F.PENDING[name](ev), ev))
            return
        if name in F.FOLDED:
            fact = F.FOLDED[name](ev)
            if fact:
                self.fold(ev, lane, fact)
            return
        if name == S.MODEL_FORWARD:
            if ev.ph != "E":
                h = self.handoff(ev, lane, "ForwardBatch", *F.forward(ev, rid), r)
                self.forward = h
                if self.batch is not None:
                    self.links.append(Link("call", self.batch.id, h.id, "run_batch", at=ev.index))
            elif ev.get("tp_size") and self.forward is not None:  # --tp-size: every rank ran this forward
                self.fold(ev, lane, F.collectives(ev, self.tp_ranks.get(ev.round, [])))
            return
        if name == S.SCHED_BATCH_FORMED:
            self.batch = self.handoff(ev, lane, "ScheduleBatch", *F.batch(ev, rid, texts), r)
            self.forward = None
            return
        if name == S.SCHED_SAMPLED:
            h = self.handoff(ev, lane, "GenerationBatchResult",
                             *F.sampled(ev, rid, texts, r in self.kept_tokens), r)
            if self.forward is not None:
                self.links.append(Link("call", self.forward.id, h.id, "next_token_ids", at=ev.index))
            self.forward = self.batch = None
            return
        made = F.describe(ev, texts)
        if made is not None:
            self.handoff(ev, lane, *made, r)

    def send(self, ev: Event, lane: str, r: int | None) -> None:
        src = self.last.get(lane)
        if src is None:
            src = self.handoff(ev, lane, str(ev.get("msg", "message")), "sent", [], r)
        msg = Link("message", src.id, "", str(ev.get("msg", "message")), F.message(ev, self.rid), at=ev.index)
        self.links.append(msg)
        if ev.flow_id is not None:
            self.sent[ev.flow_id] = (msg, ev)

    def recv(self, ev: Event, lane: str, r: int | None) -> None:
        sent = self.sent.pop(ev.flow_id, None) if ev.flow_id is not None else None
        if sent is None:  # its send is not in the trace: the receiving end alone
            self.handoff(ev, lane, str(ev.get("msg", "message")), "received (no send in the trace)", [], r)
            return
        self.awaiting.setdefault(lane, []).append((sent[0], ev, r))

    def finish(self) -> None:
        """Messages that reached no later handoff end at a node of their own (the offline Engine's caller
        reads BatchStrOutput and logs nothing); messages never received end at a "never received" node."""
        for lane in list(self.awaiting):
            for msg, recv, r in self.awaiting.pop(lane):
                msg.dst = self.handoff(recv, lane, msg.label, "received", [], r).id
        for msg, send in self.sent.values():
            lane = {"scheduler": "sched", "detokenizer": "detok"}.get(S.proc_role(str(send.get("dst"))), "tm")
            h = Handoff(f"lost_{send.index}", lane, msg.label, "never received", [], None, [send])
            self.handoffs.append(h)
            msg.dst = h.id
        for lane, waiting in list(self.pending.items()):  # a trace that ends (or is cut) while it waits
            ev = waiting[-1][1]
            self.handoff(ev, lane, "Req", "waiting", [], self.rounds[self.events.index(ev)])
        for (run, lane), h in self.summaries.items():
            h.type, h.what, h.facts = F.summary(h.events, lane, run, self.rid, self.texts)


def _merge_links(links: list[Link]) -> list[Link]:
    """Links between the same two handoffs with the same label (in a folded run) become one, with a count;
    the facts of one message (its token ids) no longer fit, so a merged link keeps only shared ones."""
    out: dict[tuple[str, str, str, str], Link] = {}
    for lk in links:
        key = (lk.kind, lk.src, lk.dst, lk.label)
        if key in out:
            out[key].count += 1
            out[key].facts = [f for f in out[key].facts if f in lk.facts]
        else:
            out[key] = lk
    return list(out.values())


def lifecycle(trace: Trace, rid: str, all_rounds: bool = False, keep: int | None = None) -> Lifecycle:
    """The handoffs of request `rid` (a full rid) and the links between them."""
    return _Builder(trace, rid, all_rounds, keep).build()

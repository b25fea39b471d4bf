"""What the panes look up at every step, computed once per trace: each request's events, rounds, lane
handoffs, prompt and streamed text, and the text of every token id the trace spells out.

Plain Python over `tracer`'s Trace, so the timeline and the panes stay cheap to step and easy to test.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from tracer import schema as S
from tracer.event import Event
from tracer.reader import Trace

# The four process lanes of a request's life, in the order a request crosses them.
LANES = ("tm", "sched", "model", "detok")
LANE_TITLES = {"tm": "HTTP server + TokenizerManager", "sched": "Scheduler", "model": "ModelRunner",
               "detok": "Detokenizer"}
LANE_SHORT = {"tm": "HTTP/TM", "sched": "Scheduler", "model": "Model", "detok": "Detok"}
PREFIX_LANE = {"http": "tm", "tm": "tm", "sched": "sched", "kv": "sched", "cache": "sched", "model": "model",
               "detok": "detok"}
PROC_LANE = {"tokenizer_manager": "tm", "scheduler": "sched", "detokenizer": "detok"}
# message type -> (the lane that sends it, the lane that receives it)
MSG_ROUTE = {"TokenizedGenerateReqInput": ("tm", "sched"), "AbortReq": ("tm", "sched"),
             "BatchTokenIDOutput": ("sched", "detok"), "BatchStrOutput": ("detok", "tm")}
# The types a request takes on its way, in order (lessons/docs/reference/trace-events.md).
TYPE_CHAIN = ("ChatCompletionRequest", "GenerateReqInput", "TokenizedGenerateReqInput", "Req",
              "ScheduleBatch", "ForwardBatch", "GenerationBatchResult", "BatchTokenIDOutput",
              "BatchStrOutput", "SSE chunk")


@dataclass(frozen=True)
class Handoff:
    """One event of a request, seen as a handoff: which lane held the request, with which type."""

    index: int
    lane: str
    type: str | None  # the `type` attr, or the message type of an ipc event; None when the event has none
    name: str
    sending_to: str | None = None  # on ipc.send: the lane the message is going to


@dataclass
class RequestInfo:
    """Facts about one request that do not depend on the scrubber's position."""

    rid: str
    events: list[int] = field(default_factory=list)  # timeline indices of its events
    handoffs: list[Handoff] = field(default_factory=list)
    rounds: set[int] = field(default_factory=set)  # rounds with a scheduler-side event about it
    prompt_text: str | None = None
    prompt_ids: list[int] | None = None
    received_ns: int | None = None  # http.request_received (a served request's clock starts there)
    endpoint: str | None = None
    chunks: list[tuple[int, str]] = field(default_factory=list)  # (event index, delta) of each SSE chunk
    decoded: list[tuple[int, str]] = field(default_factory=list)  # (event index, delta) of detok.decoded


class TraceIndex:
    """Indexes over one Trace. Rebuild it (cheap, one pass) when a live trace grows."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.requests: dict[str, RequestInfo] = {}
        self.rid_order: dict[str, int] = {}  # rid -> its place in order of first appearance (its colour)
        self.round_ends: list[int] = []  # timeline index of each sched.round_end
        self.round_of_end: dict[int, int] = {}  # that index -> its round
        self.token_text: dict[int, str] = {}
        self.t0: int | None = None  # when the first request shows up: times are shown from there
        self._search: list[str] | None = None
        for ev in trace.events:
            self._add(ev)

    def _add(self, ev: Event) -> None:
        if ev.name == S.SCHED_ROUND_END and ev.round is not None:
            self.round_ends.append(ev.index)
            self.round_of_end[ev.index] = ev.round
        if ev.name == S.SCHED_SAMPLED:
            self._learn(ev.get("token_ids"), ev.get("texts"))
        if self.t0 is None and ev.all_rids:
            self.t0 = ev.time_ns  # (a server spends seconds loading the model before that)
        for rid in ev.all_rids:
            info = self.requests.get(rid)
            if info is None:
                info = self.requests[rid] = RequestInfo(rid)
                self.rid_order[rid] = len(self.rid_order)
            info.events.append(ev.index)
            info.handoffs.append(_handoff(ev))
            if ev.round is not None and ev.lane in S.SCHED_LANES:
                info.rounds.add(ev.round)
            if ev.name == S.TM_TOKENIZED:
                info.prompt_text = ev.get("text")
                info.prompt_ids = ev.get("input_ids")
                self._learn(info.prompt_ids, ev.get("input_texts"))
            elif ev.name == S.HTTP_REQUEST_RECEIVED:
                info.received_ns, info.endpoint = ev.time_ns, ev.get("endpoint")
            elif ev.name == S.HTTP_SSE_CHUNK:
                info.chunks.append((ev.index, str(ev.get("delta") or "")))
            elif ev.name == S.DETOK_DECODED:
                info.decoded.append((ev.index, str(ev.get("delta") or "")))

    def _learn(self, ids: list | None, texts: list | None) -> None:
        """Token id -> text, from an event that lists both (sched.sampled; tm.tokenized at level 2)."""
        for tok, text in zip(ids or [], texts or []):
            if isinstance(tok, int) and isinstance(text, str):
                self.token_text.setdefault(tok, text)

    # ---- lookups ------------------------------------------------------------------------------------
    @property
    def rids(self) -> list[str]:
        return list(self.requests)

    def round_ends_of(self, rid: str) -> list[int]:
        """The sched.round_end indices of the rounds the request took part in."""
        rounds = self.requests[rid].rounds if rid in self.requests else set()
        return [i for i in self.round_ends if self.round_of_end[i] in rounds]

    def handoffs_until(self, rid: str, cursor: int) -> list[Handoff]:
        """The request's handoffs at or before the cursor."""
        info = self.requests.get(rid)
        if info is None:
            return []
        return info.handoffs[: bisect.bisect_right(info.events, cursor)]

    def text_of(self, token: int | None) -> str | None:
        """The token's text, when the trace spells it out: sampled tokens, and prompt tokens where
        tm.tokenized lists their texts (level 2 traces of a served request)."""
        return None if token is None else self.token_text.get(token)

    def search_keys(self) -> list[str]:
        """Per event, the lower-case text the `/` filter matches: its name and its rids."""
        if self._search is None:
            self._search = [" ".join([ev.name, *ev.all_rids]).lower() for ev in self.trace.events]
        return self._search


def _handoff(ev: Event) -> Handoff:
    if ev.lane == "ipc":
        msg = str(ev.get("msg") or "")
        sender, receiver = MSG_ROUTE.get(msg, (PROC_LANE.get(S.proc_role(ev.proc), "sched"),) * 2)
        if ev.name == S.IPC_SEND:
            return Handoff(ev.index, sender, msg or None, ev.name, sending_to=receiver)
        return Handoff(ev.index, receiver, msg or None, ev.name)
    lane = PREFIX_LANE.get(ev.lane, PROC_LANE.get(S.proc_role(ev.proc), "sched"))
    return Handoff(ev.index, lane, ev.get("type"), ev.name)


def streamed_text(parts: list[tuple[int, str]], cursor: int) -> tuple[str, int]:
    """The text of the parts at or before the cursor, and how many parts that is."""
    n = bisect.bisect_right([i for i, _ in parts], cursor)
    return "".join(d for _, d in parts[:n]), n

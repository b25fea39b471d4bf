"""Where each event of a request happens (its lane) and which scheduler round it belongs to, and which
runs of decode rounds the lifecycle view folds into one line.

Lanes are the four boxes of the lifecycle picture (five in a --dp-size trace, with the
DataParallelController's). In a server trace an ipc event's lane is its process;
in an offline `engine` trace every event comes from one process, so lanes come from event-name prefixes,
and an ipc event's lane from the pipeline order (tokenizer manager → scheduler → detokenizer → back).
"""

from __future__ import annotations

from tracer import schema as S
from tracer.event import Event

LANES = {"tm": "HTTP server + TokenizerManager", "dp": "DataParallelController", "sched": "Scheduler",
         "model": "ModelRunner", "detok": "Detokenizer"}  # dp: only a --dp-size trace has it
PREFIX_LANE = {"http": "tm", "tm": "tm", "dp": "dp", "sched": "sched", "kv": "sched", "cache": "sched",
               "model": "model", "detok": "detok", "disagg": "sched"}
PROC_LANE = {"tokenizer_manager": "tm", "data_parallel_controller": "dp", "scheduler": "sched",
             "detokenizer": "detok"}
NEXT_PROC = {"tokenizer_manager": "scheduler", "scheduler": "detokenizer", "detokenizer": "tokenizer_manager"}
PREV_PROC = {v: k for k, v in NEXT_PROC.items()}

# what a plain decode step does to a request; a round with anything else is drawn in full
ROUTINE = {S.SCHED_BATCH_FORMED, S.KV_ASSIGNED, S.MODEL_FORWARD, S.SCHED_SAMPLED, S.SCHED_OUTPUT_APPENDED,
           S.CACHE_INSERTED, S.IPC_SEND, S.IPC_RECV, S.DETOK_DECODED, S.TM_WAITER_WOKEN, S.HTTP_SSE_CHUNK}
MIN_RUN = 3  # a run of this many plain decode rounds keeps its first and folds the rest


def base_lane(lane: str) -> str:
    """A merged trace's lanes are one server's (prefill/sched): the lane without the server."""
    return lane.rsplit("/", 1)[-1]


def lane_titles(lanes: list[str]) -> list[tuple[str, str]]:
    """The lanes used, in LANES order (a merged trace: server by server, as they first appear), with
    titles."""
    servers = list(dict.fromkeys(lane.rsplit("/", 1)[0] if "/" in lane else "" for lane in lanes))
    return [(f"{s}/{base}" if s else base, f"{s}: {title}" if s else title)
            for s in servers for base, title in LANES.items() if (f"{s}/{base}" if s else base) in lanes]


def lane_of(ev: Event) -> str | None:
    """The lane an event is drawn in, or None for events no lane shows (trace.process_start)."""
    if ev.lane != "ipc":
        return PREFIX_LANE.get(ev.lane)
    if S.proc_role(ev.proc) in PROC_LANE:  # each data-parallel rank's scheduler draws in the Scheduler lane
        return PROC_LANE[S.proc_role(ev.proc)]
    if ev.name == S.IPC_SEND:  # offline engine: the sender is the stage before the destination
        return PROC_LANE.get(PREV_PROC.get(str(ev.get("dst")), ""))
    return PROC_LANE.get(NEXT_PROC.get(str(ev.get("src")), ""))


def causal_rounds(events: list[Event]) -> list[int | None]:
    """For each event, the scheduler round it belongs to. Scheduler-side events carry it; the detokenizer
    and tokenizer manager inherit it from the message that woke them (the round of its ipc.send)."""
    lane_round: dict[str, int | None] = {}
    sent_in: dict[str, int | None] = {}
    out: list[int | None] = []
    for ev in events:
        lane = lane_of(ev)
        if lane in ("sched", "model") and ev.round is not None:
            lane_round[lane] = ev.round
        if ev.name == S.IPC_SEND and ev.flow_id is not None:
            sent_in[ev.flow_id] = ev.round if ev.round is not None else lane_round.get(lane or "")
        elif ev.name == S.IPC_RECV and ev.flow_id in sent_in and lane is not None:
            lane_round[lane] = sent_in[ev.flow_id]
        out.append(lane_round.get(lane or ""))
    return out


def is_decode_for(ev: Event, rid: str) -> bool:
    """A sched.batch_formed in which `rid` has a one-token decode row."""
    mode = ev.get("forward_mode")
    return mode == "DECODE" or (mode == "MIXED" and rid in (ev.get("decoding_rids") or []))


def folded_runs(events: list[Event], rounds: list[int | None], rid: str,
                keep: int | None = None) -> list[tuple[int, int]]:
    """The (first, last) rounds of each run to fold: consecutive rounds in which `rid` only decodes one
    token, MIN_RUN or more in a row; each run's first round stays, and so does `keep`."""
    decode, unusual = set(), set()
    for ev, r in zip(events, rounds):
        if r is None:
            continue
        if ev.name == S.SCHED_BATCH_FORMED and is_decode_for(ev, rid):
            decode.add(r)
        finishing = ev.name == S.SCHED_OUTPUT_APPENDED and ev.get("finished")
        if ev.name not in ROUTINE or finishing or (ev.name == S.TM_WAITER_WOKEN and ev.get("finished")):
            unusual.add(r)
    plain = sorted(decode - unusual)
    runs: list[list[int]] = []
    for r in plain:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    out = []
    for run in runs:
        if len(run) < MIN_RUN:
            continue
        pieces: list[list[int]] = [[]]
        for r in run[1:]:
            if r == keep:
                pieces.append([])
            else:
                pieces[-1].append(r)
        out += [(p[0], p[-1]) for p in pieces if len(p) >= 2]
    return out

"""Facts for lessons/processes-messages.md: the ZeroMQ channels and their messages (one_request,
client_disconnect for AbortReq), read from the ipc.send / ipc.recv events and their flow ids."""

from __future__ import annotations

SCENARIOS = ("one_request", "client_disconnect")


def _sends(t):
    return [ev for ev in t.events if ev.name == "ipc.send"]


def _msgs(t, src: str, dst: str) -> list[str]:
    """The message types sent from process src to process dst, in the order they first appear."""
    return list(dict.fromkeys(ev.get("msg") for ev in _sends(t) if ev.proc == src and ev.get("dst") == dst))


def _counter(ev) -> int:
    """A flow id is `<sender pid>:<n>`: n counts the sender's messages from one."""
    return int(ev.flow_id.rsplit(":", 1)[1])


def _paired(t) -> tuple[int, int, int]:
    sends = {ev.flow_id: ev for ev in _sends(t)}
    recvs = {ev.flow_id: ev for ev in t.events if ev.name == "ipc.recv"}
    for fid, s in sends.items():  # the receiver names the sender, the sender names the receiver
        r = recvs.get(fid)
        if r is None or r.get("src") != s.proc or r.proc != s.get("dst") or r.get("msg") != s.get("msg"):
            raise ValueError(f"flow {fid}: send and receive do not match")
    return len(sends), len(recvs), len(set(sends) ^ set(recvs))


def facts(traces) -> dict:
    t, cd = traces["one_request"], traces["client_disconnect"]
    sends = _sends(t)
    channels = list(dict.fromkeys(f"{ev.proc} → {ev.get('dst')}" for ev in sends))
    n_send, n_recv, unpaired = _paired(t)
    btio = [ev for ev in sends if ev.get("msg") == "BatchTokenIDOutput"]
    load = [ev for ev in sends if ev.get("msg") in ("GetLoadReq", "GetLoadReqOutput")][:3]
    abort = next(ev for ev in _sends(cd) if ev.get("msg") == "AbortReq")
    abort_recv = next(ev for ev in cd.events if ev.name == "ipc.recv" and ev.flow_id == abort.flow_id)
    asked = next(ev for ev in cd.by_rid(abort.rid) if ev.name == "sched.abort_requested")
    finished = next(ev for ev in cd.by_rid(abort.rid) if ev.name == "sched.finished")
    _paired(cd)
    return {
        "processes": list(dict.fromkeys(ev.proc for ev in t.events)),
        "channel_count": len(channels),
        "channels": channels,
        "tm_to_sched": _msgs(t, "tokenizer_manager", "scheduler"),
        "sched_to_detok": _msgs(t, "scheduler", "detokenizer"),
        "detok_to_tm": _msgs(t, "detokenizer", "tokenizer_manager"),
        "abort_channel": f"{abort.proc} → {abort.get('dst')}",
        "abort_rid": abort.rid,
        "abort_where": asked.get("where"),
        "abort_finish": finished.get("finish_reason")["type"],
        "abort_recv_src": abort_recv.get("src"),
        "sends": n_send,
        "recvs": n_recv,
        "unpaired": unpaired,
        "btio_count": len(btio),
        "btio_first_n": _counter(btio[0]),
        "btio_last_n": _counter(btio[-1]),
        "btio_last_tokens": btio[-1].get("output_ids"),
        "sched_sends": sum(1 for ev in sends if ev.proc == "scheduler"),
        "load_path": " → ".join([load[0].proc] + [ev.get("dst") for ev in load]),
        "load_msgs": [ev.get("msg") for ev in load],
    }

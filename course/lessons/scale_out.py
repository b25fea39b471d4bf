"""Facts for lessons/scale-out.md: two scheduler ranks behind the DataParallelController (scenario
data_parallel) and one model split over three tensor-parallel ranks (scenario tensor_parallel)."""

from __future__ import annotations

from tracer.dp_ranks import dp_scheduler_procs, rank_view
from tracer.fmt import ranges
from tracer.schema import DP_SCHEDULER_PREFIX
from tracer.tp_ranks import check_tp_ranks, tp_ranks_by_round

SCENARIOS = ("data_parallel", "tensor_parallel")


def _rank_rounds(view) -> str:
    """A rank's rounds as `1 EXTEND R1; 2-4 DECODE R1; …`: consecutive rounds of one mode and requests
    merged."""
    runs: list[tuple[list[int], str, str]] = []
    for ev in view.events:
        if ev.name != "sched.batch_formed":
            continue
        what = (ev.get("forward_mode"), " ".join(ev.rids or []))
        if runs and runs[-1][1:] == what and runs[-1][0][-1] == ev.round - 1:
            runs[-1][0].append(ev.round)
        else:
            runs.append(([ev.round], *what))
    return "; ".join(f"{ranges(rounds)} {mode} {rids}" for rounds, mode, rids in runs)


def dp_facts(t) -> dict:
    dispatches = [ev for ev in t.events if ev.name == "dp.dispatch"]
    procs = dp_scheduler_procs(t)
    views = {int(p[len(DP_SCHEDULER_PREFIX):]): rank_view(t, p) for p in procs}
    out = {
        "dp_size": len(procs),
        "dp_procs": procs,
        "dp_process_count": len(t.processes()),
        "dp_method": dispatches[0].get("method"),
        "dp_requests": len(dispatches),
        "dp_order": [ev.rid for ev in dispatches],
        "dp_ranks": [ev.get("dp_rank") for ev in dispatches],
        "dp_routed": any(ev.get("routed") for ev in dispatches),
        "dp_rank_a": dispatches[0].get("dp_rank"),
        "dp_rank_b": dispatches[1].get("dp_rank"),
        "dp_first_round": min(ev.round for v in views.values() for ev in v.events
                              if ev.name == "sched.batch_formed"),
    }
    for rank, view in views.items():
        formed = [ev for ev in view.events if ev.name == "sched.batch_formed"]
        out[f"rank{rank}_rids"] = [ev.rid for ev in dispatches if ev.get("dp_rank") == rank]
        out[f"rank{rank}_rounds"] = len(formed)
        out[f"rank{rank}_schedule"] = _rank_rounds(view)
    for ev in dispatches:
        out[f"loads_{ev.rid}"] = "[" + ", ".join(map(str, ev.get("loads"))) + "]"
    return out


def tp_facts(t) -> dict:
    begins = [ev for ev in t.events if ev.name == "model.forward" and ev.ph == "B"]
    ends = [ev for ev in t.events if ev.name == "model.forward" and ev.ph == "E"]
    ranks = tp_ranks_by_round(t)
    reduces = {ev.get("all_reduce") for ev in ends}
    gathers = {ev.get("all_gather") for ev in ends}
    if len(reduces) != 1 or len(gathers) != 1:
        raise ValueError(f"tensor_parallel: forwards made different collectives: {reduces}, {gathers}")
    decode = next(ev for ev in begins if ev.get("forward_mode") == "DECODE")
    return {
        "tp_size": len(t.tp_rank_events) + 1,
        "tp_procs": ["scheduler", *sorted(t.tp_rank_events)],
        "tp_other_procs": sorted(t.tp_rank_events),
        "tp_process_count": len(t.processes()),
        "tp_forwards": len(begins),
        "tp_rank_forwards": sorted({len(v) for v in ranks.values()}) == [len(t.tp_rank_events) + 1],
        "tp_ranks_agree": check_tp_ranks(t) == [],
        "tp_lead_rank": min(r for rs in ranks.values() for r in rs),
        "tp_all_reduce": reduces.pop(),
        "tp_all_gather": gathers.pop(),
        "tp_prefill_round": begins[0].round,
        "tp_prefill_rows": begins[0].get("num_rows"),
        "tp_decode_round": decode.round,
        "tp_last_round": begins[-1].round,
    }


def facts(traces) -> dict:
    return {**dp_facts(traces["data_parallel"]), **tp_facts(traces["tensor_parallel"])}

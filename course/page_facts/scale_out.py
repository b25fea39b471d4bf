"""Facts for lessons/scale-out.md: two scheduler ranks behind the DataParallelController (scenario
data_parallel), one model split over three tensor-parallel ranks (scenario tensor_parallel), and a prefill
server and a decode server behind SGLang's router (scenario pd_disaggregation, a merged trace)."""

from __future__ import annotations

import json

from minisgl.scenarios.data_parallel import WAVES
from tracer.dp_ranks import dp_scheduler_procs, rank_view
from tracer.fmt import ranges
from tracer.schema import DP_SCHEDULER_PREFIX
from tracer.servers import server_names, server_view
from tracer.tp_ranks import check_tp_ranks, tp_ranks_by_round

SCENARIOS = ("data_parallel", "tensor_parallel", "pd_disaggregation")


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
        out[f"dp_rank_{ev.rid}"] = ev.get("dp_rank")
    turns = [ev for ev in dispatches if not ev.get("routed")]
    chosen = [ev for ev in dispatches if ev.get("routed")]
    cached = {ev.rid: ev.get("cached_tokens") for ev in t.events if ev.name == "sched.finished"}
    out |= {
        "dp_turn_rids": [ev.rid for ev in turns],
        "dp_turn_ranks": [ev.get("dp_rank") for ev in turns],
        "dp_routed_rids": [ev.rid for ev in chosen],
        # whose turn it was when the chosen ones came: a chosen rank takes no turn
        "dp_next_turn": len(turns) % len(procs),
    }
    out |= {f"dp_ask_{rid}": json.dumps(question) for wave in WAVES for rid, question, *_ in wave}
    if chosen:  # how much more than the chat template the first chosen request found on its rank
        first = chosen[0].rid
        template = min(n for rid, n in cached.items() if rid != first and n)  # the least any other hit
        out["dp_chosen_beyond_template"] = cached[first] - template
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


def _one(view, name: str, rid: str):
    found = [ev for ev in view.events if ev.name == name and ev.rid == rid]
    if len(found) != 1:
        raise ValueError(f"pd_disaggregation: {len(found)} {name} events for {rid}, expected one")
    return found[0]


def pd_facts(t) -> dict:
    prefill, decode = server_view(t, "prefill"), server_view(t, "decode")
    out: dict = {
        "pd_servers": server_names(t),
        "pd_process_count": len(t.processes()),
        "pd_prefill_schedule": _rank_rounds(prefill),
        "pd_decode_schedule": _rank_rounds(decode),
        "pd_requests": len([ev for ev in prefill.events if ev.name == "sched.req_created"]),
    }
    for rid in ("R1", "R2", "R3"):
        sent, received = _one(prefill, "disagg.kv_sent", rid), _one(decode, "disagg.kv_received", rid)
        if (sent.get("room"), sent.get("nbytes"), sent.get("first_token")) != (
                received.get("room"), received.get("nbytes"), received.get("first_token")):
            raise ValueError(f"pd_disaggregation: {rid}'s KV sent and received differ")
        extend = next(ev for ev in prefill.events if ev.name == "sched.batch_formed"
                      and rid in (ev.rids or ()))
        sampled = next(ev for ev in prefill.events if ev.name == "sched.sampled" and rid in (ev.rids or ()))
        decoded = [ev for ev in decode.events if ev.name == "sched.batch_formed" and rid in (ev.rids or ())]
        out |= {
            f"pd_prompt_{rid}": _one(prefill, "sched.req_created", rid).get("input_len"),
            f"pd_extend_{rid}": extend.get("extend_lens")[extend.rids.index(rid)],
            f"pd_cached_{rid}": _one(prefill, "sched.finished", rid).get("cached_tokens"),
            f"pd_prefill_round_{rid}": extend.round,
            f"pd_prefill_done_round_{rid}": _one(prefill, "sched.finished", rid).round,
            f"pd_rows_{rid}": sent.get("num_tokens"),
            f"pd_bytes_{rid}": sent.get("nbytes"),
            f"pd_first_token_{rid}": json.dumps(sampled.get("texts")[sampled.rids.index(rid)],
                                                ensure_ascii=False),
            f"pd_first_token_id_{rid}": sent.get("first_token"),
            f"pd_prealloc_{rid}": next(ev for ev in decode.events if ev.name == "disagg.bootstrap"
                                       and ev.rid == rid).get("num_slots"),
            f"pd_decode_rounds_{rid}": len(decoded),
            f"pd_decode_round_list_{rid}": ranges([ev.round for ev in decoded]),
            f"pd_tokens_{rid}": _one(decode, "sched.finished", rid).get("output_len"),
            f"pd_output_{rid}": json.dumps("".join(ev.get("delta") or "" for ev in decode.events
                                                   if ev.name == "detok.decoded" and ev.rid == rid),
                                           ensure_ascii=False),
        }
    from minisgl.model_loader.loader import load_model_config, resolve_model

    config = load_model_config(resolve_model(None))
    per_row = out["pd_bytes_R1"] // out["pd_rows_R1"]
    # K and V, every layer, every KV head, head_dim numbers of 4 bytes (the scenario runs in float32)
    if per_row != 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * 4:
        raise ValueError(f"pd_disaggregation: {per_row} bytes per KV row do not match the model's shape")
    return out | {"pd_bytes_per_row": per_row, "pd_layers": config.num_hidden_layers,
                  "pd_kv_heads": config.num_key_value_heads, "pd_head_dim": config.head_dim}


def facts(traces) -> dict:
    return {**dp_facts(traces["data_parallel"]), **tp_facts(traces["tensor_parallel"]),
            **pd_facts(traces["pd_disaggregation"])}

"""Generated Markdown blocks: a trace excerpt, a round's batch as a table, and a "try it" block."""

from __future__ import annotations

from tracer.normalize import event_line, normalize_event, pair_neutral
from tracer.reader import Trace

TRY_TITLE = {"en": "Try it", "zh": "动手试试"}
TRY_NOTE = {
    "en": "Run the scenario, open the replay app on it (in a terminal, or in a browser with `--web`), "
          "and draw the figures yourself:",
    "zh": "亲手运行这个场景，用回放程序打开它（在终端里，或加 `--web` 在浏览器里），再自己画出这些图：",
}


def events_block(trace: Trace, rid: str | None = None, round: int | None = None,
                 names: list[str] | None = None, proc: str | None = None, limit: int | None = None) -> str:
    """The matching events, one normalized line each (what `trace check` and the goldens read)."""
    picked = []
    for ev in trace.events:
        if rid is not None and ev.rid != rid and rid not in (ev.rids or ()):
            continue
        if round is not None and ev.round != round:
            continue
        if names is not None and ev.name not in names:
            continue
        if proc is not None and ev.proc != proc:
            continue
        picked.append(normalize_event(ev))
    if not picked:
        raise ValueError("no event matches")
    if any("/" in rec["proc"] for rec in picked):
        # a merged pair: server by server (the two interleave as their clocks decide), each in its own order,
        # with the router's random rooms and the free ports numbered as they first appear
        servers = ("prefill", "decode")
        picked = pair_neutral(sorted(picked, key=lambda rec: servers.index(rec["proc"].split("/")[0])
                                     if rec["proc"].split("/")[0] in servers else len(servers)))
    picked = [event_line(rec) for rec in picked]
    if limit is not None and len(picked) > limit:
        picked = picked[:limit] + [f"... ({len(picked) - limit} more)"]
    return "```text\n" + "\n".join(picked) + "\n```"


def _token_texts(trace: Trace) -> dict[int, str]:
    texts: dict[int, str] = {}
    for ev in trace.events:
        if ev.name == "tm.tokenized":
            texts.update(zip(ev.get("input_ids") or [], ev.get("input_texts") or []))
        elif ev.name == "sched.sampled":
            texts.update(zip(ev.get("token_ids") or [], ev.get("texts") or []))
    return texts


def batch_rows(trace: Trace, round: int) -> list[dict]:
    """One dict per token row of the round's forward: rid, position, input id and text, KV slot, logits."""
    formed = next((ev for ev in trace.events if ev.name == "sched.batch_formed" and ev.round == round), None)
    forward = next((ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "B"
                    and ev.round == round),
                   None)
    if formed is None or forward is None:
        raise ValueError(f"round {round} formed no batch")
    rids, decoding = list(formed.rids or ()), list(formed.get("decoding_rids") or [])
    mode = formed.get("forward_mode")
    if mode == "DECODE":
        owners = rids
    else:
        extending = [r for r in rids if r not in decoding]
        owners = [r for r, n in zip(extending, formed.get("extend_lens") or []) for _ in range(n)] + decoding
    texts, logit_rows = _token_texts(trace), set(formed.get("logit_rows") or [])
    ids, pos, loc = forward.get("input_ids"), forward.get("positions"), forward.get("out_cache_loc")
    return [{"row": i, "rid": owners[i], "position": pos[i], "input_id": ids[i],
             "text": texts.get(ids[i], ""), "out_cache_loc": loc[i], "logits": i in logit_rows}
            for i in range(len(ids))]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "\\n") or " "


def rows_table(trace: Trace, round: int, lang: str = "en") -> str:
    head = {"en": ("row", "request", "position", "input id", "token", "out_cache_loc (KV slot)", "logits"),
            "zh": ("行", "请求", "position", "input id", "token", "out_cache_loc（KV 槽位）", "logits")}[lang]
    yes = {"en": "yes", "zh": "是"}[lang]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in batch_rows(trace, round):
        lines.append(f"| {r['row']} | {r['rid']} | {r['position']} | {r['input_id']} | "
                     f"`{_cell(repr(r['text']))}` | {r['out_cache_loc']} | {yes if r['logits'] else ''} |")
    return "\n".join(lines)


def states_block(traces: dict[str, Trace], lang: str = "en") -> str:
    """A request's states as the scenarios' traces show them: a mermaid state diagram, then each transition
    with the event that makes it and the scenarios in which it happens (run one and watch)."""
    from tracer.req_states import state_diagram, union

    found = union(traces)
    head = {"en": ("from", "to", "the event", "in the scenarios"),
            "zh": ("从", "到", "事件", "出现在这些场景里")}[lang]
    lines = ["```mermaid", state_diagram(found, lang), "```", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for (a, b, event), names in found.items():
        lines.append(f"| `{a}` | `{b}` | `{event}` | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(lines)


def try_block(scenario: str, rid: str | None, round: int | None, lang: str = "en") -> str:
    folder = f"traces/{scenario}"
    pick = (f" --rid {rid}" if rid else "") + (f" --round {round}" if round is not None else "")
    cmds = [
        f"minisgl scenario run {scenario} --trace {folder}",
        f"minisgl replay {folder}" + (f" --rid {rid}" if rid else ""),
        f"minisgl replay {folder} --web" + (f" --rid {rid}" if rid else ""),
        f"minisgl trace show {folder}" + (f" --rid {rid}" if rid else ""),
        f"minisgl trace export {folder} --view round{pick} --format svg",
    ]
    body = "\n".join("    " + c for c in ["```bash", *cmds, "```"])
    return f'!!! example "{TRY_TITLE[lang]}"\n    {TRY_NOTE[lang]}\n\n{body}\n'


UNAVAILABLE_NOTE = {
    "en": ("Not built on this machine", "This page is made from traces that could not be run here:"),
    "zh": ("本机没有生成这一页", "这一页所用的 trace 在本机跑不出来："),
}


def unavailable_page(markdown: str, missing: dict[str, str], lang: str = "en") -> str:
    """A page whose scenarios could not run (e.g. the router is not installed): its title, and a notice
    naming each missing scenario and what it lacks, instead of figures and numbers that do not exist."""
    title = next((line for line in markdown.splitlines() if line.startswith("# ")), "#")
    head, note = UNAVAILABLE_NOTE[lang]
    items = "\n".join(f"    - `{name}`: {why}" for name, why in missing.items())
    return f'{title}\n\n!!! warning "{head}"\n    {note}\n\n{items}\n'


WHATIF_NOTE = {
    "en": ("Try it: change a number", "Run it with the change:",
           "What that run did (run when this page was built)"),
    "zh": ("动手试试：改一个数", "带着这个改动运行：", "这次运行做了什么（构建本页时实际跑出来的）"),
}


def whatif_command(scenario: str, sets: dict, prompts: dict) -> str:
    import json
    import shlex

    def shown(v) -> str:
        return v if isinstance(v, str) else json.dumps(v)

    parts = ["minisgl", "scenario", "run", scenario]
    parts += [p for k, v in sets.items() for p in ("--set", f"{k}={shown(v)}")]
    parts += [p for rid, text in prompts.items() for p in ("--prompt", f"{rid}={text}")]
    return " ".join(shlex.quote(p) for p in parts)


def whatif_block(scenario: str, sets: dict, prompts: dict, ask: str, trace, lang: str = "en") -> str:
    """A transfer question: the question, the command that answers it, and, folded, the lines that command
    prints about what the changed run did (minisgl.scenarios.summary), from the run the build made."""
    from minisgl.scenarios.summary import summary

    title, run, answer = WHATIF_NOTE[lang]
    lines = [f'!!! question "{title}"']
    if ask:
        lines += [f"    {ask}", ""]
    lines += [f"    {run}", "", "    ```bash", f"    {whatif_command(scenario, sets, prompts)}",
              "    ```", "",
              f'    ??? success "{answer}"', "", "        ```text"]
    lines += [f"        {line}" for line in summary(trace)]
    lines += ["        ```", ""]
    return "\n".join(lines)

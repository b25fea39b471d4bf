"""Change a number and run again (`minisgl scenario run NAME --set ... --prompt ...`, and
minisgl.scenarios.changes.change in Python): what may change, the clear errors for what may not, and a changed
run on the real engine that reads as the changed numbers say."""

from __future__ import annotations

import pytest

from minisgl.cli import main
from minisgl.scenarios import get
from minisgl.scenarios.base import Submit
from minisgl.scenarios.changes import ChangeError, change, parse_pairs, parse_value


def test_flags_request_fields_and_prompts_change_and_nothing_else():
    base = get("shared_prefix")
    changed = change(base, {"max_total_tokens": 96, "R2.max_new_tokens": 6, "R1.ignore_eos": False},
                     {"R2": " red green"})
    assert changed.flags == {**base.flags, "max_total_tokens": 96}
    r1, r2 = (next(s for s in changed.steps if isinstance(s, Submit) and s.rid == rid)
              for rid in ("R1", "R2"))
    assert r2.max_new_tokens == 6 and r2.text == " red green" and r1.params["ignore_eos"] is False
    assert base.flags["max_total_tokens"] != 96
    assert "changed:" in changed.title and "changed" not in base.title
    assert change(base, {}, {}) == base


@pytest.mark.parametrize("sets, prompts, says", [
    ({"chunk_size": 8}, {}, "did you mean chunked_prefill_size"),
    ({"chunked_prefill_size": "big"}, {}, "takes int | None"),
    ({"max_total_tokens": 0}, {}, "must be >= 1"),
    ({"dtype": "bfloat16"}, {}, "float32"),
    ({"R9.max_new_tokens": 2}, {}, "no request 'R9'"),
    ({"R1.colour": 2}, {}, "a request's field is one of"),
    ({"R1.abort_after_round": 2}, {}, "never aborts R1"),
    ({}, {"R9": "hi"}, "no request 'R9'"),
])
def test_a_change_that_names_nothing_real_is_refused_with_the_reason(sets, prompts, says):
    with pytest.raises(ChangeError, match=says):
        change(get("shared_prefix"), sets, prompts)


def test_a_server_scenario_changes_only_its_engine_flags():
    assert change(get("one_request"), {"max_total_tokens": 300}).flags["max_total_tokens"] == 300
    with pytest.raises(ChangeError, match="only its engine flags"):
        change(get("one_request"), {"R1.max_new_tokens": 2})


def test_values_read_as_json_and_pairs_need_an_equals_sign():
    assert [parse_value(v) for v in ("12", "0.5", "true", "None", "lpm", '["a"]')] == [12, 0.5, True, None,
                                                                                        "lpm", ["a"]]
    assert parse_pairs(["R2= red=green"], "--prompt") == {"R2": " red=green"}
    with pytest.raises(ChangeError, match="KEY=VALUE"):
        parse_pairs(["chunked_prefill_size"], "--set")


@pytest.mark.parametrize("argv, says", [
    (["--set", "chunk=3"], "no engine flag named 'chunk'"),
    (["--set", "chunked_prefill_size"], "write it as KEY=VALUE"),
    (["--prompt", "Z=hello"], "no request 'Z'"),
])
def test_the_command_refuses_a_bad_change_before_loading_anything(capsys, argv, says):
    assert main(["scenario", "run", "chunked_prefill", *argv]) == 2
    assert says in capsys.readouterr().err


def test_a_smaller_chunk_cuts_the_prompt_into_more_rounds(base_engine, tmp_path):
    from minisgl.scenarios.driver import run
    from minisgl.scenarios.summary import request_lines
    from tracer.reader import load_trace

    def prefill(sets: dict, folder) -> list[tuple[int, int]]:
        run(change(get("chunked_prefill"), sets), str(folder), loaded=base_engine)
        trace = load_trace(folder)
        taken = [ev.get("extend_range") for ev in trace.by_rid("L") if ev.name == "sched.admission"
                 and ev.get("decision") in ("admitted", "chunked")]
        assert request_lines(trace)[0].startswith("L: prompt ")
        return [tuple(r) for r in taken]

    lesson = prefill({}, tmp_path / "lesson")
    smaller = prefill({"chunked_prefill_size": 12}, tmp_path / "twelve")
    assert len(smaller) > len(lesson)
    assert all(end - start <= 12 for start, end in smaller) and smaller[-1][1] == lesson[-1][1]
    assert [start for start, _ in smaller[1:]] == [end for _, end in smaller[:-1]]  # chunk after chunk

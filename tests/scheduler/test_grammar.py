"""Structured output on the real engine (xgrammar): every answer matches its grammar, a request without one
is untouched by its batch-mates' masks, the grammar ends a request even with ignore_eos, a grammar that does
not compile refuses that request only, and the loops that cannot follow a grammar refuse it by name."""

from __future__ import annotations

import json
import re

import pytest

from minisgl.server.errors import RequestError

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "year": {"type": "integer"}},
          "required": ["city", "year"]}
ASK = [{"role": "user", "content": "Name a city and a year, as JSON."}]
GREEDY = {"temperature": 0, "max_new_tokens": 48}


@pytest.fixture(scope="module")
def engine(base_engine):
    return base_engine.fork()


def test_a_json_schema_answer_is_json_of_that_schema(engine):
    out = engine.generate(ASK, {**GREEDY, "json_schema": json.dumps(SCHEMA)})
    answer = json.loads(out["text"])
    assert set(answer) == {"city", "year"} and isinstance(answer["city"], str) and isinstance(answer["year"], int)
    assert out["finish_reason"]["type"] == "stop"


def test_regex_and_ebnf_answers_match_whole(engine):
    regex = r"[A-Z][a-z]+ (is|was) [0-9]{2}"
    out = engine.generate("Tell me about Paris.", {**GREEDY, "regex": regex})
    assert re.fullmatch(regex, out["text"]), out["text"]
    ebnf = 'root ::= "yes" | "no" | "maybe"'
    out = engine.generate("Is the sea salty?", {**GREEDY, "ebnf": ebnf, "ignore_eos": True})
    assert out["text"] in {"yes", "no", "maybe"}, out["text"]
    assert out["finish_reason"]["type"] == "stop", "the complete grammar ends it, even with ignore_eos"


def test_a_plain_request_is_untouched_by_a_batch_mates_grammar(engine):
    plain = {"temperature": 0, "max_new_tokens": 12}
    alone = engine.generate("The capital of France is", plain)
    together = engine.generate(["The capital of France is", "Write a number:"],
                               [plain, {**plain, "regex": "[0-9]{3}"}])
    assert together[0]["output_ids"] == alone["output_ids"]
    assert re.fullmatch("[0-9]{3}", together[1]["text"])


def test_a_grammar_that_does_not_compile_refuses_that_request_only(engine):
    with pytest.raises(RequestError) as refused:
        engine.generate("Count:", {**GREEDY, "regex": "(unclosed"})
    assert refused.value.status_code == 400 and refused.value.message.startswith("invalid regex: ")
    with pytest.raises(RequestError, match="invalid json_schema"):
        engine.generate("Count:", {**GREEDY, "json_schema": "{not json"})
    assert engine.generate("Count:", {**GREEDY, "regex": "[0-9]+", "max_new_tokens": 3})["text"].isdigit()
    load = engine.scheduler.get_load()
    assert load.free_slots + load.cached_slots == load.total_slots and load.num_waiting_reqs == 0


def test_two_grammars_and_unfit_loops_are_refused_by_name(base_engine, engine):
    with pytest.raises(RequestError, match="regex and ebnf"):
        engine.generate("x", {"regex": "a", "ebnf": 'root ::= "a"'})
    for flags, words in (({"enable_overlap_schedule": True}, "--enable-overlap-schedule"),
                         ({"grammar_backend": "none"}, "--grammar-backend none")):
        other = base_engine.fork(**flags)
        try:
            with pytest.raises(RequestError, match=words):
                other.generate("x", {**GREEDY, "regex": "a"})
        finally:
            other.shutdown()


def test_the_compiled_grammars_kept_are_bounded(engine, monkeypatch):
    import minisgl.constrained.grammar_manager as grammar_manager

    monkeypatch.setattr(grammar_manager, "MAX_CACHED", 2)
    regexes = ["[0-9]{2}", "[0-9]{3}", "[0-9]{4}"]
    for regex in regexes:
        engine.generate("Count:", {**GREEDY, "regex": regex, "max_new_tokens": 6})
    assert list(engine.scheduler.grammar_manager.compiled) == [("regex", r) for r in regexes[1:]]

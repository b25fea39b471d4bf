"""tracer/schema.py, the engine's emitters and lessons/docs/reference/trace-events.md name the same events and
fields: the docs' tables, the emit calls in minisgl's source and real traces of the engine are each held to
the schema module, so a field added in one place and forgotten in another fails here."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tracer import schema as S

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "lessons" / "docs" / "reference" / "trace-events.md"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOP_LEVEL = {"rid", "rids"}  # record fields the docs' attrs column names beside the attrs
EMIT_KEYWORDS = {"rid", "rids", "flow", "flow_dir", "ph"}  # tracer.event's own parameters, not attrs
SCENARIOS = ("admission_budgets", "stream_detok", "retract", "abort", "context_limit", "mixed_round",
             "overlap_schedule", "ngram_speculative")
# declared but written by no emitter: a reader honours it, so a hand-made or future trace may carry it
NEVER_EMITTED = {(S.SCHED_ENQUEUED, "position")}


# ---- the docs' tables -----------------------------------------------------------------------------
def tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """Every markdown table: its header line and its body rows split into cells."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            body = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                body.append([c.strip() for c in row.strip().strip("|").split(" | ")])
            out.append((line, body))
    return out


def ticked(text: str) -> list[str]:
    """The identifiers in backticks, a `name: value` read as its name."""
    names = (t.split(":")[0].strip() for t in re.findall(r"`([^`]+)`", text))
    return [n for n in names if re.fullmatch(r"[a-z_][a-z0-9_]*", n)]


def _strip_nested(text: str) -> str:
    """Asides in (), {} and [] hold values and explanations, not fields."""
    for pattern in (r"\{[^{}]*\}", r"\([^()]*\)", r"\[[^\[\]()]*[\])]"):
        while re.search(pattern, text):
            text = re.sub(pattern, "", text)
    return text


V2 = r"\*v2\*:?\s*"
MARKERS = re.compile(rf"^(?:{V2}(?:[^`\s][^:]*:\s*)?|level \d:\s*|on `[^`]+`:\s*|its\s+)+")


def documented_fields(cell: str) -> dict[str, int]:
    """The fields an attrs cell lists, each with the schema version the docs give it (a *v2* mark covers the
    fields after it). The list ends where the prose starts: at ' — ', or a sentence that names no field."""
    fields: dict[str, int] = {}
    since = 1
    text = _strip_nested(cell).split(" — ")[0]
    for sentence in re.split(r"\.\s+", text):
        items = [i.strip() for i in re.split(r"[,;]\s*", sentence) if i.strip()]
        if not items or not MARKERS.sub("", items[0]).startswith("`"):
            break
        for item in items:
            if re.match(V2, item):
                since = 2
            item = MARKERS.sub("", item).split(" when ")[0]
            if not item.startswith("`"):
                continue
            first = re.match(r"((?:`[^`]+`(?:\s*/\s*|\s+and\s+)?)+)", item)
            for name in ticked(first.group(1) if first else ""):
                fields.setdefault(name, since)
    return fields


def doc_events() -> dict[str, str]:
    """Event name -> its attrs cell, from every `| name | attrs |` table."""
    out = {}
    for header, rows in tables(DOC.read_text(encoding="utf-8")):
        if header.replace(" ", "") == "|name|attrs|":
            for name_cell, attrs_cell in rows:
                name = re.findall(r"`([^`]+)`", name_cell)[0]
                assert name not in out, f"{name} documented twice"
                out[name] = attrs_cell
    return out


def test_the_docs_name_every_event_of_the_schema_and_no_other():
    assert sorted(doc_events()) == sorted(S.EVENTS)


@pytest.mark.parametrize("name", sorted(S.EVENTS))
def test_the_docs_list_the_fields_of_each_event_as_the_schema_declares_them(name):
    cell, spec = doc_events()[name], S.EVENTS[name]
    listed = {k: v for k, v in documented_fields(cell).items() if k not in TOP_LEVEL}
    assert set(listed) <= set(spec.attrs), f"{name}: documented but not in tracer/schema.py"
    assert set(spec.attrs) <= set(ticked(cell)), f"{name}: in tracer/schema.py but not in the docs"
    assert cell.startswith("*v2*") == (spec.since == 2), f"{name}: the docs and the schema disagree on v2"
    for field, since in listed.items():
        assert max(since, spec.since) == spec.attrs[field].since, f"{name}.{field}: v1 or v2?"


def test_the_docs_agree_on_record_fields_budgets_levels_and_version():
    text = DOC.read_text(encoding="utf-8")
    first_column = {h.split("|")[1].strip(): [re.findall(r"`([^`]+)`", r[0])[0] for r in rows]
                    for h, rows in tables(text)}
    assert first_column["field"] == list(S.RECORD_FIELDS)
    assert first_column["budget"] == list(S.BUDGETS)
    assert f"(schema version {S.SCHEMA_VERSION})" in text.splitlines()[0]
    per_token = re.search(r"2 adds per-token events \(([^)]*)\)", text).group(1)
    assert sorted(re.findall(r"`([^`]+)`", per_token)) == sorted(
        n for n, spec in S.EVENTS.items() if spec.level == S.LEVEL_TOKENS)


def test_each_constant_is_its_event_name():
    constants = {k: v for k, v in vars(S).items() if isinstance(v, str) and v in S.EVENTS}
    assert sorted(constants.values()) == sorted(S.EVENTS)
    assert all(k == v.upper().replace(".", "_") for k, v in constants.items())
    assert all(spec.lane in S.LANES for spec in S.EVENTS.values())


# ---- the engine -----------------------------------------------------------------------------------
def emit_calls() -> list[tuple[str, str, set[str]]]:
    """(where, event name, attr keywords) of every tracer.event/begin/end call in minisgl's source."""
    out = []
    for path in sorted((ROOT / "minisgl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "tracer"
                    and node.func.attr in ("event", "begin", "end")):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            assert node.args and isinstance(node.args[0], ast.Constant), f"{where}: a name that is no literal"
            keys = {k.arg for k in node.keywords if k.arg is not None} - EMIT_KEYWORDS
            for k in node.keywords:  # a field written only sometimes: **({"field": value} if ... else {})
                if k.arg is None:
                    keys |= {d.value for part in ast.walk(k.value) if isinstance(part, ast.Dict)
                             for d in part.keys if isinstance(d, ast.Constant)}
            out.append((where, node.args[0].value, keys))
    return out


def test_every_event_and_keyword_the_engine_source_emits_is_declared():
    calls = emit_calls()
    assert len(calls) > 30
    for where, name, keys in calls:
        assert name in S.EVENTS, f"{where}: {name} is not declared in tracer/schema.py"
        assert keys <= set(S.EVENTS[name].attrs), f"{where}: {name} {keys - set(S.EVENTS[name].attrs)}"


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


@pytest.fixture(scope="module")
def engine_traces(scenario_runs) -> dict[str, list[dict]]:
    """Real traces of the offline engine, one per scenario, as the JSONL records it wrote (the session's
    scenario runs, shared with the scenario tests)."""
    return {name: records(Path(scenario_runs(name).folder)) for name in SCENARIOS}


def undeclared(recs: list[dict]) -> list[str]:
    out = set()
    for rec in recs:
        spec = S.EVENTS.get(rec["name"])
        out |= {f"record field {k}" for k in rec.keys() - S.RECORD_FIELDS.keys()}
        if rec["ph"] not in (S.PH_INSTANT, S.PH_BEGIN, S.PH_END):
            out.add(f"{rec['name']} ph {rec['ph']}")
        if spec is None:
            out.add(f"event {rec['name']}")
        else:
            out |= {f"{rec['name']}.{k}" for k in rec.get("attrs", {}).keys() - spec.attrs.keys()}
    return sorted(out)


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_every_event_and_attr_of_the_fixture_traces_is_declared(fixture):
    assert undeclared(records(FIXTURES / fixture)) == []


@pytest.mark.slow
def test_every_event_and_attr_of_real_engine_traces_is_declared(engine_traces):
    for name, recs in engine_traces.items():
        assert recs and undeclared(recs) == [], name


@pytest.mark.slow
def test_every_declared_field_is_written_somewhere(engine_traces):
    """A declared field no emitter writes is dead weight in the schema (or an emitter lost it)."""
    seen = {(name, key) for _, name, keys in emit_calls() for key in keys}
    for recs in engine_traces.values():
        seen |= {(r["name"], k) for r in recs for k in r.get("attrs", {})}
    declared = {(name, key) for name, spec in S.EVENTS.items() for key in spec.attrs}
    assert declared - seen == NEVER_EMITTED

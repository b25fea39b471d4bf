"""A lab's grade is a referee: a plausible one-line bug from its catalog (catalog/<lab>/bugs.py; a sample here,
every one with `make lab-bugs`) is caught by the differential check or by the trace of the lab's scenarios, not
only by a unit test; and the reference file, swapped in as a learner's would be, gives traces equal to the
committed golden summaries."""

from __future__ import annotations

import pytest

from minisgl.labs import bugs
from minisgl.labs.catalog import all_labs
from minisgl.labs.components import get as get_component
from minisgl.labs.differential import check_file, lab_module

LABS = all_labs()
WITH_DIFF = [lab for lab in LABS if lab_module(lab.name) is not None]


def served(lab) -> bool:
    from minisgl.scenarios import get

    return any(get(name).server is not None for name in lab.scenarios)


# a sample of each catalog, the same on every run: every third bug of a lab graded offline, two of a lab
# graded through a real server (a server started per scenario and file); `make lab-bugs` grades every bug
CASES = [(lab, bug) for lab in LABS for bug in (bugs.catalog(lab.name)[:2] if served(lab)
                                                 else bugs.catalog(lab.name)[::3])]


def case_id(case) -> str:
    return f"{case[0].name}-{case[1].name}"


@pytest.mark.parametrize("lab", LABS, ids=[lab.name for lab in LABS])
def test_every_lab_has_a_catalog_of_plausible_bugs(lab):
    catalog = bugs.catalog(lab.name)
    assert len(catalog) >= 8, f"{lab.name}: {len(catalog)} bugs"
    assert len({b.name for b in catalog}) == len(catalog)
    for bug in catalog:
        bugs.apply(get_component(lab.component), bug)  # its text occurs exactly once in the engine's file


@pytest.mark.parametrize("lab", WITH_DIFF, ids=[lab.name for lab in WITH_DIFF])
def test_the_reference_passes_the_differential_check(lab):
    result = check_file(lab.name, lab.component, lab.reference)
    assert result.ok, result.summary + "\n" + result.report()


@pytest.fixture(scope="module")
def referees(base_engine):
    from minisgl.labs.referee import Referee

    made: dict[str, Referee] = {}

    def get(lab):
        if lab.name not in made:
            made[lab.name] = Referee(lab, engine=base_engine)
        return made[lab.name]

    yield get
    for r in made.values():
        r.close()


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_each_bug_is_caught_by_the_differential_check_or_the_trace(case, referees, tmp_path):
    lab, bug = case
    path = bugs.write(get_component(lab.component), bug, tmp_path)
    if lab_module(lab.name) is not None:
        result = check_file(lab.name, lab.component, path)
        if not result.ok:
            assert result.example, "a failed differential check prints its shortest example"
            return
    assert referees(lab).trace(path), (f"{lab.name}: {bug.name} ({bug.what}) passes the differential check "
                                       "and the trace")


SCENARIOS = [(lab, name) for lab in LABS for name in lab.scenarios]


@pytest.mark.slow
@pytest.mark.parametrize("case", SCENARIOS, ids=[f"{lab.name}-{name}" for lab, name in SCENARIOS])
def test_the_reference_file_gives_the_golden_traces(case, referees, scenario_runs):
    """The lab's reference (Lab.reference) goes through the same swap as a learner's file; its trace of each
    grading scenario must equal the scenario's committed golden summary (or, for a served scenario with no
    golden, the session's own run of the scenario)."""
    from pathlib import Path

    from minisgl.labs.trace_diff import first_divergence
    from tests.scenarios.conftest import SERVED_GOLDEN
    from tracer.normalize import served_summary_text, summary_text

    lab, name = case
    got = referees(lab)._run(name, lab.reference)
    golden = Path(__file__).resolve().parents[1] / "scenarios" / "golden" / f"{name}.txt"
    if golden.exists():
        text = served_summary_text(got) if name in SERVED_GOLDEN else summary_text(got)
        assert text == golden.read_text(), f"{lab.name}: the reference's trace of {name} is not the golden"
    else:
        assert first_divergence(scenario_runs(name).trace, got) is None

"""Every lab is honest: its starter fails its unit tests and its trace, and the engine's own component (the
lab's reference, Lab.reference) passes its unit tests (test_bugs.py: its traces equal the committed goldens)."""

from __future__ import annotations

import pytest

from minisgl.labs import swap
from minisgl.labs.catalog import all_labs
from minisgl.labs.components import get as get_component
from tests.labs.conftest import run_lab_tests

LABS = all_labs()
IDS = [lab.name for lab in LABS]


def test_there_are_labs_for_the_course():
    assert len(LABS) >= 1  # the catalog grows lab by lab; issue: eight
    assert len({lab.component for lab in LABS}) == len(LABS), "two labs swap the same component"


def test_each_lab_is_named_after_the_component_the_learner_writes():
    """One name per lab: its id is the component's id and the learner's file's stem (earlier names resolve)."""
    from minisgl.labs.catalog import RENAMED, get

    for lab in LABS:
        assert lab.name == lab.component == lab.file.removesuffix(".py"), lab
    assert all(get(old).name == new for old, new in RENAMED.items())


@pytest.mark.parametrize("lab", LABS, ids=IDS)
def test_the_card_points_at_real_things(lab):
    from minisgl.scenarios import NAMES

    get_component(lab.component)
    assert lab.scenario in NAMES
    assert lab.starter.exists() and lab.tests.exists() and lab.readme.exists() and lab.reference.exists()
    assert len(lab.hints) >= 3
    assert "TODO" in lab.starter.read_text(encoding="utf-8")
    readme = lab.readme.read_text(encoding="utf-8")
    assert lab.name in readme
    # the lesson on the course site (make lessons-serve), not a path in the source tree; and never the file
    # that holds the answer
    assert f"http://127.0.0.1:8000/lessons/{lab.lesson}/" in readme and "../lessons/" not in readme
    assert get_component(lab.component).home not in readme


@pytest.mark.parametrize("lab", LABS, ids=IDS)
def test_the_starter_fails_its_unit_tests(lab, tmp_path):
    passed, failed = run_lab_tests(lab, lab.starter, tmp_path)
    assert failed > 0, f"{lab.name}: the starter passes every unit test ({passed})"


@pytest.mark.parametrize("lab", LABS, ids=IDS)
def test_the_reference_passes_its_unit_tests(lab, tmp_path):
    passed, failed = run_lab_tests(lab, lab.reference, tmp_path)
    assert failed == 0 and passed >= 5, f"{lab.name}: {passed} passed, {failed} failed"


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS, ids=IDS)
def test_the_starter_diverges_in_its_trace(lab, scenario_runs, base_engine, tmp_path):
    """The lab's scenario with the starter swapped in either raises or writes a trace unlike the reference."""
    from minisgl.labs.trace_diff import first_divergence
    from minisgl.scenarios import get
    from minisgl.scenarios.driver import run
    from tracer.reader import load_trace

    reference = scenario_runs(lab.scenario).trace
    sc = get(lab.scenario)
    if sc.server is not None:
        from minisgl.labs.trace_grade import run_trace

        result = run_trace(lab, lab.starter, tmp_path / "grade", reference_dir=scenario_runs(lab.scenario).folder)
        assert not result.ok, result.summary
        return
    swap.install(get_component(lab.component), lab.starter, quiet=True)
    try:
        run(sc, str(tmp_path / "trace"), loaded=base_engine)
    except Exception:
        return  # the starter raised inside the engine: `grade` reports it with its round
    finally:
        swap.restore()
    assert first_divergence(reference, load_trace(tmp_path / "trace")) is not None

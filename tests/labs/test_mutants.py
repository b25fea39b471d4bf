"""A grader's strength, measured as `make lab-mutants` measures it, on a sample that fits the test run: every
10th mutant mutmut makes of the radix tree's learner-written lines is killed by the differential check or the
trace, unless the lab lists it as equivalent with the reason."""

from __future__ import annotations

import pytest

from minisgl.labs.catalog import get
from minisgl.labs.mutants import equivalent, learner_functions, make_mutants, run_lab


def test_the_mutants_are_the_learners_lines():
    lab = get("radix_cache")
    assert learner_functions(lab) == ["RadixCache.match_prefix", "RadixCache._insert_helper",
                                      "RadixCache._split_node", "RadixCache.inc_lock_ref",
                                      "RadixCache.dec_lock_ref", "RadixCache.evict"]
    mutants, sources = make_mutants(lab)
    assert len(mutants) == len(sources) > 100
    assert {m.function for m in mutants} == set(learner_functions(lab))
    assert all(m.before != m.after for m in mutants)
    assert set(equivalent(lab)) <= {m.id for m in mutants}, "an equivalent mutant that mutmut no longer makes"


@pytest.mark.slow
def test_a_sample_of_the_radix_trees_mutants_is_killed_by_the_differential_check_or_the_trace(base_engine):
    table, mutants = run_lab(get("radix_cache"), every=10, say=lambda s: None, engine=base_engine)
    survivors = [f"{m.id}: {m.before} -> {m.after}" for m in mutants if not m.caught_by and not m.why]
    assert not survivors, "\n".join(survivors)
    assert table.by_tests_only == 0 and table.rate() == 1.0

"""MINISGL_LAB: the learner's file is checked before the engine uses it, installed where the engine looks the
component up, and taken out again by restore()."""

from __future__ import annotations

import pytest

from minisgl.labs import swap
from minisgl.labs.components import COMPONENTS, get
from minisgl.labs.swap import LabSwapError


@pytest.fixture(autouse=True)
def _restore():
    yield
    swap.restore()


def write(tmp_path, text: str, name: str = "mine.py"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("text, message", [
    ("def prepare_for_extend(self:\n", "syntax error"),
    ("x = 1\n", "must define prepare_for_extend"),
    ("prepare_for_extend = 3\n", "must be a function"),
    ("def prepare_for_extend(self, extra):\n    pass\n", "takes ['self', 'extra']"),
    ("async def prepare_for_extend(self):\n    pass\n", "must be a plain def, like the engine's"),
    ("raise ImportError('boom')\n", "importing it raised ImportError: boom"),
])
def test_a_file_that_cannot_stand_in_is_refused_with_its_reason(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(LabSwapError, match=message.replace("[", r"\[").replace("(", r"\(")):
        swap.install(get("prepare_for_extend"), path, quiet=True)


def test_a_class_must_offer_every_public_method_with_the_engines_parameters(tmp_path):
    path = write(tmp_path, "class RadixCache:\n    def __init__(self, device='cpu'):\n        pass\n")
    with pytest.raises(LabSwapError, match="lacks"):
        swap.install(get("radix_cache"), path, quiet=True)


def test_an_async_method_must_stay_async(tmp_path):
    path = write(tmp_path, "def _wait_one_response(self, obj, state, request):\n    pass\n"
                           "async def handle_loop(self):\n    pass\n")
    with pytest.raises(LabSwapError, match="must be an async generator"):
        swap.install(get("tm_wait_loop"), path, quiet=True)


@pytest.mark.parametrize("value, message", [("radix_cache", "COMPONENT=FILE"), ("nope=x.py", "no component"),
                                            ("radix_cache=/no/such/file.py", "no such file")])
def test_a_bad_variable_is_refused(monkeypatch, value, message):
    monkeypatch.setenv(swap.ENV, value)
    with pytest.raises(LabSwapError, match=message):
        swap.apply_from_env(quiet=True)


def test_install_puts_the_learners_object_where_the_engine_looks_and_restore_takes_it_out(tmp_path, capsys):
    from minisgl.scheduler.schedule_batch import ScheduleBatch

    original = ScheduleBatch.prepare_for_extend
    path = write(tmp_path, "def prepare_for_extend(self) -> None:\n    raise NotImplementedError\n")
    swap.install(get("prepare_for_extend"), path)
    assert ScheduleBatch.prepare_for_extend is not original
    assert ScheduleBatch.prepare_for_extend.__module__ == "minisgl_lab_mine"
    assert "ScheduleBatch.prepare_for_extend is swapped for" in capsys.readouterr().err
    swap.restore()
    assert ScheduleBatch.prepare_for_extend is original


def test_every_component_names_real_attributes():
    for comp in COMPONENTS.values():
        for slot in comp.slots:
            assert callable(slot.reference()), f"{comp.id}: {slot.owner}.{slot.name}"

"""SVG snapshots of the main screens at 80x24 and at 140x45, on the fixture traces (no times or pids
that vary between runs). After a deliberate change of the look: pytest tests/tui --snapshot-update."""

from __future__ import annotations

import pytest

from tests.tracer.helpers import ENGINE, SERVER
from tracer.reader import load_trace
from tui.app import ReplayApp

SMALL, LARGE = (80, 24), (140, 45)
ROUND = "right_square_bracket"


def _app(folder, **kwargs) -> ReplayApp:
    return ReplayApp(load_trace(folder), **kwargs)


SCREENS = {  # name -> (trace, keys pressed)
    "requests_round2": (ENGINE, [ROUND, ROUND, "1"]),  # 140x45 opens on the dashboard: 1 for the table
    "lanes_round1_forward": (ENGINE, ["right"] * 17 + ["2"]),
    "event_sampled": (ENGINE, ["right"] * 33 + ["3"]),
    "round2_batch": (ENGINE, [ROUND, ROUND, "4"]),
    "kv_round4_retraction": (ENGINE, [ROUND] * 4 + ["5"]),
    "radix_round5": (ENGINE, [ROUND] * 5 + ["6"]),
    "queues_round1_follow_b": (ENGINE, ["n", "f", ROUND, "7"]),
    "server_output_first_chunk": (SERVER, ["right"] * 32 + ["8"]),
    "server_lanes_end": (SERVER, ["end", "2"]),
}


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "140x45"])
@pytest.mark.parametrize("name", list(SCREENS))
def test_screen(snap_compare, name, size):
    folder, keys = SCREENS[name]
    assert snap_compare(_app(folder), press=keys, terminal_size=size)


def test_dashboard_round2(snap_compare):
    """The start at 140x45: round, KV, queues over radix, and output at once."""
    assert snap_compare(_app(ENGINE), press=[ROUND, ROUND], terminal_size=LARGE)


def test_help_screen(snap_compare):
    assert snap_compare(_app(ENGINE), press=["question_mark"], terminal_size=SMALL)


def test_filter_box(snap_compare):
    assert snap_compare(_app(ENGINE), press=["slash", *"kv.alloc", "enter", "right"], terminal_size=SMALL)

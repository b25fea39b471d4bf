"""For a lab's unit tests: the component under test, the learner's when MINISGL_LAB names it (as under
`minisgl lab test`), else the engine's own."""

from __future__ import annotations

from types import SimpleNamespace

from minisgl.labs.components import get
from minisgl.labs.swap import apply_from_env


def component(component_id: str) -> SimpleNamespace:
    """The component's names as the engine now sees them (after the swap, if there is one)."""
    apply_from_env(quiet=True)
    comp = get(component_id)
    return SimpleNamespace(**{slot.name: getattr(slot.resolve_owner(), slot.name) for slot in comp.slots})

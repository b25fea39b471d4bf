"""A lab's card: what the learner builds, where it runs, how it is checked, and the hints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CATALOG = Path(__file__).resolve().parent / "catalog"


@dataclass(frozen=True)
class Lab:
    name: str  # the folder under catalog/ and the learner's workspace folder
    title: str
    component: str  # an id in components.COMPONENTS
    file: str  # the starter's file name in the workspace
    lesson: str  # the lesson page (lessons/docs/lessons/<lesson>.md)
    scenario: str  # the lesson's scenario: the first whose trace grades it
    sglang: str  # where the same thing lives in SGLang
    hints: tuple[str, ...] = ()
    order: int = 0  # its place in the course: the lesson's place (one-request 1 ... limits-failures 11)
    boundaries: tuple[str, ...] = ()  # grading scenarios (minisgl.scenarios.GRADING) run after the lesson's
    view: str = ""  # the diagram view of the component (radix, admission, ...) a divergence is drawn in

    @property
    def scenarios(self) -> tuple[str, ...]:
        """Every scenario whose trace grades the lab, the lesson's first."""
        return (self.scenario, *self.boundaries)

    @property
    def folder(self) -> Path:
        return CATALOG / self.name

    @property
    def starter(self) -> Path:
        return self.folder / "starter.py"

    @property
    def tests(self) -> Path:
        return self.folder / "test_lab.py"

    @property
    def readme(self) -> Path:
        return self.folder / "README.md"

    @property
    def reference(self) -> Path:
        """The engine's own component in the starter's shape: what CI grades to prove the lab can pass."""
        return self.folder / "reference.py"

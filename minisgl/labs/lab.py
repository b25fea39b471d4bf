"""A lab's card: what the learner builds, where it runs, how it is checked, and the hints."""

from __future__ import annotations

import os
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
        """The engine's own component in the starter's shape: a file (written on first use, in minisgl's cache
        folder) that defines every name the starter defines as the engine's own. Graded like a learner's
        file, it proves the lab can pass; nothing in it is a copy that could drift from the engine."""
        text = reference_source(self)
        path = _cache_dir() / f"{self.name}.py"
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(text)
            tmp.replace(path)  # whole or not at all: another process may be reading it
        return path


def reference_source(lab: Lab) -> str:
    """Each starter name taken from where the engine defines it: a method from the component's class, any
    other name from the component's home module."""
    from minisgl.labs.bugs import starter_names
    from minisgl.labs.components import get

    component = get(lab.component)
    home = component.home.removesuffix(".py").replace("/", ".")
    owners = {s.name: s.owner.partition(":") for s in component.slots}
    lines = [f'"""The engine\'s own {component.title},',
             'in the starter\'s shape (minisgl/labs/lab.py wrote it)."""', ""]
    imports: list[str] = []
    names: list[str] = []
    for name in starter_names(lab):
        module, _, cls = owners.get(name, (home, "", ""))
        if cls:
            imports.append(f"from {module} import {cls} as _{cls}")
            names.append(f"{name} = _{cls}.{name}")
        else:
            imports.append(f"from {home} import {name}  # noqa: F401")
    lines += list(dict.fromkeys(imports))
    lines += ["", *names] if names else []
    return "\n".join(lines) + "\n"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minisgl" / "lab-references"

"""The learner's workspace: a folder (default ./minisgl-labs) with one folder per started lab holding the
starter file, the lab's README and a copy of its tests to read, and a small state file (hints shown, last
grade). Nothing is ever written into the installed package."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from minisgl.labs.lab import Lab

DEFAULT = "minisgl-labs"
STATE = ".minisgl-labs.json"


class WorkspaceError(RuntimeError):
    pass


class Workspace:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root or os.environ.get("MINISGL_LABS_DIR") or DEFAULT)

    # ---- files -------------------------------------------------------------------------------------
    def folder(self, lab: Lab) -> Path:
        return self.root / lab.name

    def file(self, lab: Lab) -> Path:
        return self.folder(lab) / lab.file

    def started(self, lab: Lab) -> bool:
        return self.file(lab).exists()

    def require(self, lab: Lab) -> Path:
        if not self.started(lab):
            raise WorkspaceError(f"lab {lab.name} is not started in {self.root} "
                                 f"(run `minisgl lab start {lab.name}`)")
        return self.file(lab)

    def start(self, lab: Lab) -> Path:
        if self.started(lab):
            raise WorkspaceError(f"{self.file(lab)} exists already; `minisgl lab reset {lab.name}` "
                                 "restores the starter")
        folder = self.folder(lab)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lab.starter, self.file(lab))
        shutil.copyfile(lab.readme, folder / "README.md")
        shutil.copyfile(lab.tests, folder / f"test_{lab.name}.py")  # to read; grading runs the lab's own copy
        self._update(lab, hints=0, shown=[], grade=None, divergence="")
        return self.file(lab)

    def reset(self, lab: Lab) -> Path:
        target = self.require(lab)
        backup = target.with_suffix(target.suffix + ".bak")
        shutil.copyfile(target, backup)
        shutil.copyfile(lab.starter, target)
        return backup

    def modified(self, lab: Lab) -> bool:
        return self.started(lab) and self.file(lab).read_bytes() != lab.starter.read_bytes()

    # ---- state -------------------------------------------------------------------------------------
    def state(self) -> dict:
        path = self.root / STATE
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def lab_state(self, lab: Lab) -> dict:
        return self.state().get(lab.name, {})

    def _update(self, lab: Lab, **changes) -> None:
        state = self.state()
        state.setdefault(lab.name, {}).update(changes)
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / (STATE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.root / STATE)

    def next_hint(self, lab: Lab) -> tuple[int, str, bool] | None:
        """(number, text, follows_grade) of the next hint, counting it as shown; None once all were shown.

        After a grade that failed, the hint chosen is the unseen one that names most of what diverged (the
        call, event or field: `follows_grade` is then True); otherwise the hints come in order."""
        st = self.lab_state(lab)
        shown = [int(i) for i in st.get("shown", range(int(st.get("hints", 0))))]
        unseen = [i for i in range(len(lab.hints)) if i not in shown]
        if not unseen:
            return None
        best, follows = pick_hint(lab.hints, unseen, st.get("divergence") or "")
        self._update(lab, hints=len(shown) + 1, shown=[*shown, best])
        return best + 1, lab.hints[best], follows

    def record_grade(self, lab: Lab, score: float, divergence: str = "") -> None:
        self._update(lab, grade=score, divergence=divergence)


WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
COMMON = {"c", "n", "self", "the", "a", "of", "to", "and", "in", "is", "expected", "got", "engine", "torch",
          "tensor", "import", "attrs", "after", "your", "its", "node", "tree", "call", "calls", "raises"}


def pick_hint(hints: tuple[str, ...], unseen: list[int], divergence: str) -> tuple[int, bool]:
    """The unseen hint sharing most identifiers with the divergence (ties: the earliest); whether any did."""
    words = {w for w in WORD.findall(divergence) if w.lower() not in COMMON and len(w) > 2}
    # an event's name counts by its last part too: sched.admission -> admission
    words |= {w.split(".")[-1] for w in re.findall(r"[a-z_]+\.[a-z_]+", divergence)}
    scores = [(len(words & set(WORD.findall(hints[i]))), -i) for i in unseen]
    top, neg_i = max(scores)
    return -neg_i, top > 0

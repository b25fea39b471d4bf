"""The one switch a lab flips: `MINISGL_LAB=COMPONENT=FILE`.

Every engine process calls `apply_from_env()` at start-up (the offline Engine, and the server's main,
scheduler and detokenizer processes, which inherit the variable). It imports FILE, checks that it defines
what the component needs with the same parameters as the engine's own version, installs it where the engine
looks it up, and says so once on stderr. Nothing else in the engine changes.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType

from minisgl.labs.components import Component, UnknownComponent, get

ENV = "MINISGL_LAB"
_applied: dict[str, str] = {}
_originals: dict[tuple[str, str], object] = {}  # what each install replaced, for restore()


class LabSwapError(RuntimeError):
    """The learner's file cannot stand in for the component (missing, broken, or a different interface)."""


def parse(value: str) -> tuple[Component, Path]:
    cid, sep, path = value.partition("=")
    if not sep or not path:
        raise LabSwapError(f"{ENV} must be COMPONENT=FILE (got {value!r})")
    try:
        return get(cid.strip()), Path(path.strip()).expanduser().resolve()
    except UnknownComponent as e:
        raise LabSwapError(str(e)) from None


def load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise LabSwapError(f"no such file: {path}")
    name = f"minisgl_lab_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before it runs: a dataclass in the file looks its module up there
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise LabSwapError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # the learner's module failed while importing
        sys.modules.pop(name, None)
        raise LabSwapError(f"{path}: importing it raised {type(e).__name__}: {e}") from e
    return module


def _kind(fn) -> str:
    if inspect.isasyncgenfunction(fn):
        return "an async generator (async def with yield)"
    if inspect.iscoroutinefunction(fn):
        return "an async def"
    if inspect.isgeneratorfunction(fn):
        return "a generator (def with yield)"
    return "a plain def"


def _params(fn) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values()]


def check(component: Component, module: ModuleType, path: Path) -> None:
    """Every name the component needs, with the engine's own parameters (and, for a class, its public
    methods)."""
    for slot in component.slots:
        ref = slot.reference()
        mine = getattr(module, slot.name, None)
        if mine is None:
            raise LabSwapError(f"{path.name} must define {slot.name} (the engine's is in {component.home})")
        if inspect.isclass(ref):
            if not inspect.isclass(mine):
                raise LabSwapError(f"{path.name}: {slot.name} must be a class")
            for attr, fn in inspect.getmembers(ref, inspect.isfunction):
                if attr.startswith("_") and attr != "__init__":
                    continue
                theirs = getattr(mine, attr, None)
                if theirs is None:
                    raise LabSwapError(f"{path.name}: class {slot.name} lacks {attr}{inspect.signature(fn)}")
                if callable(theirs) and _params(theirs) != _params(fn):
                    raise LabSwapError(f"{path.name}: {slot.name}.{attr} takes {_params(theirs)}, "
                                       f"the engine calls it with {_params(fn)}")
        else:
            if not callable(mine):
                raise LabSwapError(f"{path.name}: {slot.name} must be a function")
            if _kind(ref) != _kind(mine):
                raise LabSwapError(f"{path.name}: {slot.name} must be {_kind(ref)}, like the engine's "
                                   f"(yours is {_kind(mine)})")
            if _params(mine) != _params(ref):
                raise LabSwapError(f"{path.name}: {slot.name} takes {_params(mine)}, "
                                   f"the engine calls it with {_params(ref)}")


def install(component: Component, path: Path, quiet: bool = False) -> None:
    module = load_file(path)
    check(component, module, path)
    for slot in component.slots:
        owner = slot.resolve_owner()
        _originals.setdefault((slot.owner, slot.name), getattr(owner, slot.name))
        setattr(owner, slot.name, getattr(module, slot.name))
    _applied[component.id] = str(path)
    if not quiet:
        print(f"minisgl lab: {component.title} is swapped for {path} (the engine's own: {component.home})",
              file=sys.stderr, flush=True)


def apply_from_env(quiet: bool = False) -> str | None:
    """Install the component MINISGL_LAB names (once per process). Returns its id, or None when unset."""
    value = os.environ.get(ENV)
    if not value:
        return None
    component, path = parse(value)
    if _applied.get(component.id) != str(path):
        install(component, path, quiet=quiet)
    return component.id


def restore() -> None:
    """Put the engine's own components back (tests that swap in-process call this when done)."""
    from minisgl.labs.components import Slot

    for (owner, name), original in _originals.items():
        setattr(Slot(owner, name).resolve_owner(), name, original)
    _originals.clear()
    _applied.clear()

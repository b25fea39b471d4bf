"""The labs, in the order of the course. Each is a folder here: lab.py (LAB, its card), starter.py (what
`minisgl lab start` copies: the interface, docstrings and TODOs), test_lab.py (its unit tests), README.md and
reference.py (the engine's own component in the starter's shape)."""

from __future__ import annotations

import importlib
from pathlib import Path

from minisgl.labs.lab import Lab

HERE = Path(__file__).resolve().parent


# the labs' earlier names: each lab is now named after the component the learner writes (and its file)
RENAMED = {"radix_tree": "radix_cache", "chunked_prefill": "add_chunked_req",
           "next_batch": "get_next_batch_to_run", "detokenizer": "decode_incremental",
           "tm_loop": "tm_wait_loop"}


class UnknownLab(LookupError):
    pass


def _names() -> list[str]:
    found = [p.parent.name for p in HERE.glob("*/lab.py")]
    return [lab.name for lab in sorted((_load(n) for n in found), key=lambda lab: (lab.order, lab.name))]


def _load(key: str) -> Lab:
    return importlib.import_module(f"minisgl.labs.catalog.{key}.lab").LAB


def names() -> list[str]:
    return _names()


def get(name: str) -> Lab:
    key = name.replace("-", "_")
    key = RENAMED.get(key, key)
    if not (HERE / key / "lab.py").exists():
        known = _names()
        raise UnknownLab(f"no lab named {name!r}; `minisgl lab list` shows the {len(known)} there are: "
                         + ", ".join(known))
    return _load(key)


def all_labs() -> list[Lab]:
    return [get(n) for n in _names()]

"""The labs, in the order of the course. Their cards are one table (cards.py); each lab's files are a folder
here: starter.py (what `minisgl lab start` copies: the interface, docstrings and TODOs), test_lab.py (its unit
tests), README.md, and what grades it besides the trace. The reference a lab is checked against is the
engine's own component (Lab.reference writes it in the starter's shape)."""

from __future__ import annotations

from pathlib import Path

from minisgl.labs.catalog.cards import LABS
from minisgl.labs.lab import Lab

HERE = Path(__file__).resolve().parent

# the labs' earlier names (and the lesson's, for future_map): each lab is named after the component the
# learner writes (and its file)
RENAMED = {"radix_tree": "radix_cache", "chunked_prefill": "add_chunked_req",
           "next_batch": "get_next_batch_to_run", "detokenizer": "decode_incremental",
           "tm_loop": "tm_wait_loop", "overlap": "future_map"}


class UnknownLab(LookupError):
    pass


def names() -> list[str]:
    return [lab.name for lab in sorted(LABS, key=lambda lab: (lab.order, lab.name))]


def get(name: str) -> Lab:
    key = name.replace("-", "_")
    key = RENAMED.get(key, key)
    for lab in LABS:
        if lab.name == key:
            return lab
    known = names()
    raise UnknownLab(f"no lab named {name!r}; `minisgl lab list` shows the {len(known)} there are: "
                     + ", ".join(known))


def all_labs() -> list[Lab]:
    return [get(n) for n in names()]

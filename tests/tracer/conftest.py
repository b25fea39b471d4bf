"""Fixtures of the tracer tests: the hand-written traces, and copies of them to break on purpose."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest


@pytest.fixture
def broken(tmp_path: Path) -> Callable[..., Path]:
    """broken(source, edit) copies a fixture trace and lets `edit(records)` change its events (a list of
    dicts per file, edited in place), then writes it back: one invariant broken per test."""

    def make(source: Path, edit: Callable[[dict[str, list[dict]]], None]) -> Path:
        dst = tmp_path / source.name
        shutil.copytree(source, dst)
        files = {p.name: [json.loads(line) for line in p.read_text().splitlines()]
                 for p in dst.glob("*.jsonl")}
        edit(files)
        for name, records in files.items():
            (dst / name).write_text("".join(json.dumps(r) + "\n" for r in records))
        return dst

    return make

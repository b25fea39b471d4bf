"""The figures of the course: tracer diagram views of scenario traces, as SVG files or mermaid text.

Each figure's file name follows from what it draws (scenario, view, request, round) and its language: the
same placeholder draws the English page's figure and, with its words in Chinese, the Chinese page's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracer.diagrams import render_diagram

FOLDER = "figures"  # under the docs folder; generated at build time, never committed
# a figure's alt text (and its lightbox caption): what it draws, then its request, round and server, if any
ALT = {"en": ("the {view} view of the {scenario} scenario", ", request {}", ", round {}",
              ", on the {} server"),
       "zh": ("{scenario} 场景的 {view} 视图", "，请求 {}", "，第 {} 轮", "，{} 服务器上")}


@dataclass(frozen=True)
class Figure:
    scenario: str
    view: str
    rid: str | None = None
    round: int | None = None
    all_rounds: bool = False
    server: str | None = None  # a merged trace (pd_disaggregation): draw this server's part alone
    lang: str = "en"  # the language of its words (tracer/diagrams/lang.py)

    def path(self) -> str:
        parts = [self.view]
        if self.rid:
            parts.append(self.rid)
        if self.round is not None:
            parts.append(f"r{self.round}")
        if self.all_rounds:
            parts.append("all")
        if self.server:
            parts.append(self.server)
        if self.lang != "en":
            parts.append(self.lang)
        return f"{FOLDER}/{self.scenario}/{'-'.join(parts)}.svg"

    def alt(self) -> str:
        head, rid, rnd, server = ALT[self.lang]
        return (head.format(view=self.view, scenario=self.scenario)
                + (rid.format(self.rid) if self.rid else "")
                + (rnd.format(self.round) if self.round is not None else "")
                + (server.format(self.server) if self.server else ""))

    def render(self, trace, fmt: str) -> str | bytes:
        if self.server:
            from tracer.servers import pick_server

            trace = pick_server(trace, self.server)  # as `minisgl trace export --server` draws it
        return render_diagram(trace, self.view, fmt, rid=self.rid, round=self.round,
                              all_rounds=self.all_rounds, lang=self.lang)


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write only when the bytes differ, so `mkdocs serve` does not see a change and rebuild forever."""
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def sync(docs_dir: Path, drawn: dict[str, bytes]) -> None:
    """Make docs_dir/figures hold exactly `drawn` (path -> SVG bytes)."""
    for rel, data in drawn.items():
        write_if_changed(docs_dir / rel, data)
    root = docs_dir / FOLDER
    if root.exists():
        for f in sorted(root.rglob("*"), reverse=True):
            rel = f.relative_to(docs_dir).as_posix()
            if f.is_file() and rel not in drawn:
                f.unlink()
            elif f.is_dir() and not any(f.iterdir()):
                f.rmdir()

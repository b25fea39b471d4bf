"""Turn DOT text into SVG or PNG with Graphviz's `dot` program (the tracer never needs it otherwise)."""

from __future__ import annotations

import shutil
import subprocess

from tracer.diagrams.errors import DiagramError

INSTALL_HINT = ("install it with `apt-get install graphviz` (Debian/Ubuntu) or `brew install graphviz`, "
                "or export with --format dot or mermaid, which need nothing")


class GraphvizMissing(DiagramError):
    """svg or png was asked for, but there is no `dot` program on PATH."""


def dot_program() -> str | None:
    """The path of `dot`, or None when Graphviz is not installed."""
    return shutil.which("dot")


def run_dot(dot_text: str, fmt: str, timeout: float = 120) -> bytes:
    """`dot -T<fmt>` on the text. Raises GraphvizMissing without `dot`, DiagramError if dot fails."""
    program = dot_program()
    if program is None:
        raise GraphvizMissing(f"--format {fmt} needs Graphviz's `dot` program: {INSTALL_HINT}")
    try:
        done = subprocess.run([program, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise DiagramError(f"`dot -T{fmt}` ran for more than {timeout:.0f} s; the graph is too big") from None
    if done.returncode != 0:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[0]
        raise DiagramError(f"`dot -T{fmt}` failed (exit {done.returncode}): {first}")
    return done.stdout

"""The one error a diagram request raises when it cannot be drawn."""

from __future__ import annotations

from tracer.reader import TraceError


class DiagramError(TraceError):
    """A diagram that cannot be drawn from this trace: an unknown request, a round out of range, a view
    that needs a request, a format the view has not. A TraceError, so one `except` covers reading too."""

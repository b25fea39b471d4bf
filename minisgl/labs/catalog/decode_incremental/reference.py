"""The engine's own decode_incremental (with its helpers take_complete_text and apply_stop_strings), in the
shape of the starter (what CI grades to show the lab can pass)."""

from minisgl.detokenizer.incremental import (  # noqa: F401
    apply_stop_strings,
    decode_incremental,
    take_complete_text,
)

"""Lab decode_incremental (your file). decode_incremental: one step of incremental detokenization.

The DetokenizerManager (minisgl/detokenizer/detokenizer_manager.py) keeps one DecodeStatus per running
request. Each time the scheduler sends a request's new token ids, the manager calls

    step = decode_incremental(tokenizer, status, new_ids, finished=..., skip_special_tokens=...,
                              stop_strs=...)

and streams `step.delta_text` to the client. Over a request's life the deltas, joined, must equal the full
decode of its output ids, cut just before the first stop string, and no delta may show half a character.
The lesson page that explains it: lessons/docs/lessons/detokenizer.md ("Holding back half a character",
"Trimming a stop string").

You write three functions: take_complete_text (the offsets and the UTF-8 hold-back), apply_stop_strings
(the stop-string trim and its hold-back) and decode_incremental (one step, using both). Only
decode_incremental is what the engine calls; the other two are how the reference splits the work, and the
hints follow that split. Three small string helpers are given (imported below).
"""

from __future__ import annotations

from collections.abc import Sequence

# The engine's state and result types (the manager creates the DecodeStatus, the tracer reads the DecodeStep),
# and three small string helpers, given:
#   ends_mid_character(text)         a trailing U+FFFD: the text stops inside a UTF-8 character, so wait
#   find_stop(text, stop_strs)       index of the earliest stop string in text, or -1
#   stop_prefix_len(text, stop_strs) length of the longest tail of text that could still grow into a
#                                    stop string
from minisgl.detokenizer.incremental import (  # noqa: F401
    REPLACEMENT_CHAR,
    DecodeStatus,
    DecodeStep,
    HeldBack,
    Tokenizer,
    ends_mid_character,
    find_stop,
    stop_prefix_len,
)

# ---- yours -----------------------------------------------------------------------------------------------


def take_complete_text(
    tokenizer: Tokenizer, status: DecodeStatus, *, finished: bool, skip_special_tokens: bool
) -> str:
    """Return the text the unread ids add, and move the offsets past them, unless it ends inside a character.

    `status.decode_ids[status.surr_offset:status.read_offset]` were already turned into sent text; they are
    decoded again only as context. `status.decode_ids[status.read_offset:]` are unread.

    - Nothing unread: return "".
    - Decode two texts with `tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)`: the surrounding
      ids alone, and the surrounding ids plus the unread ones. The new text is what the second adds to the
      first (decoding from surr_offset, not read_offset, keeps a tokenizer that treats the start of a
      string specially right).
    - Unless `finished`: if the longer text is not longer, or it ends mid-character (`ends_mid_character`),
      return "" and leave both offsets where they are, so a later token can complete the character.
    - Otherwise move the window: surr_offset becomes the old read_offset, read_offset the number of ids.
      On `finished` nothing more will come, so whatever is there is returned, U+FFFD and all.
    """
    raise NotImplementedError("TODO: take_complete_text")


def apply_stop_strings(text: str, stop_strs: Sequence[str], *, finished: bool) -> tuple[str, str, bool]:
    """Split `text` into (send now, hold for the next step, a stop string was found).

    `text` is the previous step's held tail followed by this step's new text, so a stop string split across
    steps is still seen. Unless `finished`, the longest tail that could still grow into a stop string
    (`stop_prefix_len`) is held; it starts at `held_from`. If a stop string occurs (`find_stop`) at or
    before `held_from`, send only what comes before it, hold nothing, and report the stop. (One found
    later lies inside the held tail, after the start of a longer candidate that may still match first:
    it waits with the tail.) Else send everything before `held_from` and hold the rest.
    """
    raise NotImplementedError("TODO: apply_stop_strings")


def decode_incremental(
    tokenizer: Tokenizer,
    status: DecodeStatus,
    new_token_ids: Sequence[int],
    *,
    finished: bool,
    skip_special_tokens: bool,
    stop_strs: Sequence[str],
) -> DecodeStep:
    """Add one step's ids to `status` and return the text that may be sent now.

    1. Append the new ids to `status.decode_ids` (always, even after a stop).
    2. If `status.stopped` (a stop string was already cut), send nothing more:
       `DecodeStep("", HeldBack(), False, status.read_offset, status.surr_offset)`.
    3. Take the complete new text (take_complete_text), put it after the tail held last step
       (`status.stop_pending`) and split that with apply_stop_strings, ignoring empty stop strings.
       Keep the held part in `status.stop_pending`, set `status.stopped` when a stop was found, and add the
       sent part to `status.decoded_text`.
    4. Return `DecodeStep(delta_text, held_back, stop_trimmed, status.read_offset, status.surr_offset)` where
       `held_back = HeldBack(incomplete_tokens=<ids not yet read>, stop_prefix=<the text held for a stop>)`.
       The trace records every field of it, so they must be exact.
    """
    raise NotImplementedError("TODO: decode_incremental")

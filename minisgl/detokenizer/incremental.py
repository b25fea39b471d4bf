"""Incremental detokenization: turn each step's new token ids into the text a client may see now.

Two things make this harder than `tokenizer.decode(new_ids)`: one character can span several byte-level
tokens, and a stop string can span several steps. Both are solved by holding text back until it is safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

REPLACEMENT_CHAR = "\ufffd"


class Tokenizer(Protocol):
    """The one method we need; Hugging Face tokenizers already have it."""

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


@dataclass
class DecodeStatus:
    """Per-request detokenizer state, so each step decodes a short window instead of the whole output.

    `decode_ids[surr_offset:read_offset]` is the "surrounding" window: already sent, decoded again only as
    context. `decode_ids[read_offset:]` has not been turned into sent text yet.
    """

    decode_ids: list[int] = field(default_factory=list)
    decoded_text: str = ""
    surr_offset: int = 0
    read_offset: int = 0
    stop_pending: str = ""
    stopped: bool = False


@dataclass(frozen=True)
class HeldBack:
    """What a step kept from the client, for tracing: ids whose bytes do not yet end a character, and
    decoded text that might be the start of a stop string."""

    incomplete_tokens: int = 0
    stop_prefix: str = ""


@dataclass(frozen=True)
class DecodeStep:
    """The result of one step: the text to send now, plus what was held and why (the trace shows it)."""

    delta_text: str
    held_back: HeldBack
    stop_trimmed: bool
    read_offset: int
    surr_offset: int


def ends_mid_character(text: str) -> bool:
    """Byte-level decoders render an unfinished UTF-8 sequence as U+FFFD; a trailing one means "wait"."""
    return text.endswith(REPLACEMENT_CHAR)


def _decode_window(tokenizer: Tokenizer, status: DecodeStatus, skip_special_tokens: bool) -> tuple[str, str]:
    """Decode the window with and without the unread ids; the new text is what the second adds.

    Decoding from `surr_offset`, not `read_offset`, keeps tokenizers that drop a leading space right.
    """
    window = status.decode_ids[status.surr_offset :]
    unread_start = status.read_offset - status.surr_offset
    surr_text = tokenizer.decode(window[:unread_start], skip_special_tokens=skip_special_tokens)
    full_text = tokenizer.decode(window, skip_special_tokens=skip_special_tokens)
    return surr_text, full_text


def take_complete_text(
    tokenizer: Tokenizer, status: DecodeStatus, *, finished: bool, skip_special_tokens: bool
) -> str:
    """Return the newly decoded text and move the window past it, unless it ends inside a character.

    An unfinished character stays unread (the offsets do not move) so a later token can complete it;
    on `finished` nothing will come, so whatever is there is flushed.
    """
    if status.read_offset == len(status.decode_ids):
        return ""
    surr_text, full_text = _decode_window(tokenizer, status, skip_special_tokens)
    grew = len(full_text) > len(surr_text)
    if not finished and (not grew or ends_mid_character(full_text)):
        return ""
    status.surr_offset, status.read_offset = status.read_offset, len(status.decode_ids)
    return full_text[len(surr_text) :]


def find_stop(text: str, stop_strs: Sequence[str]) -> int:
    """Index of the earliest occurrence of any stop string in `text`, or -1."""
    hits = [i for i in (text.find(s) for s in stop_strs) if i >= 0]
    return min(hits, default=-1)


def stop_prefix_len(text: str, stop_strs: Sequence[str]) -> int:
    """Length of the longest tail of `text` that is a proper prefix of some stop string.

    That tail could still grow into a stop string, so it must not be sent yet.
    """
    longest = 0
    for stop in stop_strs:
        for k in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:k]):
                longest = k
                break
    return longest


def apply_stop_strings(text: str, stop_strs: Sequence[str], *, finished: bool) -> tuple[str, str, bool]:
    """Split `text` into (send now, hold for next step, stop found).

    `text` starts with the previous step's held tail, so a stop string split across steps is still seen.
    A stop found after the start of a longer, still-growing candidate must wait: that one may come first.
    """
    held_from = len(text) - (0 if finished else stop_prefix_len(text, stop_strs))
    cut = find_stop(text, stop_strs)
    if 0 <= cut <= held_from:
        return text[:cut], "", True
    return text[:held_from], text[held_from:], False


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

    The concatenation of all deltas equals the full decode, cut just before the first stop string.
    """
    status.decode_ids.extend(new_token_ids)
    if status.stopped:
        return DecodeStep("", HeldBack(), False, status.read_offset, status.surr_offset)

    new_text = take_complete_text(
        tokenizer, status, finished=finished, skip_special_tokens=skip_special_tokens
    )
    stops = [s for s in stop_strs if s]
    delta, status.stop_pending, trimmed = apply_stop_strings(
        status.stop_pending + new_text, stops, finished=finished
    )
    status.stopped = trimmed
    status.decoded_text += delta
    held = HeldBack(len(status.decode_ids) - status.read_offset, status.stop_pending)
    return DecodeStep(delta, held, trimmed, status.read_offset, status.surr_offset)

"""One-line bugs learners write in incremental detokenization (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

_STOPPED = ("    if status.stopped:\n"
            "        return DecodeStep(\"\", HeldBack(), False, status.read_offset, status.surr_offset)\n")
_EXTEND = "    status.decode_ids.extend(new_token_ids)\n"

BUGS = (
    Bug("finish_keeps_half_char", "a finished request still holds back a trailing U+FFFD, not flushing it",
        "if not finished and (not grew or ends_mid_character(full_text)):",
        "if not grew or ends_mid_character(full_text):"),
    Bug("move_when_nothing_grew", "the offsets move even when the unread ids add no text (a skipped special)",
        "grew = len(full_text) > len(surr_text)", "grew = len(full_text) >= len(surr_text)"),
    Bug("any_ufffd_waits", "any U+FFFD in the window means wait, not only a trailing one",
        "(not grew or ends_mid_character(full_text))", "(not grew or REPLACEMENT_CHAR in full_text)"),
    Bug("surr_jumps_to_end", "both offsets jump to the end: the next window has no surrounding ids",
        "status.surr_offset, status.read_offset = status.read_offset, len(status.decode_ids)",
        "status.surr_offset = status.read_offset = len(status.decode_ids)"),
    Bug("window_from_read_offset", "the window is decoded from read_offset, not surr_offset",
        "window = status.decode_ids[status.surr_offset :]",
        "window = status.decode_ids[status.read_offset :]"),
    Bug("unread_start_absolute", "the unread ids start at read_offset in the window, not read - surr",
        "unread_start = status.read_offset - status.surr_offset", "unread_start = status.read_offset"),
    Bug("surr_decode_keeps_specials", "the surrounding text is decoded without skip_special_tokens",
        "surr_text = tokenizer.decode(window[:unread_start], skip_special_tokens=skip_special_tokens)",
        "surr_text = tokenizer.decode(window[:unread_start])"),
    Bug("stop_at_held_start_missed", "a stop string that starts where the held tail starts is not cut",
        "if 0 <= cut <= held_from:", "if 0 <= cut < held_from:"),
    Bug("finish_keeps_stop_prefix", "a finished request still holds back a possible start of a stop string",
        "held_from = len(text) - (0 if finished else stop_prefix_len(text, stop_strs))",
        "held_from = len(text) - stop_prefix_len(text, stop_strs)"),
    Bug("empty_stop_kept", "an empty stop string is not dropped: it matches at once",
        "stops = [s for s in stop_strs if s]", "stops = list(stop_strs)"),
    Bug("pending_forgotten", "the text held for a stop string last step is not put before the new text",
        "status.stop_pending + new_text, stops", "new_text, stops"),
    Bug("stop_not_remembered", "a stop found is not remembered: later steps send text again",
        "    status.stopped = trimmed\n", ""),
    Bug("held_from_surr_offset", "held_back counts the ids from surr_offset, not from read_offset",
        "HeldBack(len(status.decode_ids) - status.read_offset,",
        "HeldBack(len(status.decode_ids) - status.surr_offset,"),
    Bug("stopped_drops_ids", "after a stop the new ids are not recorded",
        _EXTEND + _STOPPED, _STOPPED + _EXTEND),
    Bug("decoded_text_before_trim", "decoded_text gets the text before the stop-string trim",
        "status.decoded_text += delta", "status.decoded_text += new_text"),
)

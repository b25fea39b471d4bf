from minisgl.labs.lab import Lab

LAB = Lab(
    name="decode_incremental",
    title="Incremental detokenization: read and surround offsets, held-back bytes, stop strings",
    component="decode_incremental",
    file="decode_incremental.py",
    lesson="detokenizer",
    scenario="stream_detok",
    order=10,
    sglang="python/sglang/srt/managers/detokenizer_manager.py: DetokenizerManager.handle_batch_token_id_out "
           "(DecodeStatus with decode_ids, surr_offset, read_offset; trim_matched_stop)",
    hints=(
        "Start with take_complete_text and decode_incremental without stop strings: the tests on offsets and "
        "on half a character need only those. The new text is decode(ids[surr:]) minus its first "
        "len(decode(ids[surr:read])) characters.",
        "When the new text ends in U+FFFD (or adds nothing) and the request is not finished, return \"\" and "
        "move NO offset: the held-back count is len(decode_ids) - read_offset, and the trace records it. "
        "When you do move, it is surr_offset = read_offset first, then read_offset = len(decode_ids).",
        "apply_stop_strings: held_from = len(text) - (0 if finished else stop_prefix_len(text, stops)); "
        "cut = find_stop(text, stops). If 0 <= cut <= held_from: (text[:cut], \"\", True); else "
        "(text[:held_from], text[held_from:], False).",
        "decode_incremental: extend decode_ids first, return the empty step if status.stopped; then "
        "new = take_complete_text(...); delta, status.stop_pending, trimmed = apply_stop_strings("
        "status.stop_pending + new, [s for s in stop_strs if s], finished=finished); status.stopped = "
        "trimmed; status.decoded_text += delta; HeldBack(len(status.decode_ids) - status.read_offset, "
        "status.stop_pending).",
    ),
)

"""One-line bugs learners write in the TokenizerManager's waiter and receive loop
(see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

_REPLIES = "elif isinstance(recv_obj, (GetLoadReqOutput, FlushCacheReqOutput)):"

BUGS = (
    Bug("event_never_cleared", "the event is never cleared, so the next wait returns with nothing new",
        "            state.event.clear()\n", ""),
    Bug("pieces_never_taken", "the pieces are read but left in out_list, so each wake sends them again",
        "pieces, state.out_list = state.out_list, []", "pieces = state.out_list"),
    Bug("delta_is_whole_text", "each streamed output's delta is the whole text so far",
        "\"delta\": \"\".join(p[\"delta\"] for p in pieces)", "\"delta\": state.text"),
    Bug("stream_waits_for_finish", "a stream, too, gets one output at the finish",
        "if not (state.finished or obj.stream):", "if not state.finished:"),
    Bug("load_replies_dropped", "GetLoadReqOutput is not handed to whoever asked",
        _REPLIES, "elif isinstance(recv_obj, FlushCacheReqOutput):"),
    Bug("flush_replies_dropped", "FlushCacheReqOutput is not handed to whoever asked",
        _REPLIES, "elif isinstance(recv_obj, GetLoadReqOutput):"),
    Bug("finish_key_always_there",
        "a stream ends at its first output: each meta_info has the finish_reason key",
        "            if state.finished:\n", "            if \"finish_reason\" in meta:\n"),
    Bug("stream_flag_inverted", "the stream test is the wrong way round: a non-stream yields its first piece",
        "if not (state.finished or obj.stream):", "if not (state.finished or not obj.stream):"),
    Bug("delta_from_emptied_list", "the delta is joined from state.out_list, just emptied: always empty",
        "\"\".join(p[\"delta\"] for p in pieces)", "\"\".join(p[\"delta\"] for p in state.out_list)"),
    Bug("reply_filed_as_output", "a control reply is filed as a BatchStrOutput, so its waiter never gets it",
        "self._handle_reply(recv_obj)", "self._handle_batch_output(recv_obj)"),
)

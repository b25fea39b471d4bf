"""One-line bugs learners write in PrefillAdder.add_chunked_req (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

BUGS = (
    Bug("limit_ignores_kv_room", "the chunk is the chunk limit even when less KV room is left",
        "limit = min(self._chunk_limit(), self.rem_kv_room)", "limit = self._chunk_limit()"),
    Bug("limit_ignores_rows", "the chunk is cut by the chunk rows and the KV room, not by the rows left",
        "limit = min(self._chunk_limit(), self.rem_kv_room)",
        "limit = min(self.rem_chunk_tokens, self.rem_kv_room)"),
    Bug("no_room_boundary", "the chunk is refused only when the KV room went negative",
        "        if limit <= 0:\n", "        if limit < 0:\n"),
    Bug("refusal_drops_req", "a chunk refused for lack of room returns None: the scheduler drops the request",
        "AddReqResult.NO_TOKEN)\n            return req\n",
        "AddReqResult.NO_TOKEN)\n            return None\n"),
    Bug("end_without_prefix", "the chunk's end is counted from 0, not from the tokens already prefilled",
        "end = len(req.prefix_indices) + min(req.extend_input_len, limit)",
        "end = min(req.extend_input_len, limit)"),
    Bug("end_ignores_rest", "every chunk is the whole limit, even past the end of the prompt",
        "end = len(req.prefix_indices) + min(req.extend_input_len, limit)",
        "end = len(req.prefix_indices) + limit"),
    Bug("last_chunk_boundary", "a chunk that reaches the end of the prompt still counts as chunked",
        "chunked = end < full_len", "chunked = end <= full_len"),
    Bug("last_chunk_returned", "the request is returned after its last chunk too",
        "return req if chunked else None", "return req"),
    Bug("last_chunk_names_budget", "the last chunk, admitted whole, still names the budget that would cut it",
        "budget=self._chunk_budget() if chunked else None)", "budget=self._chunk_budget())"),
    Bug("last_chunk_reserves", "the last chunk reserves the request's future tokens, as a whole prompt does",
        "        chunked = end < full_len\n",
        "        chunked = end < full_len\n"
        "        self.rem_total_tokens -= 0 if chunked else rec.future_tokens\n"),
)

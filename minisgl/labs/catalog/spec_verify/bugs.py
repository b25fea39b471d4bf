"""One-line bugs learners write in speculative verification (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

_FREE = "            self.cache_manager.free_rejected_draft_slots(rejected)\n"

BUGS = (
    Bug("rows_without_last_token", "the rows of the next request are counted without this one's last row",
        "start += 1 + len(draft)", "start += len(draft)"),
    Bug("compared_with_next_row", "draft j is checked against row j + 1's token (the row after it)",
        "draft[n] == next_token_ids[start + n]", "draft[n] == next_token_ids[start + n + 1]"),
    Bug("at_most_one_accepted", "the run of right drafts stops after the first (an if, not a while)",
        "        while n < len(draft) and draft[n] == next_token_ids[start + n]:",
        "        if n < len(draft) and draft[n] == next_token_ids[start + n]:"),
    Bug("draft_lens_count_rows", "draft_lens counts each request's rows, its last token's included",
        "result.draft_lens = [len(d) for d in drafts]", "result.draft_lens = [1 + len(d) for d in drafts]"),
    Bug("bonus_row_freed", "the bonus token's row is freed with the rejected drafts",
        "rejected = batch.out_cache_loc[rows.stop : rows.start + 1 + len(draft)]",
        "rejected = batch.out_cache_loc[rows.stop - 1 : rows.start + 1 + len(draft)]"),
    Bug("rejected_rows_kept", "the rejected drafts' KV slots are never given back", _FREE, ""),
    Bug("limit_counts_bonus", "the bonus token counts as an accepted draft when the limit is earned",
        "req.spec_draft_limit = self.next_draft_limit(req.spec_draft_limit, len(draft), accepted)",
        "req.spec_draft_limit = self.next_draft_limit(req.spec_draft_limit, len(draft), accepted + 1)"),
    Bug("limit_without_drafts", "a request with no draft this round still has its limit doubled",
        "if draft and self.adaptive:", "if self.adaptive:"),
    Bug("limit_ignores_adaptive", "the limit is earned even with --disable-adaptive-draft",
        "if draft and self.adaptive:", "if draft:"),
    Bug("stats_count_appended", "the stats count the tokens gained (accepted + bonus) as accepted",
        "self.stats.accepted += sum(result.accept_lens)",
        "self.stats.accepted += sum(result.accept_lens) + len(batch.reqs)"),
    Bug("batch_stays_verify", "the batch is left TARGET_VERIFY for the next round",
        "batch.forward_mode, batch.spec_info = ForwardMode.DECODE, None",
        "batch.spec_info = None"),
)

"""Turn a `sched.batch_formed` event into the rows of the batch: which token of which request sits in
which row, at which position, writing which KV slot — the picture a reader needs of one forward pass."""

from __future__ import annotations

from tracer.event import Event
from tracer.state import BatchRow, RoundBatch


def build_batch(ev: Event, chunked: str | None, decoding: set[str], rows_of: dict[str, dict[int, int | None]],
                tokens_of: dict[str, dict[int, int]], slot_tokens: dict[int, int]) -> RoundBatch:
    """chunked: the rid whose prompt is still unfinished after this round (its last row samples nothing);
    decoding: rids that were running before this round (in MIXED, their rows are decode rows);
    rows_of / tokens_of: what replay knows of each request's KV slots and tokens by position."""
    mode = str(ev.get("forward_mode", "EXTEND"))
    rids = list(ev.rids or ev.get("rids") or [])
    seq_lens = list(ev.get("seq_lens") or [])
    prefix_lens = list(ev.get("prefix_lens") or [])
    extend_lens = list(ev.get("extend_lens") or [])
    out = list(ev.get("out_cache_loc") or [])
    input_ids = ev.get("input_ids")
    verify = mode == "TARGET_VERIFY"  # speculative decoding: last token + drafts, every row scored
    rows: list[BatchRow] = []
    k = 0  # index of the next forward row
    for i, rid in enumerate(rids):
        # decode: one row at position seq_len - 1; extend (MIXED, TARGET_VERIFY): rows prefix_len ..
        # seq_len - 1
        first, n = (seq_lens[i] - 1, 1) if mode == "DECODE" else (prefix_lens[i], extend_lens[i])
        if mode != "DECODE" and not verify and rid not in decoding:
            known_slots, known_tokens = rows_of.get(rid, {}), tokens_of.get(rid, {})
            for pos in range(first):  # the cached prefix: KV already there, not computed this round
                slot = known_slots.get(pos)
                token = known_tokens.get(pos, slot_tokens.get(slot) if slot is not None else None)
                rows.append(BatchRow(rid, pos, token, slot, cached=True, sampled=False))
        for j in range(n):
            token = input_ids[k] if isinstance(input_ids, list) and k < len(input_ids) else None
            rows.append(BatchRow(rid, first + j, token, out[k] if k < len(out) else None, cached=False,
                                 sampled=verify or (j == n - 1 and rid != chunked), draft=verify and j > 0))
            k += 1
    return RoundBatch(
        round=ev.round, mode=mode, rids=rids, seq_lens=seq_lens, prefix_lens=prefix_lens,
        extend_lens=extend_lens, out_cache_loc=out, req_pool_indices=list(ev.get("req_pool_indices") or []),
        rows=rows, formed_ns=ev.time_ns,
    )


def assign_sampled_tokens(batch: RoundBatch, ev: Event) -> None:
    """Put a `sched.sampled` event's tokens on the rows whose logits gave them: each request's sampled row,
    or in TARGET_VERIFY every forward row, each request's rows in turn."""
    if batch.mode == "TARGET_VERIFY":
        for row, token in zip(batch.forward_rows, ev.get("token_ids") or []):
            row.token = token
        return
    tokens = dict(zip(ev.get("rids") or ev.rids or [], ev.get("token_ids") or []))
    for row in batch.rows:
        if row.sampled and row.rid in tokens:
            row.token = tokens[row.rid]

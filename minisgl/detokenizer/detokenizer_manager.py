"""DetokenizerManager: BatchTokenIDOutput (token ids) in, BatchStrOutput (text deltas) out.

It keeps one DecodeStatus per running rid and drops it when the request finishes. The server runs it
in its own process; the offline Engine calls it in-process. Either way each batch ends with the
detokenizer's one trace hook, fed with the steps the pure decoder returned.
"""

from __future__ import annotations

from minisgl.detokenizer import trace_hooks
from minisgl.detokenizer.incremental import DecodeStatus, DecodeStep, decode_incremental
from minisgl.scheduler.io_struct import BatchStrOutput, BatchTokenIDOutput


class DetokenizerManager:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.decode_status: dict[str, DecodeStatus] = {}

    def handle_batch_token_id_out(self, recv: BatchTokenIDOutput) -> BatchStrOutput:
        texts: list[str] = []
        steps: list[DecodeStep] = []
        for i, rid in enumerate(recv.rids):
            status = self.decode_status.setdefault(rid, DecodeStatus())
            finished = recv.finished_reasons[i] is not None
            step = decode_incremental(
                self.tokenizer, status, recv.output_ids[i], finished=finished,
                skip_special_tokens=recv.skip_special_tokens[i], stop_strs=recv.stop_strs[i],
            )
            texts.append(step.delta_text)
            steps.append(step)
            if finished:
                del self.decode_status[rid]
        trace_hooks.decoded(recv, steps)
        return BatchStrOutput(
            rids=list(recv.rids),
            output_strs=texts,
            output_ids=[list(x) for x in recv.output_ids],
            finished_reasons=list(recv.finished_reasons),
            prompt_tokens=list(recv.prompt_tokens),
            completion_tokens=list(recv.completion_tokens),
            cached_tokens=list(recv.cached_tokens),
            max_new_tokens=list(recv.max_new_tokens),
            output_token_logprobs_val=list(recv.output_token_logprobs_val),
            output_top_logprobs_val=list(recv.output_top_logprobs_val),
            output_top_logprobs_idx=list(recv.output_top_logprobs_idx),
            input_token_logprobs_val=list(recv.input_token_logprobs_val),
            input_top_logprobs_val=list(recv.input_top_logprobs_val),
            input_top_logprobs_idx=list(recv.input_top_logprobs_idx),
            http_worker_ipcs=list(recv.http_worker_ipcs),
        )

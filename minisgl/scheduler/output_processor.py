"""What the scheduler does with a round's result: append tokens, check finish, cache KV, stream out."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.finish_reason import FINISH_ABORT
from minisgl.scheduler.io_struct import BatchTokenIDOutput, TokenizedGenerateReqInput
from minisgl.scheduler.req import Req

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from minisgl.scheduler.schedule_batch import ScheduleBatch
    from minisgl.scheduler.utils import GenerationBatchResult


class SchedulerOutputProcessorMixin:
    def process_batch_result(self, batch: ScheduleBatch, result: GenerationBatchResult) -> None:
        self.trace_collector.sampled(batch, result)
        if batch.forward_mode.is_decode():
            self.process_batch_result_decode(batch, result)
        else:
            self.process_batch_result_prefill(batch, result)

    def process_batch_result_prefill(self, batch: ScheduleBatch, result: GenerationBatchResult) -> None:
        for i, req in enumerate(batch.reqs):
            if result.input_token_logprobs is not None:  # the prompt's, chunk by chunk
                req.input_token_logprobs.extend(result.input_token_logprobs[i])
                req.input_top_logprobs_val.extend(result.input_top_logprobs_val[i])
                req.input_top_logprobs_idx.extend(result.input_top_logprobs_idx[i])
            if req is batch.chunked_req:
                # an intermediate chunk: its last row is not the prompt's end, so no token is taken
                if not self.enable_overlap:  # the overlap loop cached it when it formed the next round
                    self.cache_manager.cache_unfinished_req(req)
                continue
            self.append_token(req, result, i)
            if req.finished():
                self.cache_manager.cache_finished_req(req)
            elif req not in batch.decoding_reqs:
                # the prompt enters the radix tree for others to share
                self.cache_manager.cache_unfinished_req(req)
        self.trace_collector.results_processed(batch, result)
        self.stream_output(batch.reqs)

    def process_batch_result_decode(self, batch: ScheduleBatch, result: GenerationBatchResult) -> None:
        for i, req in enumerate(batch.reqs):
            rows = result.rows_of(i)  # its one row; with speculative decoding, its accepted drafts' too
            for row in rows:
                self.append_token(req, result, row)
                if req.finished():  # rows after its end computed KV for tokens it will not have
                    self.cache_manager.free_slots(batch.out_cache_loc[row + 1 : rows.stop], "finished")
                    self.cache_manager.cache_finished_req(req)
                    break
        self.trace_collector.results_processed(batch, result)
        self.stream_output(batch.reqs)
        batch.filter_batch()  # finished requests leave running_batch now, not next round

    def append_token(self, req: Req, result: GenerationBatchResult, i: int) -> None:
        """Take row i's token from the round's result, with its logprob (and the top ones if asked). The one
        way a token joins a request's output."""
        req.output_ids.append(result.next_token_ids[i])
        req.output_logprobs.append(result.logprobs[i])
        if req.grammar is not None and not req.grammar.accept_token(result.next_token_ids[i]):
            req.to_abort = True  # the mask allowed only what the grammar accepts: this is a bug, said loudly
            logger.error("rid %s: the grammar refused token %d", req.rid, result.next_token_ids[i])
        if req.top_logprobs_num > 0:
            req.output_top_logprobs_val.append(result.top_logprobs_val[i])
            req.output_top_logprobs_idx.append(result.top_logprobs_idx[i])
        req.check_finished(self.tokenizer)
        self.trace_collector.output_appended(req)

    def _refuse(self, recv_req: TokenizedGenerateReqInput, message: str) -> None:
        """A request the scheduler will not run: its only output, finished as abort with HTTP status 400."""
        self._refuse_req(Req(recv_req.rid, list(recv_req.input_ids), SamplingParams(),
                             eos_token_ids=self.eos_token_ids, http_worker_ipc=recv_req.http_worker_ipc),
                         message)

    def _refuse_req(self, req: Req, message: str) -> None:
        """(Also a request that waited for a grammar that did not compile: it holds no KV.)"""
        req.finished_reason = FINISH_ABORT(message, status_code=400)
        self.trace_collector.req_refused(req, message)
        self.stream_output([req])

    def stream_output(self, reqs: list[Req]) -> None:
        """Send new tokens: on finish, and for streaming requests every --stream-interval tokens."""
        interval = self.server_args.stream_interval
        out = BatchTokenIDOutput()
        for req in reqs:
            if req is self.chunked_req:
                continue
            n_out = len(req.output_ids)
            # a multiple of the interval reached (or passed: a verify round may append several tokens)
            due = req.stream and n_out > req.send_token_offset and (
                n_out == 1 or n_out // interval > req.send_token_offset // interval)
            if not (req.finished() or due):
                continue
            out.rids.append(req.rid)
            out.output_ids.append(req.output_ids[req.send_token_offset:])
            sent = req.send_token_offset if req.return_logprob else n_out  # logprobs only to those who ask
            out.output_token_logprobs_val.append(req.output_logprobs[sent:])
            out.output_top_logprobs_val.append(req.output_top_logprobs_val[sent:])
            out.output_top_logprobs_idx.append(req.output_top_logprobs_idx[sent:])
            first = req.send_token_offset == 0  # the prompt's logprobs go with the first output only
            out.input_token_logprobs_val.append(req.input_token_logprobs if first else [])
            out.input_top_logprobs_val.append(req.input_top_logprobs_val if first else [])
            out.input_top_logprobs_idx.append(req.input_top_logprobs_idx if first else [])
            req.send_token_offset = n_out
            out.finished_reasons.append(req.finished_reason.to_json() if req.finished() else None)
            out.skip_special_tokens.append(req.sampling_params.skip_special_tokens)
            out.stop_strs.append(req.sampling_params.stop_strs)
            out.prompt_tokens.append(len(req.origin_input_ids))
            out.completion_tokens.append(n_out)
            out.cached_tokens.append(req.cached_tokens)
            out.max_new_tokens.append(req.sampling_params.max_new_tokens)
            out.http_worker_ipcs.append(req.http_worker_ipc)
            if req.finished() and self.rid_to_req.get(req.rid) is req:  # a refused duplicate is not the owner
                del self.rid_to_req[req.rid]
        if out.rids:
            self.send_to_detokenizer.send(out)

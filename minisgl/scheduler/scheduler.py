"""The Scheduler: one loop, one round at a time.

    recv_requests -> process_input_requests -> get_next_batch_to_run -> run_batch -> process_batch_result

`run_round` is chosen once: this round, the overlap one (a forward on its own thread: scheduler_overlap.py)
or a PD server's, which also moves its pairing and transfer queues on (--disaggregation-mode).

State kept across rounds:
    waiting_queue  requests not yet admitted (new, or retracted to make room)
    running_batch  requests past prefill that decode one token per round
    chunked_req    a long prompt being prefilled a chunk per round
    last_batch     the batch that ran last round (an EXTEND batch joins running_batch next round)
    cur_batch      the batch of this round

KV slots change owner only through cache_manager (mem_cache/cache_manager.py), and every trace event
comes from trace_collector (trace_collector.py), called at the loop's fixed points.
"""

from __future__ import annotations

import logging

from minisgl.constrained.grammar_manager import GrammarManager
from minisgl.constrained.xgrammar_backend import create_grammar_backend
from minisgl.disaggregation.mixin import SchedulerDisaggregationMixin
from minisgl.disaggregation.utils import DisaggregationMode
from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.chunk_cache import ChunkCache
from minisgl.mem_cache.radix_cache import RadixCache
from minisgl.model_executor.model_runner import ModelRunner
from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.finish_reason import FINISH_ABORT
from minisgl.scheduler.io_struct import (AbortReq, ContinueGenerationReqInput, FlushCacheReq,
                                         GetLoadReq, PauseGenerationReqInput,
                                         TokenizedGenerateReqInput)
from minisgl.scheduler.output_processor import SchedulerOutputProcessorMixin
from minisgl.scheduler.req import Req
from minisgl.scheduler.schedule_batch import ScheduleBatch
from minisgl.scheduler.schedule_policy import AddReqResult, PrefillAdder, SchedulePolicy
from minisgl.scheduler.scheduler_metrics_mixin import SchedulerMetricsMixin
from minisgl.scheduler.scheduler_overlap import SchedulerOverlapMixin
from minisgl.scheduler.tp_worker import TpModelWorker
from minisgl.scheduler.trace_collector import SchedulerTraceCollector
from minisgl.scheduler.utils import GenerationBatchResult, clamp_max_new_tokens, validate_input_length
from minisgl.server_args import ServerArgs
from minisgl.speculative.ngram_worker import NGRAMWorker

logger = logging.getLogger(__name__)

# How much of a running request's remaining max_new_tokens to reserve when admitting new ones.
# It starts cautious, relaxes a little every decode round, and resets after a retraction.
INIT_NEW_TOKEN_RATIO, MIN_NEW_TOKEN_RATIO, NEW_TOKEN_RATIO_DECAY = 0.7, 0.1, 0.001


class Scheduler(SchedulerOutputProcessorMixin, SchedulerOverlapMixin, SchedulerDisaggregationMixin,
                SchedulerMetricsMixin):
    def __init__(self, server_args: ServerArgs, model_runner: ModelRunner, tokenizer, recv_from_tokenizer,
                 send_to_detokenizer, dp_rank: int = 0):
        self.server_args = server_args
        self.dp_rank = dp_rank  # which data-parallel rank this scheduler is (0 without --dp-size)
        self.tokenizer = tokenizer
        self.recv_from_tokenizer = recv_from_tokenizer  # .recv_all(block: bool) -> list of messages
        self.send_to_detokenizer = send_to_detokenizer  # .send(message)
        self.model_runner = model_runner
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        cache_cls = ChunkCache if server_args.disable_radix_cache else RadixCache
        self.tree_cache = cache_cls(self.req_to_token_pool.req_to_token.device)
        self.cache_manager = CacheManager(self.tree_cache, self.req_to_token_pool, self.token_to_kv_pool)
        self.policy = SchedulePolicy(server_args.schedule_policy, self.tree_cache,
                                     server_args.disable_radix_cache)
        self.eos_token_ids = set(model_runner.model_config.eos_token_ids)
        self.max_req_len = min(model_runner.context_len, self.token_to_kv_pool.size)
        self.trace_collector = SchedulerTraceCollector(self)  # every trace event of this process
        # structured output: grammars compiled on a thread of their own, masks applied by the worker
        grammar_backend = create_grammar_backend(server_args.grammar_backend, model_runner.source,
                                                 model_runner.model_config.vocab_size, self.eos_token_ids)
        self.grammar_manager = GrammarManager(grammar_backend, self.trace_collector, server_args)
        self.tp_worker = TpModelWorker(model_runner, self.trace_collector, server_args.random_seed,
                                       grammar_backend)
        # the worker every batch runs on, chosen once: with --speculative-algorithm NGRAM one that wraps the
        # target model's and verifies n-gram drafts in decode rounds (speculative/ngram_worker.py)
        self.model_worker = (NGRAMWorker(self.tp_worker, self.cache_manager, server_args)
                             if server_args.speculative_algorithm == "NGRAM" else self.tp_worker)

        self.waiting_queue: list[Req] = []
        self.running_batch: ScheduleBatch = self._empty_batch()
        self.chunked_req: Req | None = None
        self.last_batch: ScheduleBatch | None = None
        self.cur_batch: ScheduleBatch | None = None
        self.rid_to_req: dict[str, Req] = {}  # every request not yet finished
        self.new_token_ratio = INIT_NEW_TOKEN_RATIO
        self.forward_ct = self.num_retracted = 0  # rounds that ran a batch; requests retracted so far
        self.engine_paused = False  # /pause_generation: messages are handled, no batch runs
        self.init_overlap()  # result_queue, and the forward thread when --enable-overlap-schedule
        self.init_disaggregation()  # the queues of --disaggregation-mode prefill|decode
        # the round this scheduler runs, chosen once (as SGLang's dispatch_event_loop chooses a loop)
        pd_rounds = {DisaggregationMode.PREFILL: self.run_one_round_disagg_prefill,
                     DisaggregationMode.DECODE: self.run_one_round_disagg_decode}
        colocated = self.run_one_round_overlap if self.enable_overlap else self.run_one_round
        self.run_round = pd_rounds.get(self.disaggregation_mode, colocated)

    # ---- the loop ---------------------------------------------------------------------------------
    def event_loop(self) -> None:
        while True:
            self.run_round(block=True)

    def run_one_round(self, block: bool = False) -> ScheduleBatch | None:
        self.trace_collector.round_begin()
        recv_reqs = self.recv_requests(block=block and self.nothing_to_run())
        self.process_input_requests(recv_reqs)
        batch = self.get_next_batch_to_run()
        self.cur_batch = batch
        if batch is not None:
            result = self.run_batch(batch)
            self.process_batch_result(batch, result)
            self.trace_collector.round_end()
        else:
            self.self_check_during_idle()
        self.last_batch = batch
        return batch

    def is_idle(self) -> bool:
        # last round's prefill requests join running_batch only at the start of the next round
        pending = self.last_batch is not None and self.last_batch.forward_mode.is_extend() and any(
            not r.finished() for r in self.last_batch.reqs)
        return (not self.waiting_queue and self.running_batch.is_empty() and self.chunked_req is None
                and not pending and not self.result_queue and not any(self.disagg_queues)
                and not self.grammar_manager.has_waiting_grammars())

    def nothing_to_run(self) -> bool:  # idle, or paused with no result left: wait for a message
        return self.is_idle() or (self.engine_paused and not self.result_queue)

    def recv_requests(self, block: bool = False) -> list:
        return self.recv_from_tokenizer.recv_all(block)

    def process_input_requests(self, recv_reqs: list) -> None:
        # requests whose grammar was compiling last round: enqueued now (or refused: it did not compile)
        self.grammar_manager.move_ready_grammar_requests(self._add_request_to_queue, self._refuse_req)
        for recv_req in recv_reqs:
            if isinstance(recv_req, TokenizedGenerateReqInput):
                self.handle_generate_request(recv_req)
            elif isinstance(recv_req, AbortReq):
                self.abort_request(recv_req)
            elif isinstance(recv_req, (FlushCacheReq, GetLoadReq)):  # answered through the detokenizer
                self.send_to_detokenizer.send(self.answer_control_req(recv_req))
            elif isinstance(recv_req, (PauseGenerationReqInput, ContinueGenerationReqInput)):
                self.pause_generation(recv_req)
            else:
                raise TypeError(f"scheduler got an unknown message: {type(recv_req).__name__}")

    # ---- arrivals ---------------------------------------------------------------------------------
    def handle_generate_request(self, recv_req: TokenizedGenerateReqInput) -> None:
        params = SamplingParams.from_dict(recv_req.sampling_params)  # verified once, by the TokenizerManager
        params.normalize()
        n = len(recv_req.input_ids)
        if recv_req.rid in self.rid_to_req:
            return self._refuse(recv_req,
                                f"duplicate request id {recv_req.rid!r}: a request with it is running")
        if why := (validate_input_length(n, self.max_req_len, self.model_runner.context_len,
                                         self.token_to_kv_pool.size) or self.disagg_refusal(recv_req)
                   or self.grammar_manager.refusal(params)):
            return self._refuse(recv_req, why)
        asked = params.max_new_tokens
        params.max_new_tokens = clamp_max_new_tokens(n, asked, self.max_req_len)
        if asked is not None and params.max_new_tokens < asked:
            logger.warning("rid %s: max_new_tokens %d clamped to %d (prompt %d + output must fit %d)",
                           recv_req.rid, asked, params.max_new_tokens, n, self.max_req_len)
        req = Req(recv_req.rid, list(recv_req.input_ids), params, eos_token_ids=self.eos_token_ids,
                  stream=recv_req.stream,
                  return_logprob=recv_req.return_logprob, top_logprobs_num=recv_req.top_logprobs_num,
                  logprob_start_len=recv_req.logprob_start_len,
                  bootstrap_host=recv_req.bootstrap_host, bootstrap_port=recv_req.bootstrap_port,
                  bootstrap_room=recv_req.bootstrap_room, http_worker_ipc=recv_req.http_worker_ipc)
        self.rid_to_req[req.rid] = req
        if not self.grammar_manager.process_req_with_grammar(req):  # else: enqueued once it is compiled
            self._add_request_to_queue(req)
        self.trace_collector.req_created(req, asked)

    def abort_request(self, recv_req: AbortReq) -> None:
        req = self.rid_to_req.get(recv_req.rid)
        if req is None:
            return
        waiting = (req in self.waiting_queue or any(q.remove(req) for q in self.disagg_queues)
                   or self.grammar_manager.abort(req))  # in a PD queue, or waiting for its grammar: no KV yet
        where = "waiting" if waiting else "running"
        self.trace_collector.abort_requested(req, where)
        if where == "waiting":  # holds no KV: finish it now
            if req in self.waiting_queue:
                self.waiting_queue.remove(req)
            req.finished_reason = FINISH_ABORT()
            self.trace_collector.req_finished(req)
            self.stream_output([req])
        else:  # running or mid-prefill: it finishes when its next token is processed
            req.to_abort = True

    def pause_generation(self, recv_req: PauseGenerationReqInput | ContinueGenerationReqInput) -> None:
        """No batch runs from /pause_generation (mode "in_place") to /continue_generation."""
        self.engine_paused = isinstance(recv_req, PauseGenerationReqInput)

    def flush_cache(self) -> bool:
        if not self.is_idle():
            logger.warning("flush_cache refused: requests are still queued or running")
            return False
        self.cache_manager.flush_cache()
        self.trace_collector.cache_flushed()
        return True

    # ---- choosing this round's batch -------------------------------------------------------------
    def get_next_batch_to_run(self) -> ScheduleBatch | None:
        # last round's prefill requests now decode with the others
        if self.last_batch is not None and self.last_batch.forward_mode.is_extend():
            dropped = self.last_batch.filter_batch(chunked_req_to_exclude=self.chunked_req)
            dropped += self.running_batch.filter_batch()
            self.running_batch.merge_batch(self.last_batch)
            self.trace_collector.batch_merged(dropped)
        if self.engine_paused:
            return None
        batch = self.get_new_batch_prefill()
        if batch is None and not self.running_batch.is_empty():
            self.running_batch = self.update_running_batch(self.running_batch)
            batch = None if self.running_batch.is_empty() else self.running_batch
        return batch

    def get_new_batch_prefill(self) -> ScheduleBatch | None:
        if not self.waiting_queue and self.chunked_req is None:
            return None
        running = [r for r in self.running_batch.reqs if not r.finished()]
        if len(running) >= self.server_args.max_running_requests and self.chunked_req is None:
            self.trace_collector.prefill_skipped(running)
            return None
        self.policy.calc_priority(self.waiting_queue)
        mixed = self.server_args.enable_mixed_chunk and bool(running)
        adder = PrefillAdder(
            self.tree_cache, self.token_to_kv_pool, running, self.new_token_ratio,
            self.server_args.max_prefill_tokens, self.server_args.chunked_prefill_size,
            self.server_args.max_running_requests, mixed_decode_rows=len(running) if mixed else 0,
            has_chunked_req=self.chunked_req is not None,
        )
        if self.chunked_req is not None:
            self.chunked_req.init_next_round_input()
            self.chunked_req = adder.add_chunked_req(self.chunked_req)
        for req in self.waiting_queue:
            req.init_next_round_input(self.tree_cache)
            if adder.add_one_req(req) != AddReqResult.CONTINUE:
                break
        if adder.new_chunked_req is not None:
            self.chunked_req = adder.new_chunked_req
        self.trace_collector.admission_done(adder)
        if not adder.can_run_list:
            return None

        admitted = set(map(id, adder.can_run_list))
        self.waiting_queue = [r for r in self.waiting_queue if id(r) not in admitted]
        for req in adder.can_run_list:
            if req.is_chunked == 0 and not req.output_ids:
                req.cached_tokens = len(req.prefix_indices)  # prompt tokens the radix cache served
            req.is_chunked = req.is_chunked + 1 if req is self.chunked_req else 0
        new_batch = ScheduleBatch.init_new(adder.can_run_list, self.req_to_token_pool, self.token_to_kv_pool,
                                           self.cache_manager)
        new_batch.chunked_req = self.chunked_req
        new_batch.prepare_for_extend()

        if mixed:
            dropped = self.running_batch.filter_batch()
            self.trace_collector.decode_mem_checked(self.running_batch, dropped, "mixed")
            if not self.running_batch.is_empty() and self.running_batch.check_decode_mem():
                self.running_batch.prepare_for_decode()
                new_batch.mix_with_running(self.running_batch)
                self.running_batch = self._empty_batch()  # its requests come back with last_batch
        return new_batch

    def update_running_batch(self, batch: ScheduleBatch) -> ScheduleBatch:
        dropped = batch.filter_batch()
        self.trace_collector.decode_mem_checked(batch, dropped, "decode")
        if batch.is_empty():
            return batch
        if not batch.check_decode_mem():
            retracted = batch.retract_decode()
            logger.info("retracted %s to free KV cache", [r.rid for r in retracted])
            self.waiting_queue = retracted + self.waiting_queue
            self.num_retracted += len(retracted)
            self.trace_collector.retracted(retracted)
            self.new_token_ratio = INIT_NEW_TOKEN_RATIO
        else:
            self.new_token_ratio = max(self.new_token_ratio - NEW_TOKEN_RATIO_DECAY, MIN_NEW_TOKEN_RATIO)
        batch.prepare_for_decode()
        return batch

    # ---- running it -------------------------------------------------------------------------------
    def run_batch(self, batch: ScheduleBatch) -> GenerationBatchResult:
        self.forward_ct += 1
        return self.model_worker.forward_batch_generation(batch)  # it records the batch in the trace

    # ---- bookkeeping ------------------------------------------------------------------------------
    def _empty_batch(self) -> ScheduleBatch:
        return ScheduleBatch.init_new([], self.req_to_token_pool, self.token_to_kv_pool, self.cache_manager)

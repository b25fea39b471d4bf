"""GrammarManager (SGLang's constrained/grammar_manager.py): the requests whose grammar is still compiling.

A request with a grammar meets the scheduler like any other, but joins the waiting queue only once its
matcher exists. A grammar compiled before (the same kind and text) gives the request its matcher at once.
A new one is compiled on the backend's thread, and the request waits here: at the start of the next round
the scheduler takes it back, grammar ready (or refused, if the text did not compile). The compile overlaps
one round, and a request waits exactly one round whatever the machine, so a trace is the same on every run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from minisgl.constrained.base_grammar_backend import BaseGrammarBackend

if TYPE_CHECKING:
    from minisgl.sampling.sampling_params import SamplingParams
    from minisgl.scheduler.req import Req


MAX_CACHED = 128  # compiled grammars kept for later requests (a JSON schema's can take a few MB)


class GrammarManager:
    def __init__(self, backend: BaseGrammarBackend | None, trace_collector, server_args):
        self.backend = backend
        self.trace_collector = trace_collector
        # where a grammar cannot be followed: the overlap loop samples round N+1 before round N's token has
        # advanced the matcher; a PD pair would need the prefill server's matcher on the decode server
        self.unsupported = ("--enable-overlap-schedule" if server_args.overlap_schedule() else
                            "--disaggregation-mode" if server_args.disaggregation_mode != "null" else None)
        # the grammars compiled lately, by (kind, text), the least recently used dropped past MAX_CACHED
        self.compiled: OrderedDict[tuple[str, str], object] = OrderedDict()
        self.pending: dict[tuple[str, str], Future] = {}  # being compiled
        self.grammar_queue: list[Req] = []  # requests waiting for theirs

    def refusal(self, params: SamplingParams) -> str | None:
        """Why a request with a grammar (or a penalty: it too must see every kept token before the next
        round samples) cannot run here, or None."""
        key = params.grammar_key()
        if key is not None and self.backend is None:
            return f"{key[0]} needs a grammar backend: this server runs with --grammar-backend none"
        if self.unsupported is None:
            return None
        if key is not None:
            return f"{key[0]} (structured output) does not run with {self.unsupported} here"
        if params.has_penalties:
            return (f"penalties (frequency, presence, repetition, min_new_tokens) do not run with "
                    f"{self.unsupported} here")
        return None

    def process_req_with_grammar(self, req: Req) -> bool:
        """Give the request its matcher if its grammar is compiled; else start the compile and keep the
        request here. True: it waits here (not yet in the waiting queue)."""
        key = req.sampling_params.grammar_key()
        if key is None:
            return False
        if key in self.compiled:
            self.compiled.move_to_end(key)
            req.grammar = self.backend.new_grammar(self.compiled[key])
            self.trace_collector.grammar_ready(req, key[0], cached=True)
            return False
        if key not in self.pending:
            self.pending[key] = self.backend.submit(key)
        self.grammar_queue.append(req)
        return True

    def move_ready_grammar_requests(self, enqueue: Callable[[Req], None],
                                    refuse: Callable[[Req, str], None]) -> None:
        """The requests queued before this round: each gets its matcher and is enqueued, or is refused with
        the compile's error. Waits for compiles still running: they had a round."""
        for key, future in self.pending.items():
            try:
                self.compiled[key] = future.result()
            except ValueError as e:  # InvalidGrammar: not kept, a later request compiles the text again
                self.compiled[key] = e
            except Exception as e:  # noqa: BLE001  (any other failure fails the request, not the scheduler)
                self.compiled[key] = ValueError(f"the {key[0]} could not be compiled: {e}")
        self.pending.clear()
        queue, self.grammar_queue = self.grammar_queue, []
        for req in queue:
            kind, text = req.sampling_params.grammar_key()
            compiled = self.compiled[kind, text]
            if isinstance(compiled, ValueError):
                refuse(req, str(compiled))
                continue
            req.grammar = self.backend.new_grammar(compiled)
            enqueue(req)
            self.trace_collector.grammar_ready(req, kind, cached=False)
        for key in [k for k, v in self.compiled.items() if isinstance(v, ValueError)]:
            del self.compiled[key]
        while len(self.compiled) > MAX_CACHED:
            self.compiled.popitem(last=False)

    def has_waiting_grammars(self) -> bool:
        return bool(self.grammar_queue)

    def abort(self, req: Req) -> bool:
        """Take an aborted request out of the queue; True if it was there."""
        if req in self.grammar_queue:
            self.grammar_queue.remove(req)
            return True
        return False

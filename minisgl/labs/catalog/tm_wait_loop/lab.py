from minisgl.labs.lab import Lab

LAB = Lab(
    name="tm_wait_loop",
    title="The TokenizerManager's waiter and receive loop: handle_loop and _wait_one_response",
    component="tm_wait_loop",
    file="tm_wait_loop.py",
    lesson="tokenizer-manager",
    scenario="one_request",
    boundaries=("tm_outputs", "tm_disconnect", "tm_refused"),
    order=3,
    sglang="python/sglang/srt/managers/tokenizer_manager.py: TokenizerManager._wait_one_response, "
           "handle_loop (and _handle_batch_output)",
    hints=(
        ("Start with handle_loop: `while True: msg = await self.recv_from_detokenizer.recv()`, then dispatch "
         "on isinstance. The filing and the waking are already written: _handle_batch_output does both."),
        ("handle_loop must outlive any one message: put the dispatch (not the recv) in try/except Exception "
         "and log with logger.exception. CancelledError is not an Exception, so shutdown still stops the "
         "task."),
        ("_wait_one_response: wrap the wait in asyncio.wait_for(state.event.wait(), "
         "timeout=DISCONNECT_POLL_S); on asyncio.TimeoutError check the client (request may be None) and "
         "`continue`. Forgetting state.event.clear() makes the next wait return at once, with no new piece "
         "to take."),
        ("After a wake: raise state.error if set; `pieces, state.out_list = state.out_list, []`; clear the "
         "event; `if not (state.finished or obj.stream): continue`. The delta is the pieces' deltas joined "
         "(several may have arrived in one wake), not state.text."),
        ("Then `meta = pieces[-1]['meta_info']`; `error = refusal(meta)`, raise it if not None; yield "
         "{'text': state.text, 'delta': ..., 'output_ids': list(state.output_ids), 'meta_info': meta}; and "
         "`if state.finished: return`."),
    ),
)

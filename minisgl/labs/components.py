"""The components a lab may replace: for each, the names the learner's file defines and where the engine
looks each name up (an attribute of a module or a class), so that installing the learner's object there is
all a swap does. None of these components emits trace events; the code around them does."""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """`owner` is "package.module" or "package.module:Class"; the engine reads `owner.name`."""

    owner: str
    name: str

    def resolve_owner(self):
        module, _, cls = self.owner.partition(":")
        obj = importlib.import_module(module)
        return getattr(obj, cls) if cls else obj

    def reference(self):
        return getattr(self.resolve_owner(), self.name)


@dataclass(frozen=True)
class Component:
    id: str
    title: str
    slots: tuple[Slot, ...]
    home: str  # where the engine's own version lives (for messages and the lab README)

    def names(self) -> list[str]:
        return [s.name for s in self.slots]


_SB = "minisgl.scheduler.schedule_batch:ScheduleBatch"
_ADDER = "minisgl.scheduler.schedule_policy:PrefillAdder"

COMPONENTS: dict[str, Component] = {c.id: c for c in (
    Component("radix_cache", "RadixCache", (Slot("minisgl.scheduler.scheduler", "RadixCache"),),
              "minisgl/mem_cache/radix_cache.py"),
    Component("add_one_req", "PrefillAdder.add_one_req", (Slot(_ADDER, "add_one_req"),),
              "minisgl/scheduler/schedule_policy.py"),
    Component("add_chunked_req", "PrefillAdder.add_chunked_req", (Slot(_ADDER, "add_chunked_req"),),
              "minisgl/scheduler/schedule_policy.py"),
    Component("prepare_for_extend", "ScheduleBatch.prepare_for_extend", (Slot(_SB, "prepare_for_extend"),),
              "minisgl/scheduler/schedule_batch.py"),
    Component("decode_and_retract", "ScheduleBatch.prepare_for_decode and retract_decode",
              (Slot(_SB, "prepare_for_decode"), Slot(_SB, "retract_decode")),
              "minisgl/scheduler/schedule_batch.py"),
    Component("mix_with_running", "ScheduleBatch.mix_with_running", (Slot(_SB, "mix_with_running"),),
              "minisgl/scheduler/schedule_batch.py"),
    Component("get_next_batch_to_run", "Scheduler.get_next_batch_to_run",
              (Slot("minisgl.scheduler.scheduler:Scheduler", "get_next_batch_to_run"),),
              "minisgl/scheduler/scheduler.py"),
    Component("tm_wait_loop", "TokenizerManager._wait_one_response and handle_loop",
              (Slot("minisgl.server.tokenizer_manager:TokenizerManager", "_wait_one_response"),
               Slot("minisgl.server.tokenizer_manager:TokenizerManager", "handle_loop")),
              "minisgl/server/tokenizer_manager.py"),
    Component("decode_incremental", "decode_incremental (the detokenizer's step)",
              (Slot("minisgl.detokenizer.detokenizer_manager", "decode_incremental"),),
              "minisgl/detokenizer/incremental.py"),
    Component("context_check", "validate_input_length and clamp_max_new_tokens (a new request's lengths)",
              (Slot("minisgl.scheduler.scheduler", "validate_input_length"),
               Slot("minisgl.scheduler.scheduler", "clamp_max_new_tokens")),
              "minisgl/scheduler/utils.py"),
    Component("future_map", "FutureMap and split_launched_rows (the overlap loop's placeholders, and its "
              "results a round late)",
              (Slot("minisgl.scheduler.tp_worker_overlap_thread", "FutureMap"),
               Slot("minisgl.scheduler.scheduler_overlap", "split_launched_rows")),
              "minisgl/scheduler/overlap_utils.py"),
    Component("spec_verify", "NGRAMWorker.verify and accept_lengths (speculative decoding's verify step)",
              (Slot("minisgl.speculative.ngram_worker", "accept_lengths"),
               Slot("minisgl.speculative.ngram_worker:NGRAMWorker", "verify")),
              "minisgl/speculative/ngram_worker.py"),
)}


class UnknownComponent(LookupError):
    pass


def get(component_id: str) -> Component:
    if component_id not in COMPONENTS:
        raise UnknownComponent(f"no component {component_id!r}; there are: {', '.join(COMPONENTS)}")
    return COMPONENTS[component_id]

"""Every lab's card, in the order of the course: what the learner builds, where it runs, how it is checked
and the hints (the cards themselves are in cards_requests.py and cards_rounds.py, by part of the course). The
rest of a lab is its folder here (catalog/<name>/): starter.py, test_lab.py, README.md, and what grades it
besides the trace (bugs.py, differential.py, equivalent.py, mutants.json)."""

from __future__ import annotations

from minisgl.labs.catalog.cards_requests import (ADD_ONE_REQ, GET_NEXT_BATCH_TO_RUN, PREPARE_FOR_EXTEND,
                                                 RADIX_CACHE, TM_WAIT_LOOP)
from minisgl.labs.catalog.cards_rounds import (ADD_CHUNKED_REQ, CONTEXT_CHECK, DECODE_AND_RETRACT,
                                               DECODE_INCREMENTAL, FUTURE_MAP, MIX_WITH_RUNNING, SPEC_VERIFY)
from minisgl.labs.lab import Lab

LABS: tuple[Lab, ...] = (TM_WAIT_LOOP, GET_NEXT_BATCH_TO_RUN, RADIX_CACHE, ADD_ONE_REQ, PREPARE_FOR_EXTEND,
                         ADD_CHUNKED_REQ, DECODE_AND_RETRACT, MIX_WITH_RUNNING, DECODE_INCREMENTAL,
                         CONTEXT_CHECK, FUTURE_MAP, SPEC_VERIFY)

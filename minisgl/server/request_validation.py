"""The server's length checks on a tokenized request, before it is sent (SGLang's
TokenizerManager._validate_one_request, with its messages).

    a prompt of no tokens                          refused
    prompt >= the context length                   refused: "The input (N tokens) is longer than ..."
    prompt >= max_req_len (a KV pool smaller than  refused, both numbers named (this server's own limit)
      the context: the scheduler's limit)
    prompt + max_new_tokens > the context length   refused: "Requested token count exceeds ..."

With --allow-auto-truncate, as in SGLang, the last two become warnings: the prompt keeps its first
max_req_len - 1 tokens, and max_new_tokens is cut to what the context leaves. A max_new_tokens that fits
the context but not a smaller KV pool is not refused: the scheduler clamps it (clamp_max_new_tokens) and the
answer carries a warning. The offline Engine leaves all of this to the scheduler's validate_input_length.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minisgl.server.errors import RequestError

if TYPE_CHECKING:
    from minisgl.scheduler.io_struct import TokenizedGenerateReqInput
    from minisgl.server.tokenizer_manager import EngineLimits

logger = logging.getLogger(__name__)


def validate_one_request(tokenized: TokenizedGenerateReqInput, limits: EngineLimits,
                         allow_auto_truncate: bool = False) -> None:
    """Raise RequestError (400, code context_length_exceeded) for a request that cannot fit; with
    allow_auto_truncate, shorten its prompt or max_new_tokens in place instead."""
    n, context_len, max_req_len = len(tokenized.input_ids), limits.context_len, limits.max_req_len
    if n == 0:
        raise RequestError("the prompt is empty: at least one input token is needed")
    if n >= max_req_len:
        if n >= context_len:
            why = f"The input ({n} tokens) is longer than the model's context length ({context_len} tokens)."
        else:
            why = (f"the prompt has {n} tokens, but at most {max_req_len - 1} fit: this server's limit is "
                   f"{max_req_len} tokens for prompt and output together (context length {context_len}, KV "
                   f"cache {limits.max_total_num_tokens} slots)")
        if not allow_auto_truncate:
            raise RequestError(why, code="context_length_exceeded")
        logger.warning("rid %s: %s Truncating the input to %d tokens.", tokenized.rid, why, max_req_len - 1)
        tokenized.input_ids = tokenized.input_ids[:max_req_len - 1]
        n = max_req_len - 1
    asked = tokenized.sampling_params.get("max_new_tokens")
    if asked is not None and n + asked > context_len:
        if not allow_auto_truncate:
            raise RequestError(
                f"Requested token count exceeds the model's maximum context length of {context_len} tokens. "
                f"You requested a total of {n + asked} tokens: {n} tokens from the input messages and "
                f"{asked} tokens for the completion. Please reduce the number of tokens in the input "
                "messages or the completion to fit within the limit.", code="context_length_exceeded")
        tokenized.sampling_params["max_new_tokens"] = context_len - n  # the answer's warning says so

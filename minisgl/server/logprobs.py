"""Logprobs conversion, the output path's last job: the scheduler's numbers become SGLang's meta_info entries
in the TokenizerManager, and those become OpenAI's shapes in the serving layer.

    scheduler:       output_token_logprobs_val [float], output_top_logprobs_val/_idx [[float]], [[int]]
    meta_info:       output_token_logprobs [(logprob, token_id, text)],
                     output_top_logprobs [[(logprob, id, text)]]
    chat:            {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}],
                     "refusal"}
    completions:     {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}

Every value is log_softmax of the raw logits (see minisgl/layers/logprobs.py): temperature and the top-k,
top-p and min-p filters change which token is drawn, not the logprobs reported.
"""

from __future__ import annotations

from typing import Any

LogprobEntry = tuple[float, int, Any]  # (logprob, token id, the token's text or None), SGLang's triple


def detokenize_logprob_tokens(tokenizer, vals: list[float], ids: list[int], with_text: bool
                              ) -> list[LogprobEntry]:
    """SGLang's triples; a token's text is its own decode (a piece of a multi-byte character shows as
    U+FFFD)."""
    return [(val, tid, tokenizer.decode([tid]) if with_text else None) for val, tid in zip(vals, ids)]


def output_logprobs_of(out: dict[str, Any], tokenizer) -> tuple[list[LogprobEntry], list[list[LogprobEntry]]]:
    """The output's logprob entries not sent yet (from out["logprobs_from"], 0 unless streaming), and their
    top entries. As in SGLang, a final stop token (EOS) is one of them: usage.completion_tokens counts it,
    though its text is not in the answer."""
    meta = out["meta_info"]
    start = out.get("logprobs_from", 0)
    tokens = list(meta.get("output_token_logprobs", ())[start:])
    return tokens, list(meta.get("output_top_logprobs", ())[start:])


def _bytes(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def to_chat_logprobs(tokens: list[LogprobEntry], tops: list[list[LogprobEntry]]) -> dict[str, Any]:
    """OpenAI's chat choice.logprobs."""
    content = []
    for j, (logprob, _, text) in enumerate(tokens):
        top = [{"token": t, "logprob": lp, "bytes": _bytes(t)}
               for lp, _, t in (tops[j] if j < len(tops) else ())]
        content.append({"token": text, "logprob": logprob, "bytes": _bytes(text), "top_logprobs": top})
    return {"content": content, "refusal": None}


def to_completion_logprobs(tokens: list[LogprobEntry], tops: list[list[LogprobEntry]], text_offset: int
                           ) -> dict[str, Any]:
    """OpenAI's legacy completions choice.logprobs. As OpenAI does, each position's top_logprobs holds the
    `logprobs` most likely tokens and the chosen one; text_offset counts characters from `text_offset`."""
    out: dict[str, Any] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for j, (logprob, _, text) in enumerate(tokens):
        if logprob is None:  # the prompt's first token (echo): nothing before it scores it
            top = None
        else:
            top = {t: lp for lp, _, t in (tops[j] if j < len(tops) and tops[j] is not None else ())}
            top.setdefault(text, logprob)
        out["tokens"].append(text)
        out["token_logprobs"].append(logprob)
        out["top_logprobs"].append(top)
        out["text_offset"].append(text_offset)
        text_offset += len(text)
    return out

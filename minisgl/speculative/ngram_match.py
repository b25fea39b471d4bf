"""Draft tokens from n-gram matches in a request's own tokens (prompt lookup; no draft model).

The newest tokens of a request (its suffix) often appeared before: a text being repeated, edited or
quoted. Find the longest suffix (between the min and max window sizes) that occurred earlier, take its
most recent earlier occurrence, and propose the tokens that followed it there as the draft.

SGLang's NGRAM algorithm keeps a trie of n-grams (NgramCache, in C++) fed by every request's tokens;
this one looks only at the request's own prompt and output, with a plain scan.
"""

from __future__ import annotations


def match_ngram_draft(tokens: list[int], num_draft_tokens: int, min_window: int,
                      max_window: int) -> list[int]:
    """Up to num_draft_tokens tokens that followed the longest earlier match of tokens' suffix; [] if none.

    Longest match first; among equally long matches the most recent wins. An occurrence may overlap the
    suffix itself: the tokens then repeat with a period of n - 1 - end, and the draft continues that period
    past the last token (a repeating list drafts its next items, not just the tail already written).
    """
    n = len(tokens)
    if num_draft_tokens <= 0 or n < min_window + 1:
        return []
    last = tokens[-1]
    best_len, best_end = 0, -1  # the matched occurrence ends at best_end (inclusive); the draft follows it
    for end in range(n - 2, -1, -1):  # the most recent occurrences first
        if tokens[end] != last:
            continue
        length = 1
        limit = min(max_window, end + 1)
        while length < limit and tokens[end - length] == tokens[n - 1 - length]:
            length += 1
        if length > best_len:
            best_len, best_end = length, end
            if length == max_window:
                break
    if best_len < min_window:
        return []
    period = n - 1 - best_end
    return [tokens[best_end + 1 + i % period] for i in range(num_draft_tokens)]

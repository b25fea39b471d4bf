"""Incremental detokenization against the bundled SmolLM2 tokenizer (byte-level BPE)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minisgl.detokenizer.incremental import REPLACEMENT_CHAR, DecodeStatus, DecodeStep, decode_incremental


@pytest.fixture(scope="module")
def tok(tokenizer):
    """The engine's own tokenizer (converted from the GGUF once and cached; tests/model_loader checks the
    cache against transformers' conversion)."""
    return tokenizer


def stream(
    tokenizer,
    ids: Sequence[int],
    chunk: int = 1,
    *,
    stop_strs: Sequence[str] = (),
    skip_special_tokens: bool = True,
) -> list[DecodeStep]:
    """Feed `ids` `chunk` at a time, marking the last step finished, as the scheduler would."""
    status = DecodeStatus()
    steps = []
    for start in range(0, len(ids), chunk):
        steps.append(
            decode_incremental(
                tokenizer,
                status,
                ids[start : start + chunk],
                finished=start + chunk >= len(ids),
                skip_special_tokens=skip_special_tokens,
                stop_strs=list(stop_strs),
            )
        )
    assert "".join(s.delta_text for s in steps) == status.decoded_text
    return steps


def joined(steps: list[DecodeStep]) -> str:
    return "".join(s.delta_text for s in steps)


def test_multibyte_characters_are_never_split(tok):
    text = "北京是中国的首都，人口超过两千万。😀🎉👍🏽🇯🇵"
    ids = tok.encode(text)
    steps = stream(tok, ids)
    assert all(REPLACEMENT_CHAR not in s.delta_text for s in steps)
    assert joined(steps) == tok.decode(ids) == text
    assert any(s.held_back.incomplete_tokens > 0 for s in steps), "no character spanned two tokens"


@pytest.mark.parametrize("chunk", [1, 3])
def test_english_with_spaces_matches_full_decode(tok, chunk):
    text = "  The quick brown fox jumps over the lazy dog.\nIt   was, of course, a very   quick fox!"
    ids = tok.encode(text)
    assert joined(stream(tok, ids, chunk)) == tok.decode(ids)


def test_each_step_decodes_a_short_window(tok):
    """The whole history is never decoded again: every decode call sees only a few ids."""
    seen: list[int] = []

    class Counting:
        def decode(self, token_ids, skip_special_tokens=True):
            seen.append(len(token_ids))
            return tok.decode(token_ids, skip_special_tokens=skip_special_tokens)

    ids = tok.encode("word " * 200 + "北京是中国的首都")
    assert joined(stream(Counting(), ids)) == tok.decode(ids)
    assert max(seen) <= 6


def test_stop_string_split_across_steps_is_trimmed(tok):
    text = "Hello world, this is a test. STOP here and more text after it."
    ids = tok.encode(text)
    steps = stream(tok, ids, stop_strs=["STOP"])
    assert joined(steps) == "Hello world, this is a test. "
    hit = next(i for i, s in enumerate(steps) if s.stop_trimmed)
    assert steps[hit - 1].held_back.stop_prefix == "ST", "the stop string did not span two steps"
    assert all(s.delta_text == "" for s in steps[hit + 1 :])
    assert sum(s.stop_trimmed for s in steps) == 1


def test_earliest_of_several_stop_strings_wins(tok):
    ids = tok.encode("one two three four")
    assert joined(stream(tok, ids, stop_strs=[" four", "o t"])) == "one tw"
    assert joined(stream(tok, ids, stop_strs=[" four", " three"])) == "one two"


@pytest.mark.parametrize(
    ("text", "expected"), [("one two four", "one "), ("one two three", ""), ("one two", "one ")]
)
def test_stop_that_starts_earlier_waits_for_its_end(tok, text, expected):
    """"two" completes first, but "one two three" starts earlier and may still complete."""
    assert joined(stream(tok, tok.encode(text), stop_strs=["one two three", "two"])) == expected


def test_held_stop_prefix_is_released_when_it_is_not_a_stop(tok):
    ids = tok.encode("I like pineapples")
    steps = stream(tok, ids, stop_strs=[" pine tree"])
    assert any(s.held_back.stop_prefix == " pine" for s in steps)
    assert joined(steps) == "I like pineapples"


def test_held_stop_prefix_is_flushed_on_finish(tok):
    ids = tok.encode("I like pine")
    steps = stream(tok, ids, stop_strs=[" pine tree"])
    assert steps[-1].delta_text == " pine"
    assert joined(steps) == "I like pine"


@pytest.mark.parametrize("skip, expected", [(True, "Hello"), (False, "Hello<|im_end|>")])
def test_skip_special_tokens(tok, skip, expected):
    ids = tok.encode("Hello<|im_end|>")
    assert tok.convert_ids_to_tokens(ids[-1]) == "<|im_end|>"
    assert joined(stream(tok, ids, skip_special_tokens=skip)) == expected


def test_special_token_can_be_a_stop_string(tok):
    ids = tok.encode("Hi there<|im_end|>more")
    assert joined(stream(tok, ids, stop_strs=["<|im_end|>"], skip_special_tokens=False)) == "Hi there"


PIECES = ["北京", "是", "的", "😀", "👍🏽", " the", " cat", "  ", "\n", "ST", "OP", "é", "naïve", ",", "<|im_end|>"]


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=20),
    chunk=st.integers(1, 4),
    skip=st.booleans(),
    stop_spans=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 6)), max_size=3),
)
def test_deltas_always_equal_the_full_decode_cut_at_the_first_stop(tok, pieces, chunk, skip, stop_spans):
    ids = tok.encode("".join(pieces))
    full = tok.decode(ids, skip_special_tokens=skip)
    stops = [full[a % len(full) :][:n] for a, n in stop_spans] if full else []
    hits = [i for i in (full.find(s) for s in stops) if i >= 0]
    steps = stream(tok, ids, chunk, stop_strs=stops, skip_special_tokens=skip)
    assert joined(steps) == full[: min(hits, default=len(full))]
    assert all(REPLACEMENT_CHAR not in s.delta_text for s in steps)

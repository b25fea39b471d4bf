"""Unit tests of the context_check lab: your validate_input_length and clamp_max_new_tokens under
`minisgl lab test context_check`, else the engine's."""

from minisgl.labs.testing import component

LAB = component("context_check")


def test_a_prompt_that_leaves_room_for_one_token_runs():
    assert LAB.validate_input_length(1, 32, 32, 64) is None
    assert LAB.validate_input_length(31, 32, 32, 64) is None, "31 + one output token = 32 fits"


def test_a_prompt_with_no_room_for_an_output_token_is_refused_with_both_limits():
    why = LAB.validate_input_length(32, 32, 32, 64)
    assert why == ("the prompt has 32 tokens, but at most 31 fit: the limit is 32 tokens (context length 32, "
                   "KV cache 64 slots) and one output token needs room")
    why = LAB.validate_input_length(40, 24, 32, 24)
    assert why.startswith("the prompt has 40 tokens, but at most 23 fit"), why


def test_an_empty_prompt_is_refused():
    why = LAB.validate_input_length(0, 32, 32, 64)
    assert why == "the prompt is empty: at least one input token is needed"


def test_what_fits_is_what_was_asked():
    assert LAB.clamp_max_new_tokens(10, 5, 32) == 5
    assert LAB.clamp_max_new_tokens(10, 22, 32) == 22, "10 + 22 = 32: an exact fit is not clamped"


def test_an_output_that_would_not_fit_is_clamped_to_what_does():
    assert LAB.clamp_max_new_tokens(10, 23, 32) == 22
    assert LAB.clamp_max_new_tokens(31, 100, 32) == 1


def test_no_max_new_tokens_means_until_the_context_is_full():
    assert LAB.clamp_max_new_tokens(10, None, 32) == 22
    assert LAB.clamp_max_new_tokens(1, None, 8) == 7

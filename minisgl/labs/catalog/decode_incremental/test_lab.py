"""Unit tests of the decode_incremental lab: your decode_incremental under `minisgl lab test
decode_incremental`, else the engine's. They use the bundled model's real tokenizer (byte-level BPE: a Chinese
character often spans two tokens)."""

from minisgl.detokenizer.incremental import DecodeStatus
from minisgl.labs.testing import component
from minisgl.model_loader.loader import load_tokenizer, resolve_model

decode_incremental = component("decode_incremental").decode_incremental

TOK = load_tokenizer(resolve_model(None))
ZH = TOK.encode("北京是中国的首都。", add_special_tokens=False)  # 北 and 京 take two tokens each
EN = TOK.encode("Hello world. These are", add_special_tokens=False)  # one token per word and the period
EN_OTHER = TOK.encode("Hello world. These were", add_special_tokens=False)
EOS = TOK.convert_tokens_to_ids("<|im_end|>")


def steps(chunks, stop=(), finished_last=True, skip=True):
    """Feed the chunks one step each; returns the DecodeSteps and the final status."""
    status, out = DecodeStatus(), []
    for i, ids in enumerate(chunks):
        out.append(decode_incremental(TOK, status, ids, finished=finished_last and i == len(chunks) - 1,
                                      skip_special_tokens=skip, stop_strs=list(stop)))
    return out, status


def fields(step):
    return (step.delta_text, step.read_offset, step.surr_offset, step.held_back.incomplete_tokens,
            step.held_back.stop_prefix, step.stop_trimmed)


def test_one_token_at_a_time_the_deltas_add_up_and_the_window_slides():
    out, status = steps([[t] for t in EN], finished_last=False)
    assert "".join(s.delta_text for s in out) == TOK.decode(EN) == status.decoded_text
    assert [(s.read_offset, s.surr_offset) for s in out] == [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4)]
    assert status.decode_ids == EN


def test_half_a_character_is_held_back_and_the_offsets_wait():
    out, _ = steps([[ZH[0]], [ZH[1]], [ZH[2]], [ZH[3]]], finished_last=False)
    assert [fields(s) for s in out] == [
        ("", 0, 0, 1, "", False),  # the first byte(s) of 北: U+FFFD, nothing sent, nothing read
        ("北", 2, 0, 0, "", False),
        ("", 2, 0, 1, "", False),
        ("京", 4, 2, 0, "", False),
    ]


def test_a_character_whose_bytes_all_arrive_in_one_step_goes_out_at_once():
    out, _ = steps([ZH[:4], ZH[4:6]], finished_last=False)
    assert [fields(s) for s in out] == [("北京", 4, 0, 0, "", False), ("是中", 6, 4, 0, "", False)]


def test_finishing_flushes_an_incomplete_character():
    out, status = steps([[ZH[0]]], finished_last=True)
    assert fields(out[0]) == ("\ufffd", 1, 0, 0, "", False)
    assert status.decoded_text == "\ufffd"


def test_a_stop_string_inside_one_step_is_cut_and_nothing_follows():
    out, status = steps([EN, EN_OTHER[:2]], stop=["These"], finished_last=False)
    assert fields(out[0]) == ("Hello world. ", 5, 0, 0, "", True)
    assert status.stopped and status.decoded_text == "Hello world. "
    assert fields(out[1]) == ("", 5, 0, 0, "", False)  # after the stop: nothing more is sent
    assert status.decode_ids == EN + EN_OTHER[:2]  # the ids are still recorded


def test_a_possible_start_of_a_stop_string_is_held_until_it_is_decided():
    stop = [" These are"]
    out, status = steps([[t] for t in EN], stop=stop, finished_last=False)
    assert [fields(s) for s in out[3:]] == [("", 4, 3, 0, " These", False), ("", 5, 4, 0, "", True)]
    assert status.decoded_text == "Hello world."
    out, status = steps([[t] for t in EN_OTHER], stop=stop, finished_last=False)
    assert [fields(s) for s in out[3:]] == [("", 4, 3, 0, " These", False),
                                            (" These were", 5, 4, 0, "", False)]
    assert status.decoded_text == TOK.decode(EN_OTHER)


def test_finishing_releases_a_held_stop_prefix():
    out, status = steps([[t] for t in EN[:4]], stop=["These are"], finished_last=True)
    assert fields(out[-1]) == (" These", 4, 3, 0, "", False)
    assert status.decoded_text == "Hello world. These"


def test_empty_stop_strings_are_ignored():
    out, status = steps([EN], stop=[""], finished_last=False)
    assert fields(out[0]) == ("Hello world. These are", 5, 0, 0, "", False) and not status.stopped


def test_skip_special_tokens_is_passed_to_the_tokenizer():
    out, _ = steps([EN[:2] + [EOS]], skip=True)
    assert out[0].delta_text == "Hello world"
    out, _ = steps([EN[:2] + [EOS]], skip=False)
    assert out[0].delta_text == "Hello world<|im_end|>"

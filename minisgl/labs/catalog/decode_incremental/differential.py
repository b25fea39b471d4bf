"""The decode_incremental lab's differential check: your decode_incremental and the engine's, fed the same
request stream the DetokenizerManager feeds it (each step's new token ids, `finished` on the last step or not,
skip_special_tokens on or off, a few stop strings), with the bundled model's own decode tokenizer. The ids
come from Chinese text and emoji whose characters span several byte-level tokens, English words, spaces,
special tokens and lone bytes that no later token completes. After every step: the DecodeStep's fields, then
the whole DecodeStatus."""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

from minisgl.labs.differential import Log, call, same

TEXTS = ("北京是中国的首都。", "Hello world. These are", " These were", "🙂👍🏽 é ü 😀", "  \n\t x",
         "日本語 emoji 🎉", "aéb")
SPECIAL = (0, 1, 2)  # <|endoftext|>, <|im_start|>, <|im_end|>
LONE_BYTES = (138, 180, 241)  # a UTF-8 continuation byte alone
STOPS = ("", "。", "中国", "北京是", " These", " These are", "These", "e", "ee", ".", "world.", "\n", "🙂",
         " ", "<|im_end|>", "ese w")


@lru_cache(maxsize=1)
def tokenizer():
    """The tokenizer the detokenizer process loads (decode only), once per process."""
    from minisgl.model_loader.decode_tokenizer import load_decode_tokenizer
    from minisgl.model_loader.loader import resolve_model

    return load_decode_tokenizer(resolve_model(None))


@lru_cache(maxsize=1)
def text_ids() -> tuple[tuple[int, ...], ...]:
    backend = tokenizer().backend_tokenizer  # the Rust tokenizer (a transformers tokenizer has one too)
    return tuple(tuple(backend.encode(t, add_special_tokens=False).ids) for t in TEXTS)


# a piece of the stream: the ids of one of TEXTS (its index), or one special or lone-byte id (-1 - id)
ONE_ID = st.sampled_from(SPECIAL + LONE_BYTES).map(lambda i: -1 - i)
PIECES = st.lists(st.one_of(st.integers(0, len(TEXTS) - 1), ONE_ID), min_size=1, max_size=3)
REQUEST = st.tuples(
    PIECES,
    st.lists(st.integers(1, 4), min_size=1, max_size=4),  # the steps' sizes, used in turn
    st.booleans(),  # finished on the last step
    st.booleans(),  # skip_special_tokens
    st.lists(st.sampled_from(STOPS), max_size=3, unique=True),  # stop_strs
)


def operations():
    return REQUEST


# always tried first: a stop string found exactly where the held-back tail starts (" These" is complete and
# also the start of the longer " These are"): it stops at once; and steps that bring no new id (size 0), as
# the manager's steps for a request that is aborted or refused do
EXAMPLES = [([1], [1], False, True, [" These", " These are"]), ([0, 1], [2, 0], True, True, ["。"])]


def stream_steps(pieces, sizes) -> list[list[int]]:
    ids = [i for p in pieces for i in (text_ids()[p] if p >= 0 else (-1 - p,))]
    steps = []
    sizes = sizes if any(sizes) else [1]  # a step may bring no id, but the stream must move on
    while ids:
        n = sizes[len(steps) % len(sizes)]
        steps.append(ids[:n])
        ids = ids[n:]
    return steps


STEP_FIELDS = ("(delta_text, read_offset, surr_offset, held_back.incomplete_tokens, held_back.stop_prefix, "
               "stop_trimmed)")
STATUS_FIELDS = ("decode_ids", "decoded_text", "surr_offset", "read_offset", "stop_pending", "stopped")


def show_step(s) -> tuple:
    held = s.held_back
    return (s.delta_text, s.read_offset, s.surr_offset, held.incomplete_tokens, held.stop_prefix,
            s.stop_trimmed)


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    from minisgl.detokenizer.incremental import DecodeStatus

    pieces, sizes, finished_last, skip, stops = ops
    tok, steps = tokenizer(), stream_steps(pieces, sizes)
    for line in ("from minisgl.detokenizer.incremental import DecodeStatus",
                 "from minisgl.model_loader.decode_tokenizer import load_decode_tokenizer",
                 "from minisgl.model_loader.loader import resolve_model",
                 "tok = load_decode_tokenizer(resolve_model(None))", "s = DecodeStatus()"):
        log.step(line)
    ref, mine = DecodeStatus(), DecodeStatus()  # the manager makes them: the engine's class on both sides
    for i, ids in enumerate(steps):
        kw = dict(finished=finished_last and i == len(steps) - 1, skip_special_tokens=skip,
                  stop_strs=list(stops))
        code = f"decode_incremental(tok, s, {ids}, " + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")"
        r, _ = call(code, lambda: ref_ns.decode_incremental(tok, ref, list(ids), **kw),
                    lambda: mine_ns.decode_incremental(tok, mine, list(ids), **kw), show_step,
                    f"-> {STEP_FIELDS}")
        log.step(code, show_step(r))
        for f in STATUS_FIELDS:
            same(f"after step {i + 1}, status.{f}", getattr(ref, f), getattr(mine, f))

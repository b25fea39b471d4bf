"""The scheduler's and detokenizer's decode-only tokenizer (model_loader/decode_tokenizer.py) gives the text
transformers' tokenizer gives, for the bundled model and for Hugging Face folders, and loads without
importing transformers; where transformers would decode its own way, it is transformers' tokenizer."""

from __future__ import annotations

import json
import random
import subprocess
import sys

from minisgl.model_loader.decode_tokenizer import DecodeTokenizer, from_folder, load_decode_tokenizer
from minisgl.model_loader.loader import ModelSource

TEXTS = ["What is the capital of China?", "中文：北京是中国的首都。😀 日本語", "def f(x):\n\treturn x ** 2\n",
         "Hello , world ! It 's a test , isn't it ?", "<|im_start|>user\nHi<|im_end|>"]


def _samples(tokenizer, vocab: int) -> list[list[int]]:
    """Encoded texts, their prefixes (a character cut in the middle of its bytes), special ids, random ids."""
    rng = random.Random(0)
    out = [tokenizer.encode(t, add_special_tokens=False) for t in TEXTS]
    out += [ids[:k] for ids in out[:3] for k in range(1, len(ids))]
    specials = sorted(tokenizer.all_special_ids)
    out += [[*specials, *out[0], *specials], [], [specials[0]]]
    out += [[rng.randrange(vocab) for _ in range(rng.randrange(1, 40))] for _ in range(200)]
    return out


def _same_decode(ours, theirs, vocab: int) -> None:
    assert isinstance(ours, DecodeTokenizer)
    for ids in _samples(theirs, vocab):
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip), ids
    assert ours.decode(theirs.all_special_ids[0]) == theirs.decode(theirs.all_special_ids[0])  # one int


def test_the_bundled_models_text_equals_transformers(bundled_source, tokenizer):
    _same_decode(load_decode_tokenizer(bundled_source), tokenizer, len(tokenizer))


def test_a_hugging_face_folder_with_clean_up_spaces(tmp_path):
    """A WordPiece tokenizer saved with clean_up_tokenization_spaces=True: transformers cleans up the spaces
    before punctuation, and so does the decode tokenizer; for a BPE one, transformers does not, nor do we."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    words = sorted({w for t in TEXTS[:4] for w in t.replace("\n", " ").split()} | set(",.!?'"))
    vocab = {w: i for i, w in enumerate(["[UNK]", "[CLS]", "[SEP]", *words])}
    for kind, model in (("wordpiece", models.WordPiece(vocab, unk_token="[UNK]")),
                        ("bpe", models.BPE(vocab, [], unk_token="[UNK]"))):
        backend = Tokenizer(model)
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece() if kind == "wordpiece" else decoders.Metaspace()
        fast = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", cls_token="[CLS]",
                                       sep_token="[SEP]", clean_up_tokenization_spaces=True)
        folder = tmp_path / kind
        fast.save_pretrained(folder)
        theirs = AutoTokenizer.from_pretrained(str(folder))
        ours = load_decode_tokenizer(ModelSource("hf", folder))
        assert ours.clean_up == (kind == "wordpiece")
        _same_decode(ours, theirs, len(vocab))
        text = ours.decode(theirs.encode(TEXTS[3], add_special_tokens=False))
        assert ("world!" in text) == (kind == "wordpiece"), text  # the clean-up really ran, or really did not


def test_other_folders_are_left_to_transformers(bundled_source, tmp_path, tokenizer):
    """A tokenizer class with its own decode, added tokens the file lacks, or no tokenizer_config.json:
    transformers decodes them."""
    tokenizer.save_pretrained(tmp_path / "base")
    assert isinstance(from_folder(tmp_path / "base"), DecodeTokenizer)
    config = json.loads((tmp_path / "base" / "tokenizer_config.json").read_text())
    for name, edit in (("class", {"tokenizer_class": "WhisperTokenizer"}),
                       ("added", {"added_tokens_decoder": {"49152": {"content": "<new>", "special": True}}})):
        folder = tmp_path / name
        tokenizer.save_pretrained(folder)
        (folder / "tokenizer_config.json").write_text(json.dumps({**config, **edit}))
        assert from_folder(folder) is None, name
    assert from_folder(tmp_path / "no-such-folder") is None
    (tmp_path / "base" / "tokenizer_config.json").unlink()  # transformers would pick a class by model type
    assert from_folder(tmp_path / "base") is None


def test_it_loads_without_transformers(bundled_source, tokenizer):
    """The point of it: the scheduler and detokenizer processes no longer import transformers."""
    code = ("import sys; from minisgl.model_loader.loader import resolve_model; "
            "from minisgl.model_loader.decode_tokenizer import load_decode_tokenizer; "
            "t = load_decode_tokenizer(resolve_model(None)); print(type(t).__name__, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["DecodeTokenizer", "False"], out.stderr

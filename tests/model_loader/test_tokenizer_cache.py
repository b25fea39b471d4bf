"""The cached tokenizer is the tokenizer transformers converts from the GGUF file: the same ids for every
text, the same chat prompt, the same decoded text and special tokens. The referee is transformers' own
conversion, made in this test on an empty cache (so not read from any cache)."""

from __future__ import annotations

import os

import pytest

from minisgl.model_loader import tokenizer_cache

TEXTS = [
    "What is the capital of China?",
    "  leading spaces, trailing spaces  ",
    "中文：北京是中国的首都。😀 emoji and 日本語",
    "<|im_start|>user\nspecial tokens inside text<|im_end|>",
    "def f(x):\n\treturn x ** 2  # code, tabs and newlines\n\n",
    "",
    "a" * 300,
]
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi! 你好"},
        {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Again?"}]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenizer-cache")
    old = os.environ.get(tokenizer_cache.CACHE_ENV)
    os.environ[tokenizer_cache.CACHE_ENV] = str(folder)
    yield folder
    if old is None:
        del os.environ[tokenizer_cache.CACHE_ENV]
    else:
        os.environ[tokenizer_cache.CACHE_ENV] = old


@pytest.fixture(scope="module")
def converted(bundled_source, cache):
    """The first load on an empty cache: transformers' own conversion of the GGUF file, which it saves."""
    assert list(cache.iterdir()) == []
    tok = tokenizer_cache.load_gguf_tokenizer(bundled_source.path)
    assert tok.name_or_path == str(bundled_source.path.parent)  # converted from the file, not a cache
    return tok


def test_the_first_load_saves_and_later_loads_read_the_folder(bundled_source, cache, converted):
    saved = cache / tokenizer_cache.cache_key(bundled_source.path)
    assert (saved / "tokenizer.json").exists()
    # no temporary folder left behind; the conversion's lock file stays (removing it could let a late process
    # lock a new file while an earlier one still waits on the old)
    assert sorted(p.name for p in cache.iterdir()) == sorted([saved.name, f".{saved.name}.lock"])
    again = tokenizer_cache.load_gguf_tokenizer(bundled_source.path)
    assert again.name_or_path == str(saved)  # read from the cache, not converted again
    _same_tokenizer(again, converted)


def _same_tokenizer(tok, ref) -> None:
    assert type(tok) is type(ref)
    assert len(tok) == len(ref) and tok.get_vocab() == ref.get_vocab()
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "all_special_ids",
                 "clean_up_tokenization_spaces"):
        assert getattr(tok, attr) == getattr(ref, attr), attr
    for text in TEXTS:
        for special in (True, False):
            ids = ref.encode(text, add_special_tokens=special)
            assert tok.encode(text, add_special_tokens=special) == ids, text
            assert tok.decode(ids) == ref.decode(ids)
            assert tok.decode(ids, skip_special_tokens=True) == ref.decode(ids, skip_special_tokens=True)
    for gen in (True, False):
        assert (tok.apply_chat_template(CHAT, add_generation_prompt=gen, tokenize=False)
                == ref.apply_chat_template(CHAT, add_generation_prompt=gen, tokenize=False))
    ids = list(range(0, len(ref), 97))
    assert tok.convert_ids_to_tokens(ids) == ref.convert_ids_to_tokens(ids)


def test_a_changed_file_gets_a_new_key(bundled_source, tmp_path):
    copy = tmp_path / bundled_source.path.name
    copy.write_bytes(bundled_source.path.read_bytes())
    key = tokenizer_cache.cache_key(copy)
    assert key != tokenizer_cache.cache_key(bundled_source.path)  # another path
    os.utime(copy, ns=(0, 1_000_000_000))
    assert tokenizer_cache.cache_key(copy) != key  # same path, touched


def test_an_unwritable_cache_is_skipped_without_an_error(converted, tmp_path):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    tokenizer_cache._save(converted, blocked / "sub" / "key")  # cannot make the folder: nothing raised
    assert blocked.read_text() == "x"
    folder = tmp_path / "cache" / "key"
    folder.mkdir(parents=True)  # another process was first: its folder stays, ours is dropped
    (folder / "tokenizer.json").write_text("{}")
    tokenizer_cache._save(converted, folder)
    assert [p.name for p in folder.parent.iterdir()] == ["key"]
    assert (folder / "tokenizer.json").read_text() == "{}"


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks to see a waiter")
def test_a_second_process_waits_for_the_first_conversion_and_reads_it(bundled_source, converted, tmp_path):
    """Processes that start together on an empty cache convert once: while one holds the conversion lock (this
    test, standing in for it), another load waits; it then reads the folder the first one saved."""
    import subprocess
    import sys
    import time

    from minisgl.file_lock import exclusive

    cache = tmp_path / "cache"
    folder = cache / tokenizer_cache.cache_key(bundled_source.path)
    code = ("from minisgl.model_loader.loader import load_tokenizer, resolve_model; "
            "print(load_tokenizer(resolve_model(None)).name_or_path)")
    env = {**os.environ, tokenizer_cache.CACHE_ENV: str(cache)}
    with exclusive(folder):
        other = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while f" {other.pid} " not in "".join(line for line in open("/proc/locks") if "->" in line):
            assert other.poll() is None and time.monotonic() < deadline, "the second load did not wait"
            time.sleep(0.05)  # until the kernel lists it as blocked on the lock
        tokenizer_cache._save(converted, folder)  # what the first process does before it lets go
    out, _ = other.communicate(timeout=120)
    assert other.returncode == 0 and out.strip() == str(folder)  # read from the cache, not converted again

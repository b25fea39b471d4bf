"""minisgl's GGUF reader against the `gguf` package's own reader, on the bundled model: the same metadata and
the same bytes for every tensor; and a clear error, not a traceback, for a file that is not GGUF."""

from __future__ import annotations

import numpy as np
import pytest

from minisgl.model_loader.bundled import ModelNotFound
from minisgl.model_loader.gguf_file import GGUFError, GGUFFile
from minisgl.model_loader.gguf_weights import read_gguf_config


@pytest.fixture(scope="module")
def both(bundled_source):
    import gguf

    return GGUFFile(bundled_source.path), gguf.GGUFReader(str(bundled_source.path))


def test_every_metadata_field_equals_the_gguf_packages(both):
    ours, theirs = both
    assert list(ours.fields) == [k for k in theirs.fields if not k.startswith("GGUF.")]
    for key, field in theirs.fields.items():
        if key.startswith("GGUF."):  # the reader's own header pseudo-fields (version, counts)
            continue
        expected = field.contents()
        got = ours.fields[key]
        if isinstance(got, np.ndarray):
            got = got.tolist()
        assert got == pytest.approx(expected) if isinstance(expected, float) else got == expected, key
    # the tokenizer arrays are really there, whole
    assert len(ours.fields["tokenizer.ggml.tokens"]) == 49152
    assert ours.fields["tokenizer.ggml.tokens"][:3] == theirs.fields["tokenizer.ggml.tokens"].contents()[:3]


def test_every_tensor_has_the_same_name_type_shape_and_bytes(both):
    ours, theirs = both
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for a, b in zip(ours.tensors, theirs.tensors):
        assert a.tensor_type == int(b.tensor_type), a.name
        assert a.shape == tuple(int(x) for x in b.shape), a.name
        assert a.data.dtype == b.data.dtype and a.data.shape == b.data.shape, a.name
        assert np.array_equal(a.data, b.data), a.name


@pytest.mark.parametrize("content, why", [
    (b"", "an empty file"),
    (b"GGML" + bytes(60), "no GGUF magic"),
    (b"GGUF" + (3).to_bytes(4, "little") + (1).to_bytes(8, "little") + (5).to_bytes(8, "little"), "truncated"),
    (b"GGUF" + (99).to_bytes(4, "little") + bytes(16), "GGUF version 99"),
])
def test_a_damaged_file_is_one_clear_error(tmp_path, content, why):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(GGUFError, match=why):
        GGUFFile(path)
    with pytest.raises(ModelNotFound, match=r"bad\.gguf is not a readable GGUF file"):
        read_gguf_config(path)


def test_a_tensor_past_the_end_of_the_file_is_refused(bundled_source, tmp_path):
    whole = bundled_source.path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(GGUFError, match="runs past the end of the file"):
        GGUFFile(cut)


def test_the_engine_reads_skip_the_string_arrays_and_nothing_else(both, bundled_source):
    """read_strings=False (the config and weight reads) leaves each array of strings as its length only;
    every other field and every tensor is what the full read gives."""
    from minisgl.model_loader.gguf_file import SkippedStrings

    full = both[0]
    lean = GGUFFile(bundled_source.path, read_strings=False)
    assert list(lean.fields) == list(full.fields)
    skipped = {k for k, v in lean.fields.items() if isinstance(v, SkippedStrings)}
    assert skipped == {k for k, v in full.fields.items() if isinstance(v, list) and v and isinstance(v[0], str)}
    assert {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"} <= skipped
    for key in full.fields:
        if key in skipped:
            assert lean.fields[key].count == len(full.fields[key]), key
        else:
            a, b = lean.fields[key], full.fields[key]
            assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, key
    assert [(t.name, t.tensor_type, t.shape) for t in lean.tensors] == [
        (t.name, t.tensor_type, t.shape) for t in full.tensors]
    assert all(np.array_equal(a.data, b.data) for a, b in zip(lean.tensors, full.tensors))

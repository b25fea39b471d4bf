"""A small reader of llama.cpp's GGUF format: the metadata and where each tensor's bytes are.

A GGUF file is a header (magic `GGUF`, version, tensor count, metadata count), then the metadata as typed
key/value pairs, then one record per tensor (name, dims, ggml type, offset), then the tensors' bytes, each
aligned to `general.alignment`. The `gguf` package reads the same thing, but it turns every element of the
tokenizer's arrays (about 100,000 strings) into numpy views, which takes seconds on each start; this reader
takes milliseconds, and leaves the tensors as memory-mapped bytes for `gguf.quants.dequantize`.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_MAGIC = b"GGUF"
_SCALARS = {  # metadata value type -> struct format (little-endian)
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d",
}
_STRING, _ARRAY = 8, 9
_NUMPY = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32, 6: np.float32,
          7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}
# ggml types stored as plain numbers; every other type is blocks of bytes (quantized)
_PLAIN = {0: np.float32, 1: np.float16, 24: np.int8, 25: np.int16, 26: np.int32, 27: np.int64, 28: np.float64}


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands, in one line."""


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    tensor_type: int  # a ggml type (gguf.GGMLQuantizationType's value)
    shape: tuple[int, ...]  # ggml order: the fastest-moving dimension first
    data: np.ndarray  # numbers for plain types; bytes shaped (..., bytes per row) for quantized ones


@dataclass(frozen=True)
class SkippedStrings:
    """An array of strings left unread (`GGUFFile(path, read_strings=False)`): only its length."""

    count: int


class GGUFFile:
    """`GGUFFile(path).fields` (key -> str, number, or list / numpy array) and `.tensors`.

    read_strings=False leaves arrays of strings (the tokenizer's vocabulary and merges) as SkippedStrings:
    the engine's reads of the config and the weights never look at them."""

    def __init__(self, path: str | Path, read_strings: bool = True):
        self._read_strings = read_strings
        with open(path, "rb") as f:
            if Path(path).stat().st_size == 0:
                raise GGUFError("an empty file")
            self._buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._pos = 0
        try:
            self._read_all()
        except (struct.error, IndexError, UnicodeDecodeError, OverflowError) as e:
            raise GGUFError(f"truncated or damaged GGUF header ({type(e).__name__}: {e})") from None

    def _read_all(self) -> None:
        if self._buf[:4] != _MAGIC:
            raise GGUFError(f"no GGUF magic (the file starts with {bytes(self._buf[:4])!r})")
        self._pos = 4
        version = self._scalar("<I")
        if version not in (2, 3):
            raise GGUFError(f"GGUF version {version} (this reader knows versions 2 and 3; big-endian files "
                            "are not supported)")
        n_tensors, n_fields = self._scalar("<Q"), self._scalar("<Q")
        self.fields: dict[str, object] = {}
        for _ in range(n_fields):
            key = self._string()
            self.fields[key] = self._value(self._scalar("<I"))
        infos = [self._tensor_info() for _ in range(n_tensors)]
        align = int(self.fields.get("general.alignment", 32))
        start = -(-self._pos // align) * align
        self.tensors = [self._tensor(start, *info) for info in infos]

    def _scalar(self, fmt: str):
        (value,) = struct.unpack_from(fmt, self._buf, self._pos)
        self._pos += struct.calcsize(fmt)
        return value

    def _string(self) -> str:
        n = self._scalar("<Q")
        if self._pos + n > len(self._buf):
            raise IndexError("a string runs past the end of the file")
        s = self._buf[self._pos:self._pos + n].decode("utf-8")
        self._pos += n
        return s

    def _value(self, kind: int):
        if kind in _SCALARS:
            return self._scalar(_SCALARS[kind])
        if kind == _STRING:
            return self._string()
        if kind != _ARRAY:
            raise GGUFError(f"unknown metadata value type {kind}")
        item, count = self._scalar("<I"), self._scalar("<Q")
        if item in _NUMPY:  # one read for the whole array
            dtype = np.dtype(_NUMPY[item]).newbyteorder("<")
            arr = np.frombuffer(self._buf, dtype=dtype, count=count, offset=self._pos)
            self._pos += arr.nbytes
            return arr
        if item == _STRING:
            return self._strings(count)
        return [self._value(item) for _ in range(count)]

    def _strings(self, count: int) -> list[str] | SkippedStrings:
        """An array of strings (the tokenizer's vocabulary and merges: about 100,000), in one tight loop;
        with read_strings=False only stepped over."""
        buf, pos, end, length = self._buf, self._pos, len(self._buf), struct.Struct("<Q").unpack_from
        keep = self._read_strings
        out: list[str] = []
        append = out.append
        for _ in range(count):
            (n,) = length(buf, pos)
            pos += 8
            if pos + n > end:
                raise IndexError("a string runs past the end of the file")
            if keep:
                append(buf[pos:pos + n].decode("utf-8"))
            pos += n
        self._pos = pos
        return out if keep else SkippedStrings(count)

    def _tensor_info(self) -> tuple[str, tuple[int, ...], int, int]:
        name = self._string()
        n_dims = self._scalar("<I")
        shape = tuple(self._scalar("<Q") for _ in range(n_dims))
        return name, shape, self._scalar("<I"), self._scalar("<Q")

    def _tensor(self, start: int, name: str, shape: tuple[int, ...], kind: int, offset: int) -> GGUFTensor:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        n = int(np.prod(shape))
        np_shape = tuple(reversed(shape))  # numpy order: rows first
        if kind in _PLAIN:
            dtype, count = np.dtype(_PLAIN[kind]), n
        else:
            try:
                block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
            except (ValueError, KeyError):
                raise GGUFError(f"tensor {name}: unknown ggml type {kind}") from None
            dtype, count = np.dtype(np.uint8), n * type_size // block
            np_shape = (*np_shape[:-1], np_shape[-1] * type_size // block)
        end = start + offset + count * dtype.itemsize
        if end > len(self._buf):
            raise GGUFError(f"tensor {name} runs past the end of the file ({end} > {len(self._buf)} bytes)")
        data = np.frombuffer(self._buf, dtype=dtype, count=count, offset=start + offset).reshape(np_shape)
        return GGUFTensor(name, kind, shape, data)

"""`minisgl generate` with a --model it cannot use: exit status 2 and one line on stderr that says what
was expected, no traceback. All of these fail before torch, transformers or the tokenizer are loaded."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CLI = [sys.executable, "-m", "minisgl.cli"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
ROOT = Path(__file__).resolve().parents[1]


def _gguf(path: Path, arch: str) -> Path:
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _folder(path: Path, config: str | None, safetensors: bool = True) -> Path:
    path.mkdir()
    if config is not None:
        (path / "config.json").write_text(config)
    if safetensors:
        (path / "model.safetensors").write_bytes(b"not really weights")
    return path


def _random_gguf(tmp: Path) -> Path:
    path = tmp / "random.gguf"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    return path


def _truncated_gguf(tmp: Path) -> Path:
    path = tmp / "truncated.gguf"
    path.write_bytes(_gguf(tmp / "whole-for-truncation.gguf", "llama").read_bytes()[:40])
    return path


def _file(tmp: Path, name: str) -> Path:
    (tmp / name).write_bytes(b"\0" * 64)
    return tmp / name


GPT2 = json.dumps({"architectures": ["GPT2LMHeadModel"], "n_layer": 2})
LLAMA_NO_HEADS = json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})

# name -> (builds the --model path in a fresh folder, a regex that the one stderr line must match)
BAD_MODELS = {
    "missing path": (lambda t: t / "no-such-model", r"model not found: .*no-such-model \(expected a \.gguf file"),
    "not a .gguf file": (lambda t: _file(t, "weights.bin"), r"weights\.bin is a file but not a \.gguf file"),
    "folder without config.json": (
        lambda t: _folder(t / "empty", None), r"empty is a folder but not a Hugging Face model: expected config"),
    "folder without safetensors": (
        lambda t: _folder(t / "nosafe", GPT2, safetensors=False), r"expected config\.json and \*\.safetensors"),
    "unsupported architecture": (
        lambda t: _folder(t / "gpt2", GPT2),
        r"architecture \['GPT2LMHeadModel'\] is not supported; expected one of LlamaForCausalLM, "),
    "config.json not JSON": (lambda t: _folder(t / "badjson", "{oops"), r"config\.json is not a readable JSON"),
    "config.json lacks a field": (
        lambda t: _folder(t / "nohead", LLAMA_NO_HEADS), r"config\.json has no 'num_attention_heads'"),
    "random bytes .gguf": (_random_gguf, r"random\.gguf is not a readable GGUF file"),
    "truncated .gguf": (_truncated_gguf, r"truncated\.gguf is not a readable GGUF file"),
    "gguf of another architecture": (
        lambda t: _gguf(t / "gpt2.gguf", "gpt2"), r"GGUF architecture 'gpt2' is not supported: expected 'llama'"),
    "gguf without llama metadata": (
        lambda t: _gguf(t / "bare.gguf", "llama"),
        r"not a complete llama GGUF model, it has no 'llama\.attention\.head_count'"),
}


@pytest.fixture(scope="module")
def bad_model_runs(tmp_path_factory):
    """All bad --model runs started at once (each is a fresh interpreter): name -> (rc, stdout, stderr)."""
    tmp = tmp_path_factory.mktemp("bad_models")
    procs = {
        name: subprocess.Popen(CLI + ["generate", "hi", "--model", str(build(tmp))], cwd=ROOT, env=ENV,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for name, (build, _) in BAD_MODELS.items()
    }
    runs = {}
    for name, p in procs.items():
        out, err = p.communicate(timeout=60)
        runs[name] = (p.returncode, out, err)
    return runs


@pytest.mark.parametrize("name", list(BAD_MODELS))
def test_bad_model_is_one_clear_line(bad_model_runs, name):
    rc, out, err = bad_model_runs[name]
    assert rc == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("minisgl generate: error: ")
    assert re.search(BAD_MODELS[name][1], lines[0]), lines[0]
    assert out == ""


def test_bad_model_fails_before_torch_and_transformers_load(tmp_path):
    code = (
        "import sys; from minisgl.cli import main; "
        f"rc = main(['generate', 'hi', '--model', {str(tmp_path / 'missing')!r}]); "
        "print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=60)
    assert r.stdout.split() == ["2", "False", "False"], r.stderr


def test_bad_server_arg_is_one_line():
    r = subprocess.run(CLI + ["generate", "hi", "--max-total-tokens", "0"], cwd=ROOT, env=ENV, text=True,
                       capture_output=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["minisgl generate: error: --max-total-tokens must be >= 1, not 0"]


@pytest.mark.parametrize("argv, expected", [
    (["--help"], ["usage: minisgl", "generate", "--version"]),
    (["generate", "--help"], ["usage: minisgl generate", "prompt", "--max-new-tokens", "--model", "--dtype"]),
])
def test_help_exits_zero(argv, expected):
    r = subprocess.run(CLI + argv, cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    for word in expected:
        assert word in r.stdout

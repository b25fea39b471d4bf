"""bench_quant's clock around transformers' products: the time inside nn.Linear during the decode steps is
a part of those steps, and no hook is left behind."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench():  # bench_quant puts its own folder on sys.path, for bench_forward
    spec = importlib.util.spec_from_file_location("bench_quant", BENCHMARKS / "bench_quant.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_transformers_products_are_a_part_of_its_decode_steps(hf_model_fp32, chat_prompt_ids, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script's import-time set-up, undone afterwards
    monkeypatch.setenv("TQDM_DISABLE", os.environ.get("TQDM_DISABLE", "1"))
    prompts = [chat_prompt_ids[0][:8], chat_prompt_ids[1][:8]]
    step, products = _bench().hf_products(hf_model_fp32, prompts, rounds=3, pad_id=2)
    # both are differences of two clocked runs: the test checks they were measured, never their sign or how
    # they compare (that is the benchmark's to print; on a loaded machine the difference of two runs is noise)
    assert isinstance(step, float) and isinstance(products, float) and math.isfinite(products)
    linears = [m for m in hf_model_fp32.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and not any(m._forward_hooks or m._forward_pre_hooks for m in linears)

"""The products benchmark times what it says: each way's product of the bundled model's real weights is
x @ W.T (checked against float32 here, as the script prints it), and a step adds the layers' products and
lm_head's. No time is asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from minisgl import kernels
from minisgl.kernels import dequant_gemm

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_products.py"

pytestmark = pytest.mark.skipif(not kernels.load(), reason="the C++ kernels did not build")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_products", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_products"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_every_way_multiplies_the_models_own_weights(bundled_source, model_config):
    bench = _bench()
    products, layers = bench.load_products(bundled_source.path)
    assert layers == model_config.num_hidden_layers
    shapes = {p.name: tuple(p.weight.shape) for p in products}
    hidden, inter = model_config.hidden_size, model_config.intermediate_size
    kv = model_config.num_key_value_heads * (hidden // model_config.num_attention_heads)
    assert shapes == {"qkv_proj": (hidden + 2 * kv, hidden), "o_proj": (hidden, hidden),
                      "gate_up_proj": (2 * inter, hidden), "down_proj": (hidden, inter),
                      "lm_head": (model_config.vocab_size, hidden)}
    records = bench.measure(products, [1, 3], repeats=1)
    assert len(records) == 2 * len(products)
    absent = set() if dequant_gemm.amx_tiles() else {"AMX tiles"}  # a way only where the CPU has AMX
    for rec in records:
        ways = set(bench.WAYS) - absent - ({"int4pack"} if rec["product"] == "lm_head" else set())  # Q8_0
        assert set(rec["ms"]) == set(rec["diff"]) == ways, rec
        assert all(t > 0 for t in rec["ms"].values())
        # bfloat16 x and outputs: each way within a few bfloat16 roundings of the float32 product
        assert all(d < 1.5e-2 for d in rec["diff"].values()), rec
    # (gemm_rows, onednn_rows): gate_up_proj's blocks go to oneDNN's GEMM from 2 rows, the others' on the
    # tiles where the CPU has AMX
    crossovers = {"qkv_proj": (3, None), "o_proj": (None, None), "gate_up_proj": (1, 2),
                  "down_proj": (4, None), "lm_head": (2, None)}
    totals = bench.step_totals(records, layers, crossovers)
    one = {r["product"]: r["ms"] for r in records if r["rows"] == 1}
    want = sum(one[p]["int4pack"] for p in bench.FUSED) * layers + one["lm_head"]["F.linear bf16"]
    assert totals[1]["int4pack"] == pytest.approx(want)
    three = {r["product"]: r["ms"] for r in records if r["rows"] == 3}  # the engine's way per product at 3 rows
    whole = "AMX tiles" if dequant_gemm.amx_tiles() else "dequant+GEMM"
    want = (three["qkv_proj"][whole] + three["o_proj"]["gguf"] + three["gate_up_proj"]["dequant+GEMM"]
            + three["down_proj"]["gguf"]) * layers + three["lm_head"][whole]
    assert totals[3]["chosen"] == pytest.approx(want)
    assert set(totals) == {1, 3}
    assert set(totals[1]) == set(bench.WAYS) - absent | {"chosen"}  # no column of another way's times


@pytest.mark.parametrize("argv", [["--rows", "0"], ["--rows", "1,x"], ["--repeats", "0"],
                                  ["--model", "no-such-model.gguf"]])
def test_the_script_refuses_bad_arguments_in_one_line(argv):
    with pytest.raises(SystemExit, match="--rows|--model"):
        _bench().main(argv)

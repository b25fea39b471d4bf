"""lm-evaluation-harness (lm-eval, in its own environment, installed by `make lm-eval-env`, never a dependency
of minisgl) with its `local-completions` model against `minisgl serve`, on a tiny multiple-choice task and
a generate_until task in lm_eval_tasks/. Its loglikelihoods (the prompt logprobs of echo + logprobs,
prompts batched four to a request) equal transformers' float32 ones, and the generations are the server's
own greedy answers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from tests.server.conftest import API_KEY, wait_drained

ROOT = Path(__file__).resolve().parents[2]
LM_EVAL = ROOT / ".venv-lmeval" / "bin" / "lm_eval"
HERE = Path(__file__).resolve().parent / "lm_eval_tasks"


def test_lm_eval_loglikelihoods_equal_transformers(server, model, engine, hf_model_fp32, client, http,
                                                   tmp_path):
    if not LM_EVAL.exists():
        pytest.skip(f"lm-eval is not installed at {LM_EVAL}: `make lm-eval-env` installs it (make test tries)")
    for name in ("mc.jsonl", "gen.jsonl", "minisgl_mc.yaml", "minisgl_gen.yaml"):
        shutil.copy(HERE / name, tmp_path / name)
    tokenizer = engine.tokenizer
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    args = (f"model={model},base_url={server.url}/v1/completions,tokenizer={tmp_path / 'tokenizer'},"
            "tokenizer_backend=huggingface,tokenized_requests=True,max_retries=1,num_concurrent=1")
    env = {**os.environ, "OPENAI_API_KEY": API_KEY, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf")}
    run = subprocess.run([str(LM_EVAL), "--model", "local-completions", "--model_args", args, "--tasks",
                          "minisgl_mc,minisgl_gen", "--include_path", str(tmp_path), "--log_samples",
                          "--output_path", str(tmp_path / "out"), "--batch_size", "4"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    samples = {p.name.split("_")[2]: [json.loads(line) for line in p.read_text().splitlines()]
               for p in (tmp_path / "out").rglob("samples_*.jsonl")}
    assert len(samples["mc"]) == 20 and len(samples["gen"]) == 3
    for sample in samples["mc"][:6]:  # the referee's forward is the slow part: six questions, 24 choices
        for i, (got, _greedy) in enumerate(sample["filtered_resps"]):
            pair = sample["arguments"][f"gen_args_{i}"]
            context, continuation = pair["arg_0"], pair["arg_1"]
            ids = tokenizer.encode(context + continuation, add_special_tokens=False)
            start = len(tokenizer.encode(context, add_special_tokens=False))
            with torch.inference_mode():
                logits = hf_model_fp32(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids))).logits[0]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            want = sum(logprobs[k - 1, ids[k]].item() for k in range(start, len(ids)))
            assert float(got) == pytest.approx(want, abs=2e-3 * (len(ids) - start))
    for sample in samples["gen"]:
        answer = client.completions.create(model=model, prompt=sample["arguments"]["gen_args_0"]["arg_0"],
                                           max_tokens=6, temperature=0, stop=["\n", "."])
        assert sample["filtered_resps"][0] == answer.choices[0].text
    wait_drained(http)

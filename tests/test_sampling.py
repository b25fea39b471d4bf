"""SamplingParams validation and the Sampler's filtering, greedy path and seeded reproducibility."""

from __future__ import annotations

import pytest
import torch

from minisgl.layers.sampler import Sampler
from minisgl.sampling.sampling_params import SamplingParams

VOCAB = 1000


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"temperature": "1.0"}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": -2}, "top_k"),
        ({"top_k": 2.0}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"min_p": -0.01}, "min_p"),
        ({"min_p": 1.01}, "min_p"),
        ({"max_new_tokens": -1}, "max_new_tokens"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": 3.5}, "max_new_tokens"),
        ({"max_new_tokens": False}, "max_new_tokens"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**63}, "seed"),
        ({"seed": 1.0}, "seed"),
        ({"stop": ""}, "stop"),
        ({"stop": ["ok", ""]}, "stop"),
        ({"stop": [f"s{i}" for i in range(17)]}, "stop"),
        ({"stop": 5}, "stop"),
        ({"stop_token_ids": [1, -2]}, "stop_token_ids"),
        ({"stop_token_ids": [True]}, "stop_token_ids"),
        ({"stop_token_ids": 7}, "stop_token_ids"),
        ({"ignore_eos": 1}, "ignore_eos"),
        ({"skip_special_tokens": "yes"}, "skip_special_tokens"),
    ],
)
def test_verify_rejects_bad_values(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"\b{field}\b") as err:
        SamplingParams(**kwargs).verify()
    assert repr(next(iter(kwargs.values())))[:20] in str(err.value)


def test_verify_accepts_edges() -> None:
    for kwargs in (
        {},
        {"temperature": 0, "top_p": 1, "top_k": 1, "min_p": 1, "max_new_tokens": 1},
        {"seed": 0, "stop": "x", "stop_token_ids": [0, 2]},
        {"seed": 2**63 - 1, "stop": [f"s{i}" for i in range(16)]},
    ):
        SamplingParams(**kwargs).verify()


def test_normalize_and_dict_roundtrip() -> None:
    p = SamplingParams(stop="END", stop_token_ids=[3, 1, 3])
    p.normalize()
    assert p.stop_strs == ["END"]
    assert p.stop_token_ids == {1, 3}
    d = p.to_dict()
    assert d["stop_token_ids"] == [1, 3] and "stop_strs" not in d
    assert SamplingParams.from_dict(d).to_dict() == d
    q = SamplingParams()
    q.normalize()
    assert q.stop_strs == [] and q.stop_token_ids == set()


def test_from_dict_rejects_unknown_key() -> None:
    with pytest.raises(ValueError, match="max_tokens") as err:
        SamplingParams.from_dict({"max_tokens": 5})
    assert "max_new_tokens" in str(err.value)


def test_is_greedy() -> None:
    assert SamplingParams(temperature=0).is_greedy
    assert SamplingParams(top_k=1).is_greedy
    assert not SamplingParams().is_greedy


def _logits(batch: int, seed: int = 0, scale: float = 3.0) -> torch.Tensor:
    return torch.randn(batch, VOCAB, generator=torch.Generator().manual_seed(seed)) * scale


def test_greedy_is_argmax_and_top_k_1_matches() -> None:
    logits = _logits(64)
    params = [SamplingParams(temperature=0.0)] * 32 + [SamplingParams(temperature=1.0, top_k=1)] * 32
    ids, logprobs = Sampler()(logits, params, [0] * 64)
    assert ids.dtype == torch.int64 and ids.shape == (64,)
    assert logprobs.dtype == torch.float32 and logprobs.shape == (64,)
    assert torch.equal(ids, logits.argmax(-1))


def test_logprobs_match_log_softmax_of_raw_logits() -> None:
    logits = _logits(6)
    params = [SamplingParams(temperature=t, top_k=k) for t, k in [(0, -1), (0.5, 5), (2.0, -1)] * 2]
    ids, logprobs = Sampler()(logits, params, [0] * 6)
    expected = torch.log_softmax(logits, dim=-1).gather(1, ids[:, None]).squeeze(1)
    torch.testing.assert_close(logprobs, expected)


@pytest.mark.parametrize(
    "params",
    [SamplingParams(seed=1234), SamplingParams(temperature=0.8, top_p=0.95, top_k=200, seed=5)],
)
def test_same_seed_same_tokens_across_calls_and_batches(params: SamplingParams) -> None:
    target = _logits(1, seed=7, scale=0.1)
    alone = [Sampler(random_seed=1)(target, [params], [n])[0].item() for n in range(20)]
    again = [Sampler(random_seed=2)(target, [params], [n])[0].item() for n in range(20)]
    assert alone == again
    assert len(set(alone)) > 1

    others = [SamplingParams(temperature=0.7, top_p=0.9), SamplingParams(temperature=0.0),
              SamplingParams(seed=99, top_k=50), SamplingParams(min_p=0.1)]
    in_batch = []
    for n in range(20):
        logits = torch.cat([_logits(3, seed=n), target, _logits(1, seed=100 + n)])
        batch = others[:3] + [params] + others[3:]
        in_batch.append(Sampler()(logits, batch, [5, 6, 7, n, 8])[0][3].item())
    assert in_batch == alone


def test_different_seeds_differ() -> None:
    flat = torch.zeros(1, VOCAB)
    a = [Sampler()(flat, [SamplingParams(seed=1)], [n])[0].item() for n in range(10)]
    b = [Sampler()(flat, [SamplingParams(seed=2)], [n])[0].item() for n in range(10)]
    assert a != b


def test_unseeded_rows_follow_random_seed() -> None:
    flat = torch.zeros(8, VOCAB)
    params, lens = [SamplingParams()] * 8, [0] * 8
    draws = [Sampler(random_seed=s)(flat, params, lens)[0] for s in (3, 3, 4)]
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[0], draws[2])


def test_top_k_never_samples_outside_top_k() -> None:
    k, rows = 5, 256
    logits = _logits(1, scale=0.5).expand(rows, -1).contiguous()
    ids, _ = Sampler()(logits, [SamplingParams(temperature=1.5, top_k=k)] * rows, [0] * rows)
    allowed = set(logits[0].topk(k).indices.tolist())
    assert set(ids.tolist()) <= allowed
    assert len(set(ids.tolist())) > 1


def test_small_top_p_keeps_only_top_token() -> None:
    rows = 128
    logits = _logits(1, scale=0.5).expand(rows, -1).contiguous()
    ids, _ = Sampler()(logits, [SamplingParams(temperature=1.0, top_p=1e-6)] * rows, [0] * rows)
    assert set(ids.tolist()) == {logits[0].argmax().item()}


def test_top_p_keeps_smallest_covering_set() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log().expand(200, -1).contiguous()
    ids, _ = Sampler()(logits, [SamplingParams(top_p=0.8)] * 200, [0] * 200)
    assert set(ids.tolist()) == {0, 1}


def test_min_p_drops_unlikely_tokens() -> None:
    probs = torch.tensor([[0.4, 0.3, 0.2, 0.06, 0.04]])
    logits = probs.log().expand(300, -1).contiguous()
    ids, _ = Sampler()(logits, [SamplingParams(min_p=0.4)] * 300, [0] * 300)
    assert set(ids.tolist()) == {0, 1, 2}


def test_bf16_logits_accepted() -> None:
    logits = _logits(4).to(torch.bfloat16)
    params = [SamplingParams(temperature=0), SamplingParams(seed=5), SamplingParams(top_p=0.9)]
    params.append(SamplingParams())
    ids, logprobs = Sampler()(logits, params, [0] * 4)
    assert ids.dtype == torch.int64 and logprobs.dtype == torch.float32
    assert ids[0].item() == logits[0].float().argmax().item()
    assert torch.isfinite(logprobs).all()


def test_batch_size_mismatch_raises() -> None:
    with pytest.raises(ValueError, match="batch mismatch"):
        Sampler()(_logits(2), [SamplingParams()], [0, 0])

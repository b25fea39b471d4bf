"""The pieces of prefill/decode disaggregation on real ZeroMQ sockets, without a model: the bootstrap server
pairs a room and carries the acknowledgement, a prompt's KV rows travel from one pool's slots into other
slots of another pool bit for bit, and the flags refuse what the engine cannot combine."""

from __future__ import annotations

import time

import pytest
import torch
import zmq

from minisgl.disaggregation.bootstrap import BootstrapClient, BootstrapServer
from minisgl.disaggregation.kv_transfer import KVReceiver, KVSender, gather_kv, scatter_kv
from minisgl.mem_cache.memory_pool import TokenToKVPool
from minisgl.server_args import ServerArgs


def _until(poll, timeout: float = 5.0):
    """Poll a non-blocking receiver until it has something (messages cross a real socket)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := poll():
            return got
        time.sleep(0.01)
    raise AssertionError("nothing arrived")


@pytest.fixture
def context():
    ctx = zmq.Context()
    yield ctx
    ctx.term()


def test_the_bootstrap_server_pairs_a_room_and_hears_its_ack(context):
    server, client = BootstrapServer(context, 0), BootstrapClient(context)  # port 0: it binds a free one
    port = server.port
    try:
        room = 2**63 - 5  # the router's rooms are 64-bit
        client.register("127.0.0.1", port, room, "tcp://127.0.0.1:1234", 7)
        _until(lambda: server.poll() or server.registered)
        assert server.registered == {room: {"endpoint": "tcp://127.0.0.1:1234", "num_slots": 7}}
        assert room not in server.acked
        client.ack("127.0.0.1", port, room)
        _until(lambda: server.poll() or server.acked)
        assert server.acked == {room}
        with pytest.raises(RuntimeError, match="give another --disaggregation-bootstrap-port"):
            BootstrapServer(context, port)  # taken: one clear line, the socket closed
    finally:
        server.close()
        client.close()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_rows_travel_into_other_slots_bit_for_bit(context, dtype):
    torch.manual_seed(0)
    prefill = TokenToKVPool(16, num_layers=3, num_kv_heads=2, head_dim=4, dtype=dtype)
    decode = TokenToKVPool(16, num_layers=3, num_kv_heads=2, head_dim=4, dtype=dtype)
    for buf in prefill.k_buffer + prefill.v_buffer:
        buf.copy_(torch.randn(buf.shape))
    src, dst = torch.tensor([3, 5, 9, 10]), torch.tensor([1, 2, 7, 16])
    receiver, sender = KVReceiver(context), KVSender(context)
    try:
        k, v = gather_kv(prefill, src)
        assert k.shape == (3, 4, 2, 4)
        nbytes = sender.send(receiver.endpoint("127.0.0.1"), 42, first_token=7042, logprob=-0.25, k=k, v=v)
        (msg,) = _until(receiver.poll)
        assert (msg.room, msg.first_token, msg.logprob, msg.nbytes) == (42, 7042, -0.25, nbytes)
        assert nbytes == 2 * k.numel() * k.element_size()
        scatter_kv(decode, dst, msg.k, msg.v)
        for layer in range(3):
            assert torch.equal(decode.k_buffer[layer][dst], prefill.k_buffer[layer][src])
            assert torch.equal(decode.v_buffer[layer][dst], prefill.v_buffer[layer][src])
        untouched = torch.tensor([s for s in range(1, 17) if s not in dst.tolist()])
        assert not decode.k_buffer[0][untouched].any()  # only the preallocated slots were written
    finally:
        sender.close()
        receiver.close()


@pytest.mark.parametrize(("flags", "message"), [
    ({"disaggregation_mode": "both"}, "--disaggregation-mode must be null, prefill or decode"),
    ({"disaggregation_mode": "prefill", "enable_overlap_schedule": True}, "leave out --enable-overlap-schedule"),
    ({"disaggregation_mode": "decode", "speculative_algorithm": "NGRAM"}, "--speculative-algorithm cannot"),
    ({"disaggregation_mode": "prefill", "tp_size": 3}, "needs --tp-size 1"),
    ({"disaggregation_mode": "decode", "dp_size": 2}, "needs --dp-size 1"),
    ({"disaggregation_mode": "prefill", "enable_mixed_chunk": True}, "--enable-mixed-chunk cannot"),
    ({"disaggregation_bootstrap_port": 65536}, r"--disaggregation-bootstrap-port must be from 0 \(a free one\) to 65535"),
    ({"disaggregation_transfer_timeout": 0}, "--disaggregation-transfer-timeout must be a number of seconds"),
    ({"disaggregation_transfer_backend": "mooncake"}, "--disaggregation-transfer-backend must be zmq"),
])
def test_flags_refuse_what_cannot_be_combined(flags, message):
    with pytest.raises(ValueError, match=message):
        ServerArgs(**flags).validate()


def test_a_decode_server_runs_without_a_radix_tree():
    assert ServerArgs(disaggregation_mode="decode").disable_radix_cache  # as SGLang: its KV arrives whole
    assert not ServerArgs(disaggregation_mode="prefill").disable_radix_cache

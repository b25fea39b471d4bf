"""Prefill/decode disaggregation (`--disaggregation-mode prefill|decode`), as SGLang's
python/sglang/srt/disaggregation/.

    utils.py        DisaggregationMode, the flags and their validation
    bootstrap.py    the prefill server's bootstrap server (pairs a room's two halves) and the decode side's
                    client
    kv_transfer.py  KVSender (prefill) and KVReceiver (decode): a prompt's KV rows over ZeroMQ
    prefill.py      the prefill server's queues: bootstrap -> waiting -> forward -> inflight -> finished
    decode.py       the decode server's queues: prealloc -> transfer -> running_batch (PREBUILT)
    disagg_trace.py every disagg.* trace event
Reference: lessons/docs/reference/pd-disaggregation.md.
"""

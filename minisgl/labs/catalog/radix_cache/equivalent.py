"""Mutants of the radix tree that cannot change what it does (see minisgl/labs/mutants.py)."""

EQUIVALENT = {
    "RadixCache.match_prefix#33": "torch.empty(..., device=None) is made on torch's default device, the CPU, "
                                  "which is the cache's device here",
    "RadixCache.match_prefix#36": "torch.empty without device= is made on the CPU too, the cache's device",
    "RadixCache.dec_lock_ref#6": "only the text of the error raised for an unlocked node changes; the engine "
                                 "never unlocks a node it did not lock, so the error is never raised",
}

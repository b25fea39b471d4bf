"""The engine's own RadixCache, in the shape of the starter (what CI grades to show the lab can pass)."""

from minisgl.mem_cache.radix_cache import RadixCache  # noqa: F401

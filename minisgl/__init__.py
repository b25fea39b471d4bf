"""minisgl: a compact SGLang-style serving engine, built to be traced and replayed."""

__version__ = "0.1.0"

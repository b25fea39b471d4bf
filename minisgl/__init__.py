"""minisgl: a compact SGLang-style serving engine, built to be traced and replayed."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # `import minisgl` stays light; torch and the model load only when the Engine is asked for
    if name == "Engine":
        from minisgl.entrypoints.engine import Engine

        return Engine
    raise AttributeError(name)

"""The tokenizer of a GGUF file, converted once and then read from a cache folder.

transformers builds a fast tokenizer from a GGUF file's vocabulary and merges every time it is asked, which
takes about ten seconds here, and each server process asks (TokenizerManager, scheduler, detokenizer). The
first conversion is saved with `save_pretrained` under the cache folder; later loads read that folder. The
folder's name is a hash of the file (path, size, modification time) and of the transformers and tokenizers
versions, so a changed file or library converts again. A cache that cannot be written is skipped. Processes
that start together on an empty cache take turns (a lock file): the first converts, the rest read its folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from minisgl.file_lock import exclusive

CACHE_ENV = "MINISGL_TOKENIZER_CACHE"
_FORMAT = 1  # bump when what is saved changes


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minisgl" / "tokenizers"


def cache_key(path: Path) -> str:
    from importlib.metadata import version  # not `import transformers`: the decode-only processes skip it

    st = path.resolve().stat()
    text = (f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|transformers {version('transformers')}|"
            f"tokenizers {version('tokenizers')}|format {_FORMAT}")
    return f"{path.stem}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def load_gguf_tokenizer(path: Path):
    """The tokenizer transformers converts from the GGUF file at `path`, from the cache when it is there.

    The cache is read with the class the conversion made, named in the saved tokenizer_config.json:
    AutoTokenizer would first look through transformers' model registry for it, about 3 s of every server
    process's start."""
    import transformers

    folder = cache_dir() / cache_key(path)
    if (folder / "tokenizer.json").exists():
        try:
            name = json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"]
            return getattr(transformers, name).from_pretrained(str(folder))
        except (OSError, ValueError, KeyError, AttributeError):
            return transformers.AutoTokenizer.from_pretrained(str(folder))
    with exclusive(folder):  # one process converts; the others (a server's three) wait and read its folder
        if (folder / "tokenizer.json").exists():
            return load_gguf_tokenizer(path)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        _save(tokenizer, folder)
    return tokenizer


def _save(tokenizer, folder: Path) -> None:
    """Write into a fresh folder beside the final one, then rename it: a reader never sees half a cache, and
    of two processes converting at once, the first rename wins and the second's copy is dropped."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    except OSError:
        return  # a read-only or missing home: convert on every start
    try:
        tokenizer.save_pretrained(str(tmp))
        os.rename(tmp, folder)
    except OSError:
        pass  # another process was first (its folder is complete) or the disk is full
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

"""The kernel tests need a C++ compiler; `make test` installs g++ where it can (see the Makefile)."""

from __future__ import annotations

import os
import shutil

import pytest

NO_COMPILER = shutil.which(os.environ.get("CXX", "g++")) is None
needs_compiler = pytest.mark.skipif(NO_COMPILER, reason="no C++ compiler (g++): the CPU kernels cannot be built "
                                                         "here, and the engine runs on torch ops alone")

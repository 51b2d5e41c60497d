"""load_script: import a script of the repository (a generator, a benchmark) by path.

The tests call functions of files that are not in the package (python/cdefgen.py,
benchmarks/gpu/bench_hooks.py); each is loaded as a fresh module under ``name``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(path: Path, name: str) -> ModuleType:
    """The module that running ``path``'s top level defines (its ``__main__`` block does not run)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

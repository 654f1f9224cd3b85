"""pandas imported only by a job that uses it.

pyarrow looks for pandas the first time it converts a Python list (is the list a pandas object?)
and imports it then: about 37 MiB in every process that converts one, the driver and each Python
worker, for a job that never uses pandas. ``defer_pandas_import`` has that first look find no
pandas, and watches for pandas' import: once anything imports pandas (a user's function, a
``to_pandas()``), pyarrow is told of it, and its pandas integration is as it was.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
from typing import Optional

_PANDAS = "pandas"


def defer_pandas_import() -> None:
    """Idempotent; nothing to do when pandas is imported already."""
    if _PANDAS in sys.modules or _watch() is not None:
        return
    import pyarrow as pa
    sys.meta_path.insert(0, _PandasWatch())
    with pandas_hidden():
        pa.array([])                 # pyarrow's one look for pandas (it remembers the answer)


@contextlib.contextmanager
def pandas_hidden():
    """While inside, an import of pandas fails (for a library that imports it only to look at it)."""
    watch = _watch()
    if watch is not None:
        watch.hiding = True
    try:
        yield
    finally:
        if watch is not None:
            watch.hiding = False


def _watch() -> Optional["_PandasWatch"]:
    return next((f for f in sys.meta_path if isinstance(f, _PandasWatch)), None)


class _PandasWatch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it hides pandas while pyarrow looks, then wraps the loader of
    pandas' spec, so that pyarrow looks again once pandas is imported."""

    hiding = False

    def find_spec(self, name, path=None, target=None):
        if name != _PANDAS:
            return None
        if self.hiding:
            raise ImportError("pandas is not imported until a job uses it", name=name)
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _TellPyarrow(spec.loader)
        return spec


class _TellPyarrow(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self.loader
        import pyarrow as pa
        pa.lib._pandas_api.pd        # a look that imports: pyarrow takes pandas from sys.modules

    def __getattr__(self, name):     # the wrapped loader's other methods (resources, source)
        return getattr(self.loader, name)

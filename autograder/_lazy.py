"""Packages whose names are imported on first use (PEP 562): :func:`names_from` gives a package
the ``__getattr__`` and ``__dir__`` that import each name from its module when first asked
for, so that ``import autograder`` (or ``autograder.judge``) costs nothing until a name is used:
the grader's own processes use none of them on their way to starting a kernel."""
from __future__ import annotations

import importlib
import sys
import types


def names_from(package: str, homes: dict) -> tuple:
    """``(__getattr__, __dir__)`` for ``package``, whose names are ``homes``: ``{submodule:
    (name, ...)}``, exactly the names of its ``__all__`` (defined first: else ImportError). A name that is also a submodule's (``autograder.review``, the module, and
    ``review``, its function) stays the name when that submodule is imported."""
    where = {name: module for module, names in homes.items() for name in names}
    namespace = vars(sys.modules[package])
    declared = namespace.get("__all__")
    if declared is None or set(declared) != set(where) or len(declared) != len(where):
        raise ImportError(f"{package}: its __all__ and the names it loads on first use differ: "
                          f"{sorted(set(declared or ()) ^ set(where))}")

    def __getattr__(name):
        module = where.get(name)
        if module is not None:
            value = getattr(importlib.import_module(f".{module}", package), name)
            namespace[name] = value
            return value
        if not name.startswith("__"):
            try:
                return importlib.import_module(f".{name}", package)
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(where))

    class LazyPackage(types.ModuleType):
        def __setattr__(self, name, value):
            if name in where and isinstance(value, types.ModuleType) and value.__name__ == f"{package}.{name}":
                return  # the submodule, imported: the name keeps meaning what it names
            super().__setattr__(name, value)

    sys.modules[package].__class__ = LazyPackage
    return __getattr__, __dir__

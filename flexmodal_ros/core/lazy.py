"""Package exports imported on first use (PEP 562), for the capability subpackages.

A package's ``__init__`` that imports all its submodules makes every user pay for all of them:
``import flexmodal_ros.links.arm`` (the modal server asking whether a robot has beam links) would
load the root solvers and SciPy, ``flexmodal_ros.distributed.executors`` (the CLI parsing
``--scheduler``) Dask and the identification. With :func:`lazy_exports` a name is looked up in
its submodule only when it is first used.
"""
import importlib


def lazy_exports(package: str, exports: dict):
    """(``__getattr__``, ``__all__``) for ``package`` exporting ``exports`` = {submodule: names}."""
    module_of = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name):
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f".{module_of[name]}", package), name)

    return __getattr__, sorted(module_of)

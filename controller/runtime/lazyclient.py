"""Import ``kubernetes_asyncio.client`` without its ~1,700 generated API and model classes.

The controller uses that package's transport only (``ApiClient``, ``Configuration``, ``rest``,
the kubeconfig loaders): every object is plain JSON, never a generated model. Yet the package's
``__init__`` imports every API and model class, and ``api_client`` imports every model: about
60 MiB of resident memory (over half the controller's RSS) and 0.6 CPU seconds at start.

``install()``, called before the first import of that package, puts two lazy modules in its
place: ``kubernetes_asyncio.client`` and ``kubernetes_asyncio.client.models``. They are the real
package directories (submodules import as usual) and resolve any public name the real
``__init__`` exports on first access (PEP 562 ``__getattr__``), from the ``from ... import ...``
lines of that ``__init__``. So ``from kubernetes_asyncio.client import ApiClient`` imports only
``api_client``, and a model class is imported when, and if, something asks for it. If the real
package was imported already (a test, a tool), nothing changes.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path

PACKAGE = "kubernetes_asyncio.client"
MODELS = f"{PACKAGE}.models"

_FROM_IMPORT = re.compile(r"^from (kubernetes_asyncio\.client[\w.]*) import (\w+)\s*$", re.M)


def exports(init: Path) -> dict[str, str]:
    """``name -> module`` from the ``from <module> import <name>`` lines of an ``__init__``."""
    return {name: module for module, name in _FROM_IMPORT.findall(init.read_text())}


def _lazy_package(name: str, directory: Path) -> types.ModuleType:
    """A package module for ``directory`` whose exported names import on first access."""
    init = directory / "__init__.py"
    names = exports(init)
    module = types.ModuleType(name, f"lazy {name}: names import on first use")
    module.__path__ = [str(directory)]
    module.__file__ = str(init)
    module.__package__ = name
    module.__all__ = sorted(names)  # type: ignore[attr-defined]

    def __getattr__(attr: str) -> object:
        source = names.get(attr)
        if source is None:
            try:  # a submodule not named in __init__ (``rest``, ``exceptions``)
                return importlib.import_module(f"{name}.{attr}")
            except ModuleNotFoundError as err:
                if err.name != f"{name}.{attr}":
                    raise
                raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None
        value = getattr(importlib.import_module(source), attr)
        setattr(module, attr, value)
        return value

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def install() -> bool:
    """Put the lazy modules in place unless the package is imported already. Returns whether
    it did. (Before ``kubernetes_asyncio`` itself: its ``__init__`` imports ``client``.)"""
    if PACKAGE in sys.modules:
        return False
    spec = importlib.util.find_spec("kubernetes_asyncio")
    if spec is None or not spec.submodule_search_locations:
        return False
    directory = Path(next(iter(spec.submodule_search_locations))) / "client"
    package = _lazy_package(PACKAGE, directory)
    models = _lazy_package(MODELS, directory / "models")
    package.models = models  # type: ignore[attr-defined]
    sys.modules[PACKAGE] = package
    sys.modules[MODELS] = models
    importlib.import_module("kubernetes_asyncio").client = package  # type: ignore[attr-defined]
    return True

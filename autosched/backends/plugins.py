"""Target kinds from outside the package: a distribution declares an entry point in the
``autosched.backends`` group whose module registers its backend when imported::

    # pyproject.toml of the plugin
    [project.entry-points."autosched.backends"]
    toyc = "toyc_backend"

``import autosched`` imports each such module once, in this process and in every worker process
autosched starts (they import autosched too), so a kind registered this way parses, builds,
tunes, logs and exports like a built-in one. A plugin that fails to import is a one-line warning
naming it; the other kinds still work.
"""

from __future__ import annotations

import importlib.metadata
import warnings

from ..diagnostics import AutoschedWarning, printable

#: the entry-point group plugins declare their backend modules in
GROUP = "autosched.backends"

_loaded: set[str] = set()


def load_plugins() -> list[str]:
    """Import every ``autosched.backends`` entry point not imported yet; the names imported."""
    done = []
    for entry in importlib.metadata.entry_points(group=GROUP):
        if entry.value in _loaded:
            continue
        _loaded.add(entry.value)
        try:
            entry.load()
        except Exception as e:  # a broken plugin must not break autosched
            message = f"the backend plugin {entry.name} ({entry.value}) did not load: {e}"
            warnings.warn(printable(message), AutoschedWarning, stacklevel=2)
            continue
        done.append(entry.name)
    return done

"""The step kinds (and the command hooks beside them) a run needs: imported when a run starts, not at start-up.

``kafkaops --help`` and ``kafkaops status`` never import a step kind; a run, a resume, ``runbooks list
--check`` and the procedure commands do, through :func:`load_plugins`.
"""

from __future__ import annotations

import importlib
import os

_PLUGINS = ("kafkaops.steps",)


def load_plugins() -> None:
    """Import the modules that register step kinds.

    ``kafkaops.steps`` registers the built-in step kinds; ``KAFKAOPS_PLUGINS`` (comma-separated module
    names) adds more.
    """
    extra = [m.strip() for m in os.environ.get("KAFKAOPS_PLUGINS", "").split(",") if m.strip()]
    for name in (*_PLUGINS, *extra):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name) and name not in extra:
                continue
            raise
        register_all = getattr(module, "register_all", None)
        if callable(register_all):
            register_all()

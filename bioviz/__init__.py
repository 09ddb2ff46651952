"""bioviz: explore and train representations of biomedical names.

The library never imports streamlit; the app (``app.py``, ``app_pages/``, ``ui/``) sits on top.
In a notebook, the names of ``__all__`` (``bioviz.open_level``, ``bioviz.encode``, ...: :mod:`bioviz.api`,
and the point-cloud widget, :mod:`bioviz.notebook_widget`) are the public API (``docs/api.md``); they
load on first use, so ``import bioviz.errors`` (the command line, the app) stays light.
"""

__version__ = "0.1.0"

# name -> the module that defines it; read by __getattr__ on first use
PUBLIC_NAMES = {name: "api" for name in ("Level", "open_level", "encode", "neighbours", "code_terms", "projection",
                                     "similarity", "hierarchy", "evaluate", "paired_differences", "train", "wait")}
PUBLIC_NAMES.update({"PointCloudWidget": "notebook_widget", "point_cloud": "notebook_widget",
                "BiovizError": "errors"})

__all__ = sorted(PUBLIC_NAMES)


def __getattr__(name: str):
    """The public API's names, imported when first asked for (PEP 562)."""
    if name not in PUBLIC_NAMES:
        raise AttributeError(f"module 'bioviz' has no attribute {name!r}")
    from importlib import import_module  # light, but only a first use of the API needs it

    value = getattr(import_module(f"bioviz.{PUBLIC_NAMES[name]}"), name)
    globals()[name] = value  # later uses skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *PUBLIC_NAMES])

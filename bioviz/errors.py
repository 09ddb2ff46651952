"""Errors that carry a one-line, user-facing reason.

Every problem caused by input (a malformed file, an unknown id, a level deeper than the
tree, an unreachable model) is raised as a :class:`BiovizError`. The command line prints
its message and exits with code 2; the app shows it with ``st.error``. Anything else is a
bug and keeps its traceback.
"""


class BiovizError(ValueError):
    """Base class: bad input with a one-line explanation for the user."""


class SourceError(BiovizError):
    """An ontology source cannot be read (missing, malformed, unsupported)."""


class UnknownConceptError(BiovizError):
    """A concept id that the ontology does not contain."""


class LevelError(BiovizError):
    """A level view that cannot be built (depth too deep, no names, bad root)."""


class ModelError(BiovizError):
    """A model that cannot be found, loaded or used."""


class SplitError(BiovizError):
    """A split that cannot be drawn with the requested settings."""


class EvaluationError(BiovizError):
    """An evaluation that cannot run with the given settings."""

"""The devices a training or pretraining run may ask for, and what ``auto`` means on this machine.

Light on purpose (no torch at import): configs and the job queue read :data:`DEVICES`.
"""

from __future__ import annotations

DEVICES = ("auto", "cpu", "cuda")  # auto: the best device present when the run starts


def resolve_device(name: str) -> str:
    """The torch device a run asking for ``name`` trains on.

    ``auto`` -> ``cuda`` when present, else ``mps``, else ``cpu`` (the device bioviz encodes
    on); any other name (``cpu``, ``cuda``, ``cuda:1``) as given.

    Examples
    --------
    >>> resolve_device("cpu")
    'cpu'
    >>> resolve_device("auto") in ("cuda", "mps", "cpu")
    True
    """
    if name != "auto":
        return name
    from bioviz.models.encoders import device  # brings the hub client; configs import this module

    return device()

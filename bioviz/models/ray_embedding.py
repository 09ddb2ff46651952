"""Encoding names on a Ray cluster with Ray Data (``BIOVIZ_EXECUTOR=ray``, or ``embed --executor ray``).

:func:`bioviz.models.cached_encoding.encode_cached` asks :func:`wanted` whether the names it is
missing go to the cluster; if so :func:`encode` splits them into batches,
``ray.data.from_items(...).map_batches(BatchEncoder, concurrency=..., batch_size=...)``
encodes them on the workers (one model load per worker actor, one GPU each when the cluster
has GPUs) and the vectors come back to the caller, which writes them into the same vector
cache as local encoding. The names are sorted longest first, as the local path does, so the
batches pad alike and the vectors agree with the local ones to float32 rounding.

Only models a worker finds by name go to the cluster: ``minilm`` (bundled with bioviz's
requirements) and hub ids (from the worker's Hugging Face cache, or downloaded there). A
model directory or run on the app's machine, char-tfidf (fitted here) and head runs (a few
matrix products on their input model's cached vectors) are encoded where they are asked for.
The worker's model must be the same files as the app's: its fingerprint is checked.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import os
import time
from collections.abc import Callable

import numpy as np

from bioviz.errors import ModelError
from bioviz.ray_cluster import connect, executor_name, resources

logger = logging.getLogger(__name__)

MIN_NAMES_ENV = "BIOVIZ_RAY_MIN_NAMES"
WORKERS_ENV = "BIOVIZ_RAY_EMBED_WORKERS"
# Below this many missing names the cluster's start-up (seconds: actors load the model)
# costs more than it saves; an explicit --executor ray sends any number.
DEFAULT_MIN_NAMES = 2000
# Names per Ray Data batch, in forward passes: as the local path's progress chunks.
BATCHES_PER_BLOCK = 16
RAY_KINDS = ("bundled", "hub")

_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("bioviz_embedding_executor", default=None)


@contextlib.contextmanager
def executor(name: str):
    """Within the block, encode through ``name`` (``local`` or ``ray``) whatever the environment says.

    ``ray`` here is explicit: any number of missing names goes to the cluster.
    """
    token = _override.set(name)
    try:
        yield
    finally:
        _override.reset(token)


def wanted(label: str, kind: str | None, missing: int) -> bool:
    """True when ``missing`` names of a model should be encoded on the Ray cluster.

    Parameters
    ----------
    label : str
        The model's readable name (for the log).
    kind : str or None
        How a worker would find the model (:attr:`bioviz.models.encoders.Encoder.worker_kind`), or
        None for an encoder that is not a plain sentence-transformers model.
    missing : int
        Names not in the vector cache.
    """
    explicit = _override.get()
    if executor_name(explicit) != "ray" or not missing:
        return False
    if kind not in RAY_KINDS:
        logger.info("%s is encoded here, not on the Ray cluster (a worker could not load it by name)", label)
        return False
    return explicit == "ray" or missing >= int(os.environ.get(MIN_NAMES_ENV, DEFAULT_MIN_NAMES))


class BatchEncoder:
    """A Ray Data actor: loads the model once, then encodes each batch of names it is given.

    Parameters
    ----------
    load : callable
        ``load(spec) -> Encoder`` (:func:`bioviz.models.encoders.worker_encoder`, passed in, so
        that this module imports no encoder).
    spec : str
        The MODEL string.
    fingerprint : str
        The app's fingerprint of the model; a worker whose files differ refuses to encode.
    batch_size : int
        Names per forward pass.
    """

    def __init__(self, load: Callable, spec: str, fingerprint: str, batch_size: int):
        self.encoder = load(spec)
        if self.encoder.fingerprint != fingerprint:
            raise ModelError(f"model {spec} on the Ray worker is not the app's (fingerprint "
                             f"{self.encoder.fingerprint[:12]} vs {fingerprint[:12]}): install the same version")
        self.batch_size = batch_size

    def __call__(self, batch: dict) -> dict:
        """``{"row", "text"}`` -> ``{"row", "vector"}`` (unit float32 rows)."""
        vectors = self.encoder.encode(list(batch["text"]), batch_size=self.batch_size)
        return {"row": batch["row"], "vector": vectors}


def plan(cluster, workers: int | None = None) -> dict:
    """How many encoder actors, and what each asks for: a GPU each, or a share of the free CPUs.

    A CPU actor gets ``free CPUs // actors`` CPUs (Ray sets its torch threads to that), so one
    actor uses the machine as the local path does.
    """
    workers = workers or int(os.environ.get(WORKERS_ENV, 0) or 0) or None
    if cluster.gpus >= 1:
        count = workers or int(cluster.gpus)
        return {"actors": count, "num_gpus": 1, "num_cpus": 1}
    count = workers or 1
    return {"actors": count, "num_cpus": max(1, int(max(cluster.free_cpus, 1) // count))}


def encode(encoder, load: Callable, texts: list[str], *, batch_size: int = 64,
           progress: Callable[[int, int], None] | None = None, workers: int | None = None) -> np.ndarray:
    """Encode ``texts`` with ``encoder``'s model on the Ray cluster; rows in the order of ``texts``.

    Parameters
    ----------
    encoder : SentenceTransformerEncoder
        The app's encoder (its spec and fingerprint travel; its weights do not).
    load : callable
        What a worker loads the encoder with (:func:`bioviz.models.encoders.worker_encoder`).
    texts : list of str
    batch_size : int
        Names per forward pass.
    progress : callable, optional
        ``progress(done, total)`` as batches come back.
    workers : int, optional
        Encoder actors (default ``BIOVIZ_RAY_EMBED_WORKERS``, else one per GPU, else one).

    Raises
    ------
    ClusterError
        If the cluster cannot be reached.
    ModelError
        If a worker cannot load the model or has other files for it.
    """
    ray = connect()
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the caller draws the one progress bar
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # its notes (progress bars off, ...) are not the user's
    started = time.perf_counter()
    total = len(texts)
    order = np.argsort([-len(t) for t in texts], kind="stable")  # longest first, as Encoder.encode
    block = batch_size * BATCHES_PER_BLOCK
    items = [{"row": int(i), "text": texts[i]} for i in order]
    resources_asked = plan(resources(fresh=True), workers)
    per_actor = {key: value for key, value in resources_asked.items() if key != "actors"}
    dataset = ray.data.from_items(items, override_num_blocks=max(1, math.ceil(total / block))).map_batches(
        BatchEncoder, fn_constructor_kwargs={"load": load, "spec": encoder.spec, "fingerprint": encoder.fingerprint,
                                             "batch_size": batch_size},
        compute=ray.data.ActorPoolStrategy(size=resources_asked["actors"]), batch_size=block, batch_format="numpy",
        **per_actor)
    out: np.ndarray | None = None
    done = 0
    try:
        for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
            vectors = np.asarray(batch["vector"], dtype=np.float32)
            if out is None:
                out = np.empty((total, vectors.shape[1]), dtype=np.float32)
            out[batch["row"]] = vectors
            done += len(vectors)
            if progress is not None:
                progress(done, total)
    except ray.exceptions.RayError as error:
        cause = error
        while getattr(cause, "cause", None) is not None and cause is not cause.cause:
            cause = cause.cause
        if isinstance(cause, ModelError):
            raise ModelError(str(cause)) from None
        first = next((line for line in str(error).splitlines() if line.strip()), type(error).__name__)
        raise ModelError(f"encoding with {encoder.label} on the Ray cluster failed: {first[:300]}") from None
    if done != total or out is None:
        raise ModelError(f"the Ray cluster returned {done} of {total} vectors for {encoder.label}")
    logger.info("%s: %d names encoded on the Ray cluster (%s) in %.1fs", encoder.label, total, resources_asked,
                time.perf_counter() - started)
    return out

"""Every name of the sources' ontologies that a run may train on: the pool mined negatives and
relatedness pairs are drawn from.

A name is in the pool unless the run's leakage rule forbids it (``allowed``: the held-out names
of ``--exclude-level``/``--exclude-names``, the validation texts and anchor concepts): a mined
negative or a relatedness pair is training data too. Names are kept once per normalised text,
with every concept of every source that has that name, so a name shared by two concepts is
never taken as a negative of either.
"""

from __future__ import annotations

from dataclasses import dataclass

from bioviz.ontology.model import Ontology, normalise_name


@dataclass(frozen=True)
class PoolName:
    """One name of the pool.

    Attributes
    ----------
    text : str
        The name as the ontology spells it (the first spelling met).
    source : str
        The SOURCE string of its first concept.
    concepts : frozenset of (str, str)
        ``(source, concept id)`` of every concept with this (normalised) name.
    """

    text: str
    source: str
    concepts: frozenset


def name_pool(ontologies: dict[str, Ontology], allowed=None) -> list[PoolName]:
    """The names of every concept of ``ontologies`` (``source -> Ontology``), in a stable order.

    Parameters
    ----------
    ontologies : dict
    allowed : callable, optional
        ``allowed(text, concept_id, source)``: False keeps that name out
        (:func:`trainer.pretrain.dataset.negatives_allowed`).

    Returns
    -------
    list of PoolName
    """
    first: dict[str, tuple[str, str]] = {}
    concepts: dict[str, set] = {}
    for source, ontology in ontologies.items():
        for concept in ontology.concepts.values():
            for name in concept.names:
                key = normalise_name(name)
                # Every concept a name belongs to is recorded even when this one is forbidden: the
                # exclusion of a shared name must not depend on which concept forbids it.
                concepts.setdefault(key, set()).add((source, concept.id))
                if allowed is not None and not allowed(name, concept.id, source):
                    first[key] = ("", "")  # "" marks a forbidden name, whichever concept also has it
                    continue
                first.setdefault(key, (name, source))
    return [PoolName(text, source, frozenset(concepts[key])) for key, (text, source) in first.items() if text]


def base_vectors(texts: list[str], base: str):
    """Unit vectors of ``texts`` by the base model, served from bioviz's vector cache.

    The cache (under ``BIOVIZ_HOME``, keyed by the model's fingerprint) makes a second run,
    or a resumed one, on the same sources and base skip the encoding of every name.

    Returns
    -------
    numpy.ndarray
        ``(len(texts), dim)`` float32, L2-normalised.
    """
    from bioviz.models.registry import embed  # imported here: it loads the encoders (torch)

    return embed(list(texts), base).vectors

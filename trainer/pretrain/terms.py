"""``pretrain-terms.json``: which texts a pretraining run trained on, as hashes.

The Evaluation page marks a relatedness result whose benchmark terms were texts of a
model's pretraining pairs (:mod:`bioviz.evaluation.overlap`); this file lets it tell
without republishing the ontology's texts: one :func:`bioviz.evaluation.overlap.term_hash`
per distinct normalised text (both texts of every training pair and the names each was
built from).
"""

from __future__ import annotations

import json
from pathlib import Path

from bioviz.evaluation.overlap import TERMS_FILE, term_hash
from bioviz.paths import write_text_atomic


def pair_terms(pairs) -> list[str]:
    """Sorted :func:`term_hash` of every text of ``pairs`` (anchor, positive, the names they were built from)."""
    return sorted({term_hash(text) for p in pairs for text in (p.anchor, p.positive, *p.names)})


def write_terms(pairs, out: str | Path) -> Path:
    """Write ``OUT/pretrain-terms.json`` for the training ``pairs`` (what :func:`pair_terms` hashes).

    Parameters
    ----------
    pairs : list of Pair
        The pairs the run trained on.
    out : str or Path
        The pretrained model directory.
    """
    hashes = pair_terms(pairs)
    path = Path(out) / TERMS_FILE
    write_text_atomic(path, json.dumps({"hash": "blake2b-64 of bioviz.ontology.model.normalise_name(text)",
                                        "texts": len(hashes), "hashes": hashes}))
    return path


"""Every page that takes models on a vectors file with 10 % of the level's names missing: it says its coverage.

Both models are vectors files (no transformer is loaded): ``full`` holds every name of the tiny
table, ``partial`` lacks 10 % of the level's names. The vectors are hashed character trigrams,
so neighbours and layouts mean something.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from bioviz.models.vectors_export import write_vectors
from bioviz.models.vectors_file import VectorsCard
from bioviz.ontology import LevelSpec

SOURCE = "views_table.tsv"
PAGES = ("app_pages/2_Projection.py", "app_pages/3_Similarity_matrix.py", "app_pages/4_Neighbours.py",
         "app_pages/5_Hierarchy.py", "app_pages/6_Evaluation.py", "app_pages/7_Code_terms.py")


def trigram_vectors(names) -> np.ndarray:
    """Hashed character trigrams (64 dimensions): deterministic, and similar names are near."""
    out = np.zeros((len(names), 64), np.float32)
    for row, name in enumerate(names):
        padded = f"  {name.lower()} "
        for i in range(len(padded) - 2):
            out[row, zlib.crc32(padded[i:i + 3].encode()) % 64] += 1
    return out


@pytest.fixture(scope="module")
def vector_files(tmp_path_factory):
    from tests.pages.routed_app import DATA

    folder = tmp_path_factory.mktemp("vectors")  # inside the shared test folders (BIOVIZ_DATA_DIRS)
    spec = LevelSpec(str(DATA / SOURCE), depth=1)
    ontology = spec.ontology()
    level = spec.load(ontology).names
    everything = list(dict.fromkeys([*level, *(n for c in ontology.concepts.values() for n in c.names)]))
    dropped = set(level[::10])  # every tenth name of the level
    partial = [n for n in everything if n not in dropped]
    write_vectors(everything, trigram_vectors(everything), folder / "full.parquet", VectorsCard("full"))
    write_vectors(partial, trigram_vectors(partial), folder / "partial.npz", VectorsCard("partial"))
    return folder, len(level), len(dropped)


@pytest.mark.parametrize("page", PAGES)
def test_each_page_says_the_coverage_of_a_vectors_file(page, vector_files, app_home, data_dir, open_app):
    folder, total, missing = vector_files
    query = {"source": str(data_dir / SOURCE), "depth": "1", "model_a": str(folder / "full.parquet"),
             "model_b": str(folder / "partial.npz"), "eval_boot": "20"}
    if "Similarity" in page:  # a class's names (the shipped example terms are no names of this table)
        query.update({"from": "class", "cls": "C1"})
    if "Projection" in page:  # PCA: the layout is not what is tested (UMAP's first compile costs a minute)
        query["method"] = "pca"
    at = open_app(page, query, timeout=240).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    said = [i.value for i in at.info]
    line = f"Vectors file partial: {total - missing:,} of {total:,} names; {missing:,} without a vector are left out."
    assert line in said, said
    assert "Vectors file full: all" in " ".join(said)


def test_neighbours_says_which_file_name_answered_a_query_the_file_lacks(vector_files, app_home, data_dir, open_app):
    folder, _, _ = vector_files
    at = open_app("app_pages/4_Neighbours.py", {
        "source": str(data_dir / SOURCE), "depth": "1", "model_a": str(folder / "full.parquet"),
        "model_b": str(folder / "partial.npz"), "query": "pneumoni", "k": "3"}, timeout=240).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    warnings = [w.value for w in at.warning]
    assert any("is not in full: answered from its nearest name" in w and "(lexical ranking)" in w
               for w in warnings), warnings

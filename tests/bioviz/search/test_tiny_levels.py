"""Coding and neighbours under every ranking over tiny and hostile levels never crash (issue 32, finding 3).

The default (hybrid) ranking fits char-tfidf on the level's names; on a five-concept level
that left one n-gram (or none) after ``min_df`` and ``TruncatedSVD`` raised "Found array with
1 feature(s)", a traceback from ``bioviz code``. Now a fit that has too few n-grams keeps what
there is, and a level with none is ranked dense with a note that says so.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bioviz.errors import BiovizError
from bioviz.ontology.level_spec import LevelSpec
from bioviz.search.hybrid import SparseNames, Ranking, level_tfidf
from bioviz.search.index import NeighbourIndex
from bioviz.search.neighbours import find_query, rank_neighbours
from bioviz.search.term_coding import CodingModel, code_terms, resolve_terms
from bioviz.space import Space

RANKINGS = (Ranking("dense"), Ranking("hybrid", 0.0), Ranking("hybrid", 1.0), Ranking("hybrid", 10.0))
# Short names, one character, punctuation, digits, accents, a right-to-left letter: what a user's table may hold.
NAME = st.text(alphabet=st.sampled_from("ab xyz-_.,;:()'/1é中\u05d0"), min_size=1, max_size=6)


def vectors(texts) -> np.ndarray:
    """Hashed character trigrams: a tiny deterministic encoder (never all zero: the padding counts)."""
    out = np.zeros((len(texts), 32), np.float32)
    for row, text in enumerate(texts):
        padded = f"  {text.lower()} "
        for i in range(len(padded) - 2):
            out[row, zlib.crc32(padded[i:i + 3].encode()) % 32] += 1
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def table(path, children: list[list[str]]):
    lines = ["concept_id\tname\tparent_id\tdefinition\tsynonyms", "R\troot\t\t\t"]
    for c, names in enumerate(children):
        lines.append(f"C{c}\tclass {c}\tR\t\t")
        lines += [f"C{c}.{n}\t{name}\tC{c}\t\t" for n, name in enumerate(names)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def check_level(path, terms: list[str]) -> None:
    """Every ranking codes every term and ranks neighbours, or refuses in one line (a BiovizError)."""
    try:
        view = LevelSpec(str(path), depth=1).load()
    except BiovizError:
        return  # a level the loader refuses is its own one-line message
    index = NeighbourIndex.from_view(Space(tuple(view.names), vectors(view.names), "tri"), view)
    infos = resolve_terms(terms, view)
    texts = [info.text for info in infos]
    for ranking in RANKINGS:
        sparse = SparseNames.build(view.names, index.space.names) if ranking.hybrid else None
        coding = [CodingModel("tri", index, vectors(texts), sparse, None)]
        frame = code_terms(terms, infos, coding, view, k=3, ranking=ranking)
        assert len(frame) == len(terms)
        query = find_query(terms[0], view)
        rows = rank_neighbours(index, vectors([query.text])[0], query, k=3, ranking=ranking, sparse=sparse)
        assert len(rows) <= 3 and all(np.isfinite(row["score"]) for row in rows)


@pytest.fixture(autouse=True)
def parse_in_process(monkeypatch):
    """Tables parsed here, not in a budgeted child (a second each): the budgets have their own tests."""
    from bioviz.ontology import sources

    monkeypatch.setattr(sources, "run_within_budget",
                        lambda function, args, budget, label, progress=None: function(*args, progress=progress))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(children=st.lists(st.lists(NAME, min_size=1, max_size=3), min_size=2, max_size=3),
       terms=st.lists(NAME, min_size=1, max_size=3))
def test_tiny_and_hostile_levels_code_and_rank_under_every_ranking(tmp_home, tmp_path, children, terms):
    check_level(table(tmp_path / "level.tsv", children), terms)


def test_the_probes_five_concept_level_codes_under_the_default_ranking(tmp_home, tmp_path):
    # One n-gram shared by two names (" x") once min_df=2 prunes the rest: TruncatedSVD's crash.
    check_level(table(tmp_path / "small.tsv", [["xa", "xb"], ["yc", "zd", "we"]]), ["xa", "gout"])
    assert len(level_tfidf(["xa", "xb", "yc", "zd", "we"]).vocabulary) >= 1


def test_a_level_without_ngrams_is_ranked_dense_and_says_so(tmp_home):
    sparse = SparseNames.build(["", " "], ["", " "])
    assert sparse.model is None and "dense" in sparse.note
    assert not sparse.scores(["anything"]).any()

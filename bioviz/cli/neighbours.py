"""``python -m bioviz neighbours "text" --source SOURCE --model MODEL -k 10 [--ranking dense|hybrid] [--no-expand] [--partial]``.

The nearest names of a query among the names of a concept level, with their concept,
class, cosine score, and whether they share the query's class or concept. A query that is
an ontology synonym is also ranked as its concept's preferred name (``expansion`` says so:
``heart attack → Myocardial infarction (HPO synonym)``; :mod:`bioviz.search.lexicon`).
With ``--partial``, a level encoded for the first time gets a marked partial answer first
(:mod:`bioviz.cli.partial`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bioviz.cli.common import (add_json, add_level_options, add_ranking_options, covered_level, level_spec_from_args,
                               model_argument, rankings_from_args)
from bioviz.cli.embed_backend import add_backend_option
from bioviz.cli.partial import add_partial_option, encoding_started, plain, print_now, wait_for
from bioviz.cli.progress import progress_bar
from bioviz.errors import BiovizError
from bioviz.models.encoding_session import EncodingSession
from bioviz.models.model_spec import DEFAULT_MODEL
from bioviz.ontology import DEFAULT_SPLIT
from bioviz.search.index import NeighbourIndex
from bioviz.search.lexicon import DEFAULT_EXPANSION, expand_queries, expanded_forms, expansion_of, load_lexicon
from bioviz.search.neighbours import (AMONG, candidate_index, level_space, rank_neighbours, resolve_query,
                                      sparse_names)
from bioviz.search.vectors_query import query_answer
from bioviz.search.vocabulary_vectors import with_similar_terms

DEPTH = 200  # names the partial answer's name search ranks (bioviz.search.progressive.DEPTH)


def register(subparsers) -> None:
    """Add the ``neighbours`` sub-command."""
    parser = subparsers.add_parser("neighbours", help="nearest names of a query text in a concept level")
    parser.add_argument("text", help="the query: any text, an ontology name, or a concept id (R39.11, HP:0001250)")
    parser.add_argument("--source", default="icd10", help="icd10, icd10cm, hpo, or a path")
    parser.add_argument("--model", default=DEFAULT_MODEL, type=model_argument,
                        help="med-minilm (default), minilm, char-tfidf, a sentence-transformers directory or hub id, "
                             "or a run directory")
    parser.add_argument("--compare", default=None, metavar="MODEL", type=model_argument,
                        help="a second model: each neighbour also gets its rank under it")
    parser.add_argument("-k", type=int, default=10, help="number of neighbours")
    parser.add_argument("--among", choices=AMONG, default="names",
                        help="rank every name of the level, the few-shot split's training names "
                             f"({DEFAULT_SPLIT.shots} shots, seed {DEFAULT_SPLIT.seed}; fewshot paper Table 4), or the class concepts' own names (hypernym ranking)")
    parser.add_argument("--restrict-class", default=None, metavar="CLASS_ID",
                        help="rank only names of this class (a concept id at the level)")
    add_level_options(parser)
    add_ranking_options(parser)
    add_expand_option(parser)
    add_partial_option(parser)
    add_backend_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    add_json(parser)
    parser.set_defaults(handler=run)


def add_expand_option(parser) -> None:
    """``--expand/--no-expand`` and ``--synonyms-file``: the clinical vocabulary and synonym expansion (shared with ``code``)."""
    parser.add_argument("--expand", action=argparse.BooleanOptionalAction, default=True,
                        help="read a query with the clinical vocabulary (abbreviations, lay terms, ICD-10-CM inclusion "
                             "terms, HPO lay synonyms: the concept they name first) and also rank an ontology synonym "
                             f"as its concept's preferred name (synonym scopes {', '.join(DEFAULT_EXPANSION.scopes)}; "
                             "default on)")
    parser.add_argument("--synonyms-file", default=None, metavar="TSV",
                        help="your own synonyms for this source: one 'term<TAB>concept_id' per line, added to the "
                             "clinical vocabulary")


def vocabulary_for_args(args, ontology, quiet: bool):
    """The clinical vocabulary of ``ontology`` (with ``--synonyms-file``) when ``--expand``, else None."""
    if not args.expand:
        if args.synonyms_file:
            raise BiovizError("--synonyms-file adds to the clinical vocabulary, which --no-expand turns off: drop one")
        return None
    from bioviz.search.vocabulary import read_user_synonyms, vocabulary_for  # only an expanded query needs them

    user = None
    if args.synonyms_file:
        path = Path(args.synonyms_file)
        if not path.is_file():
            raise BiovizError(f"no synonyms file at {args.synonyms_file}")
        user = read_user_synonyms(path.read_bytes(), ontology, label=path.name)
    with progress_bar("reading the clinical vocabulary (once)", unit="step", disable=quiet) as progress:
        return vocabulary_for(ontology, user, progress=progress)


def reading_of(expanded) -> dict | None:
    """What the clinical vocabulary made of a query, for the result: rule, note and senses; None if nothing."""
    reading = expanded.reading
    if reading is None or not reading.senses:
        return None
    return {"rule": reading.rule, "note": reading.note, "rewrite": reading.rewrite or None,
            "senses": [{"long_form": s.long_form, "concepts": list(s.concept_ids), "names": list(s.concept_names),
                        "from": s.provenance} for s in reading.senses]}


def lexicon_for(args, quiet: bool):
    """The bundled lexicon when ``--expand`` (a progress bar on its first build), else None."""
    if not args.expand:
        return None
    with progress_bar("reading the ontologies' synonyms (once)", unit="step", disable=quiet) as progress:
        return load_lexicon(progress=progress)


def answer_while_encoding(args, view, query) -> list:
    """``--partial``: print the first model's partial neighbours now; the encodings still running (to wait for).

    Nothing is printed when the level's vectors are stored already: the final answer comes at once.
    """
    models = [args.model] + ([args.compare] if args.compare else [])
    jobs = [job for job in (encoding_started(model, view) for model in models) if job is not None]
    if not jobs:
        return []
    from bioviz.search.name_search import NameSearch  # only a partial answer needs it
    from bioviz.search.progressive import LexicalRanking, partial_neighbours  # as above

    lexical = LexicalRanking.by_name_search(NameSearch.from_view(view), view.names, query.text, DEPTH)
    vector = query_answer(query.text, args.model).vector  # loads the model while the thread encodes
    session = EncodingSession.of(args.model, view.names)
    answer = partial_neighbours(view, session.partial(), query, query_vector=vector, lexical=lexical, k=args.k,
                                restrict_class=args.restrict_class)
    print_now({"partial": True, "marker": answer.marker, "query": args.text, "ranked_text": query.text,
               "model": session.label, "names_encoded": answer.names_encoded, "names": answer.total,
               "lexical": answer.lexical,
               "neighbours": [plain(row) for row in answer.rows]}, args.json)
    return jobs


def _first_answer_rule(rows: list[dict], expanded) -> str:
    """Which rule placed the first row: the vocabulary's (``abbreviation``, ``vocabulary`` ...) or the model's ranking."""
    if rows and rows[0].get("placed"):
        return expanded.rule
    if rows and expanded.entries:
        return "dense, with synonym expansion"
    return "dense"


def run(args) -> dict:
    """Rank the level view's names by cosine similarity to the query."""
    if args.k < 1:
        raise BiovizError(f"-k must be at least 1 (got {args.k})")
    if not args.text.strip():
        raise BiovizError("empty query text")
    started = time.perf_counter()
    ranking = rankings_from_args(args)[0]
    level = level_spec_from_args(args)
    ontology = level.ontology()
    models = [args.model] + ([args.compare] if args.compare else [])
    view, coverage = covered_level(args, models, ontology)
    query = resolve_query(args.text, view, ontology)  # a concept id ranks the concept's name
    # --partial: the answer from what is known now, before the synonym lexicon (seconds on a first run) is read
    jobs = answer_while_encoding(args, view, query) if args.partial and args.among != "hypernyms" else []
    expansion = expansion_of(args.expand)
    vocabulary = vocabulary_for_args(args, ontology, args.quiet)
    expanded = expand_queries([query], expansion, lexicon_for(args, args.quiet), vocabulary)
    for job in jobs:
        wait_for(job, args.quiet)
    indexes, vectors, infos, notes = [], [], [], []
    for model in models:
        with progress_bar(f"encoding {len(view.names)} names ({model.spec})", disable=args.quiet) as progress:
            space, info = level_space(view, model, progress=progress)
        indexes.append(candidate_index(view, model, args.among, base=NeighbourIndex.from_view(space, view)))
        answer = query_answer(query.text, model)  # a vectors file lacking the query: its nearest name's, noted
        vectors.append(answer.vector)
        notes.append(answer.note)
        infos.append(info)
    if vocabulary is not None and args.among != "hypernyms":  # a phrasing near a listed term (first model's vectors)
        with progress_bar("encoding the clinical vocabulary's terms (once)", disable=args.quiet) as progress:
            expanded = with_similar_terms(expanded, [query], vectors[0].reshape(1, -1), indexes[0].vectors,
                                          vocabulary=vocabulary, model=args.model, progress=progress)
    forms = [expanded_forms(expanded, model) for model in models]
    other = (indexes[1], vectors[1]) if args.compare else None
    with progress_bar(f"char-tfidf of {len(view.names):,} names (first query)", unit="name",
                      disable=args.quiet or not ranking.hybrid) as progress:
        sparse = sparse_names(view, indexes[0], ranking, progress=progress)
    rows = rank_neighbours(indexes[0], vectors[0], query, k=args.k, restrict_class=args.restrict_class, other=other,
                           ranking=ranking, sparse=sparse, forms=forms[0], other_forms=forms[-1] if other else None,
                           placed=expanded[0].placed if args.among != "hypernyms" else ())
    for row in rows:
        row.pop("row", None)
    result = {
        "query": args.text,
        "ranked_text": query.text,
        "resolved_by": query.resolved_by,
        "model": indexes[0].space.model_id,
        "source": view.source,
        "level": view.title,
        "k": args.k,
        "ranking": ranking.label,
        "first_answer_from": _first_answer_rule(rows, expanded[0]),
        "expansion": expanded[0].note or None,
        "reading": reading_of(expanded[0]),
        "expanded": expansion.label,
        "query_in_ontology": query.in_ontology,
        "query_class": query.class_id,
        "query_class_label": query.class_label,
        "query_concepts": list(query.concept_ids),
        "names": len(view.names),
        "cache_hits": infos[0]["cache_hits"],
        "among": args.among,
        "candidates": len(indexes[0]),
        "index": indexes[0].kind,
        "neighbours": rows,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if coverage:
        result["coverage"] = coverage
    if any(notes):
        result["query_stand_in"] = [n for n in dict.fromkeys(notes) if n]
    if args.compare:
        result["compared_model"] = indexes[1].space.model_id
    return result

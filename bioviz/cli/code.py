"""``python -m bioviz code TERMS_FILE --source SOURCE --depth 1 --model MODEL [--compare MODEL] -k 5 [--ranking dense|hybrid] [--no-expand] [--partial] --out coded.csv``.

Codes a list of free-text terms, one row per term: each model's first concept of a level (code,
name, class, score, margin over the second concept, the other codes of its top k, its parents
within the level: ``parent``, ``parent name``), whether two models agree, and a low-confidence
flag (:mod:`bioviz.search.term_coding`, :mod:`bioviz.search.coding_confidence`,
:mod:`bioviz.search.granularity`). TERMS_FILE is one term per line, or a CSV/TSV file
whose ``--column`` holds the terms. With ``--partial``, a level encoded for the first time gets a
marked partial coding first (:mod:`bioviz.cli.partial`).
"""

from __future__ import annotations

import time
from pathlib import Path

from bioviz.cli.common import (add_json, add_level_options, add_ranking_options, covered_level, level_spec_from_args,
                               model_argument, rankings_from_args)
from bioviz.cli.embed_backend import add_backend_option
from bioviz.cli.neighbours import add_expand_option, lexicon_for, vocabulary_for_args
from bioviz.cli.partial import add_partial_option, encoding_started, plain, print_now, wait_for
from bioviz.cli.progress import progress_bar
from bioviz.csv_export import frame_to_csv
from bioviz.errors import BiovizError
from bioviz.models.encoding_session import EncodingSession
from bioviz.models.model_spec import DEFAULT_MODEL
from bioviz.output_paths import check_output_file, reporting_as
from bioviz.paths import write_text_atomic
from bioviz.search.granularity import with_parents
from bioviz.search.lexicon import expansion_of
from bioviz.search.neighbours import candidate_index
from bioviz.search.term_coding import (MAX_K, MAX_TABLE_BYTES, agreement, code_term_list, export_frame,
                                       read_term_table, terms_from_column, terms_from_text)
from bioviz.text_clean import clean_texts
from bioviz.uploads import read_user_file


def register(subparsers) -> None:
    """Add the ``code`` sub-command."""
    parser = subparsers.add_parser("code", help="each term of a list coded to a concept of a level, under one or two models")
    parser.add_argument("terms_file", metavar="TERMS_FILE",
                        help="one term per line, or a CSV/TSV file (give the terms' --column)")
    parser.add_argument("--column", default=None, help="the column of a CSV/TSV TERMS_FILE that holds the terms")
    parser.add_argument("--source", default="icd10", help="icd10, icd10cm, hpo, or a path")
    parser.add_argument("--model", default=DEFAULT_MODEL, type=model_argument,
                        help="med-minilm (default), minilm, char-tfidf, a sentence-transformers directory or hub id, "
                             "or a run directory")
    # --compare, as neighbours names its second model; --model-b, its first name here, still works
    parser.add_argument("--compare", "--model-b", dest="model_b", default=None, metavar="MODEL", type=model_argument,
                        help="a second model: both models' concepts, and whether they agree (alias --model-b)")
    parser.add_argument("-k", type=int, default=5, help=f"concepts per term and model (1 to {MAX_K})")
    parser.add_argument("--out", default=None, help="write the coding as CSV here (else the rows are printed)")
    add_level_options(parser)
    add_ranking_options(parser)
    add_expand_option(parser)
    add_partial_option(parser)
    add_backend_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    add_json(parser)
    parser.set_defaults(handler=run)


def read_terms(path: str, column: str | None) -> tuple[list[str], int]:
    """The terms of TERMS_FILE (a column of a table, or one per line, bounded like the app's uploads),
    and how many were dropped for holding only invisible characters."""
    file = Path(path)
    data = read_user_file(file, MAX_TABLE_BYTES, "terms file")
    if column is not None:
        table = read_term_table(data, file.name)
        return terms_from_column(table, column), clean_texts(table[column].astype(str)).dropped
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise BiovizError(f"{file.name} is not UTF-8 text (byte {error.start:,})") from None
    return terms_from_text(text), clean_texts(text.splitlines()).dropped


def code_while_encoding(args, terms: list[str], view, ontology) -> None:
    """``--partial``: print the first model's partial coding now, then wait for every model's encoding.

    Nothing is printed when the level's vectors are stored already: the final coding comes at once.
    """
    models = [args.model] + ([args.model_b] if args.model_b else [])
    jobs = [job for job in (encoding_started(model, view) for model in models) if job is not None]
    if not jobs:
        return
    from bioviz.search.name_search import NameSearch  # only a partial coding needs it
    from bioviz.search.progressive import LexicalRanking, partial_coding  # as above
    from bioviz.search.term_coding import encode_terms, resolve_terms  # as above

    infos = resolve_terms(terms, view, ontology)
    search = NameSearch.from_view(view)
    lexicals = [LexicalRanking.by_name_search(search, view.names, info.text) for info in infos]
    vectors = encode_terms([info.text for info in infos], args.model)  # loads the model while the thread encodes
    session = EncodingSession.of(args.model, view.names)
    coding = partial_coding(terms, infos, view, session.partial(), term_vectors=vectors, lexicals=lexicals,
                            k=args.k, ontology=ontology)
    print_now({"partial": True, "marker": coding.marker, "model": session.label,
               "names_encoded": coding.names_encoded, "names": coding.total, "lexical": coding.lexical,
               "codes": [plain(row) for row in coding.rows]}, args.json)
    for job in jobs:
        wait_for(job, args.quiet)


def run(args) -> dict:
    """Code the terms; write the CSV or return its rows."""
    if not 1 <= args.k <= MAX_K:
        raise BiovizError(f"-k must be between 1 and {MAX_K} (got {args.k})")
    if args.out:
        check_output_file(args.out)  # before every term is coded, not after
    started = time.perf_counter()
    ranking = rankings_from_args(args)[0]
    terms, invisible = read_terms(args.terms_file, args.column)
    level = level_spec_from_args(args)
    ontology = level.ontology()
    models = [args.model] + ([args.model_b] if args.model_b else [])
    view, coverage = covered_level(args, models, ontology)
    if args.partial:
        code_while_encoding(args, terms, view, ontology)
    indexes = []
    for model in models:
        with progress_bar(f"encoding {len(view.names)} names ({model.spec})", disable=args.quiet) as progress:
            indexes.append(candidate_index(view, model, progress=progress))
    lexicon_for(args, args.quiet)  # a first build's progress bar before the coding's
    vocabulary = vocabulary_for_args(args, ontology, args.quiet)
    with progress_bar(f"coding {len(terms)} terms", unit="term", disable=args.quiet) as progress:
        frame = code_term_list(terms, view, ontology, list(zip(models, indexes)), k=args.k, progress=progress,
                               ranking=ranking, expansion=expansion_of(args.expand), vocabulary=vocabulary)
    # the granularity a script user checks: one level up from each first concept (the page moves it)
    export = export_frame(with_parents(frame, ontology, root=view.root))
    result = {"terms": len(terms), "dropped_invisible": invisible, "rows": len(frame), "models": frame.attrs["models"],
              "source": view.source, "level": view.title, "k": args.k, "ranking": ranking.label,
              "expanded": expansion_of(args.expand).label, "expansions": frame.attrs["expansions"],
              **({"ranking_note": frame.attrs["ranking_note"]} if frame.attrs.get("ranking_note") else {}),
              **{key: value for key, value in agreement(frame).items()
                                                  if key != "terms"}}
    if args.out:
        with reporting_as(args.out):
            write_text_atomic(args.out, frame_to_csv(export))
        result["out"] = args.out
    else:
        result["codes"] = export.astype(object).where(export.notna(), None).to_dict("records")
    result["seconds"] = round(time.perf_counter() - started, 3)
    if coverage:
        result["coverage"] = coverage
    return result

"""``python -m bioviz eval``: the papers' evaluations of one or more models, side by side.

    python -m bioviz eval --model MODEL --benchmark mayosrs|umnsrs-sim|umnsrs-rel|all|PATH --json
    python -m bioviz eval --model MODEL --source SOURCE [--root ID] --depth K \\
        --task ranking|hypernym|synonym|leaf2parent|hierarchy-auc|all --json
    python -m bioviz eval --model MODEL --task normalisation --gold FILE [--ranking dense|hybrid] \
        [--source hpo --root HP:0000118 --synonyms] --json

Several ``--model`` options are evaluated on the same split. For a trained run the split
defaults to the one it was trained with (from its ``run.json``), so its test names are
truly held out. One JSON object: the models, the view and split, every result with its
figures, intervals and sample sizes, and any warnings. ``--baseline MODEL`` and ``--latex
FILE`` (:mod:`bioviz.cli.eval_compare`) add differences with paired intervals and tables
that fit a page.
"""

from __future__ import annotations

import sys
import time

from bioviz.cli.common import (add_json, add_level_options, add_ranking_options, covered_level, level_spec_from_args,
                               model_argument, rankings_from_args)
from bioviz.cli.embed_backend import add_backend_option
from bioviz.cli.eval_compare import add_compare_options, baseline_among, comparisons
from bioviz.errors import EvaluationError
from bioviz.evaluation import normalisation, run as evaluation, splits
from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.run import EvalSettings
from bioviz.evaluation.tables import results_table
from bioviz.models.model_spec import ModelSpec
from bioviz.models.runs import read_run
from bioviz.ontology import DEFAULT_SPLIT, SplitSpec


def register(subparsers) -> None:
    """Add the ``eval`` sub-command."""
    parser = subparsers.add_parser(
        "eval", help="score models on relatedness benchmarks and the papers' ontology protocols",
        description="Score one or more models; several --model options are compared on the same split.")
    parser.add_argument("--model", action="append", required=True, type=model_argument,
                        help="minilm, char-tfidf, a sentence-transformers directory or hub id, or a run "
                             "directory (repeat to compare)")
    parser.add_argument("--benchmark", action="append", default=[],
                        help="mayosrs, umnsrs-sim, umnsrs-rel, all, or a .tsv/.csv file of term1, term2, score")
    parser.add_argument("--source", help="icd10, icd10cm, hpo, or a path: run the ontology protocols")
    add_level_options(parser)
    parser.add_argument("--task", action="append", default=[],
                        help=f"{', '.join(evaluation.TASKS)} or all (repeatable; default all with --source), or "
                             f"{normalisation.TASK} (with --gold)")
    parser.add_argument("--gold", default=None, metavar="FILE",
                        help="mention normalisation: a TSV/CSV gold file with 'mention' and a concept id column "
                             "(assets/gold/lay_phenotypes_example.tsv; level by default hpo synonym sets under HP:0000118)")
    add_ranking_options(parser, repeat=True)
    parser.add_argument("--cross-level", default=None, metavar="DEPTHS",
                        help="also the ranking mAP on each of these levels, e.g. 1,2,3,4 (Table 4)")
    split = parser.add_argument_group(f"split (default: a run's own split, else {DEFAULT_SPLIT.shots} shots, "
                                      f"seed {DEFAULT_SPLIT.seed})")
    split.add_argument("--shots", type=int, default=None, help="training names per class")
    split.add_argument("--seed", type=int, default=None, help="split seed")
    split.add_argument("--test-per-class", type=int, default=None, help="held-out test names per class")
    split.add_argument("--zero-shot", type=float, default=None,
                       help="classes held out entirely (count, or fraction when < 1)")
    sample = parser.add_argument_group("samples")
    sample.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for the 95%% intervals")
    sample.add_argument("--leaf-queries", type=int, default=2000, help="leaf-to-parent: leaf concepts sampled")
    sample.add_argument("--pairs", type=int, default=1000, help="hierarchy AUC: pairs per distance")
    sample.add_argument("--sample-seed", type=int, default=0, help="seed of the samples and the bootstrap")
    parser.add_argument("--no-cache", action="store_true", help="recompute, neither reading nor writing cached results")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_compare_options(parser)
    add_backend_option(parser)
    add_json(parser)
    parser.set_defaults(handler=run)


def _progress(quiet: bool):
    if quiet:
        return None
    return lambda message: sys.stderr.write(f"evaluating {message}\n")


def split_from_args(args, models: list[ModelSpec]) -> tuple[SplitSpec, list[str]]:
    """The split from the options, else a run's own split, else the defaults (see
    bioviz.evaluation.splits.choose_split)."""
    return splits.choose_split(models, shots=args.shots, seed=args.seed, test_per_class=args.test_per_class,
                               zero_shot_classes=args.zero_shot)


def _run_level_warnings(models: list[ModelSpec], args) -> list[str]:
    """Warn when a run was trained on another source or level than the one evaluated and its
    training names are unknown (no ``split.json``: they cannot be left out of the queries)."""
    warnings = []
    for model in models:
        if model.kind != "run" or splits.run_seen_names(model.path):
            continue
        level = read_run(model.path).settings.level
        if level is None or not level.source:
            continue
        trained = (level.source, level.root, level.depth)
        asked = (args.source, args.root, args.depth)
        if (trained[0] != asked[0] or (trained[1] or None) != (asked[1] or None)
                or (not args.synonyms and trained[2] != asked[2])):
            warnings.append(f"{model.spec} was trained on {trained[0]} root={trained[1]} depth={trained[2]}: "
                            "names held out here may have been training names there")
    return warnings


def _depths(text: str | None) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``; checked before any work starts."""
    if not text:
        return []
    try:
        depths = [int(d) for d in text.split(",") if d.strip()]
    except ValueError:
        depths = []
    if not depths or min(depths) < 1:
        raise EvaluationError(f"--cross-level takes depths of at least 1 like 1,2,3,4 (got {text!r})")
    return depths


def _normalisation(args, models: list[ModelSpec], settings: EvalSettings, progress) -> tuple[list[EvalResult], dict]:
    """The mention normalisation results of ``--gold`` (on ``--source``'s level, else HPO synonym sets under HP:0000118), and what was scored."""
    if not args.gold:
        raise EvaluationError(f"--task {normalisation.TASK} needs --gold FILE (a 'mention' and a concept id column, "
                              "e.g. assets/gold/lay_phenotypes_example.tsv)")
    gold = normalisation.load_gold(args.gold)
    level = level_spec_from_args(args) if args.source else normalisation.EXAMPLE_LEVEL
    rankings = rankings_from_args(args)
    results = evaluation.evaluate_normalisation(gold, level, models, rankings, settings=settings, progress=progress)
    return results, {"gold": gold.label, "mentions": len(gold), "level": results[0].level,
                     "rankings": [r.label for r in rankings]}


def run(args) -> dict:
    """Evaluate the models; one dict with every figure and sample size."""
    started = time.perf_counter()
    wants_normalisation = bool(args.gold) or normalisation.TASK in args.task
    args.task = [task for task in args.task if task != normalisation.TASK]
    if not args.benchmark and not args.source and not wants_normalisation:
        raise EvaluationError("nothing to evaluate: give --benchmark NAME|PATH, --source SOURCE and/or --gold FILE")
    settings = EvalSettings(n_boot=args.n_boot, leaf_queries=args.leaf_queries,
                            pairs_per_distance=args.pairs, sample_seed=args.sample_seed)
    progress = _progress(args.quiet)
    depths = _depths(args.cross_level)
    models = args.model  # ModelSpecs: parsed by argparse (model_argument), a bad one refused in one line
    baseline = baseline_among(args.baseline, models) if args.baseline else None  # refused before any work
    out: dict = {"settings": settings.__dict__, "warnings": []}
    results: list[EvalResult] = []
    shared = {"settings": settings, "use_cache": not args.no_cache, "progress": progress}
    if args.benchmark:
        results += evaluation.evaluate_benchmarks(models, args.benchmark, **shared)
    if wants_normalisation:
        scored, out["normalisation"] = _normalisation(args, models, settings, progress)
        results += scored
    if args.source and (args.task or not wants_normalisation):
        spec, warnings = split_from_args(args, models)
        out["warnings"] += warnings + _run_level_warnings(models, args)
        level = level_spec_from_args(args)
        ontology = level.ontology()
        view, coverage = covered_level(args, models, ontology)
        if coverage:
            out["coverage"] = coverage
        split = spec.make(view)
        tasks = evaluation.expand_tasks(args.task or "all")
        results += evaluation.evaluate(view, split, models, tasks, ontology=ontology, **shared)
        out["view"] = {k: v for k, v in view.stats().items() if k != "names_per_class"}
        out["split"] = {**spec.__dict__, **split.sizes()}
        if depths:
            table = evaluation.cross_level(ontology, models, depths=depths, root=args.root, split_spec=spec,
                                           keep_ambiguous=args.keep_ambiguous, **shared)
            table.pop("results")
            out["cross_level"] = table
    out["models"] = list(dict.fromkeys((r.model, r.model_spec, r.fingerprint) for r in results))
    out["models"] = [{"label": m[0], "spec": m[1], "fingerprint": m[2]} for m in out["models"]]
    out.update(comparisons(results, args, settings, baseline=baseline))
    out["seconds"] = round(time.perf_counter() - started, 2)
    if args.json:
        # per-item values (what the differences are computed from) stay out: thousands per result
        out["results"] = [{k: v for k, v in r.to_dict().items() if k != "per_item"} for r in results]
        return out
    # Readable form: one line per figure.
    out.pop("settings")
    out["table"] = [
        {"model": r["model"], "task": r["task"], "metric": r["metric"],
         "value": "-" if r["value"] is None else f"{r['value']:.3f}",
         "95% CI": "-" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]", "n": r["n"]}
        for r in results_table(results)
    ]
    return out

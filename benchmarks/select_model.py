"""The selection protocol: score candidate encoders on development data and apply the promotion rule.

``score MODEL [--name NAME]``
    scores one candidate (a model directory, a preset or a hub id) on

    * ``ehr_relb_dev`` (clinical relatedness, Spearman),
    * ``hpo_coding_dev`` and ``gsc_plus_dev`` (term coding on HPO synonym sets under
      HP:0000118: acc@1 under the dense ranking, the product's default, and the hybrid ranking),
    * class retrieval mAP on ICD-10 chapters and HPO level 1 (names held out of every
      pretraining: 10 test names per class, 15 shots, split seed 0) and ICD-10-CM
      leaf-to-parent MRR (2,000 leaves),
    * MayoSRS / UMNSRS, **reported only**: nothing is compared or chosen on them,

    each with a 95 % bootstrap interval, and writes one JSON row to
    ``benchmarks/results/selection/NAME.json`` (with the per-item ranks and cosines that
    paired differences need; no development text is stored).
``table [NAME ...]``
    prints every stored row side by side, the paired difference of each against the shipped
    model, and the promotion rule's verdict (:mod:`bioviz.evaluation.selection`), and names
    the candidate it promotes.

The development files are read from ``--dev-dir`` (default ``../shared/benchmarks`` beside the
repository); they are never copied into the project. The rule's references are the rows named
``minilm`` (the general base) and ``med-minilm-1`` (the model shipped before this protocol).

Usage::

    BIOVIZ_HOME=/tmp/sel python benchmarks/select_model.py score minilm
    python benchmarks/select_model.py score /path/to/candidate --name wise-0.5
    python benchmarks/select_model.py table
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere, without installing
# The model as trained (fp32), whatever this machine's default backend: candidates are compared
# with each other, and int8 is judged on its own by benchmarks/int8_judged.py.
os.environ.setdefault("BIOVIZ_BACKEND", "torch")
sys.path.insert(0, str(ROOT / "benchmarks"))  # pretrain_recipes' evaluation problems

from bioviz.evaluation.selection import (CODING_FILES, PROMOTION_KEY, RANKINGS, RELATEDNESS, Figure,  # noqa: E402
                                         choose, coding_key, judge)

RESULTS = ROOT / "benchmarks" / "results" / "selection"
from dev_files import DEV_DIR  # noqa: E402,F401 - coding_defaults imports it from here too
BASE_ROW, SHIPPED_ROW = "minilm", "med-minilm-1"
REPORTED_ONLY = ("mayosrs", "umnsrs-sim", "umnsrs-rel")
STRUCTURE = {"icd10 chapters, 10 test names per class": "icd10 chapters mAP",
             "hpo level 1, 10 test names per class": "hpo level 1 mAP",
             "icd10cm leaf-to-parent": "icd10cm leaf-to-parent MRR"}
N_BOOT = 1000


def _figure(value: float, ci, n: int) -> dict:
    low, high = (ci if ci else (float("nan"), float("nan")))
    return {"value": round(float(value), 4), "low": round(float(low), 4), "high": round(float(high), 4), "n": int(n)}


def relatedness(model, path: Path) -> tuple[dict, list[float]]:
    """Spearman on a pair file and every pair's cosine (for paired differences)."""
    from bioviz.evaluation.benchmarks import load_benchmark, score_benchmark

    bench = load_benchmark(path)
    vectors = model.encode(list(bench.terms), batch_size=128, normalize_embeddings=True, show_progress_bar=False)
    scored = score_benchmark(bench, dict(zip(bench.terms, vectors)), n_boot=N_BOOT)
    return (_figure(scored["spearman"], scored["ci"]["spearman"], scored["covered"]),
            [round(float(c), 5) for c in scored["cosines"]])


def within_level(gold, view):
    """The gold rows whose concept is in the level, and how many were not.

    A few development rows are coded to HPO terms outside the phenotypic-abnormality subtree
    (modes of inheritance) or to obsolete ids: no ranking over the level can find them, so
    they are left out for every candidate alike (the count is in the row).
    """
    import dataclasses

    known = set(view.name_concepts)
    keep = [i for i, c in enumerate(gold.concept_ids) if c in known]
    kept = dataclasses.replace(gold, mentions=tuple(gold.mentions[i] for i in keep),
                               concept_ids=tuple(gold.concept_ids[i] for i in keep))
    return kept, len(gold) - len(keep)


def coding(model_text: str, dev_dir: Path) -> tuple[dict, dict]:
    """acc@1 on each coding file under the dense and the hybrid ranking, and the gold ranks behind them."""
    from bioviz.evaluation.metrics import bootstrap_mean_ci
    from bioviz.evaluation.normalisation import EXAMPLE_LEVEL, check_gold_ids, gold_ranks, load_gold
    from bioviz.models.model_spec import ModelSpec
    from bioviz.search.hybrid import HYBRID_WEIGHT, Ranking, SparseNames
    from bioviz.search.neighbours import candidate_index
    from bioviz.search.term_coding import encode_terms, resolve_terms

    model = ModelSpec.parse(model_text)
    ontology = EXAMPLE_LEVEL.ontology()
    view = EXAMPLE_LEVEL.load(ontology)
    index = candidate_index(view, model)
    sparse = SparseNames.build(view.names, index.space.names)
    figures, ranks = {}, {}
    for gold_name in CODING_FILES:
        gold, dropped = within_level(load_gold(dev_dir / f"{gold_name}.tsv"), view)
        check_gold_ids(gold, view)
        figures[f"{gold_name} rows outside the level"] = dropped
        vectors = encode_terms([i.text for i in resolve_terms(gold.mentions, view, ontology)], model)
        for label, ranking in (("dense", Ranking("dense")), ("hybrid", Ranking("hybrid", HYBRID_WEIGHT))):
            r = gold_ranks(gold, view, index, vectors, ranking=ranking, ontology=ontology, sparse=sparse)
            hits = (r == 1).astype(float)
            figures[coding_key(gold_name, label)] = _figure(hits.mean(), bootstrap_mean_ci(hits, n_boot=N_BOOT),
                                                            len(hits))
            ranks[f"{gold_name} {label}"] = [int(x) for x in r]
    figures["hybrid ranking"] = Ranking("hybrid", HYBRID_WEIGHT).label
    return figures, ranks


class CachedModel:
    """``encode`` through bioviz's vector cache: the level names coding encoded are not encoded again."""

    def __init__(self, model_text: str):
        from bioviz.models.model_spec import ModelSpec

        self.spec = ModelSpec.parse(model_text)

    def encode(self, texts, **_) -> np.ndarray:
        from bioviz.models.registry import embed

        return embed(list(texts), self.spec, batch_size=128).vectors


def structure(model_text: str, *, quick: bool = False) -> tuple[dict, dict]:
    """Class retrieval and leaf-to-parent (development structure), and MayoSRS/UMNSRS (reported only).

    ``quick`` skips the structure figures (ICD-10-CM's ~100k reference names are most of a
    candidate's CPU time; the promotion rule does not read them): for sweeps, never for a row
    that ships.
    """
    from pretrain_recipes import evaluation_problems, score

    problems = {} if quick else {k: p for k, p in evaluation_problems(2000)[0].items() if k in STRUCTURE}
    scored = score(CachedModel(model_text), problems)
    figures = {label: _figure(scored[key]["value"], scored[key]["ci"], scored[key].get("queries", 0))
               for key, label in STRUCTURE.items() if key in scored}
    reported = {name: _figure(scored[name]["value"], (scored[name]["ci"] or {}).get("spearman"), 0)
                for name in REPORTED_ONLY}
    return figures, reported


def score_candidate(model_text: str, *, name: str, dev_dir: Path, quick: bool = False) -> dict:
    """Every figure of one candidate, as the JSON row ``score`` writes."""
    from bioviz.models.encoders import load_sentence_transformer
    from bioviz.models.model_spec import ModelSpec

    started = time.perf_counter()
    spec = ModelSpec.parse(model_text)
    model = load_sentence_transformer(model_text, device="cpu")
    rel, cosines = relatedness(model, dev_dir / f"{RELATEDNESS}.tsv")
    print(f"{name}: relatedness {rel['value']:.3f} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    code_figures, ranks = coding(model_text, dev_dir)
    print(f"{name}: coding done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    struct, reported = structure(model_text, quick=quick)
    return {"name": name, "model": model_text, "fingerprint": spec.fingerprint(),
            "measured": time.strftime("%Y-%m-%d"), "seconds": round(time.perf_counter() - started), "quick": quick,
            "figures": {RELATEDNESS: rel, **code_figures, **struct}, "reported_only": reported,
            "items": {"ehr_relb_dev cosines": cosines, **{f"ranks {k}": v for k, v in ranks.items()}}}


def load_rows(names=None) -> dict[str, dict]:
    """Stored rows by name (all of them, or those named)."""
    paths = sorted(RESULTS.glob("*.json")) if not names else [RESULTS / f"{n}.json" for n in names]
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in paths}


def figures_of(row: dict) -> dict[str, Figure]:
    """A row's development figures as :class:`Figure` values."""
    return {k: Figure(v["value"], v["low"], v["high"], v["n"]) for k, v in row["figures"].items() if isinstance(v, dict)}


def paired(row: dict, reference: dict, dev_dir: Path) -> dict[str, str]:
    """Paired bootstrap differences row - reference on the dev items (acc@1 per file and ranking, Spearman)."""
    from bioviz.evaluation.benchmarks import load_benchmark
    from bioviz.evaluation.paired import paired_mean_delta, paired_spearman_delta

    out = {}
    for gold in CODING_FILES:
        for ranking in RANKINGS:
            key = f"ranks {gold} {ranking}"
            a, b = np.asarray(reference["items"][key]) == 1, np.asarray(row["items"][key]) == 1
            delta, ci, _ = paired_mean_delta(a.astype(float), b.astype(float), n_boot=N_BOOT)
            out[coding_key(gold, ranking)] = f"{delta:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"
    human = load_benchmark(dev_dir / f"{RELATEDNESS}.tsv").scores
    delta, ci, _ = paired_spearman_delta(np.asarray(reference["items"]["ehr_relb_dev cosines"], dtype=float),
                                         np.asarray(row["items"]["ehr_relb_dev cosines"], dtype=float), human,
                                         n_boot=N_BOOT)
    out[RELATEDNESS] = f"{delta:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"
    return out


def table(rows: dict[str, dict], dev_dir: Path) -> str:
    """Every row side by side, differences against the shipped model, verdicts and the promoted candidate."""
    base, shipped = figures_of(rows[BASE_ROW]), figures_of(rows[SHIPPED_ROW])
    keys = [k for k in rows[BASE_ROW]["figures"] if isinstance(rows[BASE_ROW]["figures"][k], dict)]
    lines = ["| figure | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    for key in keys:
        lines.append(f"| {key} | " + " | ".join(Figure(**r["figures"][key]).text() if key in r["figures"] else "—"
                                               for r in rows.values()) + " |")
    for key in REPORTED_ONLY:
        lines.append(f"| {key} (reported only) | "
                     + " | ".join(Figure(**r["reported_only"][key]).text() for r in rows.values()) + " |")
    lines.append("| CPU seconds to score | " + " | ".join(str(r["seconds"]) for r in rows.values()) + " |")
    diffs = {n: paired(r, rows[SHIPPED_ROW], dev_dir) for n, r in rows.items()}
    for key in diffs[BASE_ROW]:
        lines.append(f"| Δ {key} vs {SHIPPED_ROW} | " + " | ".join(d[key] for d in diffs.values()) + " |")
    verdicts = [(n, figures_of(r), judge(figures_of(r), base=base, shipped=shipped)) for n, r in rows.items()]
    lines.append("| promotable | " + " | ".join("yes" if v.promotable else "no" for _, _, v in verdicts) + " |")
    lines.append("")
    for name, _, verdict in verdicts:
        failed = [text for text, ok in verdict.checks if not ok]
        lines.append(f"{name}: {'passes' if verdict.promotable else 'fails ' + '; '.join(failed)}")
    lines.append(f"promoted (rule: docs/models.md; best {PROMOTION_KEY} among those passing, simpler on near "
                 f"ties): {choose(verdicts, key=PROMOTION_KEY)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev-dir", type=Path, default=DEV_DIR, help="folder of the development files")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("score")
    s.add_argument("model")
    s.add_argument("--name", help="row name (default: the model's folder name)")
    s.add_argument("--quick", action="store_true", help="relatedness and coding only (a sweep; the rule's figures)")
    t = sub.add_parser("table")
    t.add_argument("names", nargs="*", help="rows to compare (default: every stored row)")
    args = parser.parse_args(argv)
    if not (args.dev_dir / f"{RELATEDNESS}.tsv").is_file():
        print(f"error: no development files in {args.dev_dir} (give --dev-dir)", file=sys.stderr)
        return 2
    if args.command == "score":
        name = args.name or Path(args.model).name
        row = score_candidate(args.model, name=name, dev_dir=args.dev_dir, quick=args.quick)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{name}.json").write_text(json.dumps(row) + "\n", encoding="utf-8")
        shown = {k: Figure(**v).text() for k, v in row["figures"].items() if isinstance(v, dict)}
        print(json.dumps({"name": name, **shown}, indent=1))
        return 0
    names = args.names or None
    if names:
        names = list(dict.fromkeys([BASE_ROW, SHIPPED_ROW, *names]))
    print(table(load_rows(names), args.dev_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

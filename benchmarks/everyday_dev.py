"""Everyday queries: a development set built from the bundled sources with held-out concepts, and its scores.

Issue 40 asks that a clinician's own words (lay phrases, abbreviations, common names) find the right
concept first. This script builds a development set of such queries from sources with provenance,
holding concepts out so that a score measures what the vocabulary and the model do for concepts
they have *not* been told about, and scores the defaults before and after the clinical vocabulary.

The sets (nothing is written into the project; rows go to ``benchmarks/results/everyday_dev.json``,
the queries themselves to ``$BIOVIZ_HOME/dev/everyday_*.tsv`` for inspection):

- **WHO ICD-10** (the default level, ICD-10 chapters): a fifth of WHO's three-character categories is
  held out (a concept is held out when ``sha256("0:<category>")`` falls in the lowest fifth, so the
  split does not depend on which queries exist). Queries are the terms the clinical vocabulary maps
  into a held-out category and that WHO's own names do not spell: ICD-10-CM inclusion terms and
  includes notes (by code), HPO layperson and abbreviation synonyms (carried by name). Gold: the
  category; a query is right when its first answer's concept lies in it.
- **HPO** (the default HPO level, phenotypic abnormality's top classes): a fifth of the HPO concepts
  that have layperson or abbreviation synonyms is held out. Queries are those synonyms (spelt by no other concept), and they are taken out of the
  level's names (bioviz's HPO level keeps EXACT and RELATED synonyms as names; a query that is a name
  would resolve exactly), drawn among those whose concept the level holds (a concept all of whose
  names lie under two classes is dropped as ambiguous). Gold: the concept.

For the held-out concepts, scoring removes every source term that names them from the vocabulary
(``ClinicalVocabulary.for_ontology(..., exclude=...)``) and from the learnt word substitutions: what
is left is the model, the other concepts' vocabulary, the rewrites learnt elsewhere and bioviz's
abbreviation list (text only, never codes). The *listed* column keeps them (an upper bound: the
queries a source lists). Never trained on; these queries are not shipped.

Configurations, each the first answer of ``python -m bioviz neighbours`` as the defaults give it:
``before`` (the synonym lexicon's EXACT expansion, no vocabulary: the defaults before issue 40),
``after`` (expansion and the clinical vocabulary, held-out concepts excluded), ``unlisted_phrasing``
(the vocabulary without the queries' own terms, every other term of their concepts kept: a phrasing
no source lists, of a concept the sources know) and ``listed`` (the whole vocabulary).
Accuracy with 95% bootstrap intervals, the paired difference after − before with its interval,
per set and per query origin.

Usage::

    BIOVIZ_HOME=.bioviz python benchmarks/everyday_dev.py [--model med-minilm] [--n 300] [--n-boot 1000]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing

from bioviz.evaluation.metrics import bootstrap_mean_ci  # noqa: E402
from bioviz.evaluation.paired import paired_mean_delta  # noqa: E402
from bioviz.models.model_spec import DEFAULT_MODEL, ModelSpec  # noqa: E402
from bioviz.ontology import LevelSpec  # noqa: E402
from bioviz.ontology.model import Ontology  # noqa: E402
from bioviz.paths import home  # noqa: E402
from bioviz.search.clinical_text import term_key  # noqa: E402
from bioviz.search.lexicon import (DEFAULT_EXPANSION, QueryExpansion, expand_queries, expanded_forms,  # noqa: E402
                                   load_lexicon)
from bioviz.search.vocabulary_vectors import MIN_COSINE, MIN_LEAD, similar_reading, vocabulary_vectors  # noqa: E402
from bioviz.search.neighbours import candidate_index, rank_neighbours, resolve_query  # noqa: E402
from bioviz.search.term_coding import encode_terms  # noqa: E402
from bioviz.search.vocabulary import (ABBREVIATION, HPO, ICD10CM, LAY, NAME, ClinicalVocabulary,  # noqa: E402
                                      bundled_terms)

RESULTS = Path(__file__).resolve().parent / "results"
HOLDOUT_SHARE = 0.2  # of WHO ICD-10's categories
HPO_HOLDOUT_SHARE = 0.2  # of HPO's concepts with lay synonyms
SEED = 0
WHO_LEVEL = LevelSpec("icd10", depth=1)
HPO_LEVEL = LevelSpec("hpo")
SIMILAR_GRID = [(c, lead) for c in (0.7, 0.75, 0.8, 0.85, 0.9) for lead in (0.0, 0.03, 0.06)]


def held_out(concept_id: str, seed: int = SEED, share: float = HOLDOUT_SHARE) -> bool:
    """Whether a concept is held out: by a hash of its id, not by which queries exist."""
    digest = hashlib.sha256(f"{seed}:{concept_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def origin_of(term) -> str:
    """The query's kind for the per-origin figures."""
    if term.system == HPO:
        return "HPO abbreviation" if term.kind == ABBREVIATION else "HPO layperson synonym"
    if term.kind == ABBREVIATION:
        return "ICD-10-CM abbreviation"
    return f"ICD-10-CM {term.origin}"


def plain_query(text: str) -> str:
    """A source term as a clinician would type it: without the coders' "NOS"."""
    text = text.strip()
    return text[:-4].strip() if text.endswith(" NOS") else text


def who_set(ontology: Ontology, terms, n: int, rng: random.Random) -> tuple[list[dict], frozenset[str]]:
    """WHO ICD-10 queries of held-out categories (see the module), and the held-out concept ids."""
    full = ClinicalVocabulary.for_ontology(ontology, terms)
    own_keys = {term_key(name) for concept in ontology.concepts.values() for name in concept.names}
    by_query: dict[str, dict] = {}
    for key, matches in full.by_key.items():
        for match in matches:
            term = match.term
            if term.system not in (HPO, ICD10CM) or term.kind == NAME:
                continue
            query = plain_query(term.term)
            if term_key(query) in own_keys or len(query) < 2:
                continue
            entry = by_query.setdefault(query.casefold(), {"query": query, "gold": set(), "origin": origin_of(term),
                                                          "source": f"{term.system} {term.concept_id}"})
            entry["gold"].add(match.concept_id[:3])
    rows = [e for e in by_query.values() if all(held_out(c) for c in e["gold"])]
    rows.sort(key=lambda e: e["query"].casefold())
    hpo_rows = [e for e in rows if e["origin"].startswith("HPO")]
    cm_rows = [e for e in rows if not e["origin"].startswith("HPO")]
    picked = rng.sample(hpo_rows, min(len(hpo_rows), n // 2))
    picked += rng.sample(cm_rows, min(len(cm_rows), n - len(picked)))
    held = frozenset(c for c in ontology.concepts if held_out(c[:3]))  # every concept of a held-out category
    return [{**e, "gold": sorted(e["gold"])} for e in picked], held


def hpo_set(ontology: Ontology, terms, n: int, rng: random.Random) -> tuple[list[dict], frozenset[str], Ontology]:
    """HPO queries of held-out concepts in the level, the held-out ids, and the ontology without those queries as names."""
    lay = [t for t in terms if t.system == HPO and t.kind in (LAY, ABBREVIATION)]
    spelt_by: dict[str, set[str]] = {}
    for concept in ontology.concepts.values():
        for name in concept.names:
            spelt_by.setdefault(term_key(name), set()).add(concept.id)
    for term in lay:
        spelt_by.setdefault(term_key(term.term), set()).add(term.concept_id)
    held = frozenset(t.concept_id for t in lay if held_out(t.concept_id, share=HPO_HOLDOUT_SHARE))
    rows, seen = [], set()
    for term in lay:
        key = term_key(term.term)
        if term.concept_id not in held or spelt_by.get(key) != {term.concept_id} or key in seen:
            continue
        if term_key(ontology.concepts[term.concept_id].name) == key:
            continue
        seen.add(key)
        rows.append({"query": term.term, "gold": [term.concept_id], "origin": origin_of(term),
                     "source": f"HPO {term.concept_id}"})
    rows.sort(key=lambda e: e["query"].casefold())
    # the level without the held-out concepts' lay synonyms as names: those are the queries
    dropped = {term_key(t.term) for t in lay if t.concept_id in held}
    concepts = dict(ontology.concepts)
    for concept_id in held:
        concept = concepts[concept_id]
        concepts[concept_id] = dataclasses.replace(
            concept, synonyms=tuple(s for s in concept.synonyms if term_key(s) not in dropped))
    stripped = Ontology(ontology.source, ontology.version, concepts, ontology.graph, ontology.default_root,
                        removed_edges=ontology.removed_edges)
    in_level = set(HPO_LEVEL.load(stripped).name_concepts)
    rows = [r for r in rows if r["gold"][0] in in_level]
    return rng.sample(rows, min(len(rows), n)), held, stripped


def first_answers(rows: list[dict], level: LevelSpec, ontology: Ontology, model: ModelSpec,
                  vocabularies: dict[str, ClinicalVocabulary | None], grid: bool = False) -> dict[str, list[dict]]:
    """Per configuration, each query's first answer as ``neighbours`` gives it (concept, rule)."""
    view = level.load(ontology)
    index = candidate_index(view, model)
    lexicon = load_lexicon()
    infos = [resolve_query(r["query"], view, ontology) for r in rows]
    vectors = encode_terms([i.text for i in infos], model)
    out = {}
    for name, vocabulary in list(vocabularies.items()):
        expanded = expand_queries(infos, DEFAULT_EXPANSION, lexicon, vocabulary)
        if vocabulary is not None:  # the "similar term" rule: how each query's nearest source term scores
            terms = vocabulary_vectors(vocabulary, model)
            level_best = (vectors @ index.vectors.T).max(axis=1)
            for threshold in (SIMILAR_GRID if grid else [(MIN_COSINE, MIN_LEAD)]):
                readings = [similar_reading(f.text, vectors[i], float(level_best[i]), terms, min_cosine=threshold[0],
                                            min_lead=threshold[1], names=vocabulary.names)
                            if f.rule == "dense" and not infos[i].in_ontology else None
                            for i, f in enumerate(expanded)]
                swapped = [QueryExpansion(f.text, f.entries, r) if r is not None else f
                           for f, r in zip(expanded, readings)]
                label = name if not grid else f"{name}+similar {threshold[0]:.2f}/{threshold[1]:.2f}"
                out[label] = _answers(infos, swapped, expanded_forms(swapped, model), index, vectors)
            if grid:
                out[f"{name}, no similar-term rule"] = _answers(infos, expanded, expanded_forms(expanded, model),
                                                                index, vectors)
        else:
            out[name] = _answers(infos, expanded, expanded_forms(expanded, model), index, vectors)
    return out


def _answers(infos, expanded, forms, index, vectors) -> list[dict]:
    answers = []
    for position, (info, found) in enumerate(zip(infos, expanded)):
        own = forms.between(position, position + 1) if forms is not None else None
        top = rank_neighbours(index, vectors[position], info, k=1, forms=own if own is not None and len(own) else None,
                              placed=found.placed)
        first = top[0] if top else {}
        answers.append({"concept": first.get("concept_id", ""), "name": first.get("name", ""),
                        "rule": found.rule if first.get("placed") else "dense",
                        "exact": info.resolved_by is not None})
    return answers


def right(answer: dict, row: dict, by_category: bool) -> float:
    concept = answer["concept"]
    return float((concept[:3] if by_category else concept) in row["gold"])


def figures(rows: list[dict], answers: dict[str, list[dict]], by_category: bool, n_boot: int) -> dict:
    """Accuracy per configuration with intervals, paired after − before, per origin, and rule counts."""
    hits = {name: np.asarray([right(a, r, by_category) for a, r in zip(found, rows)]) for name, found in answers.items()}
    out = {"queries": len(rows), "accuracy": {}, "rules_after": {}, "by_origin": {}}
    for name, values in hits.items():
        out["accuracy"][name] = {"acc1": round(float(values.mean()), 3), "ci": [round(v, 3) for v in bootstrap_mean_ci(values, n_boot)]}
    out["minus_before"] = {}
    for name, values in hits.items():
        if name != "before":
            delta, ci, _ = paired_mean_delta(hits["before"], values, n_boot=n_boot)
            out["minus_before"][name] = {"delta": round(float(delta), 3), "ci": [round(v, 3) for v in ci] if ci else None}
    for answer, row in zip(answers["after"], rows):
        out["rules_after"][answer["rule"]] = out["rules_after"].get(answer["rule"], 0) + 1
    for origin in sorted({r["origin"] for r in rows}):
        mask = np.asarray([r["origin"] == origin for r in rows])
        out["by_origin"][origin] = {"queries": int(mask.sum()),
                                    **{name: round(float(values[mask].mean()), 3) for name, values in hits.items()}}
    # precision of the rules: when a rule placed the first answer, how often it was right
    for rule in sorted(out["rules_after"]):  # noqa: B007
        mask = np.asarray([a["rule"] == rule for a in answers["after"]])
        out["rules_after"][rule] = {"queries": int(mask.sum()), "right": round(float(hits["after"][mask].mean()), 3)}
    return out


def write_queries(name: str, rows: list[dict], answers: dict[str, list[dict]]) -> Path:
    """The set with each configuration's first answer, as TSV under BIOVIZ_HOME (never in the project)."""
    path = home() / "dev" / f"everyday_{name}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["query\tgold\torigin\tsource\t" + "\t".join(f"{k}_answer\t{k}_rule" for k in answers)]
    for i, row in enumerate(rows):
        cells = [row["query"], ";".join(row["gold"]), row["origin"], row["source"]]
        for found in answers.values():
            cells += [found[i]["concept"], found[i]["rule"]]
        lines.append("\t".join(cells))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--n", type=int, default=300, help="queries per set")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--sets", default="who,hpo")
    parser.add_argument("--grid", action="store_true",
                        help="score the similar-term rule's thresholds on a grid (how MIN_COSINE/MIN_LEAD were chosen)")
    args = parser.parse_args()
    model = ModelSpec.parse(args.model)
    terms = bundled_terms()
    results = {"model": args.model, "holdout_share": HOLDOUT_SHARE, "seed": SEED, "sets": {}}
    for name in args.sets.split(","):
        started = time.perf_counter()
        rng = random.Random(SEED)
        if name == "who":
            level = WHO_LEVEL
            ontology = level.ontology()
            rows, held = who_set(ontology, terms, args.n, rng)
            by_category = True
        else:
            level = HPO_LEVEL
            rows, held, ontology = hpo_set(level.ontology(), terms, args.n, rng)
            by_category = False
        query_keys = frozenset(term_key(r["query"]) for r in rows)
        vocabularies = {"before": None,
                        "after": ClinicalVocabulary.for_ontology(ontology, terms, exclude=held),
                        "unlisted_phrasing": ClinicalVocabulary.for_ontology(ontology, terms, exclude_keys=query_keys),
                        "listed": ClinicalVocabulary.for_ontology(ontology, terms)}
        answers = first_answers(rows, level, ontology, model, vocabularies, args.grid)
        result = figures(rows, answers, by_category, args.n_boot)
        result["level"] = f"{level.source} depth {level.depth}"
        result["gold"] = "three-character category" if by_category else "concept"
        result["queries_file"] = str(write_queries(name, rows, answers))
        result["seconds"] = round(time.perf_counter() - started, 1)
        results["sets"][name] = result
        print(json.dumps({name: result}, indent=1), flush=True)
    RESULTS.mkdir(exist_ok=True)
    label = Path(args.model).name if "/" in args.model else args.model  # a candidate's folder by its name
    out = RESULTS / f"everyday_dev_{label}{'_grid' if args.grid else ''}.json"
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

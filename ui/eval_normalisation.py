"""The Evaluation page's *Mention normalisation* section: a gold file of mentions and concept ids, scored per model
and ranking (:mod:`bioviz.evaluation.normalisation`), as a table, a CSV and a figure."""

from __future__ import annotations

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.evaluation import tables as result_tables
from bioviz.evaluation.normalisation import (EXAMPLE_GOLD, EXAMPLE_LEVEL, MAX_GOLD_BYTES, GoldFile, load_gold,
                                             read_gold)
from bioviz.figures import metric_bars, slug
from bioviz.models.model_spec import ModelSpec
from bioviz.ontology import LevelSpec
from bioviz.search.hybrid import RANKING_KINDS, ranking_of
from ui import cache, compare
from ui.markdown import md

RESULTS = "_norm_results"  # the last scoring: its request and results, kept across reruns
GOLD_SOURCES = {"example": "Lay phenotype phrasings (HPO, 30 mentions: the example)", "upload": "Upload a TSV/CSV gold file"}


def _gold(source: str, upload) -> GoldFile | None:
    """The chosen gold file: the bundled example, or the upload (bounded before it is read; kept in memory only)."""
    if source == "example":
        return load_gold(EXAMPLE_GOLD)
    if upload is None:
        return None
    if upload.size > MAX_GOLD_BYTES:
        raise BiovizError(f"{upload.name} is {upload.size / 2**20:.1f} MiB; a gold file is at most "
                          f"{MAX_GOLD_BYTES // 2**20} MiB")
    return read_gold(upload.getvalue(), upload.name)


def _show(stored: dict, image_format: str) -> None:
    """The results table, CSV and figure of one scoring; titles name the models, rankings, gold file and level."""
    results, gold, title = stored["results"], stored["gold"], stored["title"]
    rows = result_tables.results_table(results)
    values, lows, highs = result_tables.wide_tables(rows)
    st.dataframe(result_tables.display_table(values, lows, highs, show_ci=True), width="stretch")
    sizes = results[0].sizes
    caption = (f"{gold.label}: {sizes['queries']} mentions, {sizes['paraphrased.queries']} paraphrased (not a name "
               f"of the level) · {title} · 95% bootstrap intervals ({stored['n_boot']} resamples)")
    st.caption(md(caption))
    labels = dict.fromkeys(r.base_model for r in results)  # readable labels: never a run's path
    name = slug("normalisation", gold.label.rsplit(".", 1)[0], *labels, *stored["rankings"])
    st.download_button("Download CSV", result_tables.to_csv(rows), f"{name}.csv", "text/csv", key="_norm_csv")
    models = " vs ".join(dict.fromkeys(r.model for r in results))
    fig = metric_bars(rows, f"Mention normalisation · {models} · {title}", caption)
    compare.show_figure(fig, name, image_format, key="bars-normalisation")


def render(level: LevelSpec, view, models: list[ModelSpec], *, n_boot: int, image_format: str) -> None:
    """Gather the gold file and rankings, score on the button, show the last scoring."""
    st.caption("Each mention of a gold file ranks every concept of the level, as *Code terms* ranks them: "
               "Acc@1, Acc@5 and MRR of the curated concept, on all mentions and on the paraphrased ones "
               "(not, lower-cased, a name or synonym of the level). Uploads are read in memory, never stored.")
    left, right = st.columns([1.3, 1])
    source = left.radio("Gold file", list(GOLD_SOURCES), format_func=GOLD_SOURCES.get, key="eval_gold",
                        horizontal=True)
    upload = None
    if source == "upload":
        upload = left.file_uploader("Gold file: a header with 'mention' and a concept id column (.tsv or .csv)",
                                    type=["tsv", "csv"], key="_eval_gold_upload",
                                    max_upload_size=max(1, MAX_GOLD_BYTES // 2**20))
    kinds = right.multiselect("Rankings", list(RANKING_KINDS), default=list(RANKING_KINDS), key="_eval_rankings",
                              format_func=lambda kind: ranking_of(kind).label,
                              help="dense: the model's cosine; hybrid: exact or normalised match first, then cosine "
                                   "+ weight × char-tfidf cosine")
    if source == "example" and level != EXAMPLE_LEVEL:
        st.caption(md(f"The example is coded on HPO synonym sets under HP:0000118: choose source hpo, root "
                      f"HP:0000118 and *Synonym sets* in the sidebar (now: {view.title})."))
    rankings = tuple(ranking_of(kind) for kind in kinds)
    if st.button("Score the gold file", disabled=not (models and rankings) or (source == "upload" and upload is None)):
        try:
            gold = _gold(source, upload)
            results = cache.normalisation_results(level, tuple(models), gold, rankings=rankings, n_boot=n_boot)
        except BiovizError as error:
            st.error(md(error))
            return
        st.session_state[RESULTS] = {"request": (level, tuple(models), rankings), "results": results, "gold": gold,
                                     "title": view.title, "n_boot": n_boot,
                                     "rankings": [r.slug for r in rankings]}
    stored = st.session_state.get(RESULTS)
    if stored is None:
        return
    if stored["request"] != (level, tuple(models), rankings):
        st.info("The level, models or rankings changed since these figures: score the gold file again to update them.")
    _show(stored, image_format)

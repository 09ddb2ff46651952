"""The app's pages: the one list the router (app.py) builds ``st.navigation`` from.

The navigation groups them in two sections, *Explore* and *Train and evaluate*, each in
this list's order. Each page keeps the URL path it had when Streamlit found the page files
itself (``/Train``, ``/Neighbours``, ...), so links made before the router still open the
same view; the home page is the root URL. Sections only group the menu: they are not part
of any URL. The page files live in ``app_pages/``, not ``pages/``: Streamlit runs a
``pages/`` folder beside app.py as pages of their own, without the router, on a server's
first run.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

# What the shared sidebar offers a page besides the level selection.
NO_MODELS, TWO_MODELS, ONE_OR_TWO_MODELS = "none", "two", "one or two"
# The navigation's sections, in the order the menu shows them.
EXPLORE, TRAIN_AND_EVALUATE = "Explore", "Train and evaluate"


@dataclass(frozen=True)
class AppPage:
    """One page of the app.

    Attributes
    ----------
    script : str
        The page file, relative to app.py (what ``st.switch_page`` and ``AppTest.switch_page`` take).
    title : str
        Its name in the navigation and the browser tab.
    url_path : str
        Its URL path (empty for the home page, the root URL).
    models : str
        Model pickers the shared sidebar draws for it: ``NO_MODELS``, ``TWO_MODELS``, or
        ``ONE_OR_TWO_MODELS`` (a "Compare two models" switch first).
    section : str
        The navigation section it is listed under: ``EXPLORE`` or ``TRAIN_AND_EVALUATE``.
    own_home_notice : bool
        The page says itself what a read-only ``BIOVIZ_HOME`` means for it (Train: no job can be
        launched), so app.py leaves its general "nothing will be saved" out there (one notice, not two).
    """

    script: str
    title: str
    url_path: str
    models: str = NO_MODELS
    section: str = EXPLORE
    own_home_notice: bool = False

    @property
    def is_home(self) -> bool:
        return self.url_path == ""


PAGES = (
    AppPage("app_pages/0_Home.py", "Home", ""),
    AppPage("app_pages/1_Train.py", "Train", "Train", section=TRAIN_AND_EVALUATE, own_home_notice=True),
    AppPage("app_pages/2_Projection.py", "Projection", "Projection", TWO_MODELS),
    AppPage("app_pages/3_Similarity_matrix.py", "Similarity matrix", "Similarity_matrix", TWO_MODELS),
    AppPage("app_pages/4_Neighbours.py", "Neighbours", "Neighbours", ONE_OR_TWO_MODELS),
    AppPage("app_pages/5_Hierarchy.py", "Hierarchy", "Hierarchy", TWO_MODELS),
    AppPage("app_pages/6_Evaluation.py", "Evaluation", "Evaluation", TWO_MODELS, section=TRAIN_AND_EVALUATE),
    AppPage("app_pages/7_Code_terms.py", "Code terms", "Code_terms", ONE_OR_TWO_MODELS),
)


def sections() -> dict[str, list[AppPage]]:
    """The pages by navigation section: ``EXPLORE`` first, each section's pages in ``PAGES`` order."""
    grouped: dict[str, list[AppPage]] = {EXPLORE: [], TRAIN_AND_EVALUATE: []}
    for page in PAGES:
        grouped[page.section].append(page)
    return grouped


def navigate():
    """Register the pages with ``st.navigation`` by section; return ``(AppPage, st.Page)`` of the page this run shows.

    Call once, first thing in app.py; the returned ``st.Page``'s ``run()`` runs the page.
    """
    registered = {page: st.Page(page.script, title=page.title, url_path=page.url_path or None, default=page.is_home)
                  for page in PAGES}
    chosen = st.navigation({section: [registered[page] for page in pages] for section, pages in sections().items()})
    return next(page for page, entry in registered.items() if entry is chosen), chosen


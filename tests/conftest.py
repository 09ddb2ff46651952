"""Shared fixtures. Add fixtures here; do not change existing ones."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# No background first encoding of the bundled levels (bioviz.warmup) in tests and in the apps they start.
os.environ.setdefault("BIOVIZ_WARMUP", "0")
# Encode with torch: on a CPU the default backend is onnx-int8 (bioviz.models.backend_choice),
# whose first use exports the model (20-60 s, minutes under load), and the vectors and figures
# pinned by the tests (tests/bioviz/models/test_med_minilm.py, ...) are fp32. The tests of the
# default itself (tests/bioviz/models/test_backend_choice.py) unset it.
os.environ.setdefault("BIOVIZ_BACKEND", "torch")
# The bundled packages' text (the lexicon, the clinical vocabulary: 10-20 s to read each) once for the
# whole run and every worker, not once per fresh test home (bioviz.search.bundled_rows). Tests that
# stub the packages' readers unset it, so their tiny lists never reach this folder.
os.environ.setdefault("BIOVIZ_BUNDLED_CACHE",
                      os.path.join(tempfile.gettempdir(), f"bioviz-tests-bundled-{os.getuid()}"))

# Property and fuzz tests: modest example counts keep CI well under 20 minutes; no per-example
# deadline because a shared 2-core machine makes single examples slow now and then.
# BIOVIZ_HYPOTHESIS_PROFILE=thorough runs ten times more examples when hunting a bug.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("thorough", max_examples=400, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("BIOVIZ_HYPOTHESIS_PROFILE", "ci"))

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data_dir() -> Path:
    """Directory of the tiny real fixtures."""
    return DATA


@pytest.fixture
def tmp_home(tmp_path, monkeypatch) -> Path:
    """A fresh BIOVIZ_HOME for one test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("BIOVIZ_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def shared_home(tmp_path_factory) -> Path:
    """A BIOVIZ_HOME shared by a whole test session (parsed sources and vectors cached once).

    Use it for tests that load the bundled ontologies or encode many names; set it with
    ``monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))``.
    """
    return tmp_path_factory.mktemp("shared-home")


class _DefaultCorpus(list):
    """char-tfidf's default corpus, marked so that only its fit is memoised (other fits run as written)."""

    key = ""


_char_tfidf_defaults: dict[str, tuple[_DefaultCorpus, object]] = {}  # corpus_key() -> (corpus, its fit or None)


@pytest.fixture(autouse=True)
def char_tfidf_fitted_once_per_session(monkeypatch):
    """char-tfidf's default model is fitted once per test session, not once per BIOVIZ_HOME.

    Fitting it on every name of ICD-10 and HPO takes 30-90 s on the 2-core CI machine, and
    each test on a fresh home (``tmp_home``) that touched the model paid it again. The default
    corpus and its fit are memoised in this process; everything else runs as in the app:
    ``load_default`` still reads the home's stored fit, sets a damaged one aside, refits and
    writes the file (what the state tests check), so only minutes of identical refits go.
    Fits of other corpora (``char_tfidf.fit`` called by a test) are not memoised.
    """
    from bioviz.models import char_tfidf

    fit, default_corpus = char_tfidf.fit, char_tfidf.default_corpus

    def default_corpus_once():
        key = char_tfidf.corpus_key()
        if key not in _char_tfidf_defaults:
            corpus = _DefaultCorpus(default_corpus())
            corpus.key = key
            _char_tfidf_defaults[key] = (corpus, None)
        return _char_tfidf_defaults[key][0]

    def fit_default_once(corpus, settings=None):
        if not isinstance(corpus, _DefaultCorpus) or settings is not None:
            return fit(corpus, settings)
        corpus_again, model = _char_tfidf_defaults[corpus.key]
        if model is None:
            model = fit(corpus)
            _char_tfidf_defaults[corpus.key] = (corpus_again, model)
        return model

    monkeypatch.setattr(char_tfidf, "fit", fit_default_once)
    monkeypatch.setattr(char_tfidf, "default_corpus", default_corpus_once)


class _TrigramModel:
    """A tiny deterministic stand-in for an evaluated model: hashed character trigrams.

    Has what ``bioviz.evaluation.run`` needs of a loaded model (``spec``, ``label``,
    ``fingerprint``, ``run_dir``, ``vectors(texts)``) and counts the names it encodes.
    """

    def __init__(self, model, run_dir=None):
        import zlib

        self._crc = zlib.crc32
        self.model, spec = model, model.spec
        self.spec, self.label, self.fingerprint, self.run_dir = spec, f"tri-{spec}", f"fp-{spec}", run_dir
        self.encoded = 0

    def vectors(self, texts, progress=None):
        import numpy as np

        self.encoded += len(texts)
        if progress is not None:  # as the real encoder reports: in names, half way, then all
            progress(len(texts) // 2, len(texts))
            progress(len(texts), len(texts))
        out = {}
        for text in texts:
            v = np.zeros(64, np.float32)
            padded = f"  {text.lower()} "
            for i in range(len(padded) - 2):
                v[self._crc(padded[i:i + 3].encode()) % 64] += 1
            out[text] = v / np.linalg.norm(v)
        return out


@pytest.fixture
def fake_eval_models(monkeypatch):
    """Replace the models ``bioviz.evaluation.run`` loads with trigram encoders; returns them by spec.

    A spec naming a directory gets it as ``run_dir`` (results are then stored with the run).
    """
    from bioviz.evaluation import run as evaluation

    made = {}

    def load(model):  # a ModelSpec, as the library passes it
        run_dir = model.path if model.is_local else None
        made[model.spec] = _TrigramModel(model, run_dir)
        return made[model.spec]

    monkeypatch.setattr(evaluation, "_load_model", load)
    # The Evaluation page prepares each model's vectors with the real encoders first; the fake
    # runs have no weights for that, and the evaluation never reads those vectors.
    from ui import cache

    monkeypatch.setattr(cache, "prepare_vectors", lambda models, spec: None)
    return made


@pytest.fixture
def umls_isa_only(tmp_path) -> Path:
    """The fixture UMLS release with every PAR/CHD relabelled RO, as a ``META`` directory.

    Only ``RELA=isa``/``inverse_isa`` still give IS-A edges, so the hierarchy option
    (``parchd`` vs ``isa``) changes the result.
    """
    meta = tmp_path / "isa-only" / "META"
    meta.mkdir(parents=True)
    for name in ("MRCONSO.RRF", "MRSTY.RRF"):
        (meta / name).write_text((DATA / "umls/META" / name).read_text())
    rows = [line.split("|") for line in (DATA / "umls/META/MRREL.RRF").read_text().splitlines()]
    (meta / "MRREL.RRF").write_text("".join("|".join(r[:3] + ["RO"] + r[4:]) + "\n" for r in rows))
    return meta


@pytest.fixture
def evaluated_run(tmp_home, fake_eval_models):
    """A tiny fake run directory under ``BIOVIZ_HOME/runs`` with evaluations stored by the library.

    ``run.json`` as the trainer writes it (no weights: the fake models never load any; a
    ``config.json`` so that it parses as a model);
    ranking on mini.obo depth 1 (2 shots) and MayoSRS are evaluated through
    :mod:`bioviz.evaluation.run`, so ``.eval.json`` is the real stored form.
    """
    import json

    from bioviz.evaluation import run as evaluation
    from bioviz.ontology import level_view, load_source

    run = tmp_home / "runs" / "mini-definitions"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "run_id": "mini-definitions", "created": "2026-01-02T03:04:05+00:00",
        "config": {"source": str(DATA / "mini.obo"), "root": None, "depth": 1, "synonyms": False, "shots": 2,
                   "seed": 0, "split_seed": None, "test_per_class": 1, "zero_shot_classes": 0,
                   "encoder": "definitions", "base": "minilm", "input_label": "minilm", "init": None},
        "metrics": {"baseline": {"test": {"mAP": 0.5, "names": 2}}, "trained": {"test": {"mAP": 0.75, "names": 2}}},
    }))
    (run / "config.json").write_text("{}")
    onto = load_source(str(DATA / "mini.obo"))
    view = level_view(onto, depth=1)
    settings = evaluation.EvalSettings(n_boot=20)
    evaluation.evaluate(view, evaluation.SplitSpec(shots=2).make(view), [str(run)], ["ranking"], ontology=onto,
                        settings=settings)
    evaluation.evaluate_benchmarks([str(run)], "mayosrs", settings=settings)
    return run


def pytest_ignore_collect(collection_path):
    """Keep --doctest-modules from importing the folders' conftest.py files as modules.

    Each is imported as a module named ``conftest``; with two of them in one run (say
    ``pytest tests/pages tests/trainer``) the second is an "import file mismatch" (this one
    too, once tests/browser/conftest.py, read before it, took the name). Their fixtures still
    load: pytest reads a folder's conftest.py before collecting it. None holds doctests.
    """
    if collection_path.name == "conftest.py":
        return True
    return None


# Parallel runs (``pytest -n 2 --dist loadgroup``, as scripts/test.sh runs the suite): the tests
# that share one expensive session resource run in one worker, so it is started once and they do
# not compete with each other for it: the real-browser tests share one app server (and its encoded
# levels), the cluster tests one Ray head that takes both CPUs.
_ONE_WORKER_GROUPS = {"browser": "browser", "cluster": "ray-head"}


def pytest_collection_modifyitems(items):
    """Mark tests/browser and tests/cluster items with their xdist group (see ``_ONE_WORKER_GROUPS``)."""
    for item in items:
        parts = item.path.relative_to(ROOT).parts
        if len(parts) > 1 and parts[0] == "tests" and parts[1] in _ONE_WORKER_GROUPS:
            item.add_marker(pytest.mark.xdist_group(_ONE_WORKER_GROUPS[parts[1]]))

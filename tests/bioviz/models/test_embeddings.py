"""Encoders and their registry: bundled minilm, local directories, [CLS] checkpoints, runs, char-tfidf, errors."""

import json
import shutil

import numpy as np
import pytest

from bioviz.models import cached_encoding, char_tfidf, encoders, registry
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.encoders import load_sentence_transformer
from bioviz.models.model_spec import ModelSpec, bundled_minilm_path
from bioviz.models.registry import embed, load_encoder
from bioviz.errors import ModelError
from bioviz.models.runs import set_run_name

NAMES = ["heart attack", "myocardial infarction", "asthma", "reactive airway disease", "fracture of femur"]


@pytest.fixture(scope="module")
def minilm_copy(tmp_path_factory):
    """The bundled minilm copied into a directory of its own (a 'local model directory')."""
    target = tmp_path_factory.mktemp("models") / "my-minilm"
    shutil.copytree(bundled_minilm_path(), target)
    return target


def cls_vectors(path, texts):
    """[CLS] token states of a transformers checkpoint, normalised: the reference pooling."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModel.from_pretrained(str(path)).eval()
    with torch.no_grad():
        batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        states = model(**batch).last_hidden_state[:, 0].numpy()
    return states / np.linalg.norm(states, axis=1, keepdims=True)


def test_device_is_a_torch_device_name():
    assert encoders.device() in ("cuda", "mps", "cpu")


def test_minilm_gives_unit_float32_rows_and_a_readable_label(tmp_home):
    space = embed(NAMES, "minilm")
    assert space.vectors.dtype == np.float32 and space.vectors.shape == (len(NAMES), 384)
    np.testing.assert_allclose(np.linalg.norm(space.vectors, axis=1), 1.0, atol=1e-5)
    assert space.model_id == "minilm" and space.names == tuple(NAMES)
    sims = space.vectors @ space.vectors.T
    assert sims[0, 1] > sims[0, 4]  # heart attack is nearer myocardial infarction than a fracture


def test_second_call_is_served_from_the_cache(tmp_home):
    encoder = load_encoder("minilm")
    calls = []
    first, stats1 = encode_cached(encoder, NAMES, progress=lambda done, total: calls.append((done, total)))
    second, stats2 = encode_cached(encoder, NAMES + ["pneumonia"])
    assert (stats1.cache_hits, stats1.encoded) == (0, len(NAMES))
    assert (stats2.cache_hits, stats2.encoded) == (len(NAMES), 1)  # only the missing text is encoded
    np.testing.assert_array_equal(first, second[: len(NAMES)])
    assert calls[0] == (0, len(NAMES)) and calls[-1] == (len(NAMES), len(NAMES))


def test_cache_off_neither_reads_nor_writes(tmp_home):
    encoder = load_encoder("minilm")
    _, stats = encode_cached(encoder, NAMES[:2], use_cache=False)
    _, again = encode_cached(encoder, NAMES[:2])
    assert stats.cache_hits == 0 and again.cache_hits == 0


def test_duplicates_are_encoded_once_and_kept_in_order(tmp_home):
    space = embed(["asthma", "asthma", "fever"], "minilm")
    np.testing.assert_array_equal(space.vectors[0], space.vectors[1])
    assert len(space) == 3


def test_encoder_interface_and_chunked_progress():
    encoder = load_encoder("minilm")
    assert encoder.label == "minilm" and encoder.dim == 384 and len(encoder.fingerprint) >= 16
    seen = []
    vectors = encoder.encode(NAMES * 3, batch_size=1, progress=lambda d, t: seen.append((d, t)))
    reference = load_sentence_transformer("minilm").encode(NAMES * 3, normalize_embeddings=True)
    np.testing.assert_allclose(vectors, reference, atol=1e-5)  # sorting/chunking keeps row order
    assert seen[-1] == (15, 15) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_local_directory_has_the_same_fingerprint_as_the_same_weights(minilm_copy, tmp_home):
    encoder = load_encoder(str(minilm_copy))
    assert encoder.label == "my-minilm" and ModelSpec.parse(str(minilm_copy)).label == "my-minilm"
    assert encoder.fingerprint == load_encoder("minilm").fingerprint  # content hash, not the name
    np.testing.assert_allclose(encoder.encode(NAMES), load_encoder("minilm").encode(NAMES), atol=1e-6)


def test_changed_model_invalidates_cached_vectors(minilm_copy, tmp_path, tmp_home):
    changed = tmp_path / "cls-minilm"
    shutil.copytree(minilm_copy, changed)
    embed(NAMES, str(changed))
    before = load_encoder(str(changed)).fingerprint
    pooling = changed / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update({"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True})
    pooling.write_text(json.dumps(config))
    encoder = load_encoder(str(changed))
    vectors, stats = encode_cached(encoder, NAMES)
    assert encoder.fingerprint != before and stats.cache_hits == 0
    # the model's own pooling config ([CLS] now) is what the vectors follow
    np.testing.assert_allclose(vectors, cls_vectors(changed, NAMES), atol=1e-4)


def test_plain_transformers_checkpoint_is_pooled_with_cls(tmp_path, tmp_home):
    from transformers import AutoModel, AutoTokenizer

    plain = tmp_path / "sapbert-like"
    AutoModel.from_pretrained(str(bundled_minilm_path())).save_pretrained(plain)
    AutoTokenizer.from_pretrained(str(bundled_minilm_path())).save_pretrained(plain)
    assert not (plain / "modules.json").exists()
    space = embed(NAMES, str(plain))
    np.testing.assert_allclose(space.vectors, cls_vectors(plain, NAMES), atol=1e-4)
    assert space.model_id == "sapbert-like"


def test_run_directory_is_labelled_with_its_readable_name_and_short_id(minilm_copy, tmp_path, tmp_home):
    run = tmp_path / "runs" / "20260101-120000-abcd"
    shutil.copytree(minilm_copy, run)
    (run / "run.json").write_text(json.dumps({"run_id": "20260101-120000-abcd", "config": {
        "encoder": "definitions", "source": "hpo", "depth": 1, "shots": 15}}))
    assert ModelSpec.parse(str(run)).label == "definitions · HPO d1 · 15-shot (abcd)"
    space = embed(NAMES[:2], str(run))
    assert space.model_id == "definitions · HPO d1 · 15-shot (abcd)"
    fingerprint = load_encoder(str(run)).fingerprint
    assert fingerprint == load_encoder("minilm").fingerprint  # run.json not hashed
    # A name the user gives is used at once, also by the encoder already loaded, and it
    # neither changes the fingerprint (cached vectors stay valid) nor touches run.json.
    record = (run / "run.json").read_bytes()
    set_run_name(run, "Definitions, first try")
    assert ModelSpec.parse(str(run)).label == "Definitions, first try (abcd)"
    assert load_encoder(str(run)).fingerprint == fingerprint
    again = embed(NAMES[:2], str(run))
    assert again.model_id == "Definitions, first try (abcd)"
    np.testing.assert_array_equal(again.vectors, space.vectors)
    assert (run / "run.json").read_bytes() == record


@pytest.mark.parametrize(
    "spec, words",
    [
        ("no-such-model-anywhere", ["no-such-model-anywhere", "offline", "download it once"]),
        ("some-org/absent-model", ["some-org/absent-model", "HF_HUB_OFFLINE", "local model directory"]),
        ("./missing/model/dir", ["not found"]),
        ("", ["empty model name"]),
    ],
)
def test_unknown_model_gives_one_line_how_to(spec, words, tmp_home):
    with pytest.raises(ModelError) as error:
        load_encoder(spec)
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_a_directory_without_a_model_is_refused(tmp_path):
    with pytest.raises(ModelError, match="not a model directory"):
        load_encoder(str(tmp_path))


def test_char_tfidf_is_not_a_sentence_transformer():
    with pytest.raises(ModelError, match="lexical baseline"):
        load_sentence_transformer("char-tfidf")


def test_char_tfidf_fit_is_deterministic_and_round_trips(tmp_path):
    corpus = ["heart attack", "heart failure", "cardiac arrest", "asthma attack", "acute asthma",
              "lung cancer", "lung infection", "fracture of femur", "femur fracture", "skin rash"] * 2
    settings = {"n_components": 6, "min_df": 1}
    first, second = char_tfidf.fit(corpus, settings), char_tfidf.fit(list(reversed(corpus)), settings)
    assert first.fingerprint == second.fingerprint
    path = tmp_path / "model.npz"
    first.save(path)
    loaded = char_tfidf.CharTfidfModel.load(path)
    assert loaded.fingerprint == first.fingerprint
    vectors = loaded.transform(["heart attack", "heart attacks", "skin rash"])
    np.testing.assert_allclose(vectors, first.transform(["heart attack", "heart attacks", "skin rash"]))
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]  # lexical neighbours
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_default_char_tfidf_is_stored_once_and_stable(shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    encoder = load_encoder("char-tfidf")
    assert encoder.label == "char-tfidf" and encoder.dim == char_tfidf.SETTINGS["n_components"]
    stored = list((shared_home / "models").glob("char-tfidf-*.npz"))
    assert len(stored) == 1
    assert char_tfidf.load_default().fingerprint == encoder.fingerprint  # read back from the .npz
    space = embed(["urinary hesitancy", "hesitancy of micturition", "fracture of femur"], "char-tfidf")
    assert space.vectors.dtype == np.float32 and space.model_id == "char-tfidf"


def test_hub_id_is_served_from_the_local_hugging_face_cache(tmp_path, monkeypatch, tmp_home):
    from huggingface_hub import constants

    # the layout huggingface_hub keeps: models--org--name/{refs/main, snapshots/<commit>/...}
    repo = tmp_path / "hub" / "models--acme--tiny-minilm"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(bundled_minilm_path(), repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    encoder = load_encoder("acme/tiny-minilm")
    assert encoder.label == "acme/tiny-minilm"
    assert encoder.fingerprint == load_encoder("minilm").fingerprint
    assert embed(NAMES[:2], "acme/tiny-minilm").vectors.shape == (2, 384)


def test_fully_cached_request_never_loads_the_weights(minilm_copy, tmp_path, tmp_home):
    embed(NAMES, "minilm")
    twin = tmp_path / "twin"  # same files, so same fingerprint, but a fresh encoder object
    shutil.copytree(minilm_copy, twin)
    encoder = load_encoder(str(twin))
    vectors, stats = encode_cached(encoder, NAMES)
    assert stats.cache_hits == len(NAMES) and encoder._model is None
    np.testing.assert_array_equal(vectors, embed(NAMES, "minilm").vectors)


def test_large_requests_are_reopened_from_one_block(tmp_home, monkeypatch):
    monkeypatch.setattr(cached_encoding, "BLOCK_MIN", 4)
    encoder = load_encoder("minilm")
    first, stats1 = encode_cached(encoder, NAMES)
    assert len(list((tmp_home / "embeddings" / "blocks").glob("*.npy"))) == 1
    second, stats2 = encode_cached(encoder, NAMES)
    assert stats1.encoded == len(NAMES) and stats2.cache_hits == len(NAMES) and stats2.encoded == 0
    np.testing.assert_array_equal(first, second)


def test_model_width_is_read_from_the_files_without_loading(tmp_path, monkeypatch):
    import json

    from bioviz.models.model_files import dimension_from_files
    from bioviz.models.registry import model_dimension

    def no_loading(*args, **kwargs):
        raise AssertionError("weights loaded for a width check")

    monkeypatch.setattr(registry, "load_encoder", no_loading)
    assert model_dimension("minilm") == 384  # Pooling: 384 x one mode
    run = tmp_path / "run"
    (run / "1_Pooling").mkdir(parents=True)
    (run / "3_Dense").mkdir()
    (run / "modules.json").write_text(json.dumps([{"path": ""}, {"path": "1_Pooling"}, {"path": "3_Dense"},
                                                   {"path": "4_Normalize"}]))
    (run / "config.json").write_text(json.dumps({"hidden_size": 768}))  # the transformer's own width
    (run / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 768, "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}))
    assert dimension_from_files(run) == 1536  # two pooling modes, concatenated
    (run / "3_Dense" / "config.json").write_text(json.dumps({"in_features": 1536, "out_features": 256}))
    assert dimension_from_files(run) == 256
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"hidden_size": 1024}))
    assert dimension_from_files(plain) == 1024
    assert dimension_from_files(tmp_path / "nothing") is None

"""A vectors file as a model: the three formats, the card, coverage, and one line for every hostile file."""

import io
import pickle
import zipfile

import numpy as np
import pytest

from bioviz.errors import BiovizError, ModelError
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import embed, load_encoder
from bioviz.models.vectors_coverage import covered_view, load_level, with_coverage
from bioviz.models.vectors_encoder import MissingVectors
from bioviz.models.vectors_export import pair_as_npz, write_vectors
from bioviz.models.vectors_file import VectorsCard, open_vectors
from bioviz.ontology import LevelSpec

NAMES = ["heart attack", "myocardial infarction", "asthma", "pneumonia", "Lung  Infection"]


def _matrix(rows: int = len(NAMES), dim: int = 6, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)


def _unit(m):
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.mark.parametrize("name", ["v.parquet", "v.npz", "v_vectors.tsv"])
def test_each_format_round_trips_as_a_model_with_its_card(tmp_home, tmp_path, name):
    matrix = _matrix()
    written = write_vectors(NAMES, matrix, tmp_path / name, VectorsCard("SapBERT demo", source="a GPU cluster"))
    assert (tmp_path / "v.json") in written or (tmp_path / "v_vectors.json") in written
    model = ModelSpec.parse(str(tmp_path / name))
    assert model.kind == "vectors" and model.label == "SapBERT demo" and not model.is_neural
    assert model.fingerprint().startswith("vectors-")
    space = embed(NAMES[:3], model)
    np.testing.assert_allclose(space.vectors, _unit(matrix[:3]), atol=1e-6)
    assert isinstance(load_encoder(model).file.vectors, np.memmap)  # read from the converted copy, not RAM


def test_names_are_matched_exactly_then_normalised(tmp_home, tmp_path):
    write_vectors(NAMES, _matrix(), tmp_path / "v.parquet")
    file = open_vectors(tmp_path / "v.parquet")
    assert file.rows(["lung infection", "HEART ATTACK", "heart attack\u200b", "fever"]).tolist() == [4, 0, 0, -1]


def test_a_name_the_file_lacks_is_refused_never_a_zero_vector(tmp_home, tmp_path):
    write_vectors(NAMES, _matrix(), tmp_path / "v.npz")
    with pytest.raises(MissingVectors, match="1 names have no vector.*'fever'"):
        embed(["asthma", "fever"], ModelSpec.parse(str(tmp_path / "v.npz")))


def test_a_level_is_cut_to_the_covered_names_and_says_so(tmp_home, tmp_path, data_dir):
    spec = LevelSpec(str(data_dir / "mini.obo"))
    view = spec.load()
    write_vectors(view.names[:-2], _matrix(len(view.names) - 2), tmp_path / "v.parquet")
    model = ModelSpec.parse(str(tmp_path / "v.parquet"))
    cut, (found,) = covered_view(view, [model, ModelSpec.parse("char-tfidf")])
    assert found.message() == "9 of 11 names; 2 without a vector are left out"
    assert cut.names == view.names[:-2] and len(cut.labels) == 9
    assert load_level(with_coverage(spec, [None, model])).names == cut.names
    assert covered_view(view, [ModelSpec.parse("char-tfidf")]) == (view, ())


def test_a_projector_pair_upload_becomes_one_npz(tmp_home, tmp_path):
    vectors = "\n".join("\t".join(f"{x:.6f}" for x in row) for row in _matrix()).encode() + b"\n"
    metadata = "name\tsource\n" + "".join(f"{n}\tx\n" for n in NAMES)  # a header: several columns
    (tmp_path / "u.npz").write_bytes(pair_as_npz(vectors, metadata.encode()))
    assert open_vectors(tmp_path / "u.npz").names == tuple(NAMES)


# --- hostile files: one line each ------------------------------------------------------------


def _refusal(tmp_path, name: str) -> str:
    with pytest.raises(ModelError) as caught:
        load_encoder(ModelSpec.parse(str(tmp_path / name)))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_nan_rows_are_refused_in_one_line(tmp_home, tmp_path):
    matrix = _matrix()
    matrix[2, 1] = np.nan
    write_vectors(NAMES, matrix, tmp_path / "v.parquet")
    assert "1 rows hold NaN or infinity (first: row 3, 'asthma')" in _refusal(tmp_path, "v.parquet")


def test_a_zero_row_is_refused(tmp_home, tmp_path):
    matrix = _matrix()
    matrix[1] = 0
    write_vectors(NAMES, matrix, tmp_path / "v.npz")
    assert "is a zero vector" in _refusal(tmp_path, "v.npz")


def test_rows_of_another_dimension_are_refused(tmp_home, tmp_path):
    write_vectors(NAMES, _matrix(), tmp_path / "v_vectors.tsv")
    path = tmp_path / "v_vectors.tsv"
    path.write_text(path.read_text().replace("\n", "\t0.5\n", 1))
    assert "different dimensions" in _refusal(tmp_path, "v_vectors.tsv")


def test_a_card_that_disagrees_on_the_dimension_is_refused(tmp_home, tmp_path):
    write_vectors(NAMES, _matrix(), tmp_path / "v.parquet")
    (tmp_path / "v.json").write_text('{"name": "x", "dimension": 768}')
    assert "dimension 6, but its model card says 768" in _refusal(tmp_path, "v.parquet")


def test_duplicate_names_are_refused(tmp_home, tmp_path):
    write_vectors([*NAMES, "asthma"], _matrix(len(NAMES) + 1), tmp_path / "v.npz")
    assert "1 duplicate names (first: 'asthma' at row 6)" in _refusal(tmp_path, "v.npz")


def test_a_pickle_inside_npz_is_never_unpickled(tmp_home, tmp_path, monkeypatch):
    called = []
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: called.append(a))  # would run the payload
    np.savez(tmp_path / "v.npz", names=np.array(NAMES, dtype=object), vectors=_matrix())
    assert "object array (a pickle); bioviz never unpickles" in _refusal(tmp_path, "v.npz")
    assert not called


def test_a_5gb_declared_shape_is_refused_before_reading(tmp_home, tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (1_000_000, 1_342)})
    with zipfile.ZipFile(tmp_path / "v.npz", "w") as archive:
        names = io.BytesIO()
        np.save(names, np.array(NAMES))
        archive.writestr("names.npy", names.getvalue())
        archive.writestr("vectors.npy", header.getvalue() + b"\0" * 64)  # the header lies; 64 bytes follow
    message = _refusal(tmp_path, "v.npz")
    assert "declares a 1,000,000 x 1,342 float32 matrix (5.0 GB), over the 4.0 GB limit" in message


def test_names_and_rows_that_differ_in_count_are_refused(tmp_home, tmp_path):
    np.savez(tmp_path / "v.npz", names=np.array(NAMES), vectors=_matrix(3))
    assert "5 names but 3 vector rows" in _refusal(tmp_path, "v.npz")


def test_a_file_over_the_size_limit_is_refused(tmp_home, tmp_path, monkeypatch):
    write_vectors(NAMES, _matrix(), tmp_path / "v.parquet")
    monkeypatch.setenv("BIOVIZ_MAX_VECTORS_MB", "0.0001")
    assert "over the" in _refusal(tmp_path, "v.parquet")


def test_a_file_that_is_not_a_vectors_file_is_one_line(tmp_home, tmp_path):
    (tmp_path / "v.parquet").write_bytes(b"not parquet at all")
    assert "cannot be read as" in _refusal(tmp_path, "v.parquet")
    (tmp_path / "w.npz").write_bytes(b"PK not a zip")
    assert "cannot be read" in _refusal(tmp_path, "w.npz")


def test_a_projector_tsv_without_its_metadata_is_one_line(tmp_home, tmp_path):
    (tmp_path / "x_vectors.tsv").write_text("0.1\t0.2\n")
    with pytest.raises(BiovizError, match="x_metadata.tsv"):
        load_encoder(ModelSpec.parse(str(tmp_path / "x_vectors.tsv")))

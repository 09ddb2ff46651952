"""Vectors files, issue 41: the decoded-size budget, hostile .npz files in one line, dictionary-encoded
Parquet names, and the Projector export's formula-like names."""

import io
import struct
import zipfile

import numpy as np
import pytest

from bioviz.errors import ModelError
from bioviz.models import vectors_formats
from bioviz.models.vectors_export import pair_as_npz, write_vectors
from bioviz.models.vectors_file import open_vectors
from bioviz.models.vectors_formats import MAX_DIM, MAX_NAME_CHARS, metadata_path, read_projector_name

NAMES = ["heart attack", "asthma", "pneumonia"]


def _matrix(rows: int = len(NAMES), dim: int = 6) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(rows, dim)).astype(np.float32)


def _refused(path) -> str:
    with pytest.raises(ModelError) as caught:
        open_vectors(path)
    message = str(caught.value)
    assert "\n" not in message and caught.value.__traceback__ is not None
    return message


def _npy(header_shape, descr: str, body: bytes = b"") -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False, "shape": header_shape})
    return out.getvalue() + body


def _npz(path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> None:
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)


def _names_npy(names) -> bytes:
    out = io.BytesIO()
    np.save(out, np.array(names))
    return out.getvalue()


# --- finding 2: the decoded size ------------------------------------------------------------------


def test_a_tiny_parquet_of_4m_dimensions_is_refused_from_its_metadata(tmp_home, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = pa.array(np.zeros(4_000_000, dtype=np.float32))
    pq.write_table(pa.table({"name": ["a"], "vector": pa.ListArray.from_arrays([0, 4_000_000], values)}),
                   tmp_path / "v.parquet", compression="zstd")
    assert (tmp_path / "v.parquet").stat().st_size < 100_000
    message = _refused(tmp_path / "v.parquet")
    assert f"vectors of dimension 4,000,000, over the {MAX_DIM:,} bioviz reads" in message


def test_an_npz_declaring_67m_dimensions_is_refused_before_reading(tmp_home, tmp_path):
    _npz(tmp_path / "v.npz", {"names": _names_npy(["a", "b", "c", "d"]),
                              "vectors": _npy((4, 67_108_864), "<f4", b"\0" * 1024)})
    assert f"dimension 67,108,864, over the {MAX_DIM:,}" in _refused(tmp_path / "v.npz")


def test_an_npz_declaring_one_huge_name_is_refused_before_reading(tmp_home, tmp_path):
    _npz(tmp_path / "v.npz", {"names": _npy((1,), "<U200000000", b"x\0\0\0" * 16),
                              "vectors": _npy((1, 4), "<f4", b"\0" * 16)})
    assert f"over the {MAX_NAME_CHARS:,} characters a name may have" in _refused(tmp_path / "v.npz")


def test_a_name_longer_than_the_bound_is_refused(tmp_home, tmp_path):
    np.savez(tmp_path / "v.npz", names=np.array(["a", "x" * (MAX_NAME_CHARS + 1), "b"]), vectors=_matrix())
    assert f"over the {MAX_NAME_CHARS:,} characters" in _refused(tmp_path / "v.npz")
    write_vectors(["a", "y" * (MAX_NAME_CHARS + 1), "b"], _matrix(), tmp_path / "w.parquet")
    assert f"over the {MAX_NAME_CHARS:,}" in _refused(tmp_path / "w.parquet")


def test_a_small_projector_pair_upload_cannot_become_hundreds_of_megabytes(tmp_home):
    # 2,000 names, one of 50,000 characters: numpy's fixed-width strings made a 400 MB names array of it
    names = [f"n{i}" for i in range(1_999)] + ["x" * 50_000]
    vectors = b"1\t0\n" * 2_000
    with pytest.raises(ModelError, match=f"over the {MAX_NAME_CHARS:,} characters a name may have"):
        pair_as_npz(vectors, "".join(f"{n}\n" for n in names).encode())


def test_a_tsv_whose_floats_outgrow_the_budget_is_refused_while_read(tmp_home, tmp_path, monkeypatch):
    rows, dim = 100, 64
    (tmp_path / "v_vectors.tsv").write_text(("\t".join(["1"] * dim) + "\n") * rows)  # 12.8 KB of text
    (tmp_path / "v_metadata.tsv").write_text("".join(f"n{i}\n" for i in range(rows)))
    monkeypatch.setenv("BIOVIZ_MAX_VECTORS_MB", "0.02")  # 21 KB: the text fits, 25.6 KB of float32 do not
    message = _refused(tmp_path / "v_vectors.tsv")
    assert "vectors are" in message and "as float32, over the" in message and "BIOVIZ_MAX_VECTORS_MB" in message


def test_names_over_their_share_of_the_budget_are_refused(tmp_home, tmp_path, monkeypatch):
    rows = 4_000
    np.savez(tmp_path / "v.npz", names=np.array([f"{'n' * 60}{i}" for i in range(rows)]),
             vectors=_matrix(rows, 2))
    monkeypatch.setenv("BIOVIZ_MAX_VECTORS_MB", "1.5")  # names: 192 KB at most; these are 250 KB
    assert "limit for a file's names (an eighth of BIOVIZ_MAX_VECTORS_MB)" in _refused(tmp_path / "v.npz")


def test_a_wide_tsv_line_is_refused_before_it_is_split(tmp_home, tmp_path):
    (tmp_path / "v_vectors.tsv").write_text("1\t" * (MAX_DIM * 25) + "1\n")
    (tmp_path / "v_metadata.tsv").write_text("a\n")
    assert f"the {MAX_DIM:,} values a vector may have" in _refused(tmp_path / "v_vectors.tsv")


# --- finding 5: hostile .npz files, one line each -------------------------------------------------


def test_a_lone_surrogate_in_a_name_is_refused_in_one_line(tmp_home, tmp_path):
    np.savez(tmp_path / "v.npz", names=np.array(["a", "b\ud800", "c"]), vectors=_matrix())
    assert "the name of row 2 holds a lone surrogate" in _refused(tmp_path / "v.npz")


def _patched_member(path, patch) -> None:
    """Rewrite the ``vectors.npy`` member's local and central headers with ``patch(flags, method)``."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            flags, method = struct.unpack_from("<HH", data, start + offset)
            struct.pack_into("<HH", data, start + offset, *patch(flags, method))
            start += 4
    path.write_bytes(bytes(data))


def test_an_unknown_zip_compression_is_one_line(tmp_home, tmp_path):
    np.savez_compressed(tmp_path / "v.npz", names=np.array(NAMES), vectors=_matrix())
    _patched_member(tmp_path / "v.npz", lambda flags, method: (flags, 97))  # WavPack: zipfile lacks it
    assert "cannot be read as a vectors file" in _refused(tmp_path / "v.npz")


def test_an_encrypted_zip_member_is_one_line(tmp_home, tmp_path):
    np.savez(tmp_path / "v.npz", names=np.array(NAMES), vectors=_matrix())
    _patched_member(tmp_path / "v.npz", lambda flags, method: (flags | 1, method))
    assert "encrypted" in _refused(tmp_path / "v.npz")


def test_memory_running_out_while_reading_is_one_line(tmp_home, tmp_path, monkeypatch):
    np.savez(tmp_path / "v.npz", names=np.array(NAMES), vectors=_matrix())

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(vectors_formats, "_npz_names", exhausted)
    assert "not enough memory" in _refused(tmp_path / "v.npz")


# --- finding 8 (b, c): dictionary-encoded names, the Projector's formula-like names ---------------


def test_dictionary_encoded_parquet_names_are_read(tmp_home, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    matrix = _matrix()
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), matrix.shape[1])
    pq.write_table(pa.table({"name": pa.array(NAMES).dictionary_encode(), "vector": vectors}),
                   tmp_path / "v.parquet")
    opened = open_vectors(tmp_path / "v.parquet")
    assert opened.names == tuple(NAMES)
    np.testing.assert_allclose(opened.vectors, matrix / np.linalg.norm(matrix, axis=1, keepdims=True), atol=1e-6)


def test_the_projector_export_quotes_formula_names_and_reads_them_back(tmp_home, tmp_path):
    names = ['=HYPERLINK("http://x","y")', "'=already quoted", "+1 day", "-0.5", "'tis", "@home", "plain"]
    write_vectors(names, _matrix(len(names)), tmp_path / "x_vectors.tsv")
    lines = metadata_path(tmp_path / "x_vectors.tsv").read_text().splitlines()
    assert lines == ['\'=HYPERLINK("http://x","y")', "''=already quoted", "'+1 day", "-0.5", "'tis", "'@home",
                     "plain"]
    assert open_vectors(tmp_path / "x_vectors.tsv").names == tuple(names)
    assert [read_projector_name(line) for line in lines] == names

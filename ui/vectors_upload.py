"""The Home page's "Bring your own vectors": a vectors file uploaded, or named on the server, becomes a model.

An upload is size-bounded and stored like an ontology upload (:func:`bioviz.uploads.store_upload`);
a Projector pair (two TSVs) is stored as one ``.npz`` (:func:`bioviz.models.vectors_export.pair_as_npz`).
The file is opened once here (:func:`bioviz.models.vectors_file.open_vectors`), so a hostile one is
refused in one line on Home, then it becomes the baseline or the compared model of every page.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.models.vectors_export import pair_as_npz
from bioviz.uploads import MAX_UPLOAD_BYTES, check_upload_size, store_upload
from ui import state
from ui.markdown import md

NOTE = "_vectors_note"
SLOTS = {"Compared": "model_b", "Baseline": "model_a"}


def _use(text: str) -> str:
    """Open the vectors file ``text`` under the path policy and make it the chosen slot's model; its label."""
    model = ModelSpec.shared(text)
    if model.kind != "vectors":
        raise BiovizError(f"{text} is not a vectors file (.parquet, .npz, or the Projector's vectors .tsv)")
    encoder = load_encoder(model)  # converts and checks the file now: a bad one is refused here, in one line
    key = SLOTS[st.session_state.get("_vectors_slot", "Compared")]
    st.session_state[key] = model.spec
    st.session_state.pop(f"_{key}_label", None)  # the picker would choose its old label again
    state.keep_form(state.SHARED, state.SHARED_KEYS)
    return f"{encoder.label}: {len(encoder.file.names):,} names, {encoder.dim} dimensions"


def _stored(files) -> Path:
    """The upload stored: one Parquet or ``.npz`` as it is, a Projector pair as one ``.npz``."""
    for upload in files:
        check_upload_size(upload.name, upload.size)  # a scripted upload skips the browser's check
    if len(files) == 1:
        return store_upload(files[0].name, files[0].getvalue(), allowed=(".parquet", ".npz"),
                            keep=state.uploads_in_use())
    tsvs = sorted(files, key=lambda f: "metadata" in f.name.lower())
    if len(files) != 2 or not all(f.name.lower().endswith(".tsv") for f in files) or \
            "metadata" not in tsvs[1].name.lower():
        raise BiovizError("upload one .parquet or .npz, or the Projector's pair: x_vectors.tsv and x_metadata.tsv")
    stem = tsvs[0].name[: -len(".tsv")].removesuffix("_vectors").removesuffix("vectors") or "projector"
    return store_upload(f"{stem}.npz", pair_as_npz(tsvs[0].getvalue(), tsvs[1].getvalue()),
                        allowed=(".npz",), keep=state.uploads_in_use())


def _one_line(error: BaseException) -> str:
    """The note for a refused file: bioviz's own line, or the disk's (storing an upload on a full disk)."""
    if isinstance(error, BiovizError):
        return str(error)
    if isinstance(error, MemoryError):
        return "not enough memory to read these vectors"
    where = f" ({Path(error.filename).name})" if getattr(error, "filename", None) else ""
    return f"cannot store or read these vectors{where}: {error.strerror or error}"


def use_vectors_upload() -> None:
    """Store the uploaded vectors file and choose it (a callback)."""
    files = st.session_state.get("_vectors_upload") or []
    if not files:
        return
    try:
        stored = _stored(files)
        state.remember_upload(stored)
        st.session_state[NOTE] = ("success", f"Loaded {_use(str(stored))}.")
    except (BiovizError, OSError, MemoryError) as error:
        st.session_state[NOTE] = ("error", _one_line(error))


def use_vectors_path() -> None:
    """Choose the vectors file typed as a server path (a callback)."""
    try:
        st.session_state[NOTE] = ("success", f"Loaded {_use(st.session_state['_vectors_path'].strip())}.")
    except (BiovizError, OSError, MemoryError) as error:
        st.session_state[NOTE] = ("error", _one_line(error))


def vectors_expander() -> None:
    """The expander: upload or server path, which model slot it takes, and the formats."""
    with st.expander("Bring your own vectors (Parquet, .npz, or the Projector's TSV pair)"):
        st.markdown("Vectors computed elsewhere (a GPU cluster, a paid API, static word vectors) are compared "
                    "and trained on like a bundled model. **Parquet**: a `name` column and a `vector` list column; "
                    "**.npz**: arrays `names` and `vectors`; **Projector**: `x_vectors.tsv` with `x_metadata.tsv`. "
                    "A card beside a server file (`x.json`: name, dimension, source) names it. Pages keep the "
                    "level's names the file has vectors for and say how many are left out.")
        st.radio("Use as", list(SLOTS), horizontal=True, key="_vectors_slot")
        left, right = st.columns(2)
        with left:
            st.file_uploader("Vectors file", type=["parquet", "npz", "tsv"], accept_multiple_files=True,
                             key="_vectors_upload", on_change=use_vectors_upload,
                             max_upload_size=MAX_UPLOAD_BYTES // 2**20,
                             help=f"One .parquet or .npz, or the two Projector TSVs. At most "
                                  f"{MAX_UPLOAD_BYTES // 2**20} MiB; larger files: a server path.")
        with right:
            path = st.text_input("…or a vectors file on this server", key="_vectors_path",
                                 placeholder="/data/vectors/sapbert.parquet",
                                 help="Inside a data folder this server shares (BIOVIZ_DATA_DIRS)")
            st.button("Use these vectors", key="use_vectors_path", disabled=not path.strip(),
                      on_click=use_vectors_path)
        if note := st.session_state.pop(NOTE, None):
            (st.success if note[0] == "success" else st.error)(md(note[1]))

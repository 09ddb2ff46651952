"""Which models a session may load: the path policy, and no Hub download a link alone asked for.

A MODEL reaching the app is parsed once, under the server's path policy
(:meth:`~bioviz.models.model_spec.ModelSpec.shared`): a preset, a model directory (allowed only
inside the model folders of :mod:`bioviz.server_paths`) or a Hugging Face Hub id. Loading a hub id that
is not in the local cache downloads the whole repository when the server is online, so an
id that came from a link (``?model_a=someone/huge-repo``) waits for the user to press
*Download*; ids the user typed or confirmed in this session are *trusted* and load at once.
"""

from __future__ import annotations

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.models.model_files import hub_offline
from bioviz.models.model_spec import ModelSpec
from ui.markdown import md

TRUSTED = "_bioviz_trusted_models"  # hub ids this session typed or confirmed


def trust(spec: str) -> None:
    """Mark a model the user chose themselves (typed in, or confirmed): it may be downloaded."""
    st.session_state.setdefault(TRUSTED, set()).add(spec.strip())


def hub_download_needed(repo_id: str) -> bool:
    """Whether loading hub id ``repo_id`` would download it (online, and not in the local cache)."""
    if hub_offline():
        return False
    # imported here: the hub client is only needed for hub ids
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot_download(repo_id, local_files_only=True)
    except LocalEntryNotFoundError:
        return True
    except Exception:  # noqa: BLE001 - an invalid id: the loader refuses it without downloading
        return False
    return False


def usable_model(spec: str, key: str) -> ModelSpec:
    """The model to load for the picked text ``spec``, or stop the page with a one-line reason or a question.

    A path outside the model folders (or a directory that is no model) stops the page with
    the one-line message; a hub id that would be downloaded and that the user has not chosen
    themselves stops it with a *Download* button (``key`` tells the buttons of the two
    pickers apart).

    Returns
    -------
    ModelSpec
        A preset, a directory inside a model folder (at its real path), or a hub id safe to load now.
    """
    try:
        model = ModelSpec.shared(spec)
    except BiovizError as error:
        st.error(md(error))
        st.stop()
    if model.kind != "hub" or model.spec in st.session_state.get(TRUSTED, set()):
        return model
    if not hub_download_needed(model.spec):
        return model
    st.warning(md(f"The link asks for the model {model.spec}, which is not on this server: loading it downloads "
                  "the whole repository from the Hugging Face Hub."))
    if st.button(f"Download {md(model.spec)} from the Hugging Face Hub?", key=f"_download_{key}"):
        trust(model.spec)
        st.rerun()
    st.stop()

"""One Train-page widget per config option, chosen from its metadata (:mod:`trainer.options`).

Both forms (few-shot runs, :class:`~trainer.config.TrainConfig`; pretraining,
:class:`~trainer.pretrain.config.PretrainConfig`) draw their settings with
:func:`option_widget`: a menu for choices, a checkbox for a flag, a number input bounded by the
option's inclusive bounds. What a widget cannot bound (a strict bound such as ``lr > 0``) the
config's ``validate`` refuses when the job is launched, in the same words as the command line.
"""

from __future__ import annotations

import streamlit as st

from trainer.options import Option


def widget_bounds(option: Option) -> dict:
    """``min_value`` / ``max_value`` of a number widget from the option's inclusive bounds.

    >>> widget_bounds(Option("dropout", float, False, 0.5, min=0, max=1, max_exclusive=True))
    {'min_value': 0.0}
    >>> widget_bounds(Option("batch_size", int, False, 64, min=2))
    {'min_value': 2}
    """
    kind = float if option.kind is float else int
    bounds = {}
    if option.min is not None and not option.min_exclusive:
        bounds["min_value"] = kind(option.min)
    if option.max is not None and not option.max_exclusive:
        bounds["max_value"] = kind(option.max)
    return bounds


def widget_choices(option: Option) -> list:
    """The values a menu offers: the option's word for None (``auto``) first, then its menu less ``auto``.

    >>> widget_choices(Option("base_weight", float, True, None, offered=(0.0, 0.5), none="auto"))
    ['auto', 0.0, 0.5]
    """
    return [*([option.none] if option.none else []), *(c for c in option.menu if c != "auto")]


def option_widget(option: Option, default, key: str, **widget_args):
    """The widget of one option; returns the value it gives.

    Its label is the option's human title; its help says what it does and the config field
    it sets (the name ``--config`` files and the command line use). The default goes into the
    session before the widget is drawn, never as the widget's own default as well.

    Parameters
    ----------
    option : Option
    default : object
        The value shown first (the encoder's default, the field's default).
    key : str
        The widget's session key.
    **widget_args
        Passed to the widget (``disabled``, ``step``).
    """
    label, help_text = option.title, f"{option.help_text} (config field `{option.name}`)"
    if option.menu:
        # An "auto" value is resolved per encoder in the defaults shown; a field whose None
        # means "decided by the trainer" offers that word (e.g. base_weight: auto).
        st.session_state.setdefault(key, option.none if default is None else default)
        choice = st.selectbox(label, widget_choices(option), key=key, help=help_text, **widget_args)
        return None if choice == option.none else choice
    if option.kind is bool:
        st.session_state.setdefault(key, bool(default))
        return st.checkbox(label, key=key, help=help_text, **widget_args)
    bounds = widget_bounds(option)
    if option.kind is float:
        if default is None:  # optional number (interpolate's alpha): empty = off
            value = st.number_input(label, value=None, key=key, help=help_text, format="%g", **bounds, **widget_args)
            return None if value is None else float(value)
        st.session_state.setdefault(key, float(default))
        return st.number_input(label, key=key, help=help_text, format="%g", **bounds, **widget_args)
    widget_args = {"step": 1, **widget_args}
    if default is None:  # optional integer (split_seed, max tokens): empty = derived, or the model's own
        value = st.number_input(label, value=None, key=key, help=help_text, **bounds, **widget_args)
        return None if value is None else int(value)
    st.session_state.setdefault(key, int(default))
    return int(st.number_input(label, key=key, help=help_text, **bounds, **widget_args))

"""Every option of both configs, from its metadata: an out-of-range value is refused by the
config's ``validate``, through its command-line flag, and by the Train page's widget for it
(as scikit-learn's ``check_param_validation`` does for estimators). No training, no data."""

from __future__ import annotations

import dataclasses

import pytest
from streamlit.testing.v1 import AppTest

from bioviz.errors import BiovizError
from trainer import config as train_config
from trainer.cli import build_parser
from trainer.job_options import hyperparameters
from trainer.pretrain import command as pretrain_command, config as pretrain_config
from trainer.train_command import config_from_args as train_from_args
from ui.train.pretrain_form import GENERATED

CONFIGS = {
    "train": (train_config.TrainConfig(source="icd10"), train_config.validate),
    "pretrain": (pretrain_config.PretrainConfig(sources=["hpo"], objectives=["synonyms"]), pretrain_config.validate),
}
OPTIONS = {"train": train_config.OPTIONS, "pretrain": pretrain_config.OPTIONS}
# The options each form draws with its generated widgets (ui.train.option_widgets), by widget key.
FORM_KEYS = {
    "train": {o.name: f"hp_{o.name}" for o in hyperparameters() if o.name != "shots"},
    "pretrain": {name: f"pretrain_{name}" for name in GENERATED},
}


def bad_values(opt) -> list:
    """Values just outside what ``opt`` allows: below its minimum, above its maximum, not a choice."""
    out = []
    if opt.choices is not None:
        out.append(["no-such-choice"] if opt.kind is list else "no-such-choice")
    step = 1 if opt.kind is int else 0.5
    if opt.min is not None:
        out.append(opt.kind(opt.min) if opt.min_exclusive else opt.kind(opt.min - step))
    if opt.max is not None:
        out.append(opt.kind(opt.max) if opt.max_exclusive else opt.kind(opt.max + step))
    return out


CASES = [pytest.param(kind, opt, value, id=f"{kind}-{opt.name}={value!r}")
         for kind, options in OPTIONS.items() for opt in options.values() for value in bad_values(opt)]


def _refused(kind: str, opt, build) -> None:
    """``build()`` raises one line naming the option (its field, flag or, for objectives, the word)."""
    with pytest.raises(BiovizError) as refusal:
        build()
    message = str(refusal.value)
    assert "\n" not in message
    assert opt.name in message or opt.cli_flag in message or opt.name.rstrip("s") in message, message


def test_every_ranged_option_has_a_case_and_the_base_configs_are_valid():
    named = {(kind, p.values[1].name) for kind, p in ((p.values[0], p) for p in CASES)}
    assert {("train", "dropout"), ("train", "encoder"), ("pretrain", "batch_size"), ("pretrain", "loss"),
            ("pretrain", "objectives"), ("pretrain", "shots")} <= named
    for base, validate in CONFIGS.values():
        validate(base)
    # Pure: a config validated (objectives de-duplicated, lists copied) is left as it was given.
    given = pretrain_config.PretrainConfig(sources=("hpo",), objectives=["synonyms", "synonyms"])
    checked = pretrain_config.validate(given)
    assert checked.objectives == ["synonyms"] and checked.sources == ["hpo"]
    assert given.objectives == ["synonyms", "synonyms"] and given.sources == ("hpo",)


@pytest.mark.parametrize("kind, opt, value", CASES)
def test_validate_refuses(kind, opt, value):
    base, validate = CONFIGS[kind]
    _refused(kind, opt, lambda: validate(dataclasses.replace(base, **{opt.name: value})))


@pytest.mark.parametrize("kind, opt, value", CASES)
def test_the_command_line_flag_refuses(kind, opt, value):
    words = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    if kind == "train":
        args = build_parser().parse_args(["train", "--source", "icd10", "--out", "unused", opt.cli_flag, *words])
        _refused(kind, opt, lambda: train_config.validate(train_from_args(args)))
    else:
        args = build_parser().parse_args(["pretrain", "--sources", "hpo", "--objectives", "synonyms",
                                          opt.cli_flag, *words])
        _refused(kind, opt, lambda: pretrain_command.config_from_args(args))


def _draw_every_form_option():
    """Each form option's generated widget, as the Train page draws it (the options' own defaults)."""
    from trainer import config as train_config  # noqa: F811  (AppTest runs this function's source alone)
    from trainer.pretrain import config as pretrain_config
    from ui.train.option_widgets import option_widget

    for prefix, options in (("hp_", train_config.OPTIONS), ("pretrain_", pretrain_config.OPTIONS)):
        for opt in options.values():
            if opt.menu or opt.kind in (bool, int, float):  # names, paths and lists have widgets of their own
                default = opt.default if opt.default is not None or opt.menu else opt.min or 0
                option_widget(opt, default, f"{prefix}{opt.name}")


@pytest.fixture(scope="module")
def form():
    at = AppTest.from_function(_draw_every_form_option, default_timeout=60).run()
    assert not at.exception
    return at


FORM_CASES = [p for p in CASES if p.values[1].name in FORM_KEYS[p.values[0]]]


@pytest.mark.parametrize("kind, opt, value", FORM_CASES)
def test_the_forms_widget_refuses(form, kind, opt, value):
    """The widget cannot take the value (out of its bounds or menu); a strict bound a number
    widget cannot express is refused by ``validate`` when the form launches the job."""
    key = FORM_KEYS[kind][opt.name]
    if opt.menu:
        assert value not in form.selectbox(key=key).options and str(value) not in form.selectbox(key=key).options
        return
    widget = form.number_input(key=key)
    low, high = widget.min, widget.max
    outside = (low is not None and value < low) or (high is not None and value > high)
    strict = (opt.min_exclusive and value == opt.min) or (opt.max_exclusive and value == opt.max)
    assert outside or strict, (low, high)
    if strict:
        test_validate_refuses(kind, opt, value)

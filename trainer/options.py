"""Options of a config dataclass described once, in its field metadata.

:func:`option` declares a field with its help, the encoder types it applies to, its bounds,
its fixed choices and the word for None; :func:`options` reads them back as :class:`Option`
values. The command line's flags, the Train form's widgets and the range checks of
:func:`trainer.config.validate` are all generated from them, so they never disagree.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from functools import lru_cache

_MISSING = dataclasses.MISSING


def option(default=_MISSING, help: str = "", *, encoders: tuple[str, ...] | None = None,  # noqa: A002
           min: float | None = None, max: float | None = None,  # noqa: A002
           min_exclusive: bool = False, max_exclusive: bool = False, choices: tuple | None = None,
           offered: tuple | None = None, none: str | None = None, per_encoder: bool = False,
           label: str | None = None, flag: str | None = None, repeat: bool = False, metavar: str | None = None,
           default_factory=_MISSING):
    """A dataclass field with its description in the metadata.

    Parameters
    ----------
    default, default_factory
        As for :func:`dataclasses.field` (neither: a required field).
    help : str
        One line for ``--help`` and the form.
    encoders : tuple of str, optional
        The encoder types the field concerns (None: all).
    min, max : number, optional
        Bounds of a numeric field; ``min_exclusive`` / ``max_exclusive`` make them strict.
    choices : tuple, optional
        The only values allowed.
    offered : tuple, optional
        Values a form offers for a field whose allowed values are a range (e.g. base_weight).
    none : str, optional
        The word for None (``auto``, ``all``), for fields where None means something.
    per_encoder : bool
        The default depends on the encoder type (None until :func:`trainer.config.validate`).
    label : str, optional
        The human name a form shows (``Test names per class``); None: made from the field's name.
    flag : str, optional
        The command line's flag when it is not the field's name (``--pairs`` for ``pairs_file``).
    repeat : bool
        A list field given by repeating its flag (``--exclude-level A --exclude-level B``), not
        by one flag with several values.
    metavar : str, optional
        The value's name in ``--help`` (default: the field's name in capitals).
    """
    metadata = {"help": help, "encoders": encoders, "min": min, "max": max, "min_exclusive": min_exclusive,
                "max_exclusive": max_exclusive, "choices": choices, "offered": offered, "none": none,
                "per_encoder": per_encoder, "label": label, "flag": flag, "repeat": repeat, "metavar": metavar}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Option:
    """One field of a config, as the command line, the form and the validation see it.

    Attributes
    ----------
    name : str
    kind : type
        ``bool``, ``int``, ``float``, ``str``, ``list`` or ``dict`` (from the field's annotation);
        a list's items are strings, each one of ``choices`` when given.
    optional : bool
        None is allowed (the annotation includes None).
    default : object
        The field's default (None when required or built by a factory).
    help, encoders, min, max, min_exclusive, max_exclusive, choices, offered, none, per_encoder
        As given to :func:`option` (``label``: see :attr:`title`).
    """

    name: str
    kind: type
    optional: bool
    default: object
    help: str = ""
    encoders: tuple[str, ...] | None = None
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    choices: tuple | None = None
    offered: tuple | None = None
    none: str | None = None
    per_encoder: bool = False
    label: str | None = None
    flag: str | None = None
    repeat: bool = False
    metavar: str | None = None

    @property
    def title(self) -> str:
        """The form's label of the field: the declared ``label``, else its name in words.

        >>> Option("split_seed", int, True, None).title, Option("lr", float, True, None, label="Learning rate").title
        ('Split seed', 'Learning rate')
        """
        return self.label or self.name.replace("_", " ").capitalize()

    @property
    def cli_flag(self) -> str:
        """The command line's flag: the declared one, else ``--`` and the name with dashes.

        >>> Option("batch_size", int, False, 64).cli_flag
        '--batch-size'
        """
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def help_text(self) -> str:
        """The help with the encoder types it concerns first: ``dan/cca: weight of ...``."""
        return f"{'/'.join(self.encoders)}: {self.help}" if self.encoders else self.help

    @property
    def menu(self) -> tuple | None:
        """The values a form offers as a list: the choices, else the offered values."""
        return self.choices or self.offered

    def applies_to(self, encoder: str) -> bool:
        """Whether the field concerns ``encoder``."""
        return self.encoders is None or encoder in self.encoders

    def range_text(self) -> str:
        """``in [0, 1)``, ``>= 2``, ``> 0``; empty without bounds."""
        low, high = self.min, self.max
        if low is not None and high is not None:
            return f"in {'(' if self.min_exclusive else '['}{low:g}, {high:g}{')' if self.max_exclusive else ']'}"
        if low is not None:
            return f"{'>' if self.min_exclusive else '>='} {low:g}"
        if high is not None:
            return f"{'<' if self.max_exclusive else '<='} {high:g}"
        return ""

    def problem(self, value, name: str | None = None) -> str | None:
        """Why ``value`` is not allowed for this field (one line, naming it ``name``, default the
        field's name), or None when it is.

        >>> Option("loss", str, False, "mnrl", choices=("mnrl", "cached")).problem("x", "--loss")
        "unknown --loss 'x': choose one of mnrl, cached"
        """
        name = name or self.name
        if value is None:
            return None if self.optional else f"{name} must be given"
        if self.kind is list:
            return self._list_problem(value, name)
        if self.choices is not None:
            if value not in self.choices:
                return f"unknown {name} {value!r}: choose one of {', '.join(map(str, self.choices))}"
            return None
        if self.kind is bool:
            return None if isinstance(value, bool) else f"{name} must be true or false (got {value!r})"
        if self.kind in (int, float):
            return self._number_problem(value, name)
        if not isinstance(value, self.kind):
            return f"{name} must be a {self.kind.__name__} (got {value!r})"
        return None

    def _list_problem(self, value, name: str) -> str | None:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            return f"{name} must be a list of names (got {value!r})"
        unknown = [item for item in value if self.choices is not None and item not in self.choices]
        if unknown:
            return f"unknown {name} {unknown[0]!r}: choose any of {', '.join(map(str, self.choices))}"
        return None

    def _number_problem(self, value, name: str) -> str | None:
        kinds = (int,) if self.kind is int else (int, float)
        ok = isinstance(value, kinds) and not isinstance(value, bool)
        if ok and self.min is not None:
            ok = value > self.min if self.min_exclusive else value >= self.min
        if ok and self.max is not None:
            ok = value < self.max if self.max_exclusive else value <= self.max
        if ok:
            return None
        below = isinstance(value, kinds) and not isinstance(value, bool) and self.min is not None \
            and not (value > self.min if self.min_exclusive else value >= self.min)
        # Below the minimum, the minimum alone says what to do (the maximum is far away for most options).
        low_text = f"{'>' if self.min_exclusive else '>='} {self.min:g}" if below else ""
        wanted = low_text or self.range_text() or ("an integer" if self.kind is int else "a number")
        alternative = f", or {self.none}" if self.none else ""
        return f"{name} must be {wanted}{alternative} (got {value!r})"


def _kind(hint) -> tuple[type, bool]:
    """``(base type, optional)`` of an annotation such as ``int | None``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = typing.get_args(hint)
        base = next(a for a in args if a is not type(None))
        return _kind(base)[0], type(None) in args
    return typing.get_origin(hint) or hint, False


def from_stored(cls, values, **missing):
    """An instance of dataclass ``cls`` from stored ``values`` (a job's or a run's config file).

    Fields ``cls`` does not know are left out (a file written by another version) and fields
    the file lacks keep their defaults; ``missing`` gives required fields a value when absent.
    Nothing is checked: what was stored is read back as it was written.

    >>> from trainer.config import TrainConfig
    >>> c = from_stored(TrainConfig, {"encoder": "dan", "gone": 1}, source="?")
    >>> c.source, c.encoder, c.depth
    ('?', 'dan', 1)
    """
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**missing, **{k: v for k, v in values.items() if k in names}})


@lru_cache(maxsize=None)
def options(cls) -> tuple[Option, ...]:
    """The :class:`Option` of every field of dataclass ``cls``, in declaration order.

    Examples
    --------
    >>> from trainer.config import TrainConfig
    >>> by_name = {o.name: o for o in options(TrainConfig)}
    >>> by_name["dropout"].range_text(), by_name["context_weight"].help_text.split(":")[0]
    ('in [0, 1)', 'dan/cca')
    """
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind, optional = _kind(hints[f.name])
        default = None if f.default is _MISSING else f.default
        meta = {k: v for k, v in f.metadata.items() if k in Option.__dataclass_fields__}
        out.append(Option(name=f.name, kind=kind, optional=optional, default=default, **meta))
    return tuple(out)


NONE_WORDS = ("none", "all", "null")  # spell None for any optional option (plus its own word, e.g. auto)


def _value_parser(opt: Option):
    """The argparse ``type`` of an option: its field type, None from a none word when optional."""
    if opt.kind is dict:
        def parse(text: str):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
            return value
    elif opt.kind is list:
        return str
    elif opt.optional:
        words = (*NONE_WORDS, opt.none) if opt.none else NONE_WORDS

        def parse(text: str):
            return None if text.strip().lower() in words else opt.kind(text)
    else:
        return opt.kind
    parse.__name__ = opt.kind.__name__  # argparse names the type in "invalid int value"
    return parse


def add_arguments(parser: argparse.ArgumentParser, opts, *, suppress: bool) -> None:
    """One flag per option of ``opts``, typed from its field, its value stored under the field's name.

    Ranges and choices are left to the config's ``validate`` (one line, exit code 2), so a
    value the command line takes is refused with the same words a config file's is.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    opts : iterable of Option
    suppress : bool
        Options left out are absent from the parsed namespace (``argparse.SUPPRESS``), so that
        they do not override a config file; else they take the field's default.
    """
    for opt in opts:
        default = argparse.SUPPRESS if suppress else opt.default
        common = {"dest": opt.name, "default": default, "help": opt.help_text}
        if opt.kind is bool:
            parser.add_argument(opt.cli_flag, action="store_true", **common)
            continue
        metavar = opt.metavar or opt.name.upper()
        if opt.kind is list:
            shape = {"action": "append"} if opt.repeat else {"nargs": "+"}
            parser.add_argument(opt.cli_flag, type=str, metavar=metavar, **shape, **common)
        else:
            parser.add_argument(opt.cli_flag, type=_value_parser(opt), metavar=metavar, **common)


def values_from_args(args: argparse.Namespace, opts) -> dict:
    """``field -> value`` of the options of ``opts`` present in ``args`` (lists left out: empty)."""
    values = {opt.name: getattr(args, opt.name) for opt in opts if hasattr(args, opt.name)}
    return {name: ([] if values[name] is None and opt.kind is list else values[name])
            for opt in opts for name in [opt.name] if name in values}

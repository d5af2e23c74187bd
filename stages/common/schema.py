"""The decoder of params.yaml: plain YAML data into the settings types the schema is made of
(stages/common/params.py composes the library's own: `Recipe`, `CleanSettings`, `ExampleConfig`,
...), failing on the first value that does not fit with one line naming the param as params.yaml
writes it, the value and what it may be.

A type's fields say what each value may be (a dataclass, list, dict, Literal, Optional, Annotated
with a `Range`, or a scalar); a rule across a type's fields lives on the type (its `__post_init__`
raises `bert.errors.SettingsError`), and the decoder names the fields as written here. Numbers are
read as numbers even when a tool wrote them as strings: YAML 1.1 loaders read `6e-05` (which
`dvc exp run --set-param` writes) as a string. Two markers on a field's type tell the decoder
where params.yaml writes what: `Override` (a mapping of some keys of a type, each checked as that
field is) and `Given` (fields of a block that params.yaml writes once elsewhere: pretrain.optimizer
for every phase's recipe, the top-level seed).
"""

import dataclasses
import difflib
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Literal

import yaml

from bert.errors import SettingsError, UserError
from bert.ranges import Range

# Params of earlier params.yaml files that moved or changed shape, and where their meaning went.
MOVED = {
    "pretrain.init": "where pretraining starts is now pretrain.phases' first entry (phase1: random, or a key of weights)",
    "tasks.<task>.init": "a task's start is now its entry in tasks.run (tasks.run.<task>: finetune.init, or an earlier task)",
    "tasks.run": "tasks.run maps each task to its start ({swag: finetune.init, rte: mnli, ...})",
    "squad.version": "the SQuAD version run is now squad.run's entry: [v1.1], [v2.0], or [] for no SQuAD",
}
YAML_BOOLEAN_TRAP = "YAML reads an unquoted no/off/yes/on as a boolean"
# Values of earlier params.yaml files now spelled otherwise, as {param: (old, new)}: `off` became
# `none`, which `dvc exp run -S` writes as it is (it writes off bare, and YAML reads that as false).
RESPELLED = {"clean.decontaminate": ("off", "none")}


@dataclass(frozen=True)
class Override:
    """A mapping that replaces some keys of a dataclass (`of`): each given key is checked as that
    field is, an unknown key is an error; what it leaves out keeps the value it overrides."""

    of: type


class Given:
    """Fields of a block's type that params.yaml writes once elsewhere, as field=dotted param:
    each is read from there, checked as this type's field and named as written there; the block's
    own mapping leaves them out, and the block a param lies in takes it as one of its keys."""

    def __init__(self, **params: str):
        self.params = params


def decode(kind, raw: dict):
    """params.yaml's mapping `raw` as `kind`, every value checked; one line naming the first that
    does not fit."""
    return _build(kind, raw, "", raw)


def _build(kind, value, name: str, root: dict, given: Given | None = None):
    """`value` (plain YAML data at the param `name`; `root` the whole file) as `kind`."""
    label = name or "params.yaml"
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind):
        return _build_dataclass(kind, value, name, root, given)
    if origin is Annotated:
        base, marker = typing.get_args(kind)[:2]
        if isinstance(marker, Override):
            return _build_override(marker.of, value, name, root)
        if isinstance(marker, Given):
            return _build(base, value, name, root, marker)
        return _build_number(base, marker, value, label)
    if kind in (int, float):
        return _build_number(kind, Range(), value, label)
    if origin is Literal:
        return _build_word(typing.get_args(kind), value, label)
    if origin in (typing.Union, types.UnionType):
        return _build_union(typing.get_args(kind), value, name, root)
    if origin is list:
        if not isinstance(value, list):
            raise UserError(f"params.yaml: {label} must be a list, not {show(value)}")
        (item,) = typing.get_args(kind)
        return [_build(item, entry, f"{label}[{index}]", root) for index, entry in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            moved = _moved(name)
            raise UserError(
                f"params.yaml: {label} must be a mapping, not {show(value)}" + (f"; {moved}" if moved else "")
            )
        key_kind, item = typing.get_args(kind)
        return {
            _build(key_kind, str(key), f"{label} key", root): _build(item, entry, _join(name, str(key)), root)
            for key, entry in value.items()
        }
    if kind is bool:
        if not isinstance(value, bool):
            raise UserError(f"params.yaml: {label} must be true or false, not {show(value)}")
        return value
    if kind is str:
        if isinstance(value, bool):
            raise UserError(f"params.yaml: {label} is {show(value)}: {YAML_BOOLEAN_TRAP}; quote the text")
        if not isinstance(value, str | int | float):
            raise UserError(f"params.yaml: {label} must be a string, not {show(value)}")
        return str(value)
    raise TypeError(f"unsupported param type {kind} for {label}")


def _build_dataclass(kind, value, name: str, root: dict, given: Given | None):
    """A block: its own keys (the fields not `given`, and the params that its fields' `Given` place
    in it), each required, none unknown; then the type itself, whose rules across fields
    (SettingsError) are named as params.yaml writes them."""
    label = name or "params.yaml"
    if not isinstance(value, dict):
        raise UserError(f"params.yaml: {label} must be a mapping, not {show(value)}")
    hints = typing.get_type_hints(kind, include_extras=True)
    elsewhere = given.params if given else {}
    fields = [field.name for field in dataclasses.fields(kind) if field.name not in elsewhere]
    keys = fields + [key for key in _placed_here(hints, name) if key not in fields]
    for key in value:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            if key in elsewhere:
                hint = f"it is {elsewhere[key]}, written once for all; "
            moved = _moved(_join(name, key))
            hint = f"{moved}; " if moved else hint
            raise UserError(
                f"params.yaml: unknown key {_join(name, key)}; {hint}{label} takes: {', '.join(keys)}"
            )
    for key in keys:
        if key not in value:
            raise UserError(
                f"params.yaml: {_join(name, key)} is missing; add it (the repository's params.yaml has "
                "every key, with its meaning)"
            )
    built = {key: _build(hints[key], value[key], _join(name, key), root) for key in fields}
    built |= {key: _build(hints[key], _lookup(root, param), param, root) for key, param in elsewhere.items()}
    try:
        return kind(**built)
    except SettingsError as error:
        raise UserError(f"params.yaml: {error.naming(f'{name}.' if name else '')}") from None


def _placed_here(hints: dict, name: str) -> list[str]:
    """The keys of the block at `name` that its fields' `Given` read (pretrain.optimizer)."""
    placed = []
    for hint in hints.values():
        for marker in typing.get_args(hint)[1:] if typing.get_origin(hint) is Annotated else ():
            if isinstance(marker, Given):
                for param in marker.params.values():
                    block, _, key = param.rpartition(".")
                    if block == name and key not in placed:
                        placed.append(key)
    return placed


def _lookup(root: dict, param: str):
    """The raw value of the dotted `param`, or one line naming the first part that is missing."""
    node, walked = root, ""
    for key in param.split("."):
        if not isinstance(node, dict):
            raise UserError(f"params.yaml: {walked} must be a mapping, not {show(node)}")
        walked = _join(walked, key)
        if key not in node:
            raise UserError(
                f"params.yaml: {walked} is missing; add it (the repository's params.yaml has every key, with its meaning)"
            )
        node = node[key]
    return node


def _build_number(base: type, bounds: Range, value, label: str):
    number = _number(value)
    fits = number is not None and math.isfinite(number) and (base is float or number == int(number))
    if not fits or base(number) not in bounds:
        raise UserError(f"params.yaml: {label} is {show(value)}; it must be {bounds.describe(base)}")
    return base(number)


def _build_union(options: tuple, value, name: str, root: dict):
    if value is None and type(None) in options:
        return None
    options = [option for option in options if option is not type(None)]
    if len(options) == 1:
        return _build(options[0], value, name, root)
    for option in options:  # the first that takes the value, as auto | N
        try:
            return _build(option, value, name, root)
        except UserError:
            pass
    raise UserError(
        f"params.yaml: {name or 'params.yaml'} is {show(value)}; it must be {' or '.join(map(_describe, options))}"
    )


def _build_word(allowed: tuple[str, ...], value, label: str) -> str:
    """`value` when it is one of the words `allowed` (a Literal); else one line naming the param."""
    old, new = RESPELLED.get(label, (None, None))
    if old is not None and (value == old or value is False):
        raise UserError(
            f"params.yaml: {label} is {show(value)}: the value {old} is now spelled {new} (YAML reads a "
            f"bare {old}, as `dvc exp run -S {label}={old}` writes it, as false); write {new}"
        )
    if isinstance(value, bool):
        raise UserError(
            f"params.yaml: {label} is {show(value)}: {YAML_BOOLEAN_TRAP}; write {_quoted(allowed)}"
        )
    if value not in allowed:
        raise UserError(f"params.yaml: {label} is {show(value)}; allowed: {', '.join(allowed)}")
    return value


def _build_override(kind, value, name: str, root: dict) -> dict:
    """The keys of dataclass `kind` that `value` (a mapping, possibly empty) replaces, each built as
    that field of `kind` is."""
    if value is None:
        value = {}  # `recipe:` with nothing after it
    if not isinstance(value, dict):
        raise UserError(f"params.yaml: {name} must be a mapping (possibly empty: {{}}), not {show(value)}")
    fields = [field.name for field in dataclasses.fields(kind)]
    hints = typing.get_type_hints(kind, include_extras=True)
    built = {}
    for key, entry in value.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise UserError(
                f"params.yaml: unknown key {_join(name, key)}; {hint}{name} may override: {', '.join(fields)}"
            )
        built[key] = _build(hints[key], entry, _join(name, key), root)
    return built


def _describe(kind) -> str:
    """What a value of `kind` (one option of a union) may be, for a message."""
    if typing.get_origin(kind) is Literal:
        return " or ".join(map(str, typing.get_args(kind)))
    base, bounds = typing.get_args(kind) if typing.get_origin(kind) is Annotated else (kind, Range())
    return bounds.describe(base)


def show(value) -> str:
    """A value as params.yaml spells it."""
    if value is None or isinstance(value, bool):
        return yaml.safe_dump(value).removesuffix("\n...\n")
    return repr(value)


def _quoted(options) -> str:
    *others, last = (f'"{option}"' for option in options)
    return f"{', '.join(others)} or {last}" if others else last


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _moved(dotted: str) -> str | None:
    """What MOVED says of the param `dotted` (tasks.<task>.* looked up as such), or None."""
    task = re.match(r"tasks\.(?!run\b)([^.]+)\.", dotted)
    said = MOVED.get("tasks.<task>." + dotted[task.end() :] if task else dotted)
    return said.replace("<task>", task.group(1)) if said and task else said


def _join(prefix: str, key) -> str:
    return f"{prefix}.{key}" if prefix else str(key)

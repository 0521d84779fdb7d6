"""Turn YAML or JSON into a :class:`DpdSpec` and back, reporting every unknown key and wrong type.

One verb per meaning (docs/architecture.md): ``load_*`` reads a file, ``parse_*`` reads text or plain
data already in memory, ``dump_*`` writes plain data or YAML text.

The conversion is driven by the dataclasses' own type hints, so a new spec field needs no loader
code. Unions of records (model sources, autoscaling triggers) are written as a one-key mapping
naming the kind: ``source: {s3: {bucket: ..., prefix: ...}}``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import sys
import types
import typing
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from hyperpod_dpd._moved import renamed
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec import DpdSpec, _parsing
from hyperpod_dpd.spec.fields import is_shorthand, record_kinds
from hyperpod_dpd.spec.instances import InstanceType, supported_names
from hyperpod_dpd.spec.units import ByteSize

_MISSING = object()
# A file argument of ``-``: standard input where a file is read (as in ``kubectl apply -f -``), standard
# output where one is written (the commands' outputs).
DASH = "-"


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, value: Any, message: str, fix: str) -> Any:
        self.problems.append(Problem(field=path or "<root>", value=value, message=message, fix=fix))
        return _MISSING


def parse_spec_leniently(data: Any) -> tuple[DpdSpec | None, list[Problem]]:
    """Build a spec leniently: a field of the wrong type is reported and replaced by its default.

    Returns ``None`` only when a required field is missing or unusable, so callers can still run the
    semantic rules on the rest and report everything in one pass.
    """
    collector = _Collector()
    spec = _convert(DpdSpec, data, "", collector)
    return (spec if isinstance(spec, DpdSpec) else None), collector.problems


def parse_spec(data: Any, *, source: str | None = None) -> DpdSpec:
    """Build a spec from plain data; raise :class:`SpecError` naming every bad key and value."""
    spec, problems = parse_spec_leniently(data)
    if problems or spec is None:
        raise SpecError(problems, source=source)
    return spec


def load_spec_data(path: str | Path) -> Any:
    """The parsed content of a spec file (``.yaml``, ``.yml`` or ``.json``; ``-`` is standard input), not yet a spec."""
    name = str(path)
    if name == DASH:
        if sys.stdin is None:  # started with standard input closed (`<&-`)
            raise SpecError([Problem(field="<stdin>", value=None, message="is closed, so no spec can be read from it",
                                     fix="pipe the spec in (cat my-spec.yaml | ...), or pass the file's path")],
                            source="<stdin>")
        stdin = getattr(sys.stdin, "buffer", None)  # None when replaced by a text stream, as tests do
        try:
            head = sys.stdin.read(_parsing.MAX_FILE_BYTES + 1).encode() if stdin is None else stdin.read(
                _parsing.MAX_FILE_BYTES + 1)
        except OSError as err:
            raise SpecError([Problem(field="<stdin>", value=None, message=f"cannot be read: {err.strerror or err}",
                                     fix="pipe the spec in (cat my-spec.yaml | ...), or pass the file's path")],
                            source="<stdin>") from None
        return _parse_bytes(head, source="<stdin>")
    file = Path(path)
    try:
        with file.open("rb") as stream:  # read one byte past the limit, not a wrong file's gigabytes
            data = stream.read(_parsing.MAX_FILE_BYTES + 1)
            size = max(len(data), file.stat().st_size)
    except (OSError, ValueError) as err:  # ValueError: a NUL byte, which no path may hold
        reason = getattr(err, "strerror", None) or str(err)
        raise SpecError([Problem(field="<file>", value=name, message=f"cannot read the spec file: {reason}",
                                 fix="check the path and its permissions")], source=name) from err
    return _parse_bytes(data, source=name, size=size, json_only=file.suffix == ".json")


def _parse_bytes(data: bytes, *, source: str, size: int | None = None, json_only: bool = False) -> Any:
    """``size`` is the file's, when known; else ``data`` may be the first bytes of a longer stream."""
    try:
        _parsing.refuse_size(len(data) if size is None else size, unit="bytes", whole=size is not None)
        text = _parsing.decode_utf8(data)
    except _parsing.Refused as err:
        raise _refusal(err, source=source) from None
    # Universal newlines, as ``Path.read_text`` and text-mode standard input give them.
    return parse_text(text.replace("\r\n", "\n").replace("\r", "\n"), source=source, json_only=json_only)


def parse_text(text: str, *, source: str = "<text>", json_only: bool = False) -> Any:
    """YAML (or, with ``json_only``, strict JSON); a syntax error names the file, line and column.

    What a spec never holds is refused too, each with its position: a repeated key, more than
    :data:`~hyperpod_dpd.spec._parsing.MAX_NODES` nodes (aliases counted expanded), deeper nesting than
    :data:`~hyperpod_dpd.spec._parsing.MAX_DEPTH`, an integer too long to read, more than 1 MiB.
    """
    try:
        _parsing.refuse_size(len(text), unit="characters", whole=True)
        return _parsing.load_json(text) if json_only else _parsing.load_yaml(text)
    except _parsing.Refused as err:
        raise _refusal(err, source=source) from None
    except json.JSONDecodeError as err:
        raise _syntax_error("JSON", source, text, line=err.lineno, column=err.colno, problem=err.msg) from err
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "cannot be parsed"
        if err.context and err.problem and err.context_mark is not None and mark is not err.context_mark:
            problem = f"{problem} ({err.context} at line {err.context_mark.line + 1})"
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise _syntax_error("YAML", source, text, line=line, column=column, problem=problem) from err
    except yaml.reader.ReaderError as err:  # a control character: PyYAML names its index, not its line
        line, column = _parsing.position(text, err.position)
        problem = f"unacceptable character #x{err.character:04x}: {err.reason}"
        raise _syntax_error("YAML", source, text, line=line, column=column, problem=problem) from err
    except yaml.YAMLError as err:  # pragma: no cover - PyYAML raises marked or reader errors for syntax
        raise _syntax_error("YAML", source, text, line=1, column=1, problem=str(err)) from err


def _refusal(err: _parsing.Refused, *, source: str) -> SpecError:
    field = "<file>" if err.where is None else f"{source}:{err.where[0]}:{err.where[1]}"
    return SpecError([Problem(field=field, value=err.value, message=err.message, fix=err.fix)], source=source)


def _syntax_error(kind: str, source: str, text: str, *, line: int, column: int, problem: str) -> SpecError:
    """``FILE:LINE:COLUMN: malformed YAML: <problem> (got '<the line>')``, the position editors jump to."""
    lines = text.splitlines()
    offending = lines[line - 1].rstrip() if 0 < line <= len(lines) else ""
    fix = f"correct the syntax at line {line}, column {column}"
    if "'\\t'" in problem:  # YAML indents with spaces only; PyYAML names the tab but not the cure
        fix = f"replace the tab at line {line}, column {column} with spaces (YAML indents with spaces, never tabs)"
    problem_found = Problem(field=f"{source}:{line}:{column}", value=offending, message=f"malformed {kind}: {problem}",
                            fix=fix)
    return SpecError([problem_found], source=source)


def load_spec(path: str | Path) -> DpdSpec:
    """Read a spec file; every failure (unreadable, malformed, unknown key, wrong type) is a :class:`SpecError`."""
    return parse_spec(load_spec_data(path), source=str(path))


def parse_spec_text(text: str, *, source: str = "<text>", json_only: bool = False) -> DpdSpec:
    return parse_spec(parse_text(text, source=source, json_only=json_only), source=source)


def dump_spec(spec: DpdSpec) -> dict[str, Any]:
    """The plain-data form of a spec, which :func:`parse_spec` reads back to an equal spec."""
    result = _dump(spec)
    assert isinstance(result, dict)
    return result


def dump_spec_yaml(spec: DpdSpec) -> str:
    return yaml.safe_dump(dump_spec(spec), sort_keys=False, width=100)


# The public names before the verbs were settled, kept for a release (docs/spec.md).
spec_from_mapping = renamed(parse_spec, "spec_from_mapping")
spec_to_mapping = renamed(dump_spec, "spec_to_mapping")
spec_to_yaml = renamed(dump_spec_yaml, "spec_to_yaml")


# --- conversion --------------------------------------------------------------------------------


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _kind_of(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "empty"}.get(type(value), type(value).__name__)


def _convert(hint: Any, value: Any, path: str, out: _Collector) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        options = tuple(a for a in args if a is not type(None))
        if value is None:
            if len(options) < len(args):
                return None
            return out.add(path, value, "is empty", "give a value")
        kinds = record_kinds(options)
        if kinds is not None:
            return _convert_tagged(kinds, value, path, out)
        if len(options) == 1 and is_shorthand(options[0]) and not isinstance(value, Mapping):
            if isinstance(value, bool):
                return options[0]() if value else None  # ``slo: true`` is the record's defaults, ``false`` none
            name = path.rsplit(".", 1)[-1]
            out.add(path, value, f"must be true, false or a mapping of options, not {_kind_of(value)}",
                    f"write {name}: true (every default) or {name}: {{option: value}}")
            # Something was meant on: the rules check the rest as for ``true``, not as if the key were absent.
            return options[0]()
        if len(options) == 1:
            return _convert(options[0], value, path, out)
        for option in options:  # e.g. ``str | ModelArchitecture``: pick by the shape of the value
            if (option is str and isinstance(value, str)) or (dataclasses.is_dataclass(option)
                                                               and isinstance(value, Mapping)):
                return _convert(option, value, path, out)
        names = " or ".join(_describe(o) for o in options)
        return out.add(path, value, f"must be {names}, not {_kind_of(value)}", f"write {names}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return out.add(path, value, f"must be a list, not {_kind_of(value)}", "write a YAML list")
        items = [_convert(args[0], item, f"{path}[{i}]", out) for i, item in enumerate(value)]
        return tuple(items)
    if origin in (Mapping, dict) or hint is Mapping:
        if not isinstance(value, Mapping):
            return out.add(path, value, f"must be a mapping, not {_kind_of(value)}", "write key: value pairs")
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                out.add(f"{path}.{key}", key, "keys must be strings", "quote the key")
                continue
            converted = _convert(args[1] if args else str, item, f"{path}.{key}", out)
            result[key] = converted
        return result
    if hint is ByteSize:
        if isinstance(value, ByteSize):
            return value
        if isinstance(value, bool) or not isinstance(value, str):
            return out.add(path, value, "must be a size with a unit, not a bare number",
                           "write it as a size such as '8Gi' or '16Gi'")
        try:
            return ByteSize.parse(value)
        except ValueError as err:
            return out.add(path, value, str(err).split(";")[0], "write it as a size such as '8Gi' or '16Gi'")
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _convert_record(hint, value, path, out)
    if hint is InstanceType:
        if isinstance(value, InstanceType):
            return value
        if not isinstance(value, str):
            return out.add(path, value, f"must be an instance type name, not {_kind_of(value)}",
                           f"use one of {', '.join(supported_names())}")
        try:
            return InstanceType.from_name(value)
        except ValueError:
            return out.add(path, value, "is not an instance type that DPD supports (EFA with GPU-Direct RDMA "
                           "read and write)", f"use one of {', '.join(supported_names())}")
    if isinstance(hint, type) and issubclass(hint, Enum):
        allowed = [m.value for m in hint]
        if isinstance(value, hint):
            return value
        if value in allowed:
            return hint(value)
        return out.add(path, value, "is not an allowed value", f"use one of {', '.join(map(str, allowed))}")
    return _convert_scalar(hint, value, path, out)


def _convert_scalar(hint: Any, value: Any, path: str, out: _Collector) -> Any:
    if hint is bool:
        if isinstance(value, bool):
            return value
        return out.add(path, value, f"must be true or false, not {_kind_of(value)}", "write true or false")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return _usable_number(value, path, out)
        return out.add(path, value, f"must be an integer, not {_kind_of(value)}", "write a whole number")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = _usable_number(value, path, out)
            return number if number is _MISSING else float(number)
        return out.add(path, value, f"must be a number, not {_kind_of(value)}", "write a number such as 0.75")
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, list | dict):  # quoting a list or mapping whole gives no YAML a user would want
            return out.add(path, value, f"must be a string, not {_kind_of(value)}", "write one string")
        return out.add(path, value, f"must be a string, not {_kind_of(value)}", f"quote it: '{value}'")
    raise TypeError(f"no conversion for {hint!r} at {path}")  # pragma: no cover - a spec field of a new type


# Synth hands the spec's numbers to the CDK through jsii, as JavaScript numbers: IEEE 754 doubles, which round
# an integer beyond Number.MAX_SAFE_INTEGER (ECMA-262 §21.1.2.6) and have no JSON form for NaN or the infinities
# (RFC 8259 §6). YAML's .nan/.inf, a float literal past 1.8e308 and Python's json (NaN, Infinity) all give them.
_MAX_SAFE_INTEGER = 2**53 - 1


def _usable_number(value: int | float, path: str, out: _Collector) -> Any:
    """``value`` if it survives the trip to JavaScript (and ``float()``, which overflows past 1.8e308)."""
    if isinstance(value, int) and abs(value) > _MAX_SAFE_INTEGER:
        shown = value if value.bit_length() <= 256 else f"an integer of {value.bit_length()} bits"
        return out.add(path, shown, f"is too large to be a number (more than {_MAX_SAFE_INTEGER}, the largest "
                       "integer a JavaScript number holds exactly)", "write the number the field means")
    if isinstance(value, float) and not math.isfinite(value):
        return out.add(path, value, "must be a finite number (nan and infinities have no JSON or JavaScript form)",
                       "write a number")
    return value


def _convert_tagged(kinds: dict[str, type], value: Any, path: str, out: _Collector) -> Any:
    choices = ", ".join(kinds)
    if isinstance(value, tuple(kinds.values())):
        return value
    if not isinstance(value, Mapping) or len(value) != 1:
        return out.add(path, value, f"must be a mapping with exactly one of: {choices}",
                       f"write e.g. {{{next(iter(kinds))}: {{...}}}}")
    (kind, body), = value.items()
    if kind not in kinds:
        return out.add(f"{path}.{kind}", kind, "is not a known kind", f"use one of: {choices}")
    return _convert_record(kinds[kind], body, f"{path}.{kind}", out)


def _convert_record(cls: type, value: Any, path: str, out: _Collector) -> Any:
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        return out.add(path, value, f"must be a mapping, not {_kind_of(value)}", "write key: value pairs")
    hints = _hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    prefix = f"{path}." if path else ""
    for key, item in value.items():
        if key not in known:
            close = nearest_key(str(key), list(known))
            fix = (f"rename it to '{close}' (removing it would drop the setting)" if close
                   else f"remove it or correct its spelling (known keys: {', '.join(known)})")
            out.add(f"{prefix}{key}", key, "is not a known key", fix)
            continue
        converted = _convert(hints[key], item, f"{prefix}{key}", out)
        if converted is not _MISSING:
            kwargs[key] = converted
    failed = False
    for name, spec_field in known.items():
        required = spec_field.default is dataclasses.MISSING and spec_field.default_factory is dataclasses.MISSING
        if required and name not in value:
            out.add(f"{prefix}{name}", None, "is required", f"add '{name}' to {path or 'the spec'}")
            failed = True
        elif required and name not in kwargs:
            failed = True  # reported already; a field with a default falls back to it so checking goes on
    if failed:
        return _MISSING
    return cls(**kwargs)


def nearest_key(key: str, known: list[str]) -> str | None:
    """The known key a mistyped one most likely means: same letters without ``_``/case, else the closest."""
    squashed = key.replace("_", "").lower()
    for name in known:
        if name.replace("_", "") == squashed:
            return name
    close = difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.75)
    return close[0] if close else None


def _describe(hint: Any) -> str:
    if hint is str:
        return "a string"
    if dataclasses.is_dataclass(hint):
        return "a mapping"
    return getattr(hint, "__name__", str(hint))


# --- dumping -----------------------------------------------------------------------------------


def _dump(value: Any) -> Any:
    if isinstance(value, ByteSize):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _dump_tagged(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, InstanceType):
        return value.api_name
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {k: _dump(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_dump_tagged(v) for v in value]
    return value


def to_plain(value: Any) -> Any:
    """One spec value in its file form: sizes and instance types as strings, a record kind as a one-key mapping."""
    return _dump_tagged(value)


def _dump_tagged(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and hasattr(value, "KIND"):
        return {value.KIND: _dump(value)}
    return _dump(value)


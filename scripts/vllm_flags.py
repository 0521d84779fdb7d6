#!/usr/bin/env python3
"""Derive the command-line flags of ``vllm serve`` from vLLM's own argument definitions.

vLLM cannot be imported without torch and CUDA, so this reads the source with ``ast`` and replays
what vLLM does at parser-construction time:

- ``vllm/entrypoints/openai/cli_args.py``: ``make_arg_parser`` adds ``--headless``,
  ``--api-server-count``/``-asc`` and ``--config``, then every field of ``FrontendArgs`` (and its base
  ``BaseFrontendArgs``) as ``--field-name`` through ``get_kwargs`` and ``_customize_cli_kwargs``;
- ``vllm/engine/arg_utils.py``: ``EngineArgs.add_cli_args`` and ``AsyncEngineArgs.add_cli_args`` add
  each flag explicitly, most with ``**get_kwargs(SomeConfig)["field"]``;
- ``get_kwargs`` gives a ``bool`` field ``argparse.BooleanOptionalAction`` (so ``--no-<name>`` exists
  too), a list/tuple/set field ``nargs``, everything else one value; a dataclass-typed field takes one
  JSON value;
- ``vllm/entrypoints/cli/serve.py`` adds ``--grpc``; argparse adds ``-h``/``--help``.

Each flag gets its arity: ``none`` (a switch), ``optional``, ``one`` or ``many`` values; where
``_compute_kwargs`` gives it a checkable ``type`` or ``choices``, those too (``values``), and a JSON
config flag the keys its config class takes (``config_keys``). The same file carries the HTTP routes
of the API server (``@router.get(...)`` decorators and ``Mount`` calls under ``vllm/entrypoints/``) and,
per ``--quantization`` method, the model dtypes its config supports (``get_supported_act_dtypes`` under
``vllm/model_executor/layers/quantization/``).

``scripts/vllm_flags_check_installed.py`` compares the result with the parser an installed vLLM builds
itself; for 0.19.0 the two agree exactly (295 long flags with their arity, 22 short aliases).

Usage::

    scripts/vllm_flags.py                      # fetch the sdist from PyPI, write the package data file
    scripts/vllm_flags.py --artifact vllm-0.19.0.tar.gz --out -   # a local sdist or wheel, to stdout
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

VERSION = "0.19.0"
SDIST = f"vllm-{VERSION}.tar.gz"
# Recorded in the provenance; the address itself is the one pip uses on this machine (simple_index_url).
INDEX = "the PyPI simple index (PEP 691), project vllm"
OUT = Path(__file__).resolve().parents[1] / "k8s" / "hyperpod_dpd" / "data" / f"vllm-{VERSION}-flags.json"

ARG_UTILS = "vllm/engine/arg_utils.py"
CLI_ARGS = "vllm/entrypoints/openai/cli_args.py"
SERVE = "vllm/entrypoints/cli/serve.py"
CONFIG_UTILS = "vllm/config/utils.py"
ENTRYPOINTS = "vllm/entrypoints/"
# Modules whose classes and type aliases the annotations of the flag-bearing fields refer to.
TYPE_MODULES = ("vllm/config/", "vllm/entrypoints/chat_utils.py", "vllm/entrypoints/openai/models/protocol.py")

NONE, OPTIONAL, ONE, MANY = "none", "optional", "one", "many"


class DerivationError(RuntimeError):
    """The source no longer has the shape this script replays; read it again before trusting a list."""


# --- reading the artifact -------------------------------------------------------------------------

def read_sources(artifact: Path, package: str = "vllm") -> dict[str, str]:
    """``<package>/...`` path -> text of every Python file in an sdist (``.tar.gz``) or a wheel."""
    sources: dict[str, str] = {}
    if artifact.name.endswith(".whl"):
        with zipfile.ZipFile(artifact) as wheel:
            for name in wheel.namelist():
                if name.startswith(f"{package}/") and name.endswith(".py"):
                    sources[name] = wheel.read(name).decode("utf-8")
        return sources
    with tarfile.open(artifact, "r:gz") as sdist:
        for member in sdist.getmembers():
            _, _, name = member.name.partition("/")
            if member.isfile() and name.startswith(f"{package}/") and name.endswith(".py"):
                handle = sdist.extractfile(member)
                assert handle is not None
                sources[name] = handle.read().decode("utf-8")
    return sources


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def simple_index_url(project: str = "vllm") -> str:
    """The project's page on the index pip is configured with here (``PIP_INDEX_URL``, ``pip config``),
    else on pip's own default index. Installing vLLM to read its flags would need torch and CUDA, and
    ``pip download`` of the sdist would build its metadata, which needs them too."""
    configured = os.environ.get("PIP_INDEX_URL")
    if not configured:
        result = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                                capture_output=True, text=True, check=False)
        configured = result.stdout.strip() if result.returncode == 0 else ""
    if not configured:
        from pip._internal.models.index import PyPI  # noqa: PLC0415 - only when pip has no index configured

        configured = PyPI.simple_url
    return f"{configured.rstrip('/')}/{project}/"


def fetch_sdist(folder: Path, *, timeout: float = 60.0, project: str = "vllm",
                filename: str = SDIST) -> tuple[Path, str]:
    """Download ``filename`` through the simple index (PEP 691) into ``folder``; check the index's sha256."""
    request = urllib.request.Request(simple_index_url(project),
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        files = json.load(response)["files"]
    (entry,) = [f for f in files if f["filename"] == filename]
    expected = entry["hashes"]["sha256"]
    target = folder / filename
    if not target.exists() or sha256(target) != expected:
        folder.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        with urllib.request.urlopen(entry["url"], timeout=timeout) as response, partial.open("wb") as out:
            while block := response.read(1 << 20):
                out.write(block)
        partial.replace(target)
    actual = sha256(target)
    if actual != expected:
        raise DerivationError(f"{target} has sha256 {actual}, PyPI lists {expected}")
    return target, expected


# --- type annotations -----------------------------------------------------------------------------

@dataclass
class TypeIndex:
    """Classes and module-level type aliases by name, across the modules annotations refer to."""

    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    aliases: dict[str, ast.expr] = field(default_factory=dict)

    def add(self, tree: ast.Module) -> None:
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, node)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.aliases.setdefault(node.targets[0].id, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                if "TypeAlias" in ast.unparse(node.annotation):
                    self.aliases.setdefault(node.target.id, node.value)
            elif type(node).__name__ == "TypeAlias":  # ``type X = ...`` (Python 3.12+ syntax)
                self.aliases.setdefault(node.name.id, node.value)  # type: ignore[attr-defined]

    def is_dataclass(self, name: str) -> bool:
        node = self.classes.get(name)
        if node is None:
            return False
        decorators = {ast.unparse(d).split("(")[0].split(".")[-1] for d in node.decorator_list}
        return bool(decorators & {"config", "dataclass"})

    def fields(self, name: str) -> dict[str, ast.expr]:
        """The dataclass fields of ``name`` and its indexed bases, base fields first."""
        node = self.classes.get(name)
        if node is None:
            raise DerivationError(f"class {name} not found")
        found: dict[str, ast.expr] = {}
        for base in node.bases:
            base_name = ast.unparse(base).split(".")[-1]
            if base_name in self.classes:
                found.update(self.fields(base_name))
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                if "ClassVar" in ast.unparse(item.annotation) or "InitVar" in ast.unparse(item.annotation):
                    continue
                found[item.target.id] = item.annotation
        return found

    def members(self, annotation: ast.expr, seen: frozenset[str] = frozenset()) -> Iterator[str]:
        """The leaves of a type hint as ``get_type_hints`` splits it: unions and ``Annotated`` unwrapped,
        aliases resolved; each leaf as its name or its generic origin (``list``, ``Literal``...)."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            yield from self.members(ast.parse(annotation.value, mode="eval").body, seen)
        elif isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            yield from self.members(annotation.left, seen)
            yield from self.members(annotation.right, seen)
        elif isinstance(annotation, ast.Subscript):
            origin = ast.unparse(annotation.value).split(".")[-1]
            inner = annotation.slice
            elements = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
            if origin in ("Annotated", "SkipValidation"):  # pydantic: Annotated[T, SkipValidation()]
                yield from self.members(elements[0], seen)
            elif origin in ("Union", "Optional"):
                for element in elements:
                    yield from self.members(element, seen)
                if origin == "Optional":
                    yield "None"
            else:
                yield origin
        else:
            name = ast.unparse(annotation).split(".")[-1]
            if name in self.aliases and name not in seen:
                yield from self.members(self.aliases[name], seen | {name})
            else:
                yield name

    def leaves(self, annotation: ast.expr, seen: frozenset[str] = frozenset()) -> Iterator[ast.expr]:
        """The leaf nodes :meth:`members` names, so ``Literal[...]`` and ``list[...]`` keep their arguments."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            yield from self.leaves(ast.parse(annotation.value, mode="eval").body, seen)
        elif isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            yield from self.leaves(annotation.left, seen)
            yield from self.leaves(annotation.right, seen)
        elif isinstance(annotation, ast.Subscript):
            origin = _origin(annotation)
            elements = _elements(annotation)
            if origin in ("Annotated", "SkipValidation"):  # pydantic: Annotated[T, SkipValidation()]
                yield from self.leaves(elements[0], seen)
            elif origin in ("Union", "Optional"):
                for element in elements:
                    yield from self.leaves(element, seen)
                if origin == "Optional":
                    yield ast.Constant(None)
            else:
                yield annotation
        else:
            name = ast.unparse(annotation).split(".")[-1]
            if name in self.aliases and name not in seen:
                yield from self.leaves(self.aliases[name], seen | {name})
            else:
                yield annotation

    def literal_options(self, node: ast.Subscript, seen: frozenset[str] = frozenset()) -> list[object]:
        """``Literal["a", "b"]`` -> ``["a", "b"]``; a nested ``Literal`` (or an alias of one) is flattened,
        as ``typing.get_args`` flattens it."""
        options: list[object] = []
        for element in _elements(node):
            name = ast.unparse(element).split(".")[-1]
            if isinstance(element, ast.Subscript) and _origin(element) == "Literal":
                options += self.literal_options(element, seen)
            elif isinstance(element, ast.Name | ast.Attribute) and name in self.aliases and name not in seen:
                (inner,) = list(self.leaves(self.aliases[name], seen | {name}))
                if not (isinstance(inner, ast.Subscript) and _origin(inner) == "Literal"):
                    raise DerivationError(f"Literal member {name} is not a Literal")
                options += self.literal_options(inner, seen | {name})
            else:
                options.append(ast.literal_eval(element))
        return options

    def value_spec(self, annotation: ast.expr, name: str) -> dict[str, object] | None:
        """What ``_compute_kwargs`` (vllm/engine/arg_utils.py) gives the flag as ``type`` and ``choices``, in
        its order of checks, for the types this project can check without vLLM: ``choices`` (a ``Literal``
        without ``str`` beside it, ``literal_to_kwargs``), ``int``/``float``, vLLM's ``human_readable_int``
        (``1k``, ``2M``) and ``human_readable_int_or_auto``, and ``json`` (a dataclass, or a bare ``dict``,
        parsed by ``json.loads``). ``none`` records that ``optional_type`` also takes ``""`` and ``"None"``.
        None when the value is free text (``str`` and other non-builtin types) or the flag is a switch."""
        leaves = list(self.leaves(annotation))
        names = {_leaf_name(leaf) for leaf in leaves}
        optional = "None" in names
        spec: dict[str, object] | None
        if any(self.is_dataclass(n) for n in names):
            spec = {"type": "json"}
        elif "bool" in names:
            return None
        elif "Literal" in names:
            spec = self._literal_spec(leaves, names)
        elif names & {"tuple", "list", "set", "Tuple", "List", "Set"}:
            (collection,) = [leaf for leaf in leaves if _leaf_name(leaf) in {"tuple", "list", "set", "Tuple",
                                                                            "List", "Set"}]
            elements = _elements(collection) if isinstance(collection, ast.Subscript) else []
            element = elements[0] if elements else ast.Name("str")
            # collection_to_kwargs: a union element must include str and becomes str.
            inner = list(self.leaves(element))
            inner_names = {_leaf_name(leaf) for leaf in inner}
            if len(inner) > 1 or ("Literal" not in inner_names and not inner_names & {"int", "float"}):
                return None
            if "Literal" in inner_names:
                spec = self._literal_spec(inner, inner_names)
            else:
                spec = {"type": "int" if "int" in inner_names else "float"}
        elif "int" in names:
            spec = {"type": {"max_model_len": "human_readable_int_or_auto", "max_num_batched_tokens":
                             "human_readable_int", "kv_cache_memory_bytes": "human_readable_int"}.get(name, "int")}
        elif "float" in names:
            spec = {"type": "float"}
        elif names & {"dict", "Dict"} and "str" not in names and all(n in BUILTIN_NAMES for n in names):
            spec = {"type": "json"}
        else:
            return None
        if spec is None:
            return None
        if optional:
            spec["none"] = True
        return spec

    def _literal_spec(self, leaves: list[ast.expr], names: set[str]) -> dict[str, object] | None:
        literals = [leaf for leaf in leaves if _leaf_name(leaf) == "Literal"]
        if len(literals) != 1 or not isinstance(literals[0], ast.Subscript):
            raise DerivationError(f"expected one Literal among {[ast.unparse(leaf) for leaf in leaves]}")
        options = self.literal_options(literals[0])
        kinds = {type(option).__name__ for option in options}
        if len(kinds) != 1:
            raise DerivationError(f"Literal options of mixed types: {options}")
        (kind,) = kinds
        if "str" in names:  # literal_to_kwargs: a metavar, not choices
            return None if kind == "str" else {"type": kind}
        return {"type": kind, "choices": sorted(options)}  # type: ignore[type-var]

    def init_keys(self, name: str) -> list[str]:
        """The keyword arguments a ``@config`` dataclass takes: its fields and ``InitVar``s, bases included
        (``ClassVar``s are not fields). ``config`` (vllm/config/utils.py) makes it a pydantic dataclass
        with ``extra="forbid"``, so any other key is a validation error."""
        node = self.classes.get(name)
        if node is None:
            raise DerivationError(f"class {name} not found")
        keys: list[str] = []
        for base in node.bases:
            base_name = ast.unparse(base).split(".")[-1]
            if base_name in self.classes:
                keys += self.init_keys(base_name)
        for item in node.body:
            if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                    and "ClassVar" not in ast.unparse(item.annotation)):
                keys.append(item.target.id)
        return sorted(set(keys))

    def forbids_extra(self, name: str) -> bool:
        """``@config`` (extra forbidden unless its ``config=`` says otherwise) or ``extra="forbid"``."""
        node = self.classes.get(name)
        if node is None:
            return False
        for decorator in node.decorator_list:
            text = ast.unparse(decorator)
            head = text.split("(")[0].split(".")[-1]
            if head == "config" and "extra=" not in text:
                return True
            if "extra='forbid'" in text or 'extra="forbid"' in text:
                return True
        return False

    def nested_configs(self, name: str, seen: tuple[str, ...] = ()) -> dict[str, dict[str, object]]:
        """The fields of ``name`` typed as another config class that forbids extra keys (``pass_config:
        PassConfig``), each with that class's keys and its own nested fields. A field whose type also admits a
        free mapping (``dict[str, Any]``, ``Any``), such as ``kv_connector_extra_config``, takes any key, and so does
        one pydantic never validates (``SkipValidation[ModelConfig]``, speculative.py's ``draft_model_config``):
        such fields get no entry, and stay free."""
        found: dict[str, dict[str, object]] = {}
        for field_name, annotation in self.fields(name).items():
            sub = self.dataclass_of(annotation)
            members = set(self.members(annotation))
            if (sub is None or sub in seen or sub == name or not self.forbids_extra(sub)
                    or "SkipValidation" in ast.unparse(annotation)
                    or members & {"dict", "Dict", "Mapping", "Any", "object"}):
                continue
            entry: dict[str, object] = {"class": sub, "keys": self.init_keys(sub)}
            deeper = self.nested_configs(sub, (*seen, name))
            if deeper:
                entry["nested"] = deeper
            found[field_name] = entry
        return dict(sorted(found.items()))

    def dataclass_of(self, annotation: ast.expr) -> str | None:
        found = [n for n in map(_leaf_name, self.leaves(annotation)) if self.is_dataclass(n)]
        return found[0] if found else None

    def arity(self, annotation: ast.expr) -> str:
        """What ``get_kwargs`` makes of a field: the same order of checks as vLLM's ``_compute_kwargs``."""
        members = set(self.members(annotation))
        if any(self.is_dataclass(m) for m in members):
            return ONE
        if "bool" in members:
            return NONE
        if "Literal" in members:
            return ONE
        if members & {"tuple", "list", "set", "Tuple", "List", "Set"}:
            return MANY
        return ONE


BUILTIN_NAMES = frozenset({"None", "int", "float", "str", "bool", "bytes", "dict", "list", "tuple", "set"})


def _origin(node: ast.Subscript) -> str:
    return ast.unparse(node.value).split(".")[-1]


def _elements(node: ast.Subscript) -> list[ast.expr]:
    return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]


def _leaf_name(leaf: ast.expr) -> str:
    if isinstance(leaf, ast.Constant) and leaf.value is None:
        return "None"
    if isinstance(leaf, ast.Subscript):
        return _origin(leaf)
    return ast.unparse(leaf).split(".")[-1]


# --- replaying the parser construction ------------------------------------------------------------

@dataclass
class Parser:
    flags: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    values: dict[str, dict[str, object]] = field(default_factory=dict)
    config_keys: dict[str, dict[str, object]] = field(default_factory=dict)
    routes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    mounts: dict[str, dict[str, str]] = field(default_factory=dict)
    quantization_dtypes: dict[str, list[str]] = field(default_factory=dict)

    def add(self, option_strings: Iterable[str], arity: str, *, boolean_optional: bool,
            values: dict[str, object] | None = None, config: str | None = None) -> None:
        options = list(option_strings)
        longs = [o for o in options if o.startswith("--")]
        if not longs:
            raise DerivationError(f"no long option among {options}")
        for option in options:
            if option.startswith("--"):
                self.flags[option] = arity
                self.values.pop(option, None)
                self.config_keys.pop(option, None)
                if values is not None and arity != NONE:
                    self.values[option] = values
                if config is not None:
                    self.config_keys[option] = {"class": config}
                if boolean_optional:
                    self.flags["--no-" + option[2:]] = NONE
            else:
                self.aliases[option] = longs[0]


def _string(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _function(tree: ast.Module, class_name: str, method: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item
    raise DerivationError(f"{class_name}.{method} not found")


def _top_function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise DerivationError(f"function {name} not found")


def _add_argument_calls(function: ast.FunctionDef) -> Iterator[ast.Call]:
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            yield node


def _kwargs_sources(function: ast.FunctionDef) -> dict[str, str]:
    """``model_kwargs = get_kwargs(ModelConfig)`` -> ``{"model_kwargs": "ModelConfig"}``."""
    sources: dict[str, str] = {}
    for node in ast.walk(function):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "get_kwargs"):
            sources[node.targets[0].id] = ast.unparse(node.value.args[0])
    return sources


def _call_arity(call: ast.Call, field_arity: str | None) -> tuple[str, bool]:
    """Arity and whether the action is ``BooleanOptionalAction``, from the call's own keywords
    (which override the ``**kwargs`` of ``get_kwargs``, as keyword order does in the call)."""
    arity = field_arity if field_arity is not None else ONE
    boolean_optional = field_arity == NONE
    for keyword in call.keywords:
        explicit: list[tuple[str, ast.expr]] = []
        if keyword.arg is not None:
            explicit.append((keyword.arg, keyword.value))
        elif isinstance(keyword.value, ast.Dict):
            explicit += [(k.value, v) for k, v in zip(keyword.value.keys, keyword.value.values, strict=True)
                         if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        for name, value in explicit:
            if name == "action":
                text = ast.unparse(value)
                boolean_optional = text.endswith("BooleanOptionalAction")
                if boolean_optional or _string(value) in ("store_true", "store_false", "store_const"):
                    arity = NONE
            elif name == "nargs":
                nargs = ast.literal_eval(value)
                arity = OPTIONAL if nargs == "?" else MANY if nargs in ("+", "*") or isinstance(nargs, int) else ONE
    return arity, boolean_optional


def _field_reference(call: ast.Call) -> tuple[str, str] | None:
    """``**model_kwargs["dtype"]`` (possibly inside ``**{**...}``) -> ``("model_kwargs", "dtype")``."""
    for keyword in call.keywords:
        if keyword.arg is not None:
            continue
        candidates = [keyword.value]
        if isinstance(keyword.value, ast.Dict):
            candidates = [v for k, v in zip(keyword.value.keys, keyword.value.values, strict=True) if k is None]
        for node in candidates:
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                key = _string(node.slice)
                if key is not None:
                    return node.value.id, key
    return None


def _modified_fields(function: ast.FunctionDef) -> set[tuple[str, str]]:
    """``(variable, field)`` pairs whose kwargs the function rewrites before adding the flag
    (``observability_kwargs["collect_detailed_traces"]["choices"] += [...]``): their ``type`` and
    ``choices`` are no longer what ``get_kwargs`` derived, so no value check is derived for them."""
    modified: set[tuple[str, str]] = set()
    for node in ast.walk(function):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else (
            [node.target] if isinstance(node, ast.AugAssign) else [])
        for target in targets:
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)
                    and isinstance(target.value.value, ast.Name) and _string(target.value.slice) is not None
                    and _string(target.slice) in ("type", "choices", "action", "nargs")):
                modified.add((target.value.value.id, str(_string(target.value.slice))))
    return modified


def _call_values(call: ast.Call, values: dict[str, object] | None) -> dict[str, object] | None:
    """The call's own ``type=`` and ``choices=`` override what ``get_kwargs`` gave."""
    for keyword in call.keywords:
        if keyword.arg == "type":
            text = ast.unparse(keyword.value)
            values = {"type": text} if text in ("int", "float") else None
        elif keyword.arg == "choices":
            try:
                choices = ast.literal_eval(keyword.value)
            except ValueError:
                return None
            values = {"type": type(choices[0]).__name__, "choices": sorted(choices)}
        elif keyword.arg is None and not isinstance(keyword.value, ast.Subscript | ast.Dict):
            values = None  # ``**some_kwargs``: not traceable to one field
        elif isinstance(keyword.value, ast.Dict) and {_string(k) for k in keyword.value.keys
                                                      if k is not None} & {"type", "choices"}:
            values = None
    return values


def replay_explicit(function: ast.FunctionDef, types: TypeIndex, parser: Parser) -> None:
    """Every ``add_argument`` call of a function such as ``EngineArgs.add_cli_args``."""
    sources = _kwargs_sources(function)
    modified = _modified_fields(function)
    for call in _add_argument_calls(function):
        options = [s for s in map(_string, call.args) if s is not None]
        if not options or not all(o.startswith("-") for o in options):
            continue  # a positional such as model_tag
        reference = _field_reference(call)
        field_arity = None
        values: dict[str, object] | None = None
        config = None
        if reference is not None:
            variable, name = reference
            if variable not in sources:
                raise DerivationError(f"{variable} is not a get_kwargs(...) result in {function.name}")
            fields = types.fields(sources[variable])
            if name not in fields:
                raise DerivationError(f"{sources[variable]} has no field {name}")
            field_arity = types.arity(fields[name])
            values = None if reference in modified else types.value_spec(fields[name], name)
            config = types.dataclass_of(fields[name])
        arity, boolean_optional = _call_arity(call, field_arity)
        values = _call_values(call, values)
        parser.add(options, arity, boolean_optional=boolean_optional, values=values, config=config)


def replay_frontend(tree: ast.Module, types: TypeIndex, parser: Parser) -> None:
    """``FrontendArgs.add_cli_args``: every field becomes ``--field-name`` after the customisations."""
    annotations = types.fields("FrontendArgs")
    arities = {name: types.arity(annotation) for name, annotation in annotations.items()}
    customised: set[str] = set()
    extra_flags: dict[str, list[str]] = {}
    for class_name in ("BaseFrontendArgs", "FrontendArgs"):
        for node in ast.walk(_function(tree, class_name, "_customize_cli_kwargs")):
            target = None
            if isinstance(node, ast.Delete):
                target, value = node.targets[0], None
            elif isinstance(node, ast.Assign):
                target, value = node.targets[0], node.value
            if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)):
                continue
            key, name = _string(target.slice), _string(target.value.slice)
            if name is None or key is None:
                continue
            if name not in arities:
                raise DerivationError(f"_customize_cli_kwargs names unknown field {name}")
            if key in ("type", "choices", "action", "nargs"):
                customised.add(name)
            if key == "nargs":
                arities[name] = ONE if value is None else _call_arity(
                    ast.Call(func=ast.Name("x"), args=[], keywords=[ast.keyword("nargs", value)]), None)[0]
            elif key == "action" and value is not None and _string(value) in ("store_true", "store_false"):
                arities[name] = NONE
            elif key == "flags" and isinstance(value, ast.List):
                extra_flags[name] = [s for s in map(_string, value.elts) if s is not None]
    for name, arity in arities.items():
        values = None if name in customised else types.value_spec(annotations[name], name)
        parser.add([*extra_flags.get(name, []), "--" + name.replace("_", "-")], arity,
                   boolean_optional=arity == NONE, values=values, config=types.dataclass_of(annotations[name]))


HTTP_METHODS = ("get", "post", "put", "delete", "patch")
# FastAPI's defaults for openapi_url, docs_url (with its OAuth2 redirect) and redoc_url.
FASTAPI_DEFAULT_ROUTES = ("/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")


def derive_routes(sources: dict[str, str], parser: Parser) -> None:
    """The HTTP routes vLLM's API server can serve: every ``@router.get("/path")`` (``post``, ...,
    ``api_route``) decorator and every ``Mount("/path", app)`` under ``vllm/entrypoints/``. It is the
    union over the conditions that include a router (model task, dev mode, ...), so a path outside it is
    served by no configuration of vLLM 0.19.0."""
    routes: dict[str, dict[str, set[str]]] = {}
    for path, text in sorted(sources.items()):
        if not path.startswith(ENTRYPOINTS):
            continue
        for node in ast.walk(ast.parse(text, filename=path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
                            and decorator.args and _string(decorator.args[0]) is not None):
                        continue
                    attr, route = decorator.func.attr, str(_string(decorator.args[0]))
                    methods = [attr.upper()] if attr in HTTP_METHODS else []
                    if attr == "api_route":
                        methods = [str(_string(m)) for k in decorator.keywords if k.arg == "methods"
                                   and isinstance(k.value, ast.List | ast.Tuple) for m in k.value.elts] or ["GET"]
                    for method in methods:
                        entry = routes.setdefault(method, {}).setdefault(route, set())
                        entry.add(f"{path}:{decorator.lineno}")
            elif (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "FastAPI"
                  and not any(k.arg == "openapi_url" for k in node.keywords)):
                # FastAPI's own routes unless the call turns them off (--disable-fastapi-docs does).
                for route in FASTAPI_DEFAULT_ROUTES:
                    routes.setdefault("GET", {}).setdefault(route, set()).add(f"{path}:{node.lineno} (FastAPI)")
            elif (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("Mount", "mount")
                  and node.args and _string(node.args[0]) is not None and len(node.args) > 1):
                app = node.args[1]
                name = ast.unparse(app.func if isinstance(app, ast.Call) else app).split(".")[-1]
                parser.mounts[str(_string(node.args[0]))] = {"app": name, "source": f"{path}:{node.lineno}"}
    parser.routes = {method: {route: sorted(where) for route, where in sorted(found.items())}
                     for method, found in sorted(routes.items())}


QUANTIZATION = "vllm/model_executor/layers/quantization/"
# torch dtype attribute -> the --dtype spelling vLLM maps to it (_STR_DTYPE_TO_TORCH_DTYPE, vllm/config/model.py).
TORCH_DTYPES = {"bfloat16": "bfloat16", "half": "float16", "float16": "float16", "float": "float32",
                "float32": "float32"}


def derive_quantization_dtypes(sources: dict[str, str]) -> dict[str, list[str]]:
    """``--quantization`` method -> the model dtypes its config accepts: ``get_quantization_config``
    (quantization/__init__.py) maps each method to a class, whose ``get_supported_act_dtypes`` (or a base's)
    returns a literal list of torch dtypes; ``VllmConfig._get_quantization_config`` (vllm/config/vllm.py)
    refuses any other model dtype. Methods whose list is computed are left out."""
    init = ast.parse(sources[QUANTIZATION + "__init__.py"])
    function = _top_function(init, "get_quantization_config")
    methods: dict[str, str] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if key is not None and _string(key) is not None and isinstance(value, ast.Name):
                    methods[str(_string(key))] = value.id
    if not methods:
        raise DerivationError("get_quantization_config has no method_to_config dict")
    classes: dict[str, ast.ClassDef] = {}
    for path, text in sorted(sources.items()):
        if path.startswith(QUANTIZATION):
            for node in ast.parse(text, filename=path).body:
                if isinstance(node, ast.ClassDef):
                    classes.setdefault(node.name, node)

    def supported(name: str) -> list[str] | None:
        node = classes.get(name)
        if node is None:
            return None
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "get_supported_act_dtypes":
                returned = item.body[-1]
                if len(item.body) != 1 or not isinstance(returned, ast.Return) or not isinstance(
                        returned.value, ast.List):
                    return None
                names = [ast.unparse(e) for e in returned.value.elts]
                if not all(n.startswith("torch.") and n[6:] in TORCH_DTYPES for n in names):
                    return None
                return sorted({TORCH_DTYPES[n[6:]] for n in names})
        for base in node.bases:
            found = supported(ast.unparse(base).split(".")[-1])
            if found is not None:
                return found
        return None

    return {method: found for method, cls in sorted(methods.items()) if (found := supported(cls)) is not None}


def derive(sources: dict[str, str]) -> Parser:
    """The flags of ``vllm serve`` for the given ``vllm/...`` sources."""
    for required in (ARG_UTILS, CLI_ARGS, SERVE):
        if required not in sources:
            raise DerivationError(f"{required} is missing from the artifact")
    types = TypeIndex()
    for path, text in sorted(sources.items()):
        if path.startswith(TYPE_MODULES) or path in (ARG_UTILS, CLI_ARGS):
            types.add(ast.parse(text, filename=path))
    cli_args = ast.parse(sources[CLI_ARGS])
    arg_utils = ast.parse(sources[ARG_UTILS])
    parser = Parser()
    parser.add(["-h", "--help"], NONE, boolean_optional=False)
    replay_explicit(_top_function(cli_args, "make_arg_parser"), types, parser)
    replay_frontend(cli_args, types, parser)
    replay_explicit(_function(arg_utils, "EngineArgs", "add_cli_args"), types, parser)
    replay_explicit(_function(arg_utils, "AsyncEngineArgs", "add_cli_args"), types, parser)
    replay_explicit(_function(ast.parse(sources[SERVE]), "ServeSubcommand", "subparser_init"), types, parser)
    for flag, entry in list(parser.config_keys.items()):
        name = str(entry["class"])
        if types.forbids_extra(name):
            entry["keys"] = types.init_keys(name)
            nested = types.nested_configs(name)
            if nested:
                entry["nested"] = nested
        else:
            del parser.config_keys[flag]
    derive_routes(sources, parser)
    parser.quantization_dtypes = derive_quantization_dtypes(sources)
    return parser


def document(parser: Parser, *, artifact: str, artifact_sha256: str) -> dict[str, object]:
    return {
        "vllm_version": VERSION,
        "command": "vllm serve",
        "provenance": {
            "artifact": artifact,
            "artifact_sha256": artifact_sha256,
            "index": INDEX,
            "source_files": sorted([ARG_UTILS, CLI_ARGS, SERVE, "vllm/config/*.py", CONFIG_UTILS,
                                   ENTRYPOINTS + "**/*.py", QUANTIZATION + "**/*.py"]),
            "generator": "scripts/vllm_flags.py",
            "note": "argparse's allow_abbrev stays True in FlexibleArgumentParser (vllm/utils/argparse_utils.py), "
                    "so a unique prefix of a long flag is accepted; platform plugins may add flags not listed",
        },
        "flags": dict(sorted(parser.flags.items())),
        "aliases": dict(sorted(parser.aliases.items())),
        "values_note": "what _compute_kwargs in vllm/engine/arg_utils.py gives each flag as type and choices: "
                       "choices from a Literal without str beside it (literal_to_kwargs, sorted), int, float, "
                       "human_readable_int, human_readable_int_or_auto, json (a dataclass or a bare dict); none: "
                       "true where optional_type also takes '' and 'None'. A flag whose kwargs add_cli_args or "
                       "_customize_cli_kwargs rewrite, or whose value is free text, is not listed",
        "values": dict(sorted(parser.values.items())),
        "config_keys_note": "the keyword arguments of the config class a JSON flag builds: its fields and InitVars; "
                            "@config (vllm/config/utils.py) makes it a pydantic dataclass with extra='forbid'; "
                            "'nested' gives the same for fields typed as another such class (a field that also "
                            "admits a free dict takes any key and has no entry)",
        "config_keys": dict(sorted(parser.config_keys.items())),
        "routes_note": "the HTTP routes of vLLM's API server: every @router.<method>(path) and api_route decorator "
                       "under vllm/entrypoints/ (the union over the conditions that include a router), with "
                       "file:line; mounts serve every path under their prefix (the /metrics Mount's path_regex is "
                       "^/metrics(?P<path>.*)$, vllm/entrypoints/serve/instrumentator/metrics.py)",
        "routes": parser.routes,
        "mounts": dict(sorted(parser.mounts.items())),
        "quantization_dtypes_note": "--quantization method -> the --dtype values (as torch dtypes) its config's "
                                    "get_supported_act_dtypes returns (vllm/model_executor/layers/quantization/); "
                                    "vllm/config/vllm.py refuses any other model dtype",
        "quantization_dtypes": parser.quantization_dtypes,
    }


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--artifact", type=Path, help=f"a local {SDIST} or wheel (default: download the sdist)")
    cli.add_argument("--cache", type=Path, default=Path("build"), help="download folder (default: build/)")
    cli.add_argument("--out", default=str(OUT), help="output file, '-' for stdout (default: the package data)")
    args = cli.parse_args(argv)
    if args.artifact is None:
        artifact, digest = fetch_sdist(args.cache)
    else:
        artifact, digest = args.artifact, sha256(args.artifact)
    emit(json.dumps(document(derive(read_sources(artifact)), artifact=artifact.name, artifact_sha256=digest),
                     indent=1) + "\n", args.out)
    return 0


def emit(text: str, out: str) -> None:
    """Write ``text`` to the file ``out`` (and name it), or to stdout for ``-``."""
    if out == "-":
        sys.stdout.write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")
        print(out)


if __name__ == "__main__":
    sys.exit(main())

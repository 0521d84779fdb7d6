"""YAML and JSON parsing that refuses what a spec never contains, before it can cost a traceback or a hang.

PyYAML 6.0's ``safe_load`` keeps the last of two equal keys, lets aliases stand for any number of nodes (a
1 KB file for a billion), recurses once per nesting level and lets ``ValueError`` out of its constructors;
Python's ``json`` also keeps the last key (RFC 8259 §4 only says names SHOULD be unique) and recurses. Each
refusal here is a :class:`Refused` with the position, the value and the fix, which
:mod:`hyperpod_dpd.spec.loading` turns into a :class:`~hyperpod_dpd.errors.Problem`."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

# A spec is a few KB (the annotated example, every field listed, is 11 KB). Within 1 MiB, the slowest
# text measured (one plain scalar ``a a a ...``) takes PyYAML 6.0's pure-Python parser 1.3 s.
MAX_FILE_BYTES = 1 << 20
# Nodes in the YAML document, each alias counted as the nodes it repeats; the example spec has 93. Counting
# during composition stops a billion-laughs file before it exists: PyYAML shares an aliased node, so
# ``safe_load`` itself is quick, but every later walk, ``repr`` or dump of the data is exponential. It also
# bounds plain size: 10,000 nodes take PyYAML about 0.2 s, 500,000 (1 MiB of ``1,``) about 11 s.
MAX_NODES = 10_000
# Nesting levels, a scalar counted as one. A spec's schema nests eight; PyYAML's composer and ``json`` recurse
# once per level and raise ``RecursionError`` near 1,000 (measured: 10,000 ``[`` do).
MAX_DEPTH = 64

_MERGE_TAG = "tag:yaml.org,2002:merge"
_QUOTE_IT = "quote it to make it a string"


class Refused(Exception):
    """A file refused before it became data; ``where`` is its 1-based line and column, if it has one."""

    def __init__(self, *, where: tuple[int, int] | None, value: Any, message: str, fix: str) -> None:
        super().__init__(message)
        self.where = where
        self.value = value
        self.message = message
        self.fix = fix


def position(text: str | bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column of ``offset``, counting ``\\n`` as ``json`` and editors do."""
    newline = "\n" if isinstance(text, str) else b"\n"
    line_start = text.rfind(newline, 0, offset) + 1  # type: ignore[arg-type]
    return text.count(newline, 0, offset) + 1, offset - line_start + 1  # type: ignore[arg-type]


def refuse_size(size: int, *, unit: str, whole: bool) -> None:
    """Refuse more than :data:`MAX_FILE_BYTES` before parsing, so a wrong file costs nothing.

    ``whole`` is false for the first ``MAX_FILE_BYTES + 1`` of a stream whose length is unknown.
    """
    if size > MAX_FILE_BYTES:
        length = f"is {size} {unit}, more" if whole else "is more"
        raise Refused(where=None, value=size if whole else f"over {MAX_FILE_BYTES} {unit}",
                      message=f"{length} than the {MAX_FILE_BYTES} bytes (1 MiB) a spec file may have; a spec is "
                      "a few KB", fix="give the spec file, not another one")


# The opening bytes of files a spec argument is most often confused with; text in another encoding has none.
_BINARY_MAGIC = {b"\x1f\x8b": "a gzip archive", b"\x7fELF": "an ELF executable", b"PK\x03\x04": "a zip archive",
                 b"%PDF": "a PDF document", b"\x89PNG": "a PNG image", b"\xfe\xed\xfa": "a Mach-O executable",
                 b"\xcf\xfa\xed\xfe": "a Mach-O executable", b"BZh": "a bzip2 archive", b"\xfd7zXZ": "an xz archive"}
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode_utf8(data: bytes) -> str:
    """``data`` as text; a byte that is not UTF-8 (YAML 1.2 §5.2 and RFC 8259 §8.1 both say UTF-8) is refused.

    A binary file (a known magic number, or a NUL byte outside UTF-16) is told it is not text: "save it as
    UTF-8" would send its owner to re-encode an archive.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line, column = position(data, err.start)
        binary = _binary_kind(data)
        if binary is not None:
            raise Refused(where=(line, column), value=f"0x{data[err.start]:02x}",
                          message=f"is not a text file ({binary}), so it cannot be a spec",
                          fix="give the spec file (YAML or JSON text)") from err
        raise Refused(where=(line, column), value=f"0x{data[err.start]:02x}",
                      message=f"is not UTF-8: byte offset {err.start} ({err.reason})",
                      fix="save the file as UTF-8") from err


def _binary_kind(data: bytes) -> str | None:
    for magic, kind in _BINARY_MAGIC.items():
        if data.startswith(magic):
            return kind
    if b"\x00" in data[:8192] and not data.startswith(_UTF16_BOMS):
        return "it holds NUL bytes"
    return None


def _mark(mark: Any) -> tuple[int, int] | None:
    return (mark.line + 1, mark.column + 1) if mark is not None else None


class _SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that counts nodes and depth while composing and refuses duplicate keys.

    Aliases are allowed, within :data:`MAX_NODES`: sharing one block (``decode: *prefill``) is ordinary
    YAML, and refusing it would refuse valid files written that way.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) -> the nodes it stands for, once composed
        self._open = [0]  # nodes composed so far inside each collection being composed
        self._total = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:  # an undefined alias is PyYAML's own error
                size = self._sizes.get(id(target))
                if size is None:  # the anchor is still open: its alias is inside it
                    raise Refused(where=_mark(event.start_mark), value=f"*{event.anchor}",
                                  message="is an alias inside its own anchor, a structure without end",
                                  fix="write the repeated part out")
                self._count(size, event, alias=True)
            return super().compose_node(parent, index)
        if len(self._open) > MAX_DEPTH:
            raise _too_deep(_mark(event.start_mark), depth=len(self._open))
        self._count(1, event, alias=False)
        self._open.append(0)
        node = super().compose_node(parent, index)
        inside = self._open.pop()
        self._sizes[id(node)] = 1 + inside
        return node

    def _count(self, nodes: int, event: yaml.Event, *, alias: bool) -> None:
        self._open[-1] += nodes
        self._total += nodes
        if self._total <= MAX_NODES:
            return
        if alias:
            raise Refused(where=_mark(event.start_mark), value=f"*{event.anchor}",  # type: ignore[attr-defined]
                          message=f"repeats {nodes} nodes, taking the document past {MAX_NODES} nodes "
                          "(aliases that repeat aliases grow exponentially); a spec has about a hundred",
                          fix="write the shared part out, or alias smaller parts")
        raise Refused(where=_mark(event.start_mark), value=MAX_NODES,
                      message=f"takes the document past {MAX_NODES} nodes; a spec has about a hundred",
                      fix="give the spec file, not another one")

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """PyYAML's constructors let plain exceptions out: ``ValueError`` for ``2020-02-30`` or an offset of 99
        hours, ``IndexError`` for an empty ``!!int``, ``AttributeError`` for an empty ``!!timestamp``."""
        try:
            return super().construct_object(node, deep=deep)
        except (ArithmeticError, AttributeError, LookupError, TypeError, ValueError) as err:
            kind = node.tag.rsplit(":", 1)[-1]
            value = node.value if isinstance(node, yaml.ScalarNode) else node.tag
            raise Refused(where=_mark(node.start_mark), value=value, message=f"is not a valid {kind}: {err}",
                          fix=f"correct it, or {_QUOTE_IT}") from err

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """Python reads at most ``sys.get_int_max_str_digits()`` (4300) decimal digits and cannot print more."""
        try:
            value = super().construct_yaml_int(node)
            str(value)  # a hexadecimal, octal or binary literal is read at any length, but then never shown
        except ValueError as err:
            raise _long_integer(_mark(node.start_mark), length=f"{len(node.value)} characters") from err
        return value

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Refuse a repeated key: YAML 1.2 §3.2.1.1 makes keys unique, but PyYAML 6.0 keeps the last one silently."""
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue  # a merge (``<<``) may be overridden; a complex key is PyYAML's to refuse
            key = self.construct_object(key_node)
            try:
                earlier = first.get(key)
                first.setdefault(key, key_node)
            except TypeError:
                continue
            if earlier is not None:
                raise _duplicate(key, where=_mark(key_node.start_mark), first_line=earlier.start_mark.line + 1)
        return super().construct_mapping(node, deep=deep)


_SpecLoader.add_constructor("tag:yaml.org,2002:int", _SpecLoader.construct_yaml_int)


def _too_deep(where: tuple[int, int] | None, *, depth: int) -> Refused:
    return Refused(where=where, value=depth, message=f"nests deeper than {MAX_DEPTH} levels; a spec nests at most "
                   "eight", fix="give the spec file, not another one")


def _long_integer(where: tuple[int, int] | None, *, length: str) -> Refused:
    return Refused(where=where, value=length, message="is an integer too long to read",
                   fix=f"write a number, or {_QUOTE_IT}")


def _duplicate(key: Any, *, where: tuple[int, int] | None, first_line: int) -> Refused:
    return Refused(where=where, value=key, message=f"repeats a key first given at line {first_line}; the parser "
                   "would keep only the last", fix="remove one of them")


def load_yaml(text: str) -> Any:
    """Like ``yaml.safe_load``, with the refusals above; syntax errors are still ``yaml.YAMLError``."""
    loader = _SpecLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


# --- JSON ---------------------------------------------------------------------------------------

# Brackets outside strings, to measure nesting before ``json`` recurses into it.
_JSON_BRACKET = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]', re.DOTALL)
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # RFC 8259 §2
_PLAIN_JSON = json.JSONDecoder()


class _DuplicateKey(Exception):
    """A repeated key, found by ``object_pairs_hook``, which is told the pairs but not where they were."""


class _LongInteger(Exception):
    def __init__(self, digits: str) -> None:
        super().__init__(digits)
        self.digits = digits


class _Repeat(Exception):
    def __init__(self, first: int, second: int) -> None:
        super().__init__(first, second)
        self.first, self.second = first, second


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) < len(pairs):
        raise _DuplicateKey
    return result


def _json_int(digits: str) -> int:
    try:
        return int(digits)
    except ValueError as err:  # more than sys.get_int_max_str_digits() digits
        raise _LongInteger(digits) from err


def load_json(text: str) -> Any:
    """Like ``json.loads``, with the refusals above; syntax errors are still ``json.JSONDecodeError``."""
    depth = 0
    for token in _JSON_BRACKET.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(position(text, token.start()), depth=depth)
        elif bracket in "]}":
            depth -= 1
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs, parse_int=_json_int)
    except _LongInteger as err:
        raise _long_integer(position(text, text.find(err.digits)), length=f"{len(err.digits)} digits") from None
    except _DuplicateKey:
        try:
            _skip_value(text, 0)
        except _Repeat as repeat:
            key = _PLAIN_JSON.raw_decode(text, repeat.second)[0]
            raise _duplicate(key, where=position(text, repeat.second),
                             first_line=position(text, repeat.first)[0]) from None
        raise AssertionError("json found a repeated key") from None  # pragma: no cover


def _skip_value(text: str, at: int) -> int:
    """The end of the JSON value at ``at``, known valid; raise :class:`_Repeat` at the object that repeats a key.

    Objects are checked as they close, in the order ``object_pairs_hook`` sees them, so this finds the
    repeat that ``json`` found. Its depth is bounded by :data:`MAX_DEPTH`, checked before.
    """
    at = _JSON_SPACE.match(text, at).end()  # type: ignore[union-attr]
    opening = text[at]
    if opening not in "[{":
        return _PLAIN_JSON.raw_decode(text, at)[1]
    closing = "]" if opening == "[" else "}"
    seen: dict[str, int] = {}
    repeat: _Repeat | None = None
    at += 1
    while True:
        at = _JSON_SPACE.match(text, at).end()  # type: ignore[union-attr]
        if text[at] == closing:
            break
        if opening == "{":
            key, end = _PLAIN_JSON.raw_decode(text, at)
            if key in seen and repeat is None:
                repeat = _Repeat(seen[key], at)
            seen.setdefault(key, at)
            at = _JSON_SPACE.match(text, end).end() + 1  # type: ignore[union-attr]  # past the ':'
        at = _JSON_SPACE.match(text, _skip_value(text, at)).end()  # type: ignore[union-attr]
        if text[at] == ",":
            at += 1
    if repeat is not None:
        raise repeat
    return at + 1

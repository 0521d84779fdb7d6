"""Malformed spec files are refused with field, value and fix: never a traceback, never a hang."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import default_mapping, extreme_numbers, field_paths, fuzz_examples, plain_data, with_value, yaml_documents

from hyperpod_dpd import SpecError, dump_spec
from hyperpod_dpd.errors import Problem
from hyperpod_dpd.spec._parsing import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.loading import load_spec_data, parse_spec, parse_spec_text

MINIMAL = """name: small
model:
  name: my-model
  source: {s3: {bucket: models, prefix: my-model, region: us-east-1}}
"""
MINIMAL_JSON = '{"name": "small", "model": {"name": "m", "source": {"s3": {"bucket": "b", "prefix": "p"}}}}'
# The classic "billion laughs": nine levels of nine aliases, 342 bytes standing for 9**9 strings.
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))


def _problem(text: str, *, json_only: bool = False) -> Problem:
    with pytest.raises(SpecError) as caught:
        parse_spec_text(text, json_only=json_only)
    (problem,) = caught.value.problems
    return problem


def _file_problem(path: Path) -> Problem:
    with pytest.raises(SpecError) as caught:
        load_spec_data(path)
    (problem,) = caught.value.problems
    return problem


@pytest.mark.parametrize(("text", "where", "key", "first_line"), [
    (MINIMAL + "name: other\n", "<text>:5:1", "name", 1),  # appended to a file that has every field
    (MINIMAL.replace("bucket: models", "bucket: models, bucket: other"), "<text>:4:33", "bucket", 4),
    (MINIMAL + "env:\n  A: '1'\n  B: '2'\n  A: '3'\n", "<text>:8:3", "A", 6),
    (MINIMAL + "port: 8000\n8000: x\nport: 9000\n", "<text>:7:1", "port", 5),
])
def test_a_repeated_yaml_key_at_any_depth_is_refused_where_it_repeats(text: str, where: str, key: str,
                                                                       first_line: int) -> None:
    problem = _problem(text)
    assert (problem.field, problem.value) == (where, key)
    assert problem.message == f"repeats a key first given at line {first_line}; the parser would keep only the last"
    assert problem.fix == "remove one of them"


def test_a_merge_key_may_be_overridden_and_a_shared_block_is_read() -> None:
    spec = parse_spec_text(MINIMAL + "prefill: &role {replicas: 2, max_num_seqs: 64}\n"
                          "decode:\n  <<: *role\n  replicas: 1\n")
    assert (spec.prefill.replicas, spec.decode.replicas, spec.decode.max_num_seqs) == (2, 1, 64)


@pytest.mark.parametrize(("text", "where", "key", "first_line"), [
    (MINIMAL_JSON[:-1] + ',\n"name": "again"}', "<text>:2:1", "name", 1),
    ('{"name": "x",\n "model": {"name": "m",\n  "source": {"s3": {"a": 1}},\n  "name": "n"}}', "<text>:4:3", "name", 2),
    ('{"env": {"A": "1", "B": {"A": 1}},\n "env": 2}', "<text>:2:2", "env", 1),  # a nested A is another object's
])
def test_a_repeated_json_key_is_refused_where_it_repeats(text: str, where: str, key: str, first_line: int) -> None:
    problem = _problem(text, json_only=True)
    assert (problem.field, problem.value, problem.fix) == (where, key, "remove one of them")
    assert problem.message.startswith(f"repeats a key first given at line {first_line};")


def test_an_alias_bomb_is_refused_in_well_under_a_second() -> None:
    assert len(BOMB) < 1024
    started = time.perf_counter()
    problem = _problem(BOMB)
    elapsed = time.perf_counter() - started
    assert elapsed < 2, elapsed
    assert (problem.field, problem.value) == ("<text>:5:8", "*d")
    assert problem.message == (f"repeats 7381 nodes, taking the document past {MAX_NODES} nodes (aliases that "
                               "repeat aliases grow exponentially); a spec has about a hundred")


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    problem = _problem(MINIMAL + "args: &loop [--enforce-eager, *loop]\n")
    assert (problem.field, problem.value) == ("<text>:5:31", "*loop")
    assert "inside its own anchor" in problem.message


def test_a_document_of_too_many_nodes_is_refused_while_it_is_read() -> None:
    # "While it is read" is shown by where it stops: the problem points at the node past the budget, not at the
    # end of the document. (A wall-clock bound stood here; it failed on a loaded machine and proved less.)
    problem = _problem("[" + "1, " * (MAX_NODES + 10) + "]")
    assert problem.message == f"takes the document past {MAX_NODES} nodes; a spec has about a hundred"
    assert problem.field == f"<text>:1:{2 + 3 * (MAX_NODES - 1)}"  # the sequence, then items 0 to 9999


def test_bytes_that_are_not_utf8_are_refused_at_their_offset(tmp_path: Path) -> None:
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes(MINIMAL.encode() + "namespace: café\n".encode("latin-1"))
    problem = _file_problem(spec)
    offset = len(MINIMAL) + len("namespace: caf")
    assert (problem.field, problem.value) == (f"{spec}:5:15", "0xe9")
    assert problem.message == f"is not UTF-8: byte offset {offset} (invalid continuation byte)"
    assert problem.fix == "save the file as UTF-8"


@pytest.mark.parametrize(("head", "kind"), [
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\xd0", "an ELF executable"),
    (b"\x1f\x8b\x08\x00", "a gzip archive"),
    (b"name: a\x00\xff\n", "it holds NUL bytes"),
])
def test_a_binary_file_is_told_it_is_not_text_not_to_save_as_utf8(tmp_path: Path, head: bytes, kind: str) -> None:
    spec = tmp_path / "bin.yaml"
    spec.write_bytes(head)
    problem = _file_problem(spec)
    assert problem.message == f"is not a text file ({kind}), so it cannot be a spec"
    assert problem.fix == "give the spec file (YAML or JSON text)"


def test_a_tab_in_the_indentation_is_told_to_use_spaces() -> None:
    problem = _problem(MINIMAL + "prefill:\n\treplicas: 1\n")
    line = MINIMAL.count("\n") + 2
    assert problem.fix == f"replace the tab at line {line}, column 1 with spaces (YAML indents with spaces, never tabs)"


def test_a_list_where_a_string_belongs_is_not_told_to_quote_it() -> None:
    # "quote it: '['a', 'b']'" is not valid YAML; only a scalar can be quoted into a string.
    problem = _problem(MINIMAL.replace("name: small", "name: [a, b]"))
    assert (problem.message, problem.fix) == ("must be a string, not a list", "write one string")
    assert _problem(MINIMAL.replace("name: small", "name: {a: 1}")).fix == "write one string"


def test_standard_input_is_read_as_utf8_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"name: \xff\n"))
    monkeypatch.setattr("sys.stdin", stdin)
    problem = _file_problem(Path("-"))
    assert (problem.field, problem.value) == ("<stdin>:1:7", "0xff")
    monkeypatch.setattr("sys.stdin", io.StringIO("#" * (2 * MAX_FILE_BYTES)))  # read no further than the limit
    problem = _file_problem(Path("-"))
    assert (problem.field, problem.value) == ("<file>", f"over {MAX_FILE_BYTES} bytes")
    assert problem.message.startswith(f"is more than the {MAX_FILE_BYTES} bytes (1 MiB) a spec file may have")


def test_windows_line_ends_give_the_positions_they_gave_before(tmp_path: Path) -> None:
    spec = tmp_path / "crlf.yaml"
    spec.write_bytes((MINIMAL + "name: again\n").replace("\n", "\r\n").encode())
    assert _file_problem(spec).field == f"{spec}:5:1"


@pytest.mark.parametrize(("text", "json_only", "field", "shown"), [
    (MINIMAL + "gpu_memory_utilization: .nan\n", False, "gpu_memory_utilization", "nan"),
    (MINIMAL + "routing: {threshold: 10}\nprefill: {gpu_memory_utilization: -.inf}\n", False,
     "prefill.gpu_memory_utilization", "-inf"),
    (MINIMAL + "gpu_memory_utilization: 1.0e+400\n", False, "gpu_memory_utilization", "inf"),  # past the double
    (MINIMAL_JSON[:-1] + ', "gpu_memory_utilization": NaN}', True, "gpu_memory_utilization", "nan"),
    (MINIMAL_JSON[:-1] + ', "decode": {"gpu_memory_utilization": Infinity}}', True,
     "decode.gpu_memory_utilization", "inf"),
])
def test_non_finite_numbers_are_refused_with_their_field(text: str, json_only: bool, field: str, shown: str) -> None:
    problem = _problem(text, json_only=json_only)
    assert (problem.field, repr(problem.value)) == (field, shown)
    assert problem.message == "must be a finite number (nan and infinities have no JSON or JavaScript form)"


@pytest.mark.parametrize(("field", "number", "shown"), [
    ("gpu_memory_utilization", "1" + "0" * 400, "an integer of 1329 bits"),  # float() would overflow
    ("max_model_len", "1" + "0" * 400, "an integer of 1329 bits"),
    ("max_model_len", str(2**53), 2**53),
])
def test_integers_beyond_a_javascript_number_are_refused_with_their_field(field: str, number: str,
                                                                          shown: object) -> None:
    for text, json_only in ((MINIMAL + f"{field}: {number}\n", False),
                            (MINIMAL_JSON[:-1] + f', "{field}": {number}}}', True)):
        problem = _problem(text, json_only=json_only)
        assert (problem.field, problem.value) == (field, shown)
        assert problem.message.startswith("is too large to be a number (more than 9007199254740991")


def test_the_largest_exact_integer_is_still_a_number() -> None:
    assert parse_spec_text(MINIMAL + f"gpu_memory_utilization: {2**53 - 1}\n").gpu_memory_utilization == 2**53 - 1


@pytest.mark.parametrize(("text", "json_only", "where"), [
    (MINIMAL + "max_model_len: 1" + "0" * 5000 + "\n", False, "<text>:5:16"),
    (MINIMAL + "max_model_len: 0x" + "f" * 5000 + "\n", False, "<text>:5:16"),  # read, but never printable
    (MINIMAL_JSON[:-1] + ',\n "max_model_len": 1' + "0" * 5000 + "}", True, "<text>:2:19"),
])
def test_an_integer_too_long_for_python_to_read_is_refused_where_it_is(text: str, json_only: bool,
                                                                        where: str) -> None:
    problem = _problem(text, json_only=json_only)
    assert (problem.field, problem.message) == (where, "is an integer too long to read")


@pytest.mark.parametrize(("value", "message"), [
    ("2020-02-30", "is not a valid timestamp: day is out of range for month"),
    ("2001-12-14 21:59:43 +99:00", "is not a valid timestamp: offset must be a timedelta"),
])
def test_a_value_pyyaml_cannot_construct_is_refused_where_it_is(value: str, message: str) -> None:
    problem = _problem(MINIMAL + f"namespace: {value}\n")
    assert (problem.field, problem.value) == ("<text>:5:12", value)
    assert problem.message.startswith(message)
    assert problem.fix == "correct it, or quote it to make it a string"


def test_a_control_character_is_refused_at_its_line() -> None:
    problem = _problem(MINIMAL + "namespace: a\x00b\n")
    assert (problem.field, problem.value) == ("<text>:5:13", "namespace: a\x00b")
    assert problem.message == "malformed YAML: unacceptable character #x0000: special characters are not allowed"


def test_a_file_over_the_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"[" * (3 * MAX_FILE_BYTES))  # parsed, this would nest three million deep
    started = time.perf_counter()
    problem = _file_problem(big)
    assert time.perf_counter() - started < 1
    assert (problem.field, problem.value) == ("<file>", 3 * MAX_FILE_BYTES)
    assert problem.message == (f"is {3 * MAX_FILE_BYTES} bytes, more than the 1048576 bytes (1 MiB) a spec file "
                               "may have; a spec is a few KB")
    assert _problem("#" * (MAX_FILE_BYTES + 1)).message.startswith(f"is {MAX_FILE_BYTES + 1} characters, more")


@pytest.mark.parametrize("opening", ["[", "{a: ", "- ", '{"a": '])
def test_deep_nesting_is_refused_not_a_recursion_error(opening: str) -> None:
    nested = opening * 10_000 if opening != "- " else "".join("  " * i + "-\n" for i in range(200))
    problem = _problem(nested, json_only=opening.startswith('{"'))
    assert problem.message == f"nests deeper than {MAX_DEPTH} levels; a spec nests at most eight"
    assert problem.value == MAX_DEPTH + 1


def test_a_valid_file_reads_as_before(tmp_path: Path) -> None:
    spec = default_spec()
    written = tmp_path / "spec.json"
    written.write_text(json.dumps(dump_spec(spec), indent=2))
    assert parse_spec(load_spec_data(written)) == spec


# --- fuzzing: whatever comes in, a spec or a SpecError, quickly ------------------------------------------------

FUZZ = settings(max_examples=fuzz_examples(150), deadline=2000)  # the rest from the fuzz profile (conftest.py)


def _spec_or_spec_error(read: Any) -> None:
    """``read()`` returns a spec or raises a SpecError whose every problem renders; anything else fails."""
    try:
        read()
    except SpecError as err:
        assert err.problems
        json.dumps([p.to_json() for p in err.problems])  # what --json prints
        str(err)


DEFAULT = default_mapping()
FIELDS = field_paths(DEFAULT)


def _replaced(path: str, value: Any) -> dict[str, Any]:
    return with_value(DEFAULT, path, value)


@FUZZ
@given(st.one_of(st.text(), yaml_documents, yaml_documents.map(lambda doc: MINIMAL + doc)), st.booleans())
def test_any_text_is_a_spec_or_a_spec_error(text: str, json_only: bool) -> None:
    _spec_or_spec_error(lambda: parse_spec_text(text, json_only=json_only))


@FUZZ
@given(st.one_of(st.binary(), yaml_documents.map(str.encode), st.binary().map(lambda b: MINIMAL.encode() + b)),
       st.sampled_from(["spec.yaml", "spec.json"]))
def test_any_bytes_in_a_file_are_a_spec_or_a_spec_error(tmp_path: Path, data: bytes, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    _spec_or_spec_error(lambda: parse_spec(load_spec_data(path)))


# An unclosed flow collection costs PyYAML 0.2 s: it looks 1024 characters ahead.
@settings(FUZZ, max_examples=fuzz_examples(40))
@given(st.sampled_from(["[", "]", "{", "{a: ", "- ", "a:\n", '{"a": ', "&x [", "*x, "]),
       st.integers(min_value=1, max_value=20_000), st.booleans(), st.booleans())
def test_deep_or_long_nesting_is_a_spec_or_a_spec_error(piece: str, count: int, closed: bool, json_only: bool) -> None:
    closing = {"[": "]", "{": "}", "{a: ": "}", '{"a": ': "}", "&x [": "]"}.get(piece, "") * count if closed else ""
    _spec_or_spec_error(lambda: parse_spec_text(piece * count + closing, json_only=json_only))


@settings(FUZZ, max_examples=fuzz_examples(12))
@given(st.sampled_from(["a", "a ", "'", '"', "9", " ", "\n", "# ", "é", "\\"]),
       st.one_of(st.integers(min_value=0, max_value=MAX_FILE_BYTES // 8), st.just(MAX_FILE_BYTES)))
def test_long_strings_are_a_spec_or_a_spec_error(piece: str, length: int) -> None:
    text = MINIMAL + "namespace: " + piece * (length // len(piece.encode()))
    _spec_or_spec_error(lambda: parse_spec_text(text[:MAX_FILE_BYTES + 1]))


@FUZZ
@given(st.sampled_from(FIELDS), extreme_numbers)
def test_extreme_numbers_in_any_field_are_a_spec_or_a_spec_error(field: str, number: Any) -> None:
    _spec_or_spec_error(lambda: parse_spec(_replaced(field, number)))
    key = json.dumps(field.rsplit(".", maxsplit=1)[-1])
    text = json.dumps(_replaced(field, 0)).replace(f"{key}: 0", f"{key}: {number!r}".replace("nan", "NaN")
                                                   .replace("inf", "Infinity"), 1)
    _spec_or_spec_error(lambda: parse_spec_text(text, json_only=True))
    _spec_or_spec_error(lambda: parse_spec_text(text))


@FUZZ
@given(st.one_of(plain_data, st.tuples(st.sampled_from(FIELDS), plain_data).map(lambda pair: _replaced(*pair))))
def test_any_python_data_is_a_spec_or_a_spec_error(data: Any) -> None:
    _spec_or_spec_error(lambda: parse_spec(data))

"""vLLM 0.19.0's flag set as package data, and reading args the way vLLM's argparse does."""

from __future__ import annotations

import argparse
import json
import urllib.error
from pathlib import Path
from types import ModuleType

import pytest
from support import load_module

from hyperpod_dpd.contracts.vllm import Arity, Match, canonical, canonical_args, parse_flags, vllm_flags
from hyperpod_dpd.validation.engine import KV_LAYOUT_FLAGS, LISTENER_FLAGS, OWNED_FLAGS, PARALLEL_FLAGS

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "k8s" / "hyperpod_dpd" / "data" / "vllm-0.19.0-flags.json"
SDIST_SHA256 = "81e59cf87175e7a62eb8d9acf5989484bbd17089d5eface353f89067bda282d9"


def _generator() -> ModuleType:
    return load_module("vllm_flags_script", REPO / "scripts" / "vllm_flags.py")


@pytest.fixture(scope="session")
def vllm_sdist(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM 0.19.0's sdist from PyPI (31 MB), kept in pytest's cache folder between runs (when it has one)."""
    cache = getattr(request.config, "cache", None)
    folder = Path(cache.mkdir("vllm-0.19.0-sdist")) if cache is not None else tmp_path_factory.mktemp("vllm")
    try:
        artifact, digest = _generator().fetch_sdist(folder, timeout=60)
    except (TimeoutError, urllib.error.URLError, ConnectionError) as err:
        pytest.skip(f"PyPI is unreachable, so the flag list cannot be re-derived here ({err})")
    assert digest == SDIST_SHA256
    return Path(artifact)


def test_the_shipped_flags_are_what_the_generator_derives_from_vllm_0_19_0(vllm_sdist: Path) -> None:
    generator = _generator()
    derived = generator.document(generator.derive(generator.read_sources(vllm_sdist)),
                                 artifact=vllm_sdist.name, artifact_sha256=SDIST_SHA256)
    assert json.dumps(derived, indent=1) + "\n" == SHIPPED.read_text(encoding="utf-8")


def test_provenance_names_the_artifact_and_the_sources_read() -> None:
    flags = vllm_flags()
    assert flags.version == "0.19.0"
    assert flags.provenance["artifact"] == "vllm-0.19.0.tar.gz"
    assert flags.provenance["artifact_sha256"] == SDIST_SHA256
    assert "vllm/engine/arg_utils.py" in flags.provenance["source_files"]
    assert "vllm/entrypoints/openai/cli_args.py" in flags.provenance["source_files"]
    # the values, config keys, routes and quantization dtypes are derived from these too
    assert {"vllm/config/utils.py", "vllm/entrypoints/**/*.py",
            "vllm/model_executor/layers/quantization/**/*.py"} <= set(flags.provenance["source_files"])


def test_every_flag_the_library_emits_or_names_is_a_real_flag() -> None:
    known = vllm_flags().flags
    emitted = {"--model", "--host", "--port", "--tensor-parallel-size", "--max-model-len",
               "--gpu-memory-utilization", "--max-num-seqs"}
    named = set(OWNED_FLAGS) | set(PARALLEL_FLAGS) | set(KV_LAYOUT_FLAGS) | set(LISTENER_FLAGS)
    assert sorted((emitted | named) - set(known)) == []


def test_arity_follows_vllm_get_kwargs() -> None:
    flags = vllm_flags().flags
    assert flags["--enforce-eager"] is Arity.NONE and flags["--no-enforce-eager"] is Arity.NONE  # bool field
    assert flags["--disable-log-stats"] is Arity.NONE and "--no-disable-log-stats" not in flags  # store_true
    assert flags["--api-key"] is Arity.MANY  # list field
    assert flags["--middleware"] is Arity.ONE  # nargs removed, action="append"
    assert flags["--hf-token"] is Arity.OPTIONAL  # nargs="?"
    assert vllm_flags().aliases["-tp"] == "--tensor-parallel-size"
    assert vllm_flags().aliases["-pcp"] == "--prefill-context-parallel-size"


def _argparse_of_the_flag_set() -> argparse.ArgumentParser:
    """A plain argparse parser over the shipped flags, with allow_abbrev as vLLM leaves it."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=True)
    for flag in vllm_flags().flags:
        parser.add_argument(flag, dest=flag, action="store_true")
    return parser


def test_prefixes_resolve_exactly_as_argparse_resolves_them() -> None:
    parser = _argparse_of_the_flag_set()
    flags = vllm_flags()
    prefixes = sorted({flag[:n] for flag in flags.flags for n in range(3, len(flag) + 1)})
    mismatches = []
    for prefix in prefixes:
        match, candidates = flags.resolve(prefix)
        try:
            parsed, _ = parser.parse_known_args([prefix])
        except SystemExit:
            argparse_says = "ambiguous"
        else:
            chosen = [dest for dest, value in vars(parsed).items() if value]
            argparse_says = chosen[0] if chosen else "unknown"
        ours = candidates[0] if match in (Match.EXACT, Match.ABBREVIATION) else match.value
        if ours != argparse_says:
            mismatches.append((prefix, ours, argparse_says))
    assert len(prefixes) > 3000
    assert mismatches == []


@pytest.mark.parametrize(("written", "expected"), [
    ("--gpu-memory-util", "--gpu-memory-utilization"),
    ("--max_num_seq", "--max-num-seqs"),
    ("--kv-transfer", "--kv-transfer-config"),
    ("--pipeline-parallel", "--pipeline-parallel-size"),
    ("-tp", "--tensor-parallel-size"),
    ("--compilation-config.mode", "--compilation-config"),
    ("--no-such-flag", "--no-such-flag"),
])
def test_canonical_names(written: str, expected: str) -> None:
    assert canonical(written) == expected


def test_values_are_read_by_arity() -> None:
    flags, stray = parse_flags(["--api-key", "a", "b", "--enforce-eager", "oops", "--port", "-1", "-O3"])
    assert [(f.name, f.value) for f in flags] == [("--api-key", "a b"), ("--enforce-eager", None),
                                                  ("--port", "-1"), ("--optimization-level", "3")]
    assert stray == ["oops"]
    assert canonical_args(["-O", "2", "--max_model=8192", "stray"]) == ["--optimization-level", "2",
                                                                       "--max-model-len=8192", "stray"]


def _checker() -> ModuleType:
    return load_module("vllm_flags_check_installed", REPO / "scripts" / "vllm_flags_check_installed.py")


def _like_vllm(rule: dict[str, object]) -> tuple[object, list[object] | None]:
    """An argparse ``type``/``choices`` pair that behaves as vLLM's for one shipped rule."""
    from hyperpod_dpd.contracts import vllm

    convert = {"int": int, "float": float, "str": str, "json": json.loads,
               "human_readable_int": vllm.human_readable_int,
               "human_readable_int_or_auto": vllm._human_readable_int_or_auto}[str(rule["type"])]
    if rule.get("none"):
        inner = convert

        def convert(text: str) -> object:
            return None if text in ("", "None") else inner(text)
    return convert, list(rule["choices"]) if "choices" in rule else None  # type: ignore[call-overload]


def test_the_installed_check_compares_types_and_choices_not_only_names() -> None:
    shipped = json.loads(SHIPPED.read_text())["values"]
    real = {flag: _like_vllm(rule) for flag, rule in shipped.items()}
    assert _checker().value_differences(shipped, real) == []
    int_flag = next(f for f, r in sorted(shipped.items()) if r["type"] == "int" and "choices" not in r)
    choice_flag = next(f for f, r in sorted(shipped.items()) if "choices" in r)
    wrong = {**real, int_flag: (float, None), choice_flag: (str, real[choice_flag][1][:-1]),
             "--made-up": (str, ["a", "b"])}
    found = _checker().value_differences(shipped, wrong)
    assert f"type of {int_flag}: shipped int, installed turns '7' into 7.0" in found, found
    assert f"type of {int_flag}: shipped int, installed accepts '7.5'" in found, found
    assert any(line.startswith(f"choices of {choice_flag}: shipped") for line in found), found
    assert "choices of --made-up: shipped no rule, installed ['a', 'b']" in found

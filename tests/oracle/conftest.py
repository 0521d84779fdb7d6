"""Command lines generated from vLLM's own argument table and from the spec's fields, and the fixtures that run them.

The table is ``hyperpod_dpd/data/vllm-0.19.0-flags.json`` (derived from vLLM 0.19.0's own argument definitions
and found identical to the parser it builds): every long flag with a boundary, zero, negative, non-numeric or
out-of-choice value by its type, every key of a JSON config flag misspelt and given a negative value, the pairs
of flags vLLM checks against each other, and the spec fields that become flags. Each case is a change to the
published example spec; its verdicts are ours (``validate``) and vLLM's (the prefill role's command line).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.contracts.vllm import Arity, vllm_flags
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.oracle import EngineOracle, EngineUnavailable, Verdict, check_spec_with_engine, fake_gpu
from hyperpod_dpd.oracle.spec_check import config_for
from hyperpod_dpd.spec.instances import InstanceType
from hyperpod_dpd.spec.loading import load_spec_data, parse_spec
from hyperpod_dpd.validation import engine as rules
from hyperpod_dpd.validation.run import check_data, known_architecture

# Flags our rules refuse by design whatever their value: vLLM accepts them, but the DPD deployment breaks
# (a spec field owns the flag, the listener moves, the world size grows, another KV connector replaces the
# operator's, the KV cache is sized behind the planner's back). They are not vLLM's verdict to compare with.
BY_DESIGN = {**rules.OWNED_FLAGS, **rules.LISTENER_FLAGS, **rules.PARALLEL_FLAGS, **rules.CONNECTOR_FLAGS,
             **rules.MEMORY_FLAGS, rules.METRICS_OFF_FLAG: "metrics", rules.LORA_FLAG: "LoRA over LMCache"}
# Flags whose value is a path or a file vLLM opens at start; the model folder the oracle gets has none of them.
# Values vLLM would read from disk (a chat template, a tokenizer, a LoRA module) are not generated.
NO_VALUE_CASES = {"--model", "--tokenizer", "--chat-template", "--hf-config-path", "--speculative-config",
                  "--lora-modules", "--config", "--ssl-ca-certs", "--allowed-local-media-path", "--download-dir",
                  "--ssl-keyfile", "--ssl-certfile", "--uds", "--middleware", "--tool-parser-plugin",
                  "--reasoning-parser-plugin", "--logits-processors", "--pooler-config", "--generation-config",
                  "--log-config-file", "--response-role", "--kv-events-config", "--otlp-traces-endpoint",
                  "--grpc", "--headless", "--help"}


@dataclass(frozen=True)
class Case:
    """One change to the example spec: ``args`` appended to the shared args, or ``fields`` set at the top."""

    name: str
    args: tuple[str, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    role: dict[str, Any] = field(default_factory=dict)

    def apply(self, data: dict[str, Any]) -> dict[str, Any]:
        changed = json.loads(json.dumps(data))
        changed.update(self.fields)
        if self.args:
            changed["args"] = [*changed.get("args", []), *self.args]
        if self.role:
            changed["prefill"] = {**changed["prefill"], **self.role}
            changed["decode"] = {**changed["decode"], **self.role}
        return changed


def _values(flag: str) -> list[str]:
    rule = vllm_flags().values.get(flag)
    if rule is None:
        return ["bogus-value"]
    if rule.choices:
        return [rule.choices[0], "bogus-choice"]
    if rule.type in ("int", "human_readable_int", "human_readable_int_or_auto"):
        return ["0", "-1", "abc"]
    if rule.type == "float":
        return ["0", "-1", "1.5"]
    if rule.type == "json":
        return ["{}", "not-json"]
    return ["bogus-value"]


def flag_cases() -> Iterator[Case]:
    """Every long flag of the table: a switch alone, a valued flag with each value its type suggests."""
    table = vllm_flags()
    for flag, arity in sorted(table.flags.items()):
        if flag in BY_DESIGN or flag in NO_VALUE_CASES or flag.startswith("--no-"):
            continue
        if arity is Arity.NONE:
            yield Case(f"{flag}", (flag,))
            continue
        for value in _values(flag):
            yield Case(f"{flag} {value}", (flag, value))


def config_key_cases() -> Iterator[Case]:
    """One level down in each JSON config flag: every key misspelt, and every key given -1."""
    for flag, keys in sorted(vllm_flags().config_keys.items()):
        if flag in BY_DESIGN or flag in NO_VALUE_CASES:
            continue
        for key in sorted(keys.keys):
            yield Case(f"{flag} {key}x", (flag, json.dumps({f"{key}x": 1})))
            yield Case(f"{flag} {key}=-1", (flag, json.dumps({key: -1})))


PAIRS: tuple[tuple[str, ...], ...] = (
    ("--enable-auto-tool-choice",),
    ("--enable-auto-tool-choice", "--tool-call-parser", "llama3-json"),
    ("--enable-auto-tool-choice", "--tool-call-parser", "llama3_json"),
    ("--tool-call-parser", "llama3-json"),
    ("--enable-log-outputs",),
    ("--enable-log-outputs", "--enable-log-requests"),
    ("--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096"),
    ("--no-enable-chunked-prefill", "--max-num-batched-tokens", "16384"),
    ("--max-num-partial-prefills", "2"),
    ("--max-num-partial-prefills", "2", "--max-long-partial-prefills", "3"),
    ("--max-long-partial-prefills", "2"),
    ("--max-num-batched-tokens", "8", "--max-num-seqs", "16"),
    ("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'),
    ("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 0, "prompt_lookup_max": 4}'),
    ("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, '
                             '"prompt_lookup_max": 4}'),
    ("--speculative-config", '{"method": "ngramx", "num_speculative_tokens": 3}'),
    ("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}',
     "--async-scheduling"),
    ("--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"),
    ("--enable-lora", "--max-loras", "4", "--max-cpu-loras", "8"),
    ("--enable-lora", "--max-loras", "0"),
    ("--enable-eplb",),
    ("--reasoning-parser", "deepseek_r1"),
    ("--reasoning-parser", "deepseek-r1"),
    ("--attention-backend", "FLASHMLA"),
    ("--attention-backend", "FLASH_ATTN"),
    ("--kv-cache-dtype", "fp8", "--attention-backend", "TREE_ATTN"),
    ("--kv-cache-dtype", "fp8"),
    ("--compilation-config", '{"cudagraph_mode": "FULL_AND_PIECEWIS"}'),
    ("--compilation-config", '{"cudagraph_mode": "FULL_AND_PIECEWISE", "cudagraph_capture_sizes": [1, 2, 4]}'),
    ("--compilation-config", '{"mode": 5}'),
    ("--max-num-seq", "8"),
    ("--max-num-sequences", "8"),
    ("--stream-interval", "0"),
    ("--quantization", "fp8", "--dtype", "float32"),
)


def pair_cases() -> Iterator[Case]:
    for args in PAIRS:
        yield Case("pair " + " ".join(args), args)


def field_cases() -> Iterator[Case]:
    """The spec fields that become vLLM flags, at their boundaries."""
    for name, value in (("max_model_len", 0), ("max_model_len", -1), ("max_model_len", 131072),
                        ("max_model_len", 262144), ("tensor_parallel_size", 3), ("tensor_parallel_size", 4),
                        ("tensor_parallel_size", 16), ("gpu_memory_utilization", 0),
                        ("gpu_memory_utilization", 1.5), ("gpu_memory_utilization", 0.9)):
        yield Case(f"{name}={value}", fields={name: value})
    for value in (0, -1, 1, 512):
        yield Case(f"<role>.max_num_seqs={value}", role={"max_num_seqs": value})


def all_cases() -> list[Case]:
    return [*flag_cases(), *config_key_cases(), *pair_cases(), *field_cases()]


@dataclass(frozen=True)
class Outcome:
    case: Case
    ours: bool  # True: validate accepts
    theirs: Verdict
    our_problems: tuple[str, ...]

    @property
    def agree(self) -> bool:
        return self.theirs.ok is not None and self.ours == self.theirs.ok


def outcomes(cases: Iterable[Case], base: dict[str, Any], oracle: EngineOracle) -> list[Outcome]:
    found: list[Outcome] = []
    for case in cases:
        data = case.apply(base)
        try:
            check_data(data)
            ours, problems = True, ()
        except SpecError as err:
            ours, problems = False, tuple(f"{p.field}: {p.message}" for p in err.problems)
        try:
            spec = parse_spec(data)
        except SpecError as err:
            # The spec does not even parse (a wrong type): vLLM never sees it.
            found.append(Outcome(case, ours, Verdict(ok=False, stage="spec", error=str(err)), problems))
            continue
        architecture = known_architecture(spec)
        assert architecture is not None
        config = config_for(architecture, max_model_len=max(spec.max_model_len, 1))
        prefill = check_spec_with_engine(spec, oracle, config=config, roles=("prefill",))[0]
        found.append(Outcome(case, ours, prefill.verdict, problems))
    return found


EXAMPLE = Path(__file__).resolve().parents[2] / "k8s" / "hyperpod_dpd" / "data" / "llama-3.3-70b-p5.yaml"


def start_oracle(instance_type: InstanceType) -> EngineOracle:
    """An oracle faking ``instance_type``'s GPUs; without the engine venv the test fails naming the install."""
    try:
        oracle = EngineOracle(fake_gpu(instance_type))
        oracle.start()
    except EngineUnavailable as err:
        pytest.fail(f"{err} (`make test` installs it first)")
    return oracle


@pytest.fixture(scope="session")
def engine_oracle() -> Iterator[EngineOracle]:
    """One vLLM process for the whole session (an 8 x H100 node, ml.p5.48xlarge); each check forks from it."""
    oracle = start_oracle(InstanceType.P5_48XLARGE)
    yield oracle
    oracle.close()


@pytest.fixture(scope="session")
def h200_oracle() -> Iterator[EngineOracle]:
    """A second process: an 8 x H200 node (ml.p5en.48xlarge), whose GPU name and memory set other defaults."""
    oracle = start_oracle(InstanceType.P5EN_48XLARGE)
    yield oracle
    oracle.close()


@pytest.fixture(scope="session")
def example_data() -> dict[str, Any]:
    data: dict[str, Any] = load_spec_data(EXAMPLE)
    return data


@pytest.fixture(scope="session")
def differential(engine_oracle: EngineOracle, example_data: dict[str, Any]) -> list[Outcome]:
    return outcomes(all_cases(), example_data, engine_oracle)

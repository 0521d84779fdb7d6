"""A spec's roles through vLLM's own checks: the command line each role's pods run, its verdict, and the field.

Each role runs the shared ``worker.args`` with its own flags merged over them (the operator replaces a shared
flag by the role's flag of the same name, ``charts/inference_endpoint_config.py``). vLLM is given a folder
holding the model's ``config.json`` in place of the mounted weights, and the GPUs one pod requests, of the
model the instance type carries. A refusal is reported at the spec field that wrote the argument vLLM names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_dpd.charts.inference_endpoint_config import shared_args
from hyperpod_dpd.contracts.vllm import VLLM_VERSION, parse_flags, vllm_flags
from hyperpod_dpd.errors import Problem
from hyperpod_dpd.oracle.engine import EngineOracle, Verdict
from hyperpod_dpd.oracle.gpus import fake_gpu
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.architecture import ModelArchitecture
from hyperpod_dpd.spec.roles import RoleSpec

# The flags the spec's own fields write into the shared args, and the field.
FIELD_FLAGS = {
    "--model": "model.mount_path",
    "--host": "the host vLLM listens on (always 0.0.0.0)",
    "--port": "port",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--max-model-len": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization",
}


@dataclass(frozen=True)
class Argument:
    """One flag of a role's command line and the spec field that wrote it."""

    flag: str
    tokens: tuple[str, ...]
    field: str


@dataclass(frozen=True)
class RoleVerdict:
    """vLLM's verdict on one role's command line."""

    role: str
    argv: tuple[str, ...]
    verdict: Verdict
    fields: tuple[str, ...]
    # The arguments of the fields vLLM's message names, as written on the command line.
    value: str = ""

    def problem(self) -> Problem | None:
        """The refusal (or the check that could not run) as a problem at the field that caused it."""
        if self.verdict.ok:
            return None
        where = ", ".join(self.fields) or self.role
        if self.verdict.could_not_run:
            return Problem(field=where, value=" ".join(self.argv[2:]) or None,
                           message=f"the engine check could not run for the {self.role} role: {self.verdict.error}",
                           fix="this is no verdict on the spec: rerun with --engine; if it persists, report it "
                               "with the command line above")
        late = self.verdict.stage in ("attention_backend", "parsers")
        when = "in the worker, after loading the weights" if late else "at start"
        return Problem(field=where, value=self.value or " ".join(self.argv[2:]),
                       message=f"vLLM {VLLM_VERSION} refuses the {self.role} role's command line {when} "
                               f"({self.verdict.stage}): {condensed(self.verdict.error or '')}",
                       fix=f"change {where} to what vLLM's message asks for (run `vllm serve --help=<flag>` for a "
                           "flag's values), then rerun `hyperpod-dpd validate --engine`")


def condensed(message: str) -> str:
    """vLLM's message on one line: pydantic's multi-line errors joined, its documentation links dropped."""
    lines = [line.strip() for line in message.splitlines()
             if line.strip() and not line.strip().startswith("For further information")]
    return "; ".join(lines)


def role_arguments(spec: DpdSpec, role_name: str, role: RoleSpec) -> list[Argument]:
    """The flags one role's pods run with, each with its field: the shared args with the role's merged over."""
    shared: list[Argument] = []
    for flag in parse_flags(shared_args(spec))[0]:
        field = FIELD_FLAGS.get(flag.name, "args") if len(shared) < len(FIELD_FLAGS) else "args"
        shared.append(Argument(flag.name, tuple(flag.canonical_tokens()), field))
    own: list[Argument] = []
    if role.gpu_memory_utilization is not None:
        value = f"{role.gpu_memory_utilization:g}"
        value = f"{role.gpu_memory_utilization:g}"
        own.append(Argument("--gpu-memory-utilization", ("--gpu-memory-utilization", value),
                            f"{role_name}.gpu_memory_utilization"))
    if role.max_num_seqs is not None:
        own.append(Argument("--max-num-seqs", ("--max-num-seqs", str(role.max_num_seqs)), f"{role_name}.max_num_seqs"))
    flags, strays = parse_flags(role.args)
    own += [Argument(flag.name, tuple(flag.canonical_tokens()), f"{role_name}.args") for flag in flags]
    own += [Argument("", (stray,), f"{role_name}.args") for stray in strays]
    replaced = {argument.flag for argument in own
                if argument.flag and len(argument.tokens) and "." not in argument.tokens[0]}
    return [argument for argument in shared if argument.flag not in replaced] + own


def _names(argument: Argument) -> set[str]:
    """How vLLM's messages may name a flag: ``--max-num-seqs``, ``max_num_seqs``, and a JSON value's keys."""
    if not argument.flag:
        return set(argument.tokens)
    names = {argument.flag, argument.flag.lstrip("-").replace("-", "_")}
    names |= {alias for alias, target in vllm_flags().aliases.items() if target == argument.flag}
    joined = " ".join(argument.tokens[1:])
    names |= {key for key in re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:', joined) if len(key) > 3}
    names |= {value for value in argument.tokens[1:] if len(value) > 2 and not value.startswith(("{", "["))}
    return names


def blamed(arguments: Sequence[Argument], verdict: Verdict) -> list[Argument]:
    """The arguments vLLM's message names, the role's own first; else every flag the spec's args add (vLLM's
    message named none of them), else the model (its config.json is what vLLM read)."""
    text = f"{verdict.error or ''}"
    hits = [argument for argument in reversed(arguments)
            if argument.flag != "--model" and not argument.field.startswith("the host")
            and any(_mentions(text, name) for name in _names(argument))]
    return hits or [a for a in reversed(arguments) if a.field.endswith(".args") or a.field == "args"]


def _mentions(text: str, name: str) -> bool:
    return bool(re.search(rf"(?<![A-Za-z0-9_-]){re.escape(name)}(?![A-Za-z0-9_])", text))


def config_for(architecture: ModelArchitecture, *, max_model_len: int) -> dict[str, Any]:
    """A Hugging Face ``config.json`` with ``architecture``'s shape: a Llama (or Mixtral for MoE) with its
    layers, heads, widths and dtype, FP8 weights when it says one byte a parameter."""
    moe = architecture.is_moe
    config: dict[str, Any] = {
        "architectures": ["MixtralForCausalLM" if moe else "LlamaForCausalLM"],
        "model_type": "mixtral" if moe else "llama",
        "hidden_size": architecture.hidden_size,
        "intermediate_size": architecture.intermediate_size or 4 * architecture.hidden_size,
        "num_attention_heads": architecture.num_attention_heads,
        "num_key_value_heads": architecture.num_kv_heads,
        "num_hidden_layers": architecture.num_layers,
        "head_dim": architecture.head_dim,
        "vocab_size": architecture.vocab_size or 32000,
        "max_position_embeddings": architecture.max_context_length or max_model_len,
        "torch_dtype": "bfloat16" if architecture.dtype == "fp8" else architecture.dtype,
        "rms_norm_eps": 1e-5,
    }
    if moe:
        config |= {"num_local_experts": architecture.num_experts,
                   "num_experts_per_tok": architecture.num_experts_per_token}
    if architecture.weight_bytes_per_parameter == 1 or architecture.dtype == "fp8":
        config["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    return config


def check_spec_with_engine(spec: DpdSpec, oracle: EngineOracle, *, config: Mapping[str, Any],
                           roles: tuple[str, ...] = ("prefill", "decode")) -> list[RoleVerdict]:
    """Each role's command line through ``oracle`` (which fakes the spec's GPU model), with ``config`` as the
    model's ``config.json`` and the GPUs one pod of the role requests."""
    model = oracle.model_dir(dict(config), "spec-model")
    verdicts: list[RoleVerdict] = []
    for role_name, role in spec.roles():
        if role_name not in roles:
            continue
        arguments = role_arguments(spec, role_name, role)
        argv: list[str] = []
        for argument in arguments:
            tokens = list(argument.tokens)
            if argument.flag == "--model":
                tokens = ["--model", str(model)]
            argv += tokens
        # A pod gets at most one node's GPUs, whatever it asks for.
        verdict = oracle.check(argv, gpus=min(spec.role_gpus(role), spec.instance_type.facts.gpus))
        if verdict.error:
            verdict = Verdict(ok=verdict.ok, stage=verdict.stage, error_type=verdict.error_type,
                              error=verdict.error.replace(str(model), spec.model.mount_path),
                              summary=verdict.summary)
        shown = [spec.model.mount_path if token == str(model) else token for token in argv]
        named = [] if verdict.ok else blamed(arguments, verdict)
        fields = tuple(dict.fromkeys(a.field for a in named)) or (() if verdict.ok else ("model.architecture",))
        value = " ".join(" ".join(a.tokens) for a in reversed(named))
        verdicts.append(RoleVerdict(role=role_name, argv=("vllm", "serve", *shown), verdict=verdict, fields=fields,
                                    value=value))
    return verdicts


def oracle_for(spec: DpdSpec) -> EngineOracle:
    """An (unstarted) oracle faking the spec's instance type's GPU."""
    return EngineOracle(fake_gpu(spec.instance_type, count=spec.tensor_parallel_size))




def config_json_of(data: object, source: str | None) -> dict[str, Any] | None:
    """The ``config.json`` a spec's ``model.architecture: {config_json: PATH}`` names (relative to the spec
    file), read whole: vLLM needs more of it than the sizing fields. None when the spec has no such path."""
    model = data.get("model") if isinstance(data, Mapping) else None
    chosen = model.get("architecture") if isinstance(model, Mapping) else None
    path_text = chosen.get("config_json") if isinstance(chosen, Mapping) else None
    if not isinstance(path_text, str):
        return None
    path = Path(path_text).expanduser()
    if not path.is_absolute() and source and Path(source).is_file():
        path = Path(source).parent / path
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the spec's own check names the unreadable file
    return loaded if isinstance(loaded, dict) else None


def engine_verdicts(spec: DpdSpec, architecture: ModelArchitecture | None,
                    config: Mapping[str, Any] | None = None) -> list[RoleVerdict]:
    """Both roles through vLLM's own checks, faking the spec's GPUs; raises :class:`EngineUnavailable` without
    the engine venv. Without ``config`` the model's ``config.json`` is built from ``architecture``."""
    if config is None:
        if architecture is None:
            return [RoleVerdict(role=name, argv=(), fields=("model.architecture",), verdict=Verdict(
                ok=None, stage="oracle", error="vLLM needs the model's config.json, and the spec names no "
                "architecture; set model.architecture: {config_json: path/to/config.json}"))
                for name, _ in spec.roles()]
        config = config_for(architecture, max_model_len=spec.max_model_len)
    with oracle_for(spec) as oracle:
        return check_spec_with_engine(spec, oracle, config=config)

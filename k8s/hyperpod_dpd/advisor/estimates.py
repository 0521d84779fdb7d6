"""The adapter to AIConfigurator: one aggregated or disaggregated layout at one load, as an :class:`Estimate`.

AIConfigurator (``aiconfigurator`` / ``aiconfigurator-core``, the ``advisor`` extra) is imported
lazily, so the rest of the package works without it. Its estimate gives per-request TTFT and TPOT and
the throughput the layout sustains; a closed-loop client with ``C`` requests in flight cannot get
more than that throughput, so when ``C`` exceeds it the surplus waits before its first token
(Little's law: end-to-end latency = ``C`` / requests per second). That wait is ``queue_s``.
"""

from __future__ import annotations

import csv
import functools
import importlib
import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from typing import Any

from hyperpod_dpd.advisor.systems import Target
from hyperpod_dpd.architecture import ModelArchitecture
from hyperpod_dpd.cli._common import UserFacingError
from hyperpod_dpd.errors import Problem, SpecError

DATABASE_MODE = "SILICON"
EXTRA = "advisor"
_QUIET_LOGGERS = ("aiconfigurator", "aiconfigurator_core")
# Config keys of the bundled model compared against our architecture before trusting the mapping.
_SHAPE_KEYS = {"num_layers": "num_hidden_layers", "hidden_size": "hidden_size",
               "num_attention_heads": "num_attention_heads", "num_kv_heads": "num_key_value_heads",
               "intermediate_size": "intermediate_size", "dtype": "torch_dtype"}


class Layout(StrEnum):
    """Which way of serving an estimate describes."""

    AGGREGATED = "aggregated"
    DISAGGREGATED = "disaggregated"


class AdvisorUnavailable(UserFacingError):
    """AIConfigurator is not installed: the message names the extra that brings it (exit status 2)."""


class OutOfMemory(SpecError):
    """AIConfigurator finds no room for the weights and the batch at this tensor parallel size."""


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """One layout at one load, as a client with ``concurrency`` requests in flight would see it.

    Times are seconds; throughputs are output tokens (or requests) per second. ``queue_s`` is the part
    of ``ttft_s`` spent waiting because the load exceeds what the layout sustains.
    """

    layout: Layout
    description: str
    concurrency: int
    ttft_s: float
    tpot_s: float
    e2e_s: float
    queue_s: float
    requests_per_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s_per_user: float
    gpus: int
    nodes: int
    tensor_parallel_size: int
    sustains_load: bool = True

    def to_json(self) -> dict[str, object]:
        return {
            "layout": self.layout.value, "description": self.description, "concurrency": self.concurrency,
            "ttft_s": round(self.ttft_s, 4), "tpot_s": round(self.tpot_s, 5), "e2e_s": round(self.e2e_s, 4),
            "queue_s": round(self.queue_s, 4), "requests_per_s": round(self.requests_per_s, 4),
            "output_tokens_per_s": round(self.output_tokens_per_s, 2),
            "output_tokens_per_s_per_gpu": round(self.output_tokens_per_s_per_gpu, 3),
            "output_tokens_per_s_per_user": round(self.output_tokens_per_s_per_user, 3),
            "gpus": self.gpus, "nodes": self.nodes, "tensor_parallel_size": self.tensor_parallel_size,
            "sustains_load": self.sustains_load,
        }


@dataclass(frozen=True, kw_only=True)
class _Raw:
    """AIConfigurator's figures for one engine layout: per-request latencies and sustained rate."""

    ttft_s: float
    tpot_s: float
    latency_s: float
    requests_per_s: float


def _modules() -> tuple[Any, Any]:
    try:
        api = importlib.import_module("aiconfigurator.cli.api")
        database = importlib.import_module("aiconfigurator_core.sdk.perf_database")
    except ImportError:
        raise AdvisorUnavailable(
            "the advisor needs NVIDIA AIConfigurator, which is not installed: "
            f"pip install 'hyperpod-dpd[{EXTRA}]'") from None
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    return api, database


@functools.cache
def _database_version(system: str, backend: str) -> str:
    _, database = _modules()
    # The maintained "current" slot is what AIConfigurator calls latest; reading the slot skips a scan of
    # every system's collection metadata.
    slots = database.get_version_slots(system, backend)
    version: str | None = slots["current"] if slots else database.get_latest_database_version(system=system,
                                                                                               backend=backend)
    if version is None:
        raise SpecError([Problem(field="instance_type", value=system, message=f"has no {backend} database in "
                                 "the installed AIConfigurator", fix=f"reinstall 'hyperpod-dpd[{EXTRA}]'")])
    return version


def _core_dir() -> Path:
    _modules()
    return Path(importlib.import_module("aiconfigurator_core").__file__ or "").parent


def _check_support(target: Target, architecture: ModelArchitecture) -> None:
    """Refuse a model whose bundled config differs from ours or that AIConfigurator's own matrix fails."""
    config_file = _core_dir() / "model_configs" / (target.model_path.replace("/", "--") + "_config.json")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    different = [f"{ours} {getattr(architecture, ours)} vs {config.get(theirs)}"
                 for ours, theirs in _SHAPE_KEYS.items() if getattr(architecture, ours) != config.get(theirs)]
    if different:
        raise SpecError([Problem(
            field="model.architecture", value=architecture.name,
            message=f"does not have the shape of AIConfigurator's {target.model_path} ({'; '.join(different)}), "
                    "so its data would not describe this model", fix="use a matching preset")])
    matrix = _core_dir() / "systems" / "support_matrix" / f"{target.system}.csv"
    with matrix.open(encoding="utf-8", newline="") as handle:
        status = {row["Mode"]: row["Status"] for row in csv.DictReader(handle)
                  if row["HuggingFaceID"] == target.model_path and row["Backend"] == target.backend
                  and row["Version"] == _database_version(target.system, target.backend)}
    failing = [mode for mode in ("agg", "disagg") if status.get(mode) != "PASS"]
    if failing:
        raise SpecError([Problem(
            field="model.architecture", value=architecture.name,
            message=f"AIConfigurator's support matrix has no passing {target.backend} estimate of "
                    f"{target.model_path} on {target.system} ({', '.join(failing)}: "
                    f"{', '.join(status.get(m, 'not listed') for m in failing)})",
            fix="choose a larger GPU (instance_type) or a smaller model")])


def versions(target: Target) -> Mapping[str, str]:
    """What the estimates rest on, printed with every result."""
    _modules()
    return {
        "aiconfigurator": metadata.version("aiconfigurator"),
        "aiconfigurator_core": metadata.version("aiconfigurator-core"),
        "system": target.system,
        "backend": f"{target.backend} {_database_version(target.system, target.backend)} (the engine version of "
                   "the measured kernels)",
        "database_mode": f"{DATABASE_MODE} (silicon-collected kernel data only, no speed-of-light fill-in)",
        "model_data": target.model_path,
    }


@functools.cache
def _raw_aggregated(target: Target, *, isl: int, osl: int, tp: int, batch: int) -> _Raw:
    return _estimate(target, tp=tp, batch=batch, mode="agg", isl=isl, osl=osl, batch_size=batch, tp_size=tp)


@functools.cache
def _raw_disaggregated(target: Target, *, isl: int, osl: int, tp: int, prefill_workers: int,
                       decode_workers: int, decode_batch: int) -> _Raw:
    return _estimate(target, tp=tp, batch=decode_batch, mode="disagg", isl=isl, osl=osl, tp_size=tp,
                     prefill_batch_size=1, prefill_num_workers=prefill_workers, decode_batch_size=decode_batch,
                     decode_num_workers=decode_workers)


def _estimate(target: Target, *, tp: int, batch: int, **options: Any) -> _Raw:
    api, _ = _modules()
    try:
        result = api.cli_estimate(target.model_path, target.system, backend_name=target.backend,
                                  backend_version=_database_version(target.system, target.backend),
                                  database_mode=DATABASE_MODE, **options)
    except RuntimeError as err:
        if not str(err).startswith("OOM"):
            raise
        raise OutOfMemory([Problem(
            field="tensor_parallel_size", value=tp,
            message=f"leaves no GPU memory for the weights and {batch} sequences per engine by AIConfigurator's "
                    "estimate", fix="raise tensor_parallel_size or lower max_num_seqs")]) from None
    return _to_raw(result.raw)


def _to_raw(row: Mapping[str, Any]) -> _Raw:
    return _Raw(ttft_s=float(row["ttft"]) / 1000, tpot_s=float(row["tpot"]) / 1000,
                latency_s=float(row["request_latency"]) / 1000, requests_per_s=float(row["seq/s"]))


class Estimator:
    """Estimates for one model on one system at one request shape; results are cached per layout."""

    def __init__(self, target: Target, architecture: ModelArchitecture, *, isl: int, osl: int,
                 gpus_per_node: int) -> None:
        _modules()
        _check_support(target, architecture)
        self.target = target
        self.isl = isl
        self.osl = osl
        self.gpus_per_node = gpus_per_node

    def aggregated(self, *, tp: int, replicas: int, concurrency: int, max_batch: int, gpus: int | None = None,
                   layout: Layout = Layout.AGGREGATED, description: str | None = None) -> Estimate:
        """``replicas`` vLLM engines of ``tp`` GPUs sharing ``concurrency`` evenly (some get one more).

        Each engine runs at most ``max_batch`` requests at once; the rest wait for a slot.
        """
        base, extra = divmod(concurrency, replicas)
        groups = [(min(batch, max_batch), count) for batch, count in ((base + 1, extra), (base, replicas - extra))
                  if batch > 0 and count > 0]
        raws = [(_raw_aggregated(self.target, isl=self.isl, osl=self.osl, tp=tp, batch=batch), batch, count)
                for batch, count in groups]
        users = sum(batch * count for _, batch, count in raws)

        def mean(pick: Callable[[_Raw], float]) -> float:
            return sum(pick(raw) * batch * count for raw, batch, count in raws) / users

        total_gpus = gpus if gpus is not None else replicas * tp
        raw = _Raw(ttft_s=mean(lambda r: r.ttft_s), tpot_s=mean(lambda r: r.tpot_s),
                   latency_s=mean(lambda r: r.latency_s),
                   requests_per_s=sum(r.requests_per_s * count for r, _, count in raws))
        return self._closed_loop(raw, layout=layout, concurrency=concurrency, gpus=total_gpus, tp=tp,
                                 description=description or f"{replicas} x TP{tp} vLLM replica(s)")

    def disaggregated(self, *, tp: int, prefill_replicas: int, decode_replicas: int, concurrency: int,
                      decode_max_num_seqs: int, transfer_s: float) -> Estimate:
        """The DPD layout: each decoder takes its share of ``concurrency`` up to its ``max_num_seqs``."""
        batch = min(decode_max_num_seqs, math.ceil(concurrency / decode_replicas))
        raw = _raw_disaggregated(self.target, isl=self.isl, osl=self.osl, tp=tp, prefill_workers=prefill_replicas,
                                 decode_workers=decode_replicas, decode_batch=batch)
        moved = _Raw(ttft_s=raw.ttft_s + transfer_s, tpot_s=raw.tpot_s, latency_s=raw.latency_s + transfer_s,
                     requests_per_s=raw.requests_per_s)
        return self._closed_loop(moved, layout=Layout.DISAGGREGATED, concurrency=concurrency,
                                 gpus=(prefill_replicas + decode_replicas) * tp, tp=tp,
                                 description=f"{prefill_replicas} prefill + {decode_replicas} decode x TP{tp}")

    def _closed_loop(self, raw: _Raw, *, layout: Layout, concurrency: int, gpus: int, tp: int,
                     description: str) -> Estimate:
        e2e = max(raw.latency_s, concurrency / raw.requests_per_s)
        queue = e2e - raw.latency_s
        rate = concurrency / e2e
        tokens = rate * self.osl
        return Estimate(
            layout=layout, description=description, concurrency=concurrency, ttft_s=raw.ttft_s + queue,
            tpot_s=raw.tpot_s, e2e_s=e2e, queue_s=queue, requests_per_s=rate, output_tokens_per_s=tokens,
            output_tokens_per_s_per_gpu=tokens / gpus, output_tokens_per_s_per_user=1 / raw.tpot_s, gpus=gpus,
            nodes=math.ceil(gpus / self.gpus_per_node), tensor_parallel_size=tp)


def at_rate(estimate_at: Callable[[int], Estimate], rate: float, *, max_concurrency: int) -> Estimate:
    """The estimate at the fewest requests in flight whose throughput reaches ``rate`` requests per second.

    Throughput grows with the requests in flight until the layout saturates; if it never reaches
    ``rate``, the estimate at the largest load tried is returned with ``sustains_load=False``. A layout
    that sustains the rate serves exactly that rate, so its throughput figures are the rate's.
    """
    low, high = 0, 1
    last: Estimate | None = None
    while True:
        try:
            current = estimate_at(high)
        except OutOfMemory:
            if last is None:
                raise
            return replace(last, sustains_load=False)
        if current.requests_per_s >= rate:
            break
        if high >= max_concurrency:
            return replace(current, sustains_load=False)
        last = current
        low, high = high, min(max_concurrency, high * 2)
    while high - low > 1:
        middle = (low + high) // 2
        if estimate_at(middle).requests_per_s >= rate:
            high = middle
        else:
            low = middle
    found = estimate_at(high)
    scale = rate / found.requests_per_s
    return replace(found, requests_per_s=rate, output_tokens_per_s=found.output_tokens_per_s * scale,
                   output_tokens_per_s_per_gpu=found.output_tokens_per_s_per_gpu * scale)


"""The adapter to AIConfigurator: one aggregated or disaggregated layout at one load, as an :class:`Estimate`.

AIConfigurator (``aiconfigurator`` / ``aiconfigurator-core``, the ``advisor`` extra) is imported
lazily, so the rest of the package works without it. It supplies per-step kernel timings only
(:mod:`hyperpod_dpd.advisor.steps`); the queueing of both layouts is the advisor's own
(:mod:`hyperpod_dpd.advisor.queueing`).
"""

from __future__ import annotations

import copy
import csv
import functools
import importlib
import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hyperpod_dpd.advisor import kernel_cache, queueing
from hyperpod_dpd.advisor.analogy import (
    ANALOGY_SPREAD_FLOOR,
    ANALOGY_SPREAD_PER_DISTANCE,
    AnalogySteps,
    analogy_spread,
)
from hyperpod_dpd.advisor.engine import EngineSettings
from hyperpod_dpd.advisor.queueing import Stations
from hyperpod_dpd.advisor.steps import PhaseFactors, StepTimes, aggregated_stations, dpd_stations
from hyperpod_dpd.advisor.systems import Target
from hyperpod_dpd.contracts.prices import NodePrice
from hyperpod_dpd.errors import Problem, SpecError, UsageError, install_extra
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec.architecture import PRESETS, ModelArchitecture

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


class AdvisorUnavailable(UsageError):
    """AIConfigurator is not installed: the message names the extra that brings it (exit status 2)."""


class OutOfMemory(SpecError):
    """AIConfigurator finds no room for the weights and the batch at this tensor parallel size."""


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """One layout at one load, as the clients would see it.

    Times are seconds; throughputs are output tokens (or requests) per second. ``queue_s`` is the mean
    time a request waits for a prefill lane or a decoder slot; ``decoding`` the mean number of requests
    the decoders run at once. ``gpus`` and the per-GPU figure count every GPU of ``nodes`` (the nodes
    the stack creates, idle GPUs included); ``gpus_used`` those the engines occupy. A load the layout
    cannot sustain (``sustains_load`` false) has no latency figures (``nan``, ``null`` in JSON).
    ``ttft_band_s`` and ``tpot_band_s`` are the range the figures take under the least and the most
    variable service times (:data:`VARIABILITY`), widened by :func:`~hyperpod_dpd.advisor.analogy.analogy_spread`
    when ``by_analogy_to`` names the measured model whose data stand in for the spec's, and by the model's error
    (``PhaseFactors.ttft_residual`` / ``tpot_residual``).
    :attr:`capacity_per_s` is the layout's saturation rate; at a concurrency it is simulated only when
    read (``capacity_of``), since a closed loop's own rate is its throughput, not its capacity.
    """

    layout: Layout
    description: str
    concurrency: int
    ttft_s: float
    ttft_p90_s: float
    tpot_s: float
    e2e_s: float
    queue_s: float
    requests_per_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s_per_user: float
    gpus: int
    gpus_used: int
    nodes: int
    tensor_parallel_size: int
    decoding: float
    capacity_requests_per_s: float
    usd_per_hour: float | None = None
    usd_per_million_output_tokens: float | None = None
    sustains_load: bool = True
    ttft_band_s: tuple[float, float] | None = None
    tpot_band_s: tuple[float, float] | None = None
    by_analogy_to: str | None = None
    capacity_of: Callable[[], float] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def capacity_per_s(self) -> float:
        """Requests per second the layout completes with every decoder slot busy."""
        if math.isnan(self.capacity_requests_per_s) and self.capacity_of is not None:
            return self.capacity_of()
        return self.capacity_requests_per_s

    def to_json(self) -> dict[str, object]:
        return {
            "layout": self.layout.value, "description": self.description, "concurrency": self.concurrency,
            "ttft_s": _round(self.ttft_s, 4), "ttft_p90_s": _round(self.ttft_p90_s, 4),
            "tpot_s": _round(self.tpot_s, 5), "e2e_s": _round(self.e2e_s, 4), "queue_s": _round(self.queue_s, 4),
            "requests_per_s": _round(self.requests_per_s, 4),
            "output_tokens_per_s": _round(self.output_tokens_per_s, 2),
            "output_tokens_per_s_per_gpu": _round(self.output_tokens_per_s_per_gpu, 3),
            "output_tokens_per_s_per_user": _round(self.output_tokens_per_s_per_user, 3),
            "decoder_mean_batch": _round(self.decoding, 2),
            "capacity_requests_per_s": _round(self.capacity_per_s, 4),
            "gpus": self.gpus, "gpus_used": self.gpus_used, "nodes": self.nodes,
            "tensor_parallel_size": self.tensor_parallel_size,
            "usd_per_hour": _round(self.usd_per_hour, 2),
            "usd_per_million_output_tokens": _round(self.usd_per_million_output_tokens, 3),
            "sustains_load": self.sustains_load,
            "ttft_band_s": _band(self.ttft_band_s, 4), "tpot_band_s": _band(self.tpot_band_s, 5),
            "by_analogy_to": self.by_analogy_to,
        }


def _round(value: float | None, digits: int) -> float | None:
    """JSON has no NaN: a figure a saturated layout does not have is ``null``."""
    return None if value is None or math.isnan(value) else round(value, digits)


def _band(band: tuple[float, float] | None, digits: int) -> list[float | None] | None:
    return None if band is None else [_round(band[0], digits), _round(band[1], digits)]


def _modules() -> tuple[Any, Any]:
    try:
        api = importlib.import_module("aiconfigurator.cli.api")
        database = importlib.import_module("aiconfigurator_core.sdk.perf_database")
    except ImportError:
        raise AdvisorUnavailable(
            "the advisor needs NVIDIA AIConfigurator, which is not installed: "
            f"{install_extra(EXTRA)}") from None
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


def kernel_version(target: Target) -> str:
    """The engine version AIConfigurator's kernel data for ``target`` were measured on."""
    return _database_version(target.system, target.backend)


def _core_dir() -> Path:
    _modules()
    return Path(importlib.import_module("aiconfigurator_core").__file__ or "").parent


@functools.cache
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
        "model_data": target.model_path if not target.analogy_of else (
            f"{target.model_path}, by analogy: {target.analogy_of} is not in AIConfigurator's data, so its step "
            f"times are {target.model_path}'s measured times scaled by the ratio of the two models' rooflines "
            f"(FLOPs over peak, bytes over HBM bandwidth) on {target.gpu_model}; its ranges widen by "
            f"exp({ANALOGY_SPREAD_PER_DISTANCE:g} x distance + {ANALOGY_SPREAD_FLOOR:g}) each side, the first "
            "measured on Llama 3.1 70B against 8B (docs/advise.md)"),
    }


def _aic_call(target: Target, tp: int, **options: Any) -> Any:
    """One static AIConfigurator estimate; a layout that does not fit is :class:`OutOfMemory`."""
    api, _ = _modules()
    try:
        return api.cli_estimate(target.model_path, target.system, backend_name=target.backend,
                                backend_version=_database_version(target.system, target.backend),
                                database_mode=DATABASE_MODE, **options)
    except RuntimeError as err:
        if not str(err).startswith("OOM"):
            raise
        raise OutOfMemory([Problem(
            field="tensor_parallel_size", value=tp,
            message=f"leaves no GPU memory for the weights and batch {options.get('batch_size')} by "
                    "AIConfigurator's estimate", fix="raise tensor_parallel_size or lower max_num_seqs")]) from None
    except (KeyError, ValueError, AssertionError) as err:
        raise SpecError([Problem(
            field="args", value=f"quantization {options.get('gemm_quant_mode') or 'bf16'}, KV cache "
                                f"{options.get('kvcache_quant_mode') or 'bf16'}",
            message=f"has no {target.backend} kernel data for {target.model_path} on {target.system} "
                    f"at TP {tp} ({type(err).__name__})",
            fix="use the BF16 model or an instance type AIConfigurator measured with this quantization")]) from None


def _cached_call(target: Target, tp: int, **options: Any) -> Any:
    """:func:`_aic_call` through the disk cache (:mod:`hyperpod_dpd.advisor.kernel_cache`): only the figures
    the step times read are kept, and a look-up that fails is never cached."""
    cache = kernel_cache.shared()
    entry = kernel_cache.key(target.system, target.backend, target.model_path, tp, **options)
    found = cache.get(entry) if cache is not None else None
    if found is None:
        raw = _aic_call(target, tp, **options).raw
        found = {name: float(raw[name]) for name in kernel_cache.STEP_KEYS if name in raw}
        if cache is not None:
            cache.put(entry, found)
    return SimpleNamespace(raw=found)


@functools.cache
def _step_times(target: Target, tp: int, engine: EngineSettings, isl: int, osl: int) -> StepTimes:
    """One set of step times per layout and request shape, shared by every estimator of the process."""
    return StepTimes(target, tp=tp, engine=engine, isl=isl, osl=osl, run=functools.partial(_cached_call, target, tp))


@functools.cache
def _analogy_steps(measured: StepTimes, model: ModelArchitecture, reference: ModelArchitecture,
                   gpu_model: str) -> StepTimes:
    return AnalogySteps(measured, model=model, reference_model=reference, gpu_model=gpu_model)


class Estimator:
    """Estimates for one model on one system at one request shape; step times are cached per TP."""

    def __init__(self, target: Target, architecture: ModelArchitecture, *, isl: int, osl: int,
                 gpus_per_node: int, engine: EngineSettings | None = None, factors: PhaseFactors | None = None,
                 price: NodePrice | None = None) -> None:
        _modules()
        self.architecture = architecture
        self.reference_architecture = PRESETS[target.reference] if target.analogy_of else architecture
        _check_support(target, self.reference_architecture)
        self.target = target
        self.isl = isl
        self.osl = osl
        self.gpus_per_node = gpus_per_node
        self.engine = engine or EngineSettings()
        self.factors = factors or PhaseFactors()
        self.price = price

    def steps(self, tp: int) -> StepTimes:
        measured = _step_times(self.target, tp, self.engine, self.isl, self.osl)
        if not self.target.analogy_of:
            return measured
        return _analogy_steps(measured, self.architecture, self.reference_architecture, self.target.gpu_model)

    def with_engine(self, engine: EngineSettings) -> Estimator:
        """The same estimator with other engine settings (its own step times, cached per settings)."""
        other = copy.copy(self)
        other.engine = engine
        return other

    def aggregated(self, *, tp: int, replicas: int, load: Load, max_batch: int, nodes: int,
                   layout: Layout = Layout.AGGREGATED, description: str | None = None, bands: bool = True) -> Estimate:
        """``replicas`` vLLM engines of ``tp`` GPUs, each running at most ``max_batch`` requests at once.

        ``bands`` false skips the ranges (two more simulations), for a search that compares points only.
        """
        factors = self.factors if layout is Layout.DISAGGREGATED else self.factors.for_aggregated()
        stations = aggregated_stations(self.steps(tp), factors, replicas=replicas, slots=max_batch,
                                       isl=self.isl, osl=self.osl)
        return self._estimate(stations, load, layout=layout, nodes=nodes, tp=tp, bands=bands,
                              description=description or f"{replicas} x TP{tp} vLLM replica(s)")

    def disaggregated(self, *, tp: int, prefill_replicas: int, decode_replicas: int, load: Load,
                      decode_max_num_seqs: int, transfer_s: float, nodes: int, bands: bool = True) -> Estimate:
        """The DPD layout: prefillers one prompt at a time, each decoder up to its ``max_num_seqs``."""
        stations = dpd_stations(self.steps(tp), self.factors, prefill_replicas=prefill_replicas,
                                decode_replicas=decode_replicas, decode_slots=decode_max_num_seqs,
                                transfer_s=transfer_s, isl=self.isl)
        return self._estimate(stations, load, layout=Layout.DISAGGREGATED, nodes=nodes, tp=tp, bands=bands,
                              description=f"{prefill_replicas} prefill + {decode_replicas} decode x TP{tp}")

    def _estimate(self, stations: Stations, load: Load, *, layout: Layout, nodes: int, tp: int,
                  description: str, bands: bool = True) -> Estimate:
        variability = VARIABILITY if bands else ()
        if load.concurrency is not None:
            outcome = queueing.closed_loop(stations, osl=self.osl, concurrency=load.concurrency)
            variants = [queueing.closed_loop(stations, osl=self.osl, concurrency=load.concurrency, jitter=jitter,
                                             exponential=exponential) for jitter, exponential in variability]
            in_flight = load.concurrency
            capacity, capacity_of = math.nan, functools.partial(queueing.capacity, stations, osl=self.osl)
        else:
            outcome = queueing.open_loop(stations, osl=self.osl, rate=load.rate or 0.0)
            variants = [queueing.open_loop(stations, osl=self.osl, rate=load.rate or 0.0, jitter=jitter,
                                           exponential=exponential, capacity_per_s=outcome.capacity_per_s)
                        for jitter, exponential in variability]
            in_flight = 0 if outcome.saturated else round(outcome.in_flight)
            capacity, capacity_of = outcome.capacity_per_s, None
        spread = analogy_spread(self.architecture, self.reference_architecture) if self.target.analogy_of else 0.0
        # The model's own error (a calibration's residual, or uncalibrated its miss against the published points)
        # is what the point figure may still be off by: the range holds it on each side.
        fitted = self.factors if layout is Layout.DISAGGREGATED else self.factors.for_aggregated()
        ttft_band = _spread([outcome, *variants], "ttft_s", spread, fitted.ttft_residual) if bands else None
        tpot_band = (_spread([outcome, *variants], "tpot_s", spread, fitted.tpot_residual)
                     if bands and self.osl >= 2 else None)
        tokens = outcome.requests_per_s * self.osl
        # One output token has no time per output token after the first: TPOT does not exist.
        tpot = outcome.tpot_s if self.osl >= 2 else math.nan
        gpus = nodes * self.gpus_per_node
        usd = None if self.price is None else nodes * self.price.usd_per_node_hour
        per_million = None if usd is None or tokens <= 0 else usd / (tokens * 3600) * 1e6
        return Estimate(
            layout=layout, description=description, concurrency=in_flight, ttft_s=outcome.ttft_s,
            ttft_p90_s=outcome.ttft_p90_s, tpot_s=tpot, e2e_s=outcome.e2e_s, queue_s=outcome.queue_s,
            requests_per_s=outcome.requests_per_s, output_tokens_per_s=tokens,
            output_tokens_per_s_per_gpu=tokens / gpus,
            output_tokens_per_s_per_user=1 / tpot if tpot > 0 else math.nan,
            gpus=gpus, gpus_used=(stations.prefill_lanes + (0 if stations.colocated else stations.decoders)) * tp,
            nodes=nodes, tensor_parallel_size=tp, decoding=outcome.decoding,
            capacity_requests_per_s=capacity, capacity_of=capacity_of, usd_per_hour=usd,
            usd_per_million_output_tokens=per_million, sustains_load=not outcome.saturated,
            ttft_band_s=ttft_band, tpot_band_s=tpot_band,
            by_analogy_to=self.target.model_path if self.target.analogy_of else None)


# The service-time variability the band spans (jitter share, exponential): none at all, and
# exponential service times (the M/M/c end). The point figure uses queueing.DEFAULT_JITTER. The
# range is then widened by the model's error (PhaseFactors.ttft_residual / tpot_residual).
VARIABILITY: tuple[tuple[float, bool], ...] = ((0.0, False), (0.0, True))


def _spread(outcomes: list[queueing.Outcome], name: str, spread: float,
            residual: float = 0.0) -> tuple[float, float] | None:
    """The range of ``name`` over ``outcomes``, widened by ``exp(spread)`` and the relative ``residual`` each
    side; ``None`` when saturated."""
    values = [getattr(o, name) for o in outcomes if not o.saturated and not math.isnan(getattr(o, name))]
    if len(values) < len(outcomes):
        return None
    return min(values) * math.exp(-spread) * max(0.0, 1 - residual), max(values) * math.exp(spread) * (1 + residual)

"""``advise --calibrate BENCH.json``: fit the model's phase factors to the user's own benchmark, per layout.

The input is what ``hyperpod-dpd bench --json`` prints: ``runs.dpd`` and, when bench ran with
``--aggregated``, ``runs.aggregated`` (the aggregated twin), each with the scenario and one entry per
concurrency level. Each layout gets its own three factors, fitted on its own run, because what only DPD
pays (the KV transfer, the router hop, LMCache on both roles) must not slow the baseline:

- decode step: the ratio of measured to predicted mean TPOT (geometric mean over the levels);
- overhead: what a closed loop of ``C`` clients spends per request beyond TTFT and decoding
  (``C / requests per second - TTFT - (osl - 1) x TPOT``), at least 0. Little's law holds for means
  only, so the fit reads the means bench records (``client_ttft_mean_s``, ``client_tpot_mean_s``);
  a file without them falls back to p50, with a warning;
- prefill: the multiplier that brings the predicted mean TTFT closest to the measured one (least
  squares on the logarithm, a golden-section search; TTFT holds the prefill queue, so it is solved
  through the model).

Without ``runs.aggregated`` the baseline keeps AIConfigurator's own corrections, and the output says so.
Every factor is bounded by physics (:mod:`hyperpod_dpd.advisor.physics`: no step faster than its
bytes over HBM bandwidth or its FLOPs over the GPUs' peak) and above by ``FACTOR_MAX``; a prefill fit
at either end of that range, and an overhead above ``OVERHEAD_SHARE_MAX`` of the mean end-to-end
time, are refused: such a benchmark measured something else. So are data from another endpoint, model
(``model.name`` or the architecture it is sized as), instance type, request shape or layout
(``layout``: TP, replicas per role and engine flags, as bench records them; the DPD run is compared with
:func:`~hyperpod_dpd.charts.aggregated.layout_identity`, the twin's with its own
:func:`~hyperpod_dpd.charts.aggregated.twin_layout_identity`), a failed run, a run bench itself marked
untrusted (``trusted: false``) or failed (``problem``), and a level with a zero or negative figure, each by
name. A file from a bench older than the ``model``/``architecture``/``instance_type`` fields is still used,
with a warning that those could not be checked.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hyperpod_dpd.advisor.comparison import advise
from hyperpod_dpd.advisor.engine import engine_settings
from hyperpod_dpd.advisor.estimates import Estimator
from hyperpod_dpd.advisor.physics import decode_floor_s, prefill_floor_s
from hyperpod_dpd.advisor.steps import PhaseFactors, StepTimes
from hyperpod_dpd.advisor.systems import target_for
from hyperpod_dpd.advisor.traffic import Traffic
from hyperpod_dpd.charts.aggregated import SUFFIX, layout_identity, twin_layout_identity
from hyperpod_dpd.errors import Problem, SpecError, UsageError
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.architecture import ModelArchitecture

# Above four times the kernel data's step time a benchmark measured another engine, not a slower one.
FACTOR_MAX = 4.0
# The closed-loop identity's residual (time per request outside TTFT and decoding) is the client's gap
# between requests and the HTTP hops; above a tenth of the mean end-to-end time it is not that.
OVERHEAD_SHARE_MAX = 0.10
# Below a hundredth of the mean cycle the residual is the throughput window's error, not a cost: genai-bench
# divides the tokens by the level's whole run time, and the advisor's own simulation, whose cycle has no gap
# by construction, leaves 0.2 % (16 ms of a 9.2 s cycle at concurrency 32).
OVERHEAD_NOISE_SHARE = 0.01
DPD_RUN = "dpd"
AGGREGATED_RUN = "aggregated"
# bench names the aggregated twin's endpoint after the spec (benchmark/session.py: f"{spec.name}-agg").
AGGREGATED_SUFFIX = SUFFIX
MEAN, MEDIAN = "mean", "p50"
# A prefill fit this close (in log) to an end of its range is a boundary fit, not a fit.
_EDGE = 0.02
_GOLDEN_STEPS = 12
_NARROW = 1.15  # the line is fitted between the golden section's result divided and multiplied by this
_LINE_POINTS = 7
_GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass(frozen=True, kw_only=True)
class Measured:
    """One level of a benchmark: mean TTFT and TPOT in seconds (p50 in older files), output tokens per second."""

    concurrency: int
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float


@dataclass(frozen=True, kw_only=True)
class Bench:
    """One run of a ``bench --json`` document (the DPD run; its ``aggregated`` run when bench measured both).

    ``statistic`` is ``"mean"`` when every level carries the client's means, else ``"p50"``.
    """

    endpoint: str
    isl: int
    osl: int
    levels: tuple[Measured, ...]
    model: str | None = None
    architecture: str | None = None
    instance_type: str | None = None
    layout: Mapping[str, Any] | None = None
    trusted: bool = True
    distrust: tuple[str, ...] = ()
    problem: str | None = None
    statistic: str = MEAN
    aggregated: Bench | None = None

    def unchecked(self) -> list[str]:
        """The identity fields the file does not carry (a bench older than them)."""
        return [name for name, value in (("model", self.model), ("architecture", self.architecture),
                                         ("instance_type", self.instance_type), ("layout", self.layout))
                if value is None]


@dataclass(frozen=True, kw_only=True)
class Fit:
    """The fitted factors (``factors.aggregated`` the baseline's) and each layout's mean absolute error."""

    factors: PhaseFactors
    error_before: Mapping[str, float]
    error_after: Mapping[str, float]
    levels: tuple[int, ...]
    warnings: tuple[str, ...] = ()
    baseline_error_before: Mapping[str, float] | None = None
    baseline_error_after: Mapping[str, float] | None = None

    def render(self) -> str:
        def errors(found: Mapping[str, float]) -> str:
            return ", ".join(f"{name} {value:.0%}" for name, value in found.items())

        def factors(f: PhaseFactors) -> str:
            return f"prefill x{f.prefill:.3g}, decode step x{f.decode:.3g}, +{f.overhead_s * 1000:.0f} ms per request"

        lines = [f"calibrated on concurrency {', '.join(map(str, self.levels))}: {factors(self.factors)}",
                 f"  uncalibrated model off by {errors(self.error_before)}",
                 f"  calibrated model off by {errors(self.error_after)}"]
        baseline = self.factors.for_aggregated()
        if self.baseline_error_before is None or self.baseline_error_after is None:
            lines.append(f"  aggregated baseline: {baseline.source}")
        else:
            lines += [f"  aggregated baseline, on its own run: {factors(baseline)}",
                      f"    uncalibrated model off by {errors(self.baseline_error_before)}",
                      f"    calibrated model off by {errors(self.baseline_error_after)}"]
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        def rounded(found: Mapping[str, float] | None) -> dict[str, float] | None:
            return None if found is None else {k: round(v, 4) for k, v in found.items()}

        return {"factors": self.factors.to_json(), "levels": list(self.levels),
                "error_before": rounded(self.error_before), "error_after": rounded(self.error_after),
                "baseline_error_before": rounded(self.baseline_error_before),
                "baseline_error_after": rounded(self.baseline_error_after)}


def read_bench(path: Path) -> Bench:
    """The runs of ``path``; a file that is not ``bench --json`` output is refused with the key missing."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise UsageError(f"--calibrate: cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"--calibrate: {path} is not JSON ({err.msg}, line {err.lineno}); give the output of "
                              "'hyperpod-dpd bench --json'") from None
    return parse_bench(document, where=str(path))


def parse_bench(document: Any, *, where: str) -> Bench:
    runs = document.get("runs", {}) if isinstance(document, Mapping) else {}
    run = runs.get(DPD_RUN) if isinstance(runs, Mapping) else None
    if not isinstance(run, Mapping):
        raise UsageError(f"--calibrate: {where} has no runs.{DPD_RUN}; give the output of 'hyperpod-dpd bench "
                              "--json' for the DPD endpoint")
    aggregated = runs.get(AGGREGATED_RUN)
    return replace(_parse_run(run, label=DPD_RUN, where=where), aggregated=None if aggregated is None else
                   _parse_run(aggregated, label=AGGREGATED_RUN, where=where))


def _level(level: Mapping[str, Any], *, means: bool) -> Measured:
    if means:
        ttft, tpot = float(level["client_ttft_mean_s"]), float(level["client_tpot_mean_s"])
    else:
        ttft, tpot = float(level["ttft_s"]["p50"]), float(level["tpot_s"]["p50"])
    return Measured(concurrency=int(level["concurrency"]), ttft_s=ttft, tpot_s=tpot,
                    output_tokens_per_s=float(level["output_tokens_per_s"]))


def _parse_run(run: Any, *, label: str, where: str) -> Bench:
    if not isinstance(run, Mapping):
        raise UsageError(f"--calibrate: {where}: runs.{label} is not an object; give the output of "
                              "'hyperpod-dpd bench --json'")
    if any(isinstance(level, Mapping) and "request_rate" in level for level in run.get("levels") or []):
        raise UsageError(f"--calibrate: {where} holds open-loop levels (bench --request-rate); the fit needs "
                              "closed-loop ones: give 'hyperpod-dpd bench --json' run with --concurrency")
    try:
        scenario = run["scenario"]
        used = [level for level in run["levels"] if level.get("completed") and not level.get("failed")]
        means = bool(used) and all(level.get("client_ttft_mean_s") is not None
                                   and level.get("client_tpot_mean_s") is not None for level in used)
        levels = tuple(_level(level, means=means) for level in used)
        layout = run.get("layout")
        distrust = tuple(str(w.get("message", w)) if isinstance(w, Mapping) else str(w)
                         for w in run.get("warnings") or [])
        return Bench(endpoint=str(run["endpoint"]), isl=int(scenario["isl"]), osl=int(scenario["osl"]),
                     levels=levels, model=_text(run.get("model")), architecture=_text(run.get("architecture")),
                     instance_type=_text(run.get("instance_type")),
                     layout=layout if isinstance(layout, Mapping) else None,
                     trusted=run.get("trusted") is not False, distrust=distrust, problem=_text(run.get("problem")),
                     statistic=MEAN if means else MEDIAN)
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(f"--calibrate: {where}: runs.{label} lacks {err} or has a non-number there; give "
                              "the output of 'hyperpod-dpd bench --json'") from None


def _comparable(value: Any) -> Any:
    return [str(item) for item in value] if isinstance(value, list | tuple) else value


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _architecture(spec: DpdSpec) -> ModelArchitecture | None:
    """The architecture the planner sizes ``spec`` with (its name is what ``bench --json`` records)."""
    from hyperpod_dpd.validation import check  # noqa: PLC0415 - heavy

    return check(spec).architecture


def _refusals(spec: DpdSpec, traffic: Traffic, bench: Bench, *, prefix: str = "calibrate",
              endpoint: str | None = None, deployed: Mapping[str, Any] | None = None) -> list[Problem]:
    found = []
    endpoint = spec.name if endpoint is None else endpoint
    if bench.endpoint != endpoint:
        found.append(Problem(field=f"{prefix}.endpoint", value=bench.endpoint, message=f"is not this spec's "
                             f"endpoint {endpoint!r}: another deployment may run another model or instance type",
                             fix="benchmark this spec's endpoint (hyperpod-dpd bench SPEC --json)"))
    if bench.model is not None and bench.model != spec.model.name:
        found.append(Problem(field=f"{prefix}.model", value=bench.model, message=f"is not the spec's model "
                             f"{spec.model.name!r}", fix="calibrate with a benchmark of this model"))
    if bench.architecture is not None:
        ours = _architecture(spec)
        if bench.architecture != (None if ours is None else ours.name):
            found.append(Problem(field=f"{prefix}.architecture", value=bench.architecture, message="is not the "
                                 f"architecture the spec's model is sized as ({ours.name if ours else 'none'})",
                                 fix="calibrate with a benchmark of this model"))
    if bench.instance_type is not None and bench.instance_type != spec.instance_type.facts.name:
        found.append(Problem(field=f"{prefix}.instance_type", value=bench.instance_type, message="is not the "
                             f"spec's instance type {spec.instance_type.facts.name}",
                             fix="calibrate on the same hardware"))
    if (bench.isl, bench.osl) != (traffic.isl, traffic.osl):
        found.append(Problem(field=f"{prefix}.scenario", value=f"{bench.isl} in / {bench.osl} out",
                             message=f"is not the traffic asked about ({traffic.isl} in / {traffic.osl} out); the "
                                     "factors are per request shape", fix="benchmark D(isl,osl) of this traffic"))
    if not bench.trusted:
        found.append(Problem(field=f"{prefix}.trusted", value=False, message="bench marked this run as not to be "
                             "trusted as measured" + (f": {'; '.join(bench.distrust)}" if bench.distrust else ""),
                             fix="fix what bench reported and rerun 'hyperpod-dpd bench --json'"))
    if bench.problem:
        found.append(Problem(field=f"{prefix}.problem", value=bench.problem, message="bench reported this run as "
                             "failed", fix="rerun 'hyperpod-dpd bench --json' until the run succeeds"))
    if bench.layout is not None:
        deployed = layout_identity(spec) if deployed is None else deployed
        for key, value in bench.layout.items():
            if key in deployed and _comparable(value) != _comparable(deployed[key]):
                found.append(Problem(field=f"{prefix}.layout.{key}", value=value, message=f"is not the spec's "
                                     f"{deployed[key]!r}: the run measured another layout or engine setting under "
                                     "the same endpoint name", fix="calibrate with a benchmark of this spec "
                                     "as deployed"))
    for level in bench.levels:
        bad = [name for name, value in (("ttft_s", level.ttft_s), ("tpot_s", level.tpot_s),
                                        ("output_tokens_per_s", level.output_tokens_per_s))
               if not math.isfinite(value) or value <= 0]
        if bad:
            found.append(Problem(field=f"{prefix}.levels[concurrency {level.concurrency}]", value=", ".join(
                f"{name} {getattr(level, name):g}" for name in bad), message="must be positive: a completed "
                "level cannot have served no tokens or taken no time", fix="rerun that level of the benchmark"))
    if not bench.levels:
        found.append(Problem(field=f"{prefix}.levels", value=0, message="no level completed without failures",
                             fix="rerun the benchmark until its levels succeed"))
    return found


def _aggregated_refusals(spec: DpdSpec, traffic: Traffic, bench: Bench) -> list[Problem]:
    found = _refusals(spec, traffic, bench, prefix=f"calibrate.{AGGREGATED_RUN}",
                      endpoint=spec.name + AGGREGATED_SUFFIX, deployed=twin_layout_identity(spec))
    gpus = spec.instance_type.facts.gpus
    if spec.tensor_parallel_size != gpus:
        found.append(Problem(field=f"calibrate.{AGGREGATED_RUN}.layout.tensor_parallel_size",
                             value=spec.tensor_parallel_size, message=f"leaves the aggregated twin, one replica, on "
                             f"part of its node, while the advisor's one-node baseline runs a replica on each of the "
                             f"{gpus} GPUs", fix="calibrate the aggregated side at TP "
                             f"{gpus}, or calibrate DPD alone (bench without --aggregated)"))
    return found


Triple = tuple[float, float, float]  # predicted (TTFT, TPOT, output tokens per second) at one level


def _predict(spec: DpdSpec, bench: Bench, factors: PhaseFactors) -> tuple[dict[int, Triple], dict[int, Triple]]:
    """Both layouts' predictions at every level of either run, by concurrency (the baseline: one node)."""
    runs = [bench, *([bench.aggregated] if bench.aggregated else [])]
    concurrency = tuple(sorted({level.concurrency for run in runs for level in run.levels}))
    advice = advise(spec, Traffic(isl=bench.isl, osl=bench.osl, concurrency=concurrency), baseline_nodes=1,
                    factors=factors, thorough=False)

    def triple(e: Any) -> Triple:
        return e.ttft_s, e.tpot_s, e.output_tokens_per_s

    return ({p.concurrency: triple(p.disaggregated) for p in advice.points},
            {p.concurrency: triple(p.aggregated) for p in advice.points})


def _errors(levels: Sequence[Measured], predicted: Mapping[int, Triple]) -> dict[str, float]:
    def mean_error(pick: int, measured: Callable[[Measured], float]) -> float:
        return statistics.fmean(abs(predicted[m.concurrency][pick] / measured(m) - 1) for m in levels)

    return {"TTFT": mean_error(0, lambda m: m.ttft_s), "TPOT": mean_error(1, lambda m: m.tpot_s),
            "throughput": mean_error(2, lambda m: m.output_tokens_per_s)}


def _tpot_ratio(levels: Sequence[Measured], predicted: Mapping[int, Triple]) -> float:
    """Measured over predicted TPOT, the geometric mean over the levels."""
    return math.exp(statistics.fmean(math.log(m.tpot_s / predicted[m.concurrency][1]) for m in levels))


def _ttft_loss(levels: Sequence[Measured], predicted: Mapping[int, Triple]) -> float:
    return sum(math.log(predicted[m.concurrency][0] / m.ttft_s) ** 2 for m in levels)


def _ttft_bias(levels: Sequence[Measured], predicted: Mapping[int, Triple]) -> float:
    """The mean log-ratio of predicted to measured TTFT: 0 where the prefill factor is right."""
    return statistics.fmean(math.log(predicted[m.concurrency][0] / m.ttft_s) for m in levels)


def _root(samples: Sequence[tuple[float, float]], *, fallback: float) -> float:
    """Where the least-squares line through (log factor, bias) crosses 0; ``fallback`` when it does not rise."""
    slope, intercept = statistics.linear_regression([x for x, _ in samples], [y for _, y in samples])
    return math.exp(-intercept / slope) if slope > 0 else fallback


def _overhead(run: Bench) -> tuple[float, float]:
    """The closed-loop identity's mean residual per request (0 within its noise), and the mean cycle (C / X)."""
    cycles = [m.concurrency / (m.output_tokens_per_s / run.osl) for m in run.levels]
    residual = statistics.fmean(c - m.ttft_s - (run.osl - 1) * m.tpot_s for c, m in zip(cycles, run.levels,
                                                                                        strict=True))
    cycle = statistics.fmean(cycles)
    return (residual if residual > OVERHEAD_NOISE_SHARE * cycle else 0.0), cycle


@dataclass
class _Golden:
    """A golden-section search on the logarithm of a factor, asked for one point at a time."""

    low: float
    high: float
    c: float = 0.0
    d: float = 0.0
    fc: float | None = None
    fd: float | None = None

    def __post_init__(self) -> None:
        self.a, self.b = math.log(self.low), math.log(self.high)
        self.c, self.d = self.b - _GOLDEN * (self.b - self.a), self.a + _GOLDEN * (self.b - self.a)

    def next(self) -> float:
        return math.exp(self.c if self.fc is None else self.d)

    def tell(self, loss: float) -> None:
        if self.fc is None:
            self.fc = loss
        else:
            self.fd = loss
        if self.fc is None or self.fd is None:
            return
        if self.fc < self.fd:
            self.b, self.d, self.fd = self.d, self.c, self.fc
            self.c, self.fc = self.b - _GOLDEN * (self.b - self.a), None
        else:
            self.a, self.c, self.fc = self.c, self.d, self.fd
            self.d, self.fd = self.a + _GOLDEN * (self.b - self.a), None

    def best(self) -> float:
        known = [(loss, x) for loss, x in ((self.fc, self.c), (self.fd, self.d)) if loss is not None]
        return math.exp(min(known)[1])

    def at_edge(self, value: float) -> bool:
        return min(math.log(value) - math.log(self.low), math.log(self.high) - math.log(value)) < _EDGE


@dataclass(frozen=True, kw_only=True)
class _Floors:
    """The lowest physical factor of each phase for one layout: the floor over the kernel time, at its worst."""

    prefill: float
    decode: float


def _floors(spec: DpdSpec, bench: Bench, *, chunked: bool) -> _Floors:
    architecture = _architecture(spec)
    if architecture is None:  # a spec the advisor cannot estimate was refused before
        return _Floors(prefill=0.0, decode=0.0)
    engine = engine_settings(spec)
    facts = spec.instance_type.facts
    tp = spec.tensor_parallel_size
    steps: StepTimes = Estimator(target_for(spec.instance_type, architecture), architecture, isl=bench.isl,
                                 osl=bench.osl, gpus_per_node=facts.gpus, engine=engine).steps(tp)
    fp8_weights, fp8_kv = engine.gemm_quant_mode is not None, engine.kvcache_quant_mode is not None
    tokens = bench.isl
    if chunked:  # an aggregated engine prefills in chunks of the batched-token budget
        tokens = math.ceil(bench.isl / max(1, math.ceil(bench.isl / engine.max_num_batched_tokens)))
    prefill = prefill_floor_s(architecture, gpu=facts.gpu_model, tp=tp, tokens=tokens,
                              fp8_weights=fp8_weights) / steps.prefill_s(tokens)
    context = bench.isl + bench.osl // 2
    decode = max(decode_floor_s(architecture, gpu=facts.gpu_model, tp=tp, batch=batch, context_tokens=context,
                                fp8_weights=fp8_weights, fp8_kv=fp8_kv) / steps.decode_step_s(batch)
                 for batch in sorted({1, *(level.concurrency for level in bench.levels)}))
    return _Floors(prefill=prefill, decode=decode)


def _bounds(name: str, *, field: str, decode: float, prefill: float, floors: _Floors,
            search: _Golden) -> list[Problem]:
    found = []
    for phase, value, floor in (("decode step", decode, floors.decode), ("prefill", prefill, floors.prefill)):
        if value < floor:
            found.append(Problem(field=field, value=f"{phase} x{value:.3g}", message=f"makes the {name} {phase} "
                                 f"faster than physics allows (at least x{floor:.3g}: bytes over HBM bandwidth, "
                                 "FLOPs over the GPUs' peak); the benchmark did not measure this model on this "
                                 "hardware", fix="calibrate with a benchmark of this spec's endpoint"))
        elif value > FACTOR_MAX:
            found.append(Problem(field=field, value=f"{phase} x{value:.3g}", message=f"is above x{FACTOR_MAX:g}: "
                                 "the benchmark is too far from the kernel data to be this model on this hardware",
                                 fix="calibrate with a benchmark of this spec's endpoint"))
    if not found and search.at_edge(prefill):
        found.append(Problem(field=field, value=f"prefill x{prefill:.3g}", message=f"is at the end of the {name} "
                             f"prefill's range (x{search.low:.3g}-x{search.high:g}): TTFT is not explained by "
                             "prefill and queueing, so the fit would be a boundary, not a measurement",
                             fix="check the run's TTFT (client stalls, a queue outside the engines) and rerun"))
    return found


def calibrate_at_its_traffic(spec: DpdSpec, bench: Bench, *, source: str) -> Fit:
    """:func:`calibrate` at the traffic ``bench`` measured (its prompt and output lengths, every concurrency level
    of its runs): for a command with no load point of its own, as ``advise --trace``, whose trace gives the traffic
    and whose capacities and emulation then run on the fitted factors."""
    runs = (bench, *((bench.aggregated,) if bench.aggregated is not None else ()))
    concurrency = tuple(sorted({level.concurrency for run in runs for level in run.levels}))
    return calibrate(spec, Traffic(isl=bench.isl, osl=bench.osl, concurrency=concurrency), bench, source=source)


def calibrate(spec: DpdSpec, traffic: Traffic, bench: Bench, *, source: str) -> Fit:
    """Phase factors fitted to ``bench``'s runs, each layout on its own, or :class:`SpecError` naming why not."""
    problems = _refusals(spec, traffic, bench)
    if bench.aggregated is not None:
        problems += _aggregated_refusals(spec, traffic, bench.aggregated)
    if problems:
        raise SpecError(problems, source=source)
    bench = replace(bench, levels=tuple(sorted(bench.levels, key=lambda m: m.concurrency)))
    agg_run = bench.aggregated
    runs = {"DPD": bench, **({"aggregated": agg_run} if agg_run else {})}
    start = PhaseFactors()

    def predict(dpd: PhaseFactors, agg: PhaseFactors) -> tuple[dict[int, Triple], dict[int, Triple]]:
        return _predict(spec, bench, replace(dpd, aggregated=agg))

    before = predict(start, start)
    decode = {name: start.decode * _tpot_ratio(run.levels, before[i]) for i, (name, run) in enumerate(runs.items())}
    overhead: dict[str, float] = {}
    for name, run in runs.items():
        residual, e2e = _overhead(run)
        if residual > OVERHEAD_SHARE_MAX * e2e:
            raise SpecError([Problem(field="calibrate" if name == "DPD" else f"calibrate.{AGGREGATED_RUN}",
                                     value=f"+{residual * 1000:.0f} ms per request", message=f"of the {name} run's "
                                     f"mean {e2e:.2f} s per request is outside TTFT and decoding, above "
                                     f"{OVERHEAD_SHARE_MAX:.0%}: the clients did not run a closed loop as genai-bench "
                                     "does, or the figures are not means", fix="rerun 'hyperpod-dpd bench --json' "
                                     "with --concurrency")], source=source)
        overhead[name] = residual

    def trial(name: str, prefill: float | None) -> PhaseFactors:
        if name not in runs or prefill is None:
            return start
        return PhaseFactors(prefill=prefill, decode=decode[name], overhead_s=overhead[name])

    def refit_decode(prefill: Mapping[str, float]) -> None:
        refined = predict(*(trial(name, prefill.get(name)) for name in ("DPD", "aggregated")))
        for i, (name, run) in enumerate(runs.items()):
            decode[name] *= _tpot_ratio(run.levels, refined[i])

    floors = {name: _floors(spec, run, chunked=name != "DPD") for name, run in runs.items()}
    ranges = {name: (max(floors[name].prefill, 1e-3), FACTOR_MAX) for name in runs}
    # The golden section finds the region; the simulated TTFT is noisy in the factor (a few per cent: a finite run
    # of seeded requests), so the answer is the root of a straight line fitted through TTFT's log-ratio at
    # _LINE_POINTS factors around it. An aggregated engine's TPOT holds its prefill chunks, and a slower prefill
    # leaves fewer requests decoding at once, so the decode step is refitted after each. Both layouts' searches
    # share each simulation.
    searches = {name: _Golden(*ranges[name]) for name in runs}
    for _ in range(_GOLDEN_STEPS + 2):
        found = predict(*(trial(name, searches[name].next() if name in runs else None)
                          for name in ("DPD", "aggregated")))
        for i, (name, run) in enumerate(runs.items()):
            searches[name].tell(_ttft_loss(run.levels, found[i]))
    prefill = {name: searches[name].best() for name in runs}
    refit_decode(prefill)
    offsets = [_NARROW ** (2 * k / (_LINE_POINTS - 1) - 1) for k in range(_LINE_POINTS)]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for offset in offsets:
        tried = {name: prefill[name] * offset for name in runs}
        found = predict(*(trial(name, tried.get(name)) for name in ("DPD", "aggregated")))
        for i, (name, run) in enumerate(runs.items()):
            samples[name].append((math.log(tried[name]), _ttft_bias(run.levels, found[i])))
    for name in runs:
        low, high = ranges[name]
        prefill[name] = min(high, max(low, _root(samples[name], fallback=prefill[name])))
    refit_decode(prefill)
    edges = {name: _Golden(*ranges[name]) for name in runs}  # a boundary fit is one at the physical range's ends
    for name in runs:
        problems += _bounds(name, field="calibrate" if name == "DPD" else f"calibrate.{AGGREGATED_RUN}",
                            decode=decode[name], prefill=prefill[name], floors=floors[name], search=edges[name])
    if problems:
        raise SpecError(problems, source=source)
    baseline = (PhaseFactors(prefill=prefill["aggregated"], decode=decode["aggregated"],
                             overhead_s=overhead["aggregated"], source=f"calibrated on {source} (runs.aggregated)")
                if agg_run else PhaseFactors(source=f"AIConfigurator's default latency corrections, uncalibrated: "
                                             f"{source} has no runs.aggregated (bench --aggregated measures it)"))
    factors = PhaseFactors(prefill=prefill["DPD"], decode=decode["DPD"], overhead_s=overhead["DPD"],
                           source=f"calibrated on {source}", aggregated=baseline)
    after = predict(factors, baseline)
    warnings = []
    if missing := bench.unchecked():
        warnings.append(f"{source} does not name the {', '.join(missing)} it measured: calibration could not check "
                        f"it is the spec's {spec.model.name} on {spec.instance_type.api_name} at TP "
                        f"{spec.tensor_parallel_size}, {spec.prefill.replicas}P+{spec.decode.replicas}D with the "
                        "spec's engine flags")
    for name, run in runs.items():
        if run.statistic != MEAN:
            warnings.append(f"{source}: the {name} run has no client means (client_ttft_mean_s, client_tpot_mean_s; "
                            "a bench older than them): the fit used p50 figures, which Little's law does not hold "
                            "for, so a skewed TTFT shows as overhead")
    error_after = _errors(bench.levels, after[0])
    baseline_after = _errors(agg_run.levels, after[1]) if agg_run else None
    if baseline_after is not None:  # the ranges hold what the fitted model still misses
        baseline = replace(baseline, ttft_residual=baseline_after["TTFT"], tpot_residual=baseline_after["TPOT"])
    factors = replace(factors, ttft_residual=error_after["TTFT"], tpot_residual=error_after["TPOT"],
                      aggregated=baseline)
    return Fit(factors=factors, error_before=_errors(bench.levels, before[0]), error_after=error_after,
               levels=tuple(m.concurrency for m in bench.levels), warnings=tuple(warnings),
               baseline_error_before=_errors(agg_run.levels, before[1]) if agg_run else None,
               baseline_error_after=baseline_after)

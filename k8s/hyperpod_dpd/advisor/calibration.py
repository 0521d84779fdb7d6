"""``advise --calibrate BENCH.json``: fit the model's phase factors to the user's own benchmark.

The input is what ``hyperpod-dpd bench --json`` prints: ``runs.dpd`` (and optionally
``runs.aggregated``) with the scenario and one entry per concurrency level (p50 TTFT and TPOT in
seconds, output tokens per second). Three factors are fitted on the DPD run, one per phase:

- decode step: the ratio of measured to predicted TPOT (geometric mean over the levels);
- overhead: what a closed loop of ``C`` clients spends per request beyond TTFT and decoding
  (``C / requests per second - TTFT - (osl - 1) x TPOT``, the router and HTTP hop), at least 0;
- prefill: the multiplier that brings the predicted TTFT closest to the measured one (least squares
  on the logarithm over the levels; TTFT holds the prefill queue, so it is solved through the model).

Data from another endpoint, model (``model.name`` or the architecture it is sized as), instance type,
request shape or layout (``runs.dpd.layout``: TP, replicas per role and engine flags, when the bench
names them; see :func:`layout_identity`), a failed run, a run bench itself marked untrusted
(``trusted: false``) or failed (``problem``), and a level with a zero or negative figure are refused,
and so are factors outside ``FACTOR_RANGE``: a benchmark
that far from the kernel data measured something else. A file from a bench older than the
``model``/``architecture``/``instance_type`` fields is still used, with a warning that those could not
be checked.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hyperpod_dpd.advisor.comparison import advise
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.advisor.traffic import Traffic
from hyperpod_dpd.errors import Problem, SpecError, UsageError
from hyperpod_dpd.spec import DpdSpec

FACTOR_RANGE = (0.25, 4.0)
DPD_RUN = "dpd"
_PREFILL_GRID = tuple(0.25 * 1.1**k for k in range(30))  # 0.25 to about 4


@dataclass(frozen=True, kw_only=True)
class Measured:
    """One DPD level of a benchmark: p50 TTFT and TPOT (seconds) and output tokens per second."""

    concurrency: int
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float


@dataclass(frozen=True, kw_only=True)
class Bench:
    """The DPD run of a ``bench --json`` document."""

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

    def unchecked(self) -> list[str]:
        """The identity fields the file does not carry (a bench older than them)."""
        return [name for name, value in (("model", self.model), ("architecture", self.architecture),
                                         ("instance_type", self.instance_type), ("layout", self.layout))
                if value is None]


def layout_identity(spec: DpdSpec) -> dict[str, Any]:
    """What a DPD run's figures depend on beyond model and hardware: recorded by bench, compared by calibration."""
    return {"tensor_parallel_size": spec.tensor_parallel_size, "prefill_replicas": spec.prefill.replicas,
            "decode_replicas": spec.decode.replicas, "args": list(spec.args),
            "prefill_args": list(spec.prefill.args), "decode_args": list(spec.decode.args)}


@dataclass(frozen=True, kw_only=True)
class Fit:
    """The fitted factors and the model's mean absolute error before and after, per metric."""

    factors: PhaseFactors
    error_before: Mapping[str, float]
    error_after: Mapping[str, float]
    levels: tuple[int, ...]
    warnings: tuple[str, ...] = ()

    def render(self) -> str:
        def errors(found: Mapping[str, float]) -> str:
            return ", ".join(f"{name} {value:.0%}" for name, value in found.items())

        f = self.factors
        return (f"calibrated on concurrency {', '.join(map(str, self.levels))}: prefill x{f.prefill:.3g}, decode step "
                f"x{f.decode:.3g}, +{f.overhead_s * 1000:.0f} ms per request\n"
                f"  uncalibrated model off by {errors(self.error_before)}\n"
                f"  calibrated model off by {errors(self.error_after)}")

    def to_json(self) -> dict[str, object]:
        return {"factors": self.factors.to_json(), "levels": list(self.levels),
                "error_before": {k: round(v, 4) for k, v in self.error_before.items()},
                "error_after": {k: round(v, 4) for k, v in self.error_after.items()}}


def read_bench(path: Path) -> Bench:
    """The DPD run of ``path``; a file that is not ``bench --json`` output is refused with the key missing."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise UsageError(f"--calibrate: cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"--calibrate: {path} is not JSON ({err.msg}, line {err.lineno}); give the output of "
                              "'hyperpod-dpd bench --json'") from None
    return parse_bench(document, where=str(path))


def parse_bench(document: Any, *, where: str) -> Bench:
    run = document.get("runs", {}).get(DPD_RUN) if isinstance(document, Mapping) else None
    if not isinstance(run, Mapping):
        raise UsageError(f"--calibrate: {where} has no runs.{DPD_RUN}; give the output of 'hyperpod-dpd bench "
                              "--json' for the DPD endpoint")
    if any(isinstance(level, Mapping) and "request_rate" in level for level in run.get("levels") or []):
        raise UsageError(f"--calibrate: {where} holds open-loop levels (bench --request-rate); the fit needs "
                              "closed-loop ones: give 'hyperpod-dpd bench --json' run with --concurrency")
    try:
        scenario = run["scenario"]
        levels = tuple(
            Measured(concurrency=int(level["concurrency"]), ttft_s=float(level["ttft_s"]["p50"]),
                     tpot_s=float(level["tpot_s"]["p50"]), output_tokens_per_s=float(level["output_tokens_per_s"]))
            for level in run["levels"] if level.get("completed") and not level.get("failed"))
        layout = run.get("layout")
        distrust = tuple(str(w.get("message", w)) if isinstance(w, Mapping) else str(w)
                         for w in run.get("warnings") or [])
        return Bench(endpoint=str(run["endpoint"]), isl=int(scenario["isl"]), osl=int(scenario["osl"]),
                     levels=levels, model=_text(run.get("model")), architecture=_text(run.get("architecture")),
                     instance_type=_text(run.get("instance_type")),
                     layout=layout if isinstance(layout, Mapping) else None,
                     trusted=run.get("trusted") is not False, distrust=distrust, problem=_text(run.get("problem")))
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(f"--calibrate: {where}: runs.{DPD_RUN} lacks {err} or has a non-number there; give "
                              "the output of 'hyperpod-dpd bench --json'") from None


def _comparable(value: Any) -> Any:
    return [str(item) for item in value] if isinstance(value, list | tuple) else value


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _architecture(spec: DpdSpec) -> str | None:
    """The architecture name the planner sizes ``spec`` with (what ``bench --json`` records)."""
    from hyperpod_dpd.validation import check  # noqa: PLC0415 - heavy

    found = check(spec).architecture
    return None if found is None else found.name


def _refusals(spec: DpdSpec, traffic: Traffic, bench: Bench) -> list[Problem]:
    found = []
    if bench.endpoint != spec.name:
        found.append(Problem(field="calibrate.endpoint", value=bench.endpoint, message=f"is not this spec's endpoint "
                             f"{spec.name!r}: another deployment may run another model or instance type",
                             fix="benchmark this spec's endpoint (hyperpod-dpd bench SPEC --json)"))
    if bench.model is not None and bench.model != spec.model.name:
        found.append(Problem(field="calibrate.model", value=bench.model, message=f"is not the spec's model "
                             f"{spec.model.name!r}", fix="calibrate with a benchmark of this model"))
    if bench.architecture is not None and bench.architecture != (ours := _architecture(spec)):
        found.append(Problem(field="calibrate.architecture", value=bench.architecture, message="is not the "
                             f"architecture the spec's model is sized as ({ours or 'none'})",
                             fix="calibrate with a benchmark of this model"))
    if bench.instance_type is not None and bench.instance_type != spec.instance_type.facts.name:
        found.append(Problem(field="calibrate.instance_type", value=bench.instance_type, message="is not the spec's "
                             f"instance type {spec.instance_type.facts.name}", fix="calibrate on the same hardware"))
    if (bench.isl, bench.osl) != (traffic.isl, traffic.osl):
        found.append(Problem(field="calibrate.scenario", value=f"{bench.isl} in / {bench.osl} out",
                             message=f"is not the traffic asked about ({traffic.isl} in / {traffic.osl} out); the "
                                     "factors are per request shape", fix="benchmark D(isl,osl) of this traffic"))
    if not bench.trusted:
        found.append(Problem(field="calibrate.trusted", value=False, message="bench marked this run as not to be "
                             "trusted as measured" + (f": {'; '.join(bench.distrust)}" if bench.distrust else ""),
                             fix="fix what bench reported and rerun 'hyperpod-dpd bench --json'"))
    if bench.problem:
        found.append(Problem(field="calibrate.problem", value=bench.problem, message="bench reported this run as "
                             "failed", fix="rerun 'hyperpod-dpd bench --json' until the run succeeds"))
    if bench.layout is not None:
        deployed = layout_identity(spec)
        for key, value in bench.layout.items():
            if key in deployed and _comparable(value) != _comparable(deployed[key]):
                found.append(Problem(field=f"calibrate.layout.{key}", value=value, message=f"is not the spec's "
                                     f"{deployed[key]!r}: the run measured another layout or engine setting under "
                                     "the same endpoint name", fix="calibrate with a benchmark of this spec "
                                     "as deployed"))
    for level in bench.levels:
        bad = [name for name, value in (("ttft_s", level.ttft_s), ("tpot_s", level.tpot_s),
                                        ("output_tokens_per_s", level.output_tokens_per_s))
               if not math.isfinite(value) or value <= 0]
        if bad:
            found.append(Problem(field=f"calibrate.levels[concurrency {level.concurrency}]", value=", ".join(
                f"{name} {getattr(level, name):g}" for name in bad), message="must be positive: a completed "
                "level cannot have served no tokens or taken no time", fix="rerun that level of the benchmark"))
    if not bench.levels:
        found.append(Problem(field="calibrate.levels", value=0, message="no level completed without failures",
                             fix="rerun the benchmark until its levels succeed"))
    return found


def _predict(spec: DpdSpec, bench: Bench, factors: PhaseFactors) -> list[tuple[float, float, float]]:
    traffic = Traffic(isl=bench.isl, osl=bench.osl, concurrency=tuple(level.concurrency for level in bench.levels))
    advice = advise(spec, traffic, baseline_nodes=1, factors=factors, thorough=False)
    return [(p.disaggregated.ttft_s, p.disaggregated.tpot_s, p.disaggregated.output_tokens_per_s)
            for p in advice.points]


def _errors(levels: Sequence[Measured], predicted: Sequence[tuple[float, float, float]]) -> dict[str, float]:
    def mean_error(pick: int, measured: Sequence[float]) -> float:
        return statistics.fmean(abs(p[pick] / m - 1) for p, m in zip(predicted, measured, strict=True))

    return {"TTFT": mean_error(0, [m.ttft_s for m in levels]), "TPOT": mean_error(1, [m.tpot_s for m in levels]),
            "throughput": mean_error(2, [m.output_tokens_per_s for m in levels])}


def _tpot_ratio(levels: Sequence[Measured], predicted: Sequence[tuple[float, float, float]]) -> float:
    """Measured over predicted TPOT, the geometric mean over the levels."""
    return math.exp(statistics.fmean(math.log(m.tpot_s / p[1]) for m, p in zip(levels, predicted, strict=True)))


def calibrate(spec: DpdSpec, traffic: Traffic, bench: Bench, *, source: str) -> Fit:
    """Phase factors fitted to ``bench``'s DPD levels, or :class:`SpecError` naming why the data cannot be used."""
    problems = _refusals(spec, traffic, bench)
    if problems:
        raise SpecError(problems, source=source)
    levels = tuple(sorted(bench.levels, key=lambda m: m.concurrency))
    bench = replace(bench, levels=levels)
    start = PhaseFactors()
    before = _predict(spec, bench, start)
    decode = start.decode * _tpot_ratio(levels, before)
    overhead = max(0.0, statistics.fmean(
        m.concurrency / (m.output_tokens_per_s / bench.osl) - m.ttft_s - (bench.osl - 1) * m.tpot_s for m in levels))

    def ttft_loss(prefill: float) -> float:
        trial = PhaseFactors(prefill=prefill, decode=decode, overhead_s=overhead)
        return sum(math.log(p[0] / m.ttft_s) ** 2 for m, p in zip(levels, _predict(spec, bench, trial), strict=True))

    prefill = min(_PREFILL_GRID, key=ttft_loss)
    # A slower prefill leaves fewer requests decoding at once, so the decode step is refined once more.
    decode *= _tpot_ratio(levels, _predict(spec, bench, PhaseFactors(prefill=prefill, decode=decode,
                                                                      overhead_s=overhead)))
    low, high = FACTOR_RANGE
    for name, value in (("decode step", decode), ("prefill", prefill)):
        if not low <= value <= high:
            raise SpecError([Problem(field="calibrate", value=f"{name} x{value:.3g}", message=f"is outside "
                                     f"{low:g}-{high:g}: the benchmark is too far from the kernel data to be this "
                                     "model on this hardware",
                                     fix="calibrate with a benchmark of this spec's endpoint")], source=source)
    factors = PhaseFactors(prefill=prefill, decode=decode, overhead_s=overhead, source=f"calibrated on {source}")
    after = _predict(spec, bench, factors)
    missing = bench.unchecked()
    warnings = (f"{source} does not name the {', '.join(missing)} it measured: calibration could not check it is "
                f"the spec's {spec.model.name} on {spec.instance_type.api_name} at TP {spec.tensor_parallel_size}, "
                f"{spec.prefill.replicas}P+{spec.decode.replicas}D with the spec's engine flags",) if missing else ()
    return Fit(factors=factors, error_before=_errors(levels, before), error_after=_errors(levels, after),
               levels=tuple(m.concurrency for m in levels), warnings=warnings)

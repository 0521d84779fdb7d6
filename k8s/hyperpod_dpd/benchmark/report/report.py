"""What ``bench`` found: the :class:`Report` it returns, printed as tables or as one JSON object.

Each endpoint's run (or results folder) is an :class:`Outcome`; the :class:`Report` holds them with the A/B,
the capacity at the SLO and the advisor beside them, and writes the HTML report (:mod:`figures`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyperpod_dpd.benchmark.proof.decomposition import Decomposition, decompose, render_decompositions
from hyperpod_dpd.benchmark.proof.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.proof.overhead import (
    client_overhead,
    quantiles_dict,
    render_resolution_notes,
    render_server_clock,
    server_clock_rows,
    twin_ttft,
)
from hyperpod_dpd.benchmark.proof.proof import PROOF_FILE, RunProof
from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning
from hyperpod_dpd.benchmark.report.ab import CHANGE_METRICS, AbRow, BuyerRow, compare_ab, compare_buyer, render_buyer
from hyperpod_dpd.benchmark.report.capacity import NO_SLO, Capacity, Slo, capacity_at_slo, render_capacities
from hyperpod_dpd.benchmark.report.economics import Layout
from hyperpod_dpd.benchmark.report.figures import ReportInput, write_report
from hyperpod_dpd.benchmark.report.page import CSS, sections_html, verdict, verdict_html
from hyperpod_dpd.benchmark.report.prediction import ComparisonRow, render_comparison
from hyperpod_dpd.benchmark.report.repeats import level_repeats, median_decomposition, median_level, median_results
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.benchmark.run.twin_identity import IdentityDifference, refusal
from hyperpod_dpd.columns import ms, render_columns
from hyperpod_dpd.load_point import Load, column_header
from hyperpod_dpd.report_page import PageBody

HEADERS = ("TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "E2E p50/p90/p99 s", "OUT tok/s", "DONE",
           "FAILED", "ERR")
# from the router's and the vLLM pods' counters
ROUTING_HEADERS = ("PREFIX HIT dec/pre", "DISAGG", "KV IN tok", "SRV tok/s", "CLIENT +ms")
CACHE_ROLES = ("decoder", "prefill")  # the roles of the PREFIX HIT column, in its order
GOODPUT_HEADER = "GOOD req/s"


def _three(p: Percentiles, *, seconds: bool = False) -> str:
    if seconds:
        return "/".join("-" if v is None else f"{v:.2f}" for v in (p.p50, p.p90, p.p99))
    return "/".join(ms(v) for v in (p.p50, p.p90, p.p99))


def level_row(level: LevelResult) -> list[str]:
    return [level.load.cell(), _three(level.ttft), _three(level.tpot), _three(level.e2e, seconds=True),
            "lost" if level.summary_lost else f"{level.output_tokens_per_s:,.1f}", str(level.completed),
            str(level.failed), f"{level.error_rate:.1%}"]


def routing_cells(level: LevelResult, seen: LevelDisaggregation | None) -> list[str]:
    """``PREFIX HIT`` the decoders' and prefillers' prefix-cache hit rates (``-`` for a role that exports none),
    ``DISAGG`` as disaggregated/routed and percent, ``KV IN tok`` the decoder's external prompt tokens,
    ``SRV tok/s`` the decoders' own output tokens per second, ``CLIENT +ms`` the client's mean TTFT above the
    router's."""
    if seen is None or seen.fraction is None:
        return ["?"] * len(ROUTING_HEADERS)
    overhead = client_overhead(level, seen)
    served = server_output_tokens_per_s(level, seen)
    rates = [seen.prefix_cache_hit_rate(role) for role in CACHE_ROLES]
    return ["/".join("-" if rate is None else f"{rate:.0%}" for rate in rates),
            f"{seen.disaggregated}/{seen.routed} {seen.fraction:.0%}", f"{seen.external_kv_tokens:,}",
            "-" if served is None else f"{served:,.1f}", "-" if overhead is None else f"{overhead * 1e3:+.0f}"]


def server_output_tokens_per_s(level: LevelResult, seen: LevelDisaggregation | None) -> float | None:
    """The decoders' ``vllm:generation_tokens_total`` increase over the level, per second of the client's timed
    window, both over the same requests: the counters span the whole level (their snapshots are taken in the quiet
    pauses around it), so the tokens of a warm-up the client's duration leaves out (aiperf's, whose
    ``benchmark_duration`` is its measured phase's: :func:`~hyperpod_dpd.benchmark.run.aiperf_results.
    warmup_output_tokens`) are taken off first; genai-bench's duration covers its warm-up. Requests cut at the
    bound count what they streamed. None when not exported, or when the warm-up's tokens are unknown (aiperf's
    per-request records missing)."""
    if seen is None or seen.generation_tokens is None or not level.duration_s or level.warmup_output_tokens is None:
        return None
    return max(seen.generation_tokens - level.warmup_output_tokens, 0) / level.duration_s


def goodput_cell(level: LevelResult, slo: Slo) -> str:
    good, rate = level.goodput(ttft_s=slo[0], tpot_s=slo[1])
    return f"{rate:.2f} ({good}/{len(level.measured_answered)})"


def results_table(results: BenchmarkResults, routing: Mapping[Load, LevelDisaggregation] | None = None,
                  slo: Slo | None = None) -> tuple[tuple[str, ...], list[list[str]]]:
    """The per-level table's headers and rows, as the text report and the HTML page show them."""
    headers = ((column_header([*results.loads, *results.missing]),) + HEADERS
               + (ROUTING_HEADERS if routing is not None else ()) + ((GOODPUT_HEADER,) if slo else ()))
    rows = [level_row(level) + (routing_cells(level, routing.get(level.load)) if routing is not None else [])
            + ([goodput_cell(level, slo)] if slo else []) for level in results.levels]
    rows += [[level.cell(), *(["not run"] + ["-"] * (len(headers) - 2))] for level in results.missing]
    return headers, rows


def render_results(title: str, results: BenchmarkResults, warnings: Sequence[TrustWarning],
                   routing: Mapping[Load, LevelDisaggregation] | None = None, slo: Slo | None = None) -> str:
    """The per-level table (with the router's and decoder's counts when ``routing`` is given, goodput
    under the spec's SLO when ``slo`` is), the levels that never ran, then every trust warning."""
    lines = [title, *render_columns(*results_table(results, routing, slo))]
    coarse = render_resolution_notes(results.levels, routing, whose="the server") if routing is not None else []
    if coarse:
        lines += ["", *coarse]
    if warnings:
        lines += ["", "cannot be trusted as measured:", *(f"  - {w.render()}" for w in warnings)]
    return "\n".join(lines)


REPEAT_HEADERS = ("RUN", "TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "OUT tok/s", "DONE", "FAILED", "DISAGG")


def render_repeats(label: str, runs: Sequence[BenchmarkResults],
                   routings: Sequence[Mapping[Load, LevelDisaggregation] | None]) -> str:
    """Every repeat of every level beside the others, and their median (what capacity, the stages and the figures
    read, :mod:`repeats`): the main table is the first run's alone, which would hide how far the repeats spread."""
    loads = sorted({level.load for run in runs for level in run.levels}, key=Load.sort_key)
    rows = []
    for load in loads:
        for index, run in enumerate(runs, start=1):
            level = run.level(load)
            if level is None:
                rows.append([load.cell(), str(index), "not run", *["-"] * (len(REPEAT_HEADERS) - 2)])
                continue
            routing = routings[index - 1] if index - 1 < len(routings) else None
            seen = None if routing is None else routing.get(load)
            share = "?" if seen is None or seen.fraction is None else f"{seen.fraction:.0%}"
            rows.append([load.cell(), str(index), _three(level.ttft), _three(level.tpot),
                         f"{level.output_tokens_per_s:,.1f}", str(level.completed), str(level.failed), share])
        present = level_repeats(runs, load)
        if len(present) > 1:
            middle = median_level(present)
            rows.append([load.cell(), "median", _three(middle.ttft), _three(middle.tpot),
                         f"{middle.output_tokens_per_s:,.1f}", "-", "-", "-"])
    return "\n".join([f"{label}: each of the {len(runs)} runs per level and their median (capacity, the TTFT stages "
                      "and the figures read the median)", *render_columns((column_header(loads), *REPEAT_HEADERS),
                                                                         rows)])


def results_object(*, endpoint: str, scenario: Scenario, results: BenchmarkResults,
                   warnings: Sequence[TrustWarning], job: str | None = None,
                   routing: Mapping[Load, LevelDisaggregation] | None = None,
                   slo: Slo | None = None, identity: Mapping[str, str | None] | None = None,
                   layout: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One run of ``bench --json``. ``identity`` (``model``, ``architecture``, ``instance_type``) and ``layout``
    (TP, replicas, engine flags) name what was measured, so that ``advise --calibrate`` can refuse a run of
    another model, instance type or layout."""
    document = {"endpoint": endpoint, "job": job, **(identity or {}), **({"layout": layout} if layout else {}),
                "scenario": {"isl": scenario.isl, "osl": scenario.osl, **scenario.levels_dict(),
                             "requests_per_level": scenario.requests_per_level, "max_seconds": scenario.max_seconds},
                **results.as_dict(), "trusted": not warnings, "warnings": [w.as_dict() for w in warnings]}
    if routing is not None:
        document["routing"] = [{**(routing[lv.load].as_dict() if lv.load in routing else lv.load.as_dict()),
                                "client_overhead_s": client_overhead(lv, routing.get(lv.load)),
                                "client_overhead_quantiles": quantiles_dict(lv, routing.get(lv.load)),
                                "server_output_tokens_per_s": server_output_tokens_per_s(lv, routing.get(lv.load))}
            for lv in results.levels]
    if slo:
        document["goodput"] = {"slo": {"ttft_s": slo[0], "tpot_s": slo[1]}, "levels": [
            {**lv.load.as_dict(), "good": lv.goodput(ttft_s=slo[0], tpot_s=slo[1])[0],
             "answered": len(lv.measured_answered), "per_s": lv.goodput(ttft_s=slo[0], tpot_s=slo[1])[1]}
            for lv in results.levels]}
    return document


def to_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=False)


RUNS_FOLDER = "runs"  # under --report-dir: each live run's result files and counters

# A results folder without the counters bench read while the Job ran (proof.PROOF_FILE): the client's files only.
UNCHECKED = ("not checked: a results folder holds no router or decoder counters, so which path the requests took, "
             "whether the KV cache arrived and how much of the TTFT is the client's were not verified here (the run "
             f"that wrote the folder checked them and wrote them as {PROOF_FILE}, which this folder lacks or whose "
             "counters were refused)")


@dataclass
class Outcome:
    """One endpoint's run (or results folder): its results, why not to trust them, and where they came from."""

    label: str
    endpoint: str
    results: BenchmarkResults
    warnings: list[TrustWarning]
    job: str | None = None
    problem: str = ""
    source: str = ""
    routing: dict[Load, LevelDisaggregation] | None = None  # when the counters were read
    repeats: list[BenchmarkResults] = field(default_factory=list)  # the same levels run again, after ``results``
    # the aggregated twin's router and engine counters per level (its TTFT clock and request counts), when read
    server: dict[Load, LevelDisaggregation] | None = None
    repeat_routing: list[dict[Load, LevelDisaggregation] | None] = field(default_factory=list)  # one per repeat
    files: Mapping[str, str] = field(default_factory=dict)  # the result files read, by name
    proof: RunProof | None = None  # the counters read, as written beside the results
    proof_note: str = ""  # why a folder's counters file was not used
    repeat_copies: list[tuple[Mapping[str, str], RunProof | None]] = field(default_factory=list)  # each repeat's
    # the twin's: what it serves otherwise than the DPD endpoint (run/twin_identity.py), when both were read
    identity_differences: list[IdentityDifference] = field(default_factory=list)

    def unverified(self, load: Load) -> tuple[str, ...]:
        """Why this endpoint's ``load`` is not verified against its servers: its warnings' codes, and ``unchecked``
        for a results folder without its counters (its run's counters file absent or refused)."""
        codes = sorted({w.code.value for w in self.warnings if w.load == load} - {Trust.UNCHECKED.value})
        return (*codes, *(() if self.job or self.proof is not None else (Trust.UNCHECKED.value,)))

    def run_folders(self) -> dict[str, dict[str, str]]:
        """A live run's folders as ``--results-dir`` reads them, by name (``dpd``, then ``dpd-r2``...): the result
        files it read and the counters it read beside them."""
        if not self.job:
            return {}
        folders = {}
        for index, (files, proof) in enumerate([(self.files, self.proof), *self.repeat_copies], start=1):
            copy = dict(files)
            if proof is not None:
                copy[PROOF_FILE] = proof.to_text()
            folders[self.label if index == 1 else f"{self.label}-r{index}"] = copy
        return folders

    @property
    def runs(self) -> list[BenchmarkResults]:
        return [self.results, *self.repeats]

    def decompositions(self) -> list[Decomposition]:
        """TTFT by stage per level, the median over every run whose counters were read (:mod:`repeats`; the DPD
        endpoint's)."""
        read = [(run, routing) for run, routing in zip(self.runs, [self.routing, *self.repeat_routing], strict=True)
                if routing is not None]
        loads = sorted({level.load for run, _ in read for level in run.levels}, key=Load.sort_key)
        return [median_decomposition([decompose(level, routing.get(load)) for run, routing in read
                                      if (level := run.level(load)) is not None]) for load in loads]


@dataclass(frozen=True)
class Comparison:
    """The advisor's prediction beside the measurement, per level and layout."""

    rows: list[ComparisonRow]
    assumptions: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Report:
    """What a run found, for the table or the JSON object ``bench`` prints."""

    scenario: Scenario
    outcomes: list[Outcome]
    comparison: Comparison | None = None
    slo: Slo | None = None
    identity: Mapping[str, str | None]
    run_layouts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # by run label: what it measured
    layouts: tuple[Layout, Layout] | None = None  # what each endpoint holds and costs, for the A/B
    prediction_note: str | None = None  # why the advisor's prediction is not beside the levels

    @property
    def healthy(self) -> bool:
        """Every Job succeeded and every level can be trusted (exit status 0)."""
        return all(not o.problem and not o.warnings and o.results.levels for o in self.outcomes)

    def to_json(self) -> str:
        outcomes, scenario = self.outcomes, self.scenario
        document: dict[str, Any] = {"runs": {o.label: {**results_object(
            endpoint=o.endpoint, scenario=scenario, results=o.results, warnings=o.warnings, job=o.job,
            routing=o.routing, slo=self.slo, identity=self.identity, layout=self.run_layouts.get(o.label)),
            "problem": o.problem or None,
            **({"unchecked": UNCHECKED + (f" ({o.proof_note})" if o.proof_note else "")}
               if o.proof is None and not o.job else {}),
            **({"server_clock": [row.as_dict() for row in server_clock_rows(o.results.levels, o.server, twin_ttft)]}
               if o.server is not None else {}),
            **({"repeats": [run.as_dict() for run in o.repeats]} if o.repeats else {})} for o in outcomes}}
        ab = self._ab()
        if ab is not None:
            document["ab"] = [row.as_dict() for row in ab]
        buyer = self._buyer()
        if buyer is not None and self.layouts is not None:
            document["ab_buyer"] = {"layouts": [layout.as_dict() for layout in self.layouts],
                                    "twin_differences": [d.as_dict() for d in self.twin_differences],
                                    "levels": [row.as_dict() for row in buyer]}
        capacities = self._capacities()
        if capacities or self.slo is None:
            document["capacity_at_slo"] = [capacity.as_dict() for capacity in capacities]
        if self.slo is None:
            document["capacity_at_slo_note"] = NO_SLO
        stages = [row.as_dict() for o in outcomes for row in o.decompositions()]
        if stages:
            document["ttft_stages"] = stages
        if self.comparison is not None:
            document["comparison"] = {"rows": [row.as_dict() for row in self.comparison.rows],
                                      "assumptions": self.comparison.assumptions}
        if self.prediction_note:
            document["prediction_note"] = self.prediction_note
        return to_json(document)

    def render(self) -> str:
        scenario, blocks = self.scenario, []
        for o in self.outcomes:
            counts = sorted(set(scenario.requests_per_level))
            where = (f"{'/'.join(map(str, counts))} requests per level, {scenario.client.value}, job {o.job}" if o.job
                     else f"read from {o.source}")
            title = f"{o.label}: {o.endpoint}, {scenario.traffic} ({scenario.isl} in / {scenario.osl} out), {where}"
            if o.repeats:
                title += f" (the first of {len(o.runs)} runs; each run is below)"
            block = "\n\n".join([render_results(title, o.results, o.warnings, o.routing, self.slo),
                                  *self._outcome_blocks(o)])
            if o.problem:
                block += f"\n\nthe job did not succeed:\n{o.problem}"
            blocks.append(block)
        buyer = self._buyer()
        if buyer is not None and self.layouts is not None:
            return "\n\n".join([*blocks, *self._closing_blocks(before_ab=True),
                                 render_buyer(buyer, self.layouts, self.twin_differences),
                                 *self._closing_blocks(before_ab=False)])
        return "\n\n".join([*blocks, *self._closing_blocks(before_ab=True), *self._closing_blocks(before_ab=False)])

    def _outcome_blocks(self, o: Outcome, *, coarse_notes: bool = True) -> list[str]:
        """A run's blocks under its level table: its repeats, the twin's server clock (and the quantiles its
        histogram decided only to its resolution, unless ``coarse_notes`` is False: the page's verdict names
        them), a folder left unchecked."""
        blocks = []
        if o.repeats:
            blocks.append(render_repeats(o.label, o.runs, [o.routing, *o.repeat_routing]))
        if o.server is not None:
            blocks.append(render_server_clock(o.label, server_clock_rows(o.results.levels, o.server, twin_ttft)))
            coarse = render_resolution_notes(o.results.levels, o.server, whose="the twin's", clock=twin_ttft)
            if coarse and coarse_notes:
                blocks.append("\n".join(coarse))
        if o.proof is None and not o.job:
            blocks.append(UNCHECKED + (f" ({o.proof_note})" if o.proof_note else ""))
        return blocks

    def _closing_blocks(self, *, before_ab: bool) -> list[str]:
        """The blocks after the runs: the TTFT stages and capacity (``before_ab``), then the advisor beside them."""
        blocks = []
        if not before_ab:
            if self.comparison is not None:
                blocks.append(render_comparison(self.comparison.rows, self.comparison.assumptions))
            if self.prediction_note:
                blocks.append(f"measured against predicted: {self.prediction_note}")
            return blocks
        for o in self.outcomes:
            stages = o.decompositions()
            if any(row.measured for row in stages):
                blocks.append(render_decompositions(stages, column_header([row.load for row in stages])))
            elif stages:
                blocks.append(f"TTFT by stage ({o.label}): unmeasured, no pod exported a stage histogram "
                              "(docs/bench.md names them)")
        capacities = self._capacities()
        if capacities or self.slo is None:
            blocks.append(render_capacities(capacities))
        return blocks

    def html_blocks(self) -> list[str]:
        """The text report's blocks the HTML page shows as they are laid out (its own sections and its verdict, which
        names the quantiles decided only to a histogram's resolution, show the rest)."""
        blocks = []
        for o in self.outcomes:
            blocks += self._outcome_blocks(o, coarse_notes=False)
        return [*blocks, *self._closing_blocks(before_ab=True), *self._closing_blocks(before_ab=False)]

    def buyer_rows(self) -> list[BuyerRow] | None:
        """The A/B per level and metric (None without a twin or prices)."""
        return self._buyer()

    def _unverified(self, load: Load) -> dict[str, tuple[str, ...]]:
        """Each A/B side's reasons its ``load`` is unverified (a side with none left out)."""
        return {o.label: found for o in self.outcomes[:2] if (found := o.unverified(load))}

    def _ab(self) -> list[AbRow] | None:
        outcomes = self.outcomes
        if len(outcomes) < 2:
            return None
        buyer = {row.load: {d.metric.key: d for d in row.differences} for row in self._buyer() or []}
        return [dataclasses.replace(row, unverified=self._unverified(row.load), differences={
            change: found for change, key in CHANGE_METRICS.items()
            if (found := buyer.get(row.load, {}).get(key)) is not None})
            for row in compare_ab(outcomes[0].results, outcomes[1].results)]

    def _buyer(self) -> list[BuyerRow] | None:
        outcomes = self.outcomes
        if len(outcomes) < 2 or self.layouts is None:
            return None
        return [dataclasses.replace(row, unverified=self._unverified(row.load))
                for row in compare_buyer(outcomes[0].runs, outcomes[1].runs, self.layouts,
                                         refused=refusal(self.twin_differences))]

    @property
    def twin_differences(self) -> list[IdentityDifference]:
        """What the twin serves otherwise than the DPD endpoint (empty without a twin, or when not compared)."""
        return [d for o in self.outcomes[1:2] for d in o.identity_differences]

    def _capacities(self) -> list[Capacity]:
        if not self.slo:
            return []
        return [capacity_at_slo(o.label, median_results(o.runs), self.slo,
                                untrusted=frozenset(w.load for w in o.warnings))
                for o in self.outcomes]

    def write_input(self) -> ReportInput:
        """What the HTML report shows: the first run of each endpoint, DPD's stages, the advisor's rows."""
        title = f"bench: {', '.join(o.endpoint for o in self.outcomes)}, {self.scenario.traffic}"
        return ReportInput(
            title=title, runs={o.label: median_results(o.runs) for o in self.outcomes},
            repeats={o.label: o.runs for o in self.outcomes if o.repeats}, slo=self.slo,
            unverified={o.label: {lv.load: codes for lv in o.results.levels if (codes := o.unverified(lv.load))}
                        for o in self.outcomes},
            decompositions=self.outcomes[0].decompositions(),
            predictions=self.comparison.rows if self.comparison is not None else (),
            prediction_note=self.prediction_note, text=self.render(), document=json.loads(self.to_json()),
            layouts=dict(zip([o.label for o in self.outcomes], self.layouts or (), strict=False)),
            server_tokens_per_s={o.label: {lv.load: server_output_tokens_per_s(lv, o.routing.get(lv.load))
                                           for lv in o.results.levels} for o in self.outcomes if o.routing},
            body_html=PageBody(banner=verdict_html(verdict(self)), style=CSS,
                               sections=sections_html(self, blocks=self.html_blocks(), tables=[
                                   results_table(o.results, o.routing, self.slo) for o in self.outcomes])))

    def write(self, folder: Path) -> list[Path]:
        """The HTML report, its PNGs and its JSON in ``folder`` (:mod:`figures`), and each live run's folder under
        ``runs/`` (its result files and counters), which ``--results-dir`` reports again with the same verdicts."""
        written = write_report(folder, self.write_input())
        for o in self.outcomes:
            for name, files in o.run_folders().items():
                run = folder / RUNS_FOLDER / name
                run.mkdir(parents=True, exist_ok=True)
                for file, text in sorted(files.items()):
                    if "/" not in file and file not in (".", ".."):  # a name, never a path out of the folder
                        (run / file).write_text(text, encoding="utf-8")
                written.append(run)
        return written

"""The HTML report's own sections: the verdict at the top, each run's levels and warnings, the pods, the A/B.

The text report is for a terminal; the page is for someone who was not there. So the page says first whether
DPD was disaggregated and can be trusted, and if not, why (every warning's code and levels, a Job that failed, a
twin that serves another model); then its tables are HTML tables (cells wrap, nothing is cut at the page's
edge), with the per-pod counts that the text report sums. Blocks that only the text report lays out (the TTFT
stages, capacity, the advisor) become tables the same way, from their columns.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.benchmark.proof.disaggregation import FINISHED, RESTARTS, STAGE
from hyperpod_dpd.benchmark.proof.overhead import resolution_notes, twin_ttft
from hyperpod_dpd.benchmark.proof.proof import RunProof
from hyperpod_dpd.benchmark.report.ab import buyer_table
from hyperpod_dpd.load_point import Load, column_header
from hyperpod_dpd.observability.metrics import TTFT

# report.py imports this page, so the page never imports it back: its Report and Outcome are typed Any here
# (a Report is ``report``, an Outcome ``o``), and report.py hands each run's per-level table in.

CSS = ("body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:1280px;"
       "padding:0 1em;line-height:1.45;color:#1f2328}"
       "h1{font-size:1.5em;overflow-wrap:anywhere}h2{font-size:1.2em;margin-top:1.6em}"
       ".verdict{padding:.8em 1.1em;border-radius:6px;margin:1em 0 1.4em 0}"
       ".verdict h2{margin:0 0 .4em 0}.ok{background:#e8f5e9;border:2px solid #2e7d32}"
       ".bad{background:#fdecea;border:2px solid #c62828}"
       ".figures{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}"
       "figure{margin:0;max-width:100%}figure svg{max-width:100%;height:auto}"
       "figcaption{font-size:13px;max-width:720px}"
       "table{border-collapse:collapse;margin:.4em 0 1em 0;font-size:13px;max-width:100%}"
       ".scroll{overflow-x:auto;max-width:100%}"
       "th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top;overflow-wrap:break-word}"
       "th{background:#f6f8fa;font-weight:600}td.n{text-align:right;white-space:nowrap}"
       "p,li{overflow-wrap:anywhere}details pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}"
       ".code{font-family:ui-monospace,monospace;font-size:12px;background:#f6f8fa;padding:0 3px}")
# A text report's table line: cells apart by two spaces or more (plain-text columns pad with at least two)
CELLS = re.compile(r"\s{2,}")
NUMBER = re.compile(r"^[-+$]?[\d.,/%() +-]*\d[\d.,/%() ]*$")  # a figure, a percentage or a/b/c figures
NUMERIC = ' class="n"'


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What the top of the page says: trusted or not, in one line, and every reason not to."""

    trusted: bool
    headline: str
    reasons: tuple[str, ...]
    # what the servers' histograms could decide only to their buckets' width (audit B14): no excess shown, none
    # excluded either, so said beside the verdict rather than folded into "trusted"
    undecided: tuple[str, ...] = ()


def verdict(report: Any) -> Verdict:
    """Disaggregated and trusted (every Job succeeded, every level verified against its servers), or why not."""
    reasons = []
    for o in report.outcomes:
        if o.problem:
            reasons.append(f"{o.label}: the benchmark Job did not succeed (its log is below)")
        if not o.results.levels:
            reasons.append(f"{o.label}: no level has results")
        codes: dict[str, list[Load]] = {}
        for w in o.warnings:
            codes.setdefault(w.code.value, [])
            if w.load not in codes[w.code.value]:
                codes[w.code.value].append(w.load)
        for code, loads in codes.items():
            at = ", ".join(load.describe() for load in sorted(loads, key=Load.sort_key))
            reasons.append(f"{o.label}: {code} at {at}")
    reasons += [f"the twin differs from DPD: {d.render()}" for d in report.twin_differences]
    names = ", ".join(o.endpoint for o in report.outcomes)
    undecided = tuple(f"{o.label}: {note}" for o in report.outcomes for note in (
        resolution_notes(o.results.levels, o.routing) if o.routing is not None else
        resolution_notes(o.results.levels, o.server, clock=twin_ttft) if o.server is not None else []))
    if not reasons:
        return Verdict(trusted=True, headline=(
            f"Disaggregated and trusted: every level of {names} was verified against its servers' own counters "
            "(the path each request took, the KV cache that arrived, the client's share of TTFT)"
            + (f"; {len(undecided)} client-overhead quantiles only to the histogram's resolution (below)"
               if undecided else "")), reasons=(), undecided=undecided)
    levels = sum(len(o.results.levels) + len(o.results.missing) for o in report.outcomes)
    flagged = len({(o.label, w.load) for o in report.outcomes for w in o.warnings})
    return Verdict(trusted=False, headline=(
        f"Not trusted as measured: {flagged} of {levels} levels carry a warning"
        + ("; a benchmark Job failed" if any(o.problem for o in report.outcomes) else "")
        + ". Read the reasons before any number below"), reasons=tuple(reasons), undecided=undecided)


def verdict_html(found: Verdict) -> str:
    items = "".join(f"<li>{html.escape(reason)}</li>" for reason in found.reasons)
    undecided = "".join(f"<li>{html.escape(note)}</li>" for note in found.undecided)
    return (f"<section class=\"verdict {'ok' if found.trusted else 'bad'}\" id=\"verdict\">"
            f"<h2>{html.escape(found.headline)}</h2>" + (f"<ul>{items}</ul>" if items else "")
            + ("<p><strong>Undecided, not excluded:</strong> the server's TTFT histogram places these quantiles only "
               "to its bucket's width, so the client's share there is neither shown over its bound nor within it "
               f"(finer router buckets decide it):</p><ul>{undecided}</ul>" if undecided else "") + "</section>")


def table_html(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table whose numbers are right-aligned and kept on one line, its words wrapped."""
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in headers)
    body = "".join("<tr>" + "".join(
        f"<td{NUMERIC if NUMBER.match(str(cell)) else ''}>{html.escape(str(cell))}</td>" for cell in row)
        + "</tr>" for row in rows)
    return f"<div class=\"scroll\"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def block_html(text: str) -> str:
    """A block of the text report as HTML: its runs of aligned columns as tables, its other lines as paragraphs."""
    lines = text.splitlines()
    parts, index = [], 0
    while index < len(lines):
        cells = CELLS.split(lines[index].strip())
        width, end = len(cells), index + 1
        while width >= 3 and end < len(lines) and len(CELLS.split(lines[end].strip())) == width:
            end += 1
        if end - index >= 2 and width >= 3:
            rows = [CELLS.split(line.strip()) for line in lines[index + 1:end] if set(line.strip()) != {"-"}]
            parts.append(table_html(cells, rows))
            index = end
            continue
        if lines[index].strip():
            parts.append(f"<p>{html.escape(lines[index].strip())}</p>")
        index += 1
    return "\n".join(parts)


# A pod's level, from its counters (proof.DpdCounters' keys): what the page's per-pod table shows
POD_HEADERS = ("POD", "REQUESTS", "PROMPT tok", "KV IN tok", "OWN CACHE tok", "OUT tok", "TTFT mean ms",
               "TPOT mean ms", "RESTARTS")
ENGINE_TTFT = (f"{STAGE}decode:{TTFT.name}_sum", f"{STAGE}decode:{TTFT.name}_count")


def _grown(before: Mapping[str, float] | None, after: Mapping[str, float], key: str) -> float | None:
    if key not in after:
        return None
    start = (before or {}).get(key, 0.0)
    return after[key] - start if after[key] >= start else after[key]  # a counter that went down restarted


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def pod_rows(proof: RunProof) -> list[list[str]]:
    """Each level's increase of each pod's counters (router: routed requests and TTFT; decoder: finished requests,
    prompt tokens, KV from the prefiller, its own prefix cache, output tokens, TTFT and time per output token;
    prefiller: its restarts)."""
    rows = []
    for index, load in enumerate(proof.loads):
        before, after = proof.windows.get(index), proof.windows.get(index + 1)
        if before is None or after is None:
            continue
        for pod, sample in sorted(after.pods.items()):
            earlier = before.pods.get(pod)
            grown = {key: _grown(earlier, sample, key) for key in sample}
            router = pod.startswith("router/")
            routed = [grown.get(key) for key in ("disaggregated", "local", "fallback")]
            requests = sum(v for v in routed if v is not None) if router else grown.get(FINISHED)
            total, count = (grown.get("ttft_seconds"), grown.get("ttft_count")) if router else (
                grown.get(ENGINE_TTFT[0]), grown.get(ENGINE_TTFT[1]))
            ttft = "-" if total is None or not count else f"{total / count * 1e3:,.1f}"
            gaps, between = grown.get("itl_count"), grown.get("itl_seconds")
            tpot = "-" if between is None or not gaps else f"{between / gaps * 1e3:,.1f}"
            restarted = (sample.get(RESTARTS, 0.0) - (earlier or {}).get(RESTARTS, 0.0)) if earlier else None
            rows.append([load.cell(), pod, _count(requests), _count(grown.get("prompt_tokens")),
                         _count(grown.get("external_kv_tokens")), _count(grown.get("cache_hit_tokens")),
                         _count(grown.get("generation_tokens")), ttft, tpot,
                         "new pod" if restarted is None else _count(restarted)])
    return rows


def outcome_html(o: Any, report: Any, table: tuple[tuple[str, ...], list[list[str]]]) -> str:
    scenario = report.scenario
    where = f"job {o.job}" if o.job else f"read from {o.source}"
    parts = [f"<h2>{html.escape(o.label)}: {html.escape(o.endpoint)}</h2>",
             f"<p>{html.escape(scenario.traffic)}: {scenario.isl} tokens in, {scenario.osl} out; "
             f"{html.escape(scenario.client.value)}; {html.escape(where)}</p>",
             table_html(*table)]
    if o.warnings:
        parts.append("<p><strong>Cannot be trusted as measured:</strong></p><ul>" + "".join(
            f"<li><span class=\"code\">{html.escape(w.code.value)}</span> {html.escape(w.load.describe())}: "
            f"{html.escape(w.message)}</li>" for w in o.warnings) + "</ul>")
    if o.proof is not None and o.proof.windows:
        rows = pod_rows(o.proof)
        if rows:
            parts += [f"<h3>{html.escape(o.label)}: per pod, per level (each pod's own counters)</h3>",
                      table_html((column_header(list(o.proof.loads)), *POD_HEADERS), rows)]
    if o.problem:
        parts.append(f"<details><summary>the benchmark Job did not succeed: its log</summary>"
                     f"<pre>{html.escape(o.problem)}</pre></details>")
    return "\n".join(parts)


def sections_html(report: Any, *, blocks: Sequence[str],
                  tables: Sequence[tuple[tuple[str, ...], list[list[str]]]]) -> str:
    """Every run's section (``tables``: each run's per-level table, in order), the A/B as a table, then the text
    report's other ``blocks`` as tables and paragraphs."""
    parts = [outcome_html(o, report, table) for o, table in zip(report.outcomes, tables, strict=True)]
    buyer = report.buyer_rows()
    if buyer is not None and report.layouts is not None:
        parts.append("<h2>DPD against the aggregated twin</h2>")
        parts += [f"<p><strong>The twin differs from DPD:</strong> {html.escape(d.render())}</p>"
                  for d in report.twin_differences]
        held = "".join(f"<li>{html.escape(layout.describe())}</li>" for layout in report.layouts)
        parts.append("<p>DPD - AGG with its 95% interval (Welch over the repeats, two or more a side; one run a side "
                     f"has none and no verdict), each layout as priced:</p><ul>{held}</ul>")
        parts.append(table_html(*buyer_table(buyer)) if buyer else "<p>no load level completed on both endpoints</p>")
    parts += [f"<section>{block_html(block)}</section>" for block in blocks]
    return "\n".join(parts)

"""``hyperpod-dpd trace summary FILE`` and ``hyperpod-dpd trace generate KIND -o FILE``: traffic as data.

``summary`` reads a Mooncake JSONL, Azure LLM inference or BurstGPT CSV trace (plain or gzip'd) and prints its
lengths, its busiest windows (the p99 window arrival rate), its prefix reuse and the tokens/s each role must
process; with ``--spec`` only the prompts at or above the spec's routing threshold count as prefill demand.
``generate`` writes a synthetic trace as Mooncake JSONL, the file aiperf's fixed schedule replays.
"""

from __future__ import annotations

import argparse
import json
import sys

from hyperpod_dpd.cli._argtypes import number, path, positive, seconds, whole
from hyperpod_dpd.cli._common import add_json_argument, load_spec_argument, warn
from hyperpod_dpd.columns import render_columns
from hyperpod_dpd.contracts.router import PrefillRule
from hyperpod_dpd.errors import SpecError, UsageError
from hyperpod_dpd.spec.loading import DASH
from hyperpod_dpd.traces import (
    DEFAULT_WINDOW_S,
    FORMAT_NAMES,
    ArrivalKind,
    Lengths,
    LengthShape,
    PrefixGroups,
    TraceSummary,
    generate,
    mooncake_lines,
    read_trace,
    summarise,
    write_mooncake,
)
from hyperpod_dpd.traces.mooncake import write_lines
from hyperpod_dpd.traces.summary import MIN_WINDOW_S
from hyperpod_dpd.traces.synthetic import DAY_S

JSON_SHAPE = ('{"source", "requests", "duration_s", "window_s", "input_tokens": {"mean", "p50", "p99"}, '
              '"output_tokens", "mean_arrivals_per_s", "p99_window_arrivals_per_s", "peak_window", '
              '"prefilled_share", "prefix_reuse", "prefix_reuse_per_request", "prefix_reuse_note", '
              '"routing_threshold", "windows": [{"start_s", "requests", "arrivals_per_s", "prefill_tokens_per_s", '
              '"decode_tokens_per_s"}]}')
KINDS = tuple(kind.value for kind in ArrivalKind)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "trace", help="summarise a request trace, or generate a synthetic one",
        description="Traffic as data: read a public trace format (Mooncake JSONL, Azure LLM inference CSV, "
                    "BurstGPT CSV; plain or .gz) and say what it asks of each pool, or write a synthetic trace.",
        epilog="examples:\n  hyperpod-dpd trace generate diurnal --rate 3 --duration 86400 -o day.jsonl\n"
               "  hyperpod-dpd trace summary day.jsonl --spec my-spec.yaml\n"
               "  hyperpod-dpd trace summary AzureLLMInferenceTrace_conv.csv --json | jq .p99_window_arrivals_per_s",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    summary = actions.add_parser(
        "summary", help="lengths, busiest windows, prefix reuse and tokens/s per role of a trace",
        description="Summarise a trace: request lengths (mean, p50, p99), arrivals per window (the peak and the "
                    "p99 window), prefix reuse (Mooncake hash_ids: an upper bound of the prefix-cache hit rate) "
                    "and, per window, the prompt tokens/s the prefill pool and the output tokens/s the decode "
                    "pool must process.")
    summary.add_argument("file", metavar="FILE", type=path, help="the trace (format told by its first line)")
    summary.add_argument("--format", choices=FORMAT_NAMES, help="the trace's format (default: detected)")
    summary.add_argument("--window", type=seconds, default=DEFAULT_WINDOW_S, metavar="SECONDS",
                         help=f"the window arrivals are counted in (default: {DEFAULT_WINDOW_S:g})")
    summary.add_argument("--spec", type=path, metavar="SPEC",
                         help="count as prefill demand only the prompts at or above this spec's routing.threshold "
                              "(default: every prompt)")
    add_json_argument(summary, shape=JSON_SHAPE)
    summary.set_defaults(handler=run_summary)
    make = actions.add_parser(
        "generate", help="write a synthetic trace (Poisson, diurnal, bursty, shared-prefix) as Mooncake JSONL",
        description="Write a synthetic trace as Mooncake JSONL (aiperf's fixed-schedule format), the same for "
                    "the same seed. poisson: exponential gaps; diurnal: a 24 h sinusoid of --peak-to-trough by "
                    "thinning; bursty: gamma gaps of --burst-cv; shared-prefix: poisson with --prefix-groups.")
    make.add_argument("kind", metavar="KIND", choices=KINDS, help=f"one of {', '.join(KINDS)}")
    make.add_argument("-o", "--output", metavar="FILE", type=path, required=True,
                      help="where to write (.gz: gzip'd; -: standard output)")
    make.add_argument("--rate", type=_rate, default=2.0, metavar="PER_S", help="mean requests/s (default: 2)")
    make.add_argument("--duration", type=seconds, default=3600.0, metavar="SECONDS", help="default: 3600")
    make.add_argument("--seed", type=whole, default=0, help="the random seed (default: 0)")
    make.add_argument("--isl", type=positive, default=1024, metavar="TOKENS", help="mean prompt tokens (default: 1024)")
    make.add_argument("--osl", type=positive, default=256, metavar="TOKENS", help="mean output tokens (default: 256)")
    make.add_argument("--lengths", choices=[shape.value for shape in LengthShape], default=LengthShape.LOGNORMAL.value,
                      help="fixed lengths or lognormal ones of that mean, sigma 1 (default: lognormal)")
    make.add_argument("--peak-to-trough", type=number, default=3.0, metavar="RATIO",
                      help="diurnal: the peak rate over the trough rate (default: 3)")
    make.add_argument("--peak-at", type=number, default=DAY_S / 2, metavar="SECONDS",
                      help="diurnal: when the rate peaks (default: 43200, noon)")
    make.add_argument("--burst-cv", type=number, default=3.0, metavar="CV",
                      help="bursty: the gaps' coefficient of variation, above 1 (default: 3)")
    make.add_argument("--prefix-groups", type=positive, metavar="N",
                      help="share prompt prefixes within N groups (default: none; shared-prefix: 8)")
    make.add_argument("--shared-blocks", type=positive, default=2, metavar="N",
                      help="the 512-token blocks a group's prompts share (default: 2)")
    make.set_defaults(handler=run_generate)


def _rate(text: str) -> float:
    value = number(text, unit="request")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of requests per second, above 0 (got {text})")
    return value


def render(summary: TraceSummary) -> list[str]:
    """The summary as plain text: where it came from, the rates, the lengths and the busiest windows."""
    reuse = "-" if summary.prefix_reuse is None else f"{summary.prefix_reuse:.1%}"
    routed = ("every prompt (no --spec)" if summary.routing_threshold is None else
              f"{summary.prefilled_share:.1%} of prompts at or above routing.threshold {summary.routing_threshold:,}")
    lines = [f"trace: {summary.source}",
             f"{summary.requests:,} requests over {summary.duration_s:,.1f} s; windows of {summary.window_s:g} s",
             f"arrivals/s: mean {summary.mean_arrivals_per_s:,.3f}, p99 window {summary.p99_arrivals_per_s:,.3f}, "
             f"peak window {summary.peak.arrivals_per_s:,.3f}",
             f"prefill demand: {routed}",
             f"prefix reuse: {reuse} ({summary.prefix_reuse_note})", ""]
    lines += render_columns(*summary.overview(), rule=True)
    lines += ["", *render_columns(*summary.busiest(), rule=True)]
    return lines


def run_summary(args: argparse.Namespace) -> int:
    routing = PrefillRule(threshold=load_spec_argument(args.spec).spec.routing.threshold) if args.spec else None
    try:
        trace = read_trace(args.file, format=args.format)
    except SpecError as err:  # a bad row is the user's to fix: a message and status 2, as a bad spec
        raise UsageError(str(err)) from None
    summary = summarise(trace, window_s=args.window, routing=routing)
    if summary.duration_s < summary.window_s:  # every rate is requests over one whole window: it reads low
        warn(f"the trace spans {summary.duration_s:g} s, less than one {summary.window_s:g} s window, so its "
             f"rates per window read low; give --window {max(MIN_WINDOW_S, summary.duration_s):g} or less")
    print(json.dumps(summary.to_json(), indent=2) if args.json else "\n".join(render(summary)))
    return 0


def run_generate(args: argparse.Namespace) -> int:
    shape = LengthShape(args.lengths)
    prefix = None
    if args.prefix_groups or args.kind == ArrivalKind.SHARED_PREFIX.value:  # shared-prefix: 8 groups by default
        prefix = PrefixGroups(groups=args.prefix_groups or PrefixGroups().groups, shared_blocks=args.shared_blocks)
    trace = generate(args.kind, rate_per_s=args.rate, duration_s=args.duration, seed=args.seed,
                     input_tokens=Lengths(mean=args.isl, shape=shape),
                     output_tokens=Lengths(mean=args.osl, shape=shape),
                     prefix=prefix, peak_to_trough=args.peak_to_trough, peak_at_s=args.peak_at,
                     burst_cv=args.burst_cv)
    if args.output == DASH:
        write_lines(mooncake_lines(trace), sys.stdout)
        return 0
    write_mooncake(trace, args.output)
    print(f"wrote {len(trace.requests):,} requests to {args.output}: {trace.source}", file=sys.stderr)
    return 0

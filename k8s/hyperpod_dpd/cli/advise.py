"""``hyperpod-dpd advise [SPEC] --isl N --osl N (--concurrency N[,N...] | --request-rate R) [...]``, or
``hyperpod-dpd advise [SPEC] --trace FILE [--autoscale] [...]`` (:mod:`hyperpod_dpd.cli.advise_trace`).

Predicts the spec's DPD layout against aggregated vLLM with NVIDIA AIConfigurator (the ``advisor``
extra, imported only when the command runs). ``--search`` finds the layout with the fewest nodes that
meets ``--ttft-ms``/``--tpot-ms``; ``--write-spec FILE`` writes the best one as a spec (``-``: to standard
output, everything else then going to standard error, so that ``> my-spec.yaml`` captures only the spec). Exit
status: 0,
1 when the DPD layout misses an SLA (or no layout meets it), 2 for bad input or a missing extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hyperpod_dpd.advisor.search import DEFAULT_MAX_NODES, DEFAULT_TOP
from hyperpod_dpd.cli import advise_trace
from hyperpod_dpd.cli._argtypes import number, path, whole, wholes
from hyperpod_dpd.cli._common import add_spec_argument, load_spec_argument, print_warnings, warn
from hyperpod_dpd.errors import SpecError, UsageError, install_extra
from hyperpod_dpd.spec.loading import DASH

EXIT_SLA_MISSED = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "advise", help="predict DPD against aggregated vLLM for your traffic (AIConfigurator)",
        description="Predict TTFT, TPOT and throughput of the spec's DPD layout against aggregated vLLM on "
                    f"the same model and TP, with NVIDIA AIConfigurator ({install_extra('advisor')}).",
        epilog="examples:\n  hyperpod-dpd advise my-spec.yaml --isl 4096 --osl 256 --concurrency 8,16,32\n"
               "  hyperpod-dpd advise my-spec.yaml --isl 4096 --osl 256 --concurrency 16 --tpot-ms 30 --search "
               "--write-spec my-spec.best.yaml\n"
               "  hyperpod-dpd advise my-spec.yaml --trace day.jsonl --autoscale",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_argument(parser)
    parser.add_argument("--isl", type=whole, metavar="N", help="input tokens per request (required without --trace)")
    parser.add_argument("--osl", type=whole, metavar="N", help="output tokens per request (required without --trace)")
    load = parser.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=wholes, metavar="N[,N...]",
                      help="requests in flight (closed loop), one or more load points")
    load.add_argument("--request-rate", type=number, metavar="R", help="arrivals per second (one load point)")
    parser.add_argument("--ttft-ms", type=number, metavar="MS", help="time-to-first-token target")
    parser.add_argument("--tpot-ms", type=number, metavar="MS", help="time-per-output-token target")
    parser.add_argument("--baseline-nodes", type=whole, metavar="N",
                        help="nodes of the aggregated baseline (default: as many as the DPD layout, equal cost)")
    parser.add_argument("--search", action="store_true",
                        help="find the DPD layout with the fewest nodes that meets the SLAs at one load point")
    parser.add_argument("--max-nodes", type=whole, metavar="N",
                        help=f"with --search: the largest layout tried (default: {DEFAULT_MAX_NODES})")
    parser.add_argument("--top", type=whole, metavar="N",
                        help=f"with --search: layouts printed (default: {DEFAULT_TOP})")
    parser.add_argument("--write-spec", metavar="FILE", type=path,
                        help="with --search: write the best layout as a spec (- prints it to standard output and "
                             "everything else to standard error)")
    parser.add_argument("--any-layout", action="store_true",
                        help="with --search: also try layouts the operator does not run today (several decoders, "
                             "roles of part of a node); they are shown, never written")
    parser.add_argument("--price-per-node-hour", type=number, metavar="USD",
                        help="your rate per node-hour; replaces the shipped price table, whose figures are labelled "
                             "SageMaker ml.* rate, or derived from EC2's at the published SageMaker ratio")
    parser.add_argument("--calibrate", metavar="BENCH_JSON", type=path,
                        help="fit the model's prefill, decode and overhead factors to a 'hyperpod-dpd bench "
                             "--json' result of this spec, report its error, and use them (with --trace: fitted at "
                             "the bench run's own traffic; the capacities at the SLO and the emulated day use them)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    advise_trace.add_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.trace is not None:
        return advise_trace.run(args)
    advise_trace.refuse_trace_options(args)
    missing = [flag for flag, value in (("--isl", args.isl), ("--osl", args.osl)) if value is None]
    if args.concurrency is None and args.request_rate is None:
        missing.append("--concurrency or --request-rate")
    if missing:
        raise UsageError(f"advise needs {', '.join(missing)} (the traffic to predict), or --trace FILE (a day of it)")
    for flag, value in (("--write-spec", args.write_spec), ("--max-nodes", args.max_nodes), ("--top", args.top),
                        ("--any-layout", args.any_layout or None)):
        if value is not None and not args.search:
            raise UsageError(f"{flag} needs --search: it applies to the layouts the search finds")
    if args.search and args.baseline_nodes is not None:
        raise UsageError("--baseline-nodes applies to the comparison, not to --search; drop one of them")
    _refuse_writing_the_input(args.spec, args.write_spec)
    spec = load_spec_argument(args.spec).spec
    # With --write-spec - standard output carries the spec alone; the report goes to standard error.
    report = sys.stderr if args.write_spec == DASH else sys.stdout
    from hyperpod_dpd.advisor import NoLayoutMeetsSla, Traffic, advise, search  # noqa: PLC0415 - keeps --help fast
    from hyperpod_dpd.advisor.render import render_advice, render_search  # noqa: PLC0415

    traffic = Traffic(isl=args.isl, osl=args.osl, concurrency=args.concurrency or (),
                      request_rate=args.request_rate, ttft_ms=args.ttft_ms, tpot_ms=args.tpot_ms)
    source = args.spec or "the embedded default spec"
    try:
        factors = None
        if args.calibrate:
            from hyperpod_dpd.advisor.calibration import calibrate, read_bench  # noqa: PLC0415

            fit = calibrate(spec, traffic, read_bench(Path(args.calibrate)), source=args.calibrate)
            for warning in fit.warnings:
                warn(warning)
            print(fit.render(), file=sys.stderr)
            factors = fit.factors
        if args.search:
            result = search(spec, traffic, max_nodes=DEFAULT_MAX_NODES if args.max_nodes is None else args.max_nodes,
                            top=DEFAULT_TOP if args.top is None else args.top, any_layout=args.any_layout,
                            factors=factors, price_per_node_hour=args.price_per_node_hour)
        else:
            advice = advise(spec, traffic, baseline_nodes=args.baseline_nodes, factors=factors,
                            price_per_node_hour=args.price_per_node_hour)
    except NoLayoutMeetsSla as err:
        if args.json:  # a JSON reader gets an answer on stdout too, not an empty document
            closest = err.closest.to_json() if err.closest is not None else None
            print(json.dumps({"best": [], "closest": closest, "message": str(err)}, indent=2), file=report)
        print(f"hyperpod-dpd: {err}", file=sys.stderr)
        return EXIT_SLA_MISSED
    except SpecError as err:
        raise UsageError(f"cannot advise on {source}:\n" + "\n".join(
            f"  - {problem.render()}" for problem in err.problems)) from None
    if not args.search:
        if args.json:
            print(json.dumps(advice.to_json(), indent=2))
        else:
            print(render_advice(advice), end="")
        if not advice.meets_sla:
            print("hyperpod-dpd: the DPD layout misses the SLA at some load point (see above)", file=sys.stderr)
            return EXIT_SLA_MISSED
        return 0
    spec_text: str | None = None
    if args.write_spec:
        from hyperpod_dpd.spec.loading import dump_spec_yaml  # noqa: PLC0415
        from hyperpod_dpd.validation import check  # noqa: PLC0415

        if not result.best[0].runnable:
            raise UsageError(f"--write-spec: the best layout ({result.best[0].estimate.description}) is not one "
                                  "the operator runs (one decoder, whole-node roles); nothing written. Fix: drop "
                                  "--any-layout, or allow more nodes (--max-nodes)")
        best = result.best[0].spec
        where = "standard output" if args.write_spec == DASH else args.write_spec
        print_warnings(check(best, source=where).warnings)
        spec_text = dump_spec_yaml(best)
        if args.write_spec != DASH:
            try:
                Path(args.write_spec).write_text(spec_text, encoding="utf-8")
            except OSError as err:
                raise UsageError(f"cannot write {args.write_spec}: {err.strerror}. Fix: choose a writable path "
                                      "in an existing folder") from None
    if args.json:
        print(json.dumps(result.to_json(), indent=2), file=report)
    else:
        print(render_search(result, isl=traffic.isl, osl=traffic.osl, sla=traffic.sla), end="", file=report)
    if args.write_spec == DASH and spec_text is not None:
        sys.stdout.write(spec_text)
        print("wrote the best layout to standard output", file=sys.stderr)
    elif args.write_spec:
        print(f"wrote the best layout to {args.write_spec}", file=sys.stderr)
    return 0


def _refuse_writing_the_input(spec: str | None, write_spec: str | None) -> None:
    """``--write-spec`` never replaces the spec it read: the written one has no comments and spells out every field."""
    if spec is None or write_spec is None or DASH in (spec, write_spec):
        return
    try:
        same = Path(spec).resolve() == Path(write_spec).resolve() or Path(spec).samefile(write_spec)
    except OSError:  # the output does not exist yet
        same = False
    if same:
        target = Path(spec)
        best = target.with_name(f"{target.stem}.best{target.suffix or '.yaml'}")
        raise UsageError(f"--write-spec: {write_spec} is the spec being read; writing the best layout over it would "
                         f"drop its comments and the fields it leaves out. Fix: write it beside the spec "
                         f"(--write-spec {best}) and compare the two (diff {spec} {best})")

#!/usr/bin/env python3
"""Synthesis cost of the hyperpod-dpd app, side by side with the floor jsii itself costs.

Runs each case in a fresh Python process (as ``cdk synth`` does) and prints wall time, the
ratio to a one-bucket CDK app, resource counts and template sizes against CloudFormation's
limits. Not part of the test suite: ``make bench``.

    .venv/bin/python bench/synth_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MAX_RESOURCES = 500  # CloudFormation: resources per template
MAX_TEMPLATE_BYTES = 1_000_000  # CloudFormation: template body uploaded through S3 (cdk deploy does this)
CASES = ["minimal", "default", "endpoints=1", "endpoints=4", "endpoints=16"]


def run_case(case: str, outdir: str) -> dict[str, Any]:
    """Build and synthesize one case in this process; report timings and the template's shape."""
    started = time.perf_counter()
    import aws_cdk as cdk  # noqa: PLC0415
    from aws_cdk import aws_s3 as s3  # noqa: PLC0415

    import hyperpod_dpd  # noqa: F401, PLC0415 - points jsii at the wheel's Node first

    imported = time.perf_counter()
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    app = cdk.App(context=context, outdir=outdir)
    if case == "minimal":
        stack = cdk.Stack(app, "Minimal", env=cdk.Environment(region="us-west-2"))
        s3.Bucket(stack, "Bucket")
    else:
        from hyperpod_dpd.spec.defaults import default_spec  # noqa: PLC0415
        from hyperpod_dpd_cdk import HyperPodDpdStack  # noqa: PLC0415

        count = 1 if case == "default" else int(case.split("=")[1])
        base = default_spec()
        specs = [base] if case == "default" else [
            dataclasses.replace(base, name=f"ep-{i:02d}", endpoint_name=f"ep-{i:02d}") for i in range(count)]
        stack = HyperPodDpdStack(app, "HyperPodDpd", endpoints=specs, env=cdk.Environment(region="us-west-2"))
    built = time.perf_counter()
    assembly = app.synth()
    done = time.perf_counter()
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    path = Path(assembly.directory) / artifact.template_file
    return {"case": case, "import_s": imported - started, "construct_s": built - imported,
            "synth_s": done - built, "resources": len(artifact.template["Resources"]),
            "template_bytes": path.stat().st_size}


def measure(case: str, repeat: int) -> dict[str, Any]:
    walls, results = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as outdir:
            started = time.perf_counter()
            completed = subprocess.run(
                [sys.executable, __file__, "--case", case, "--out", outdir], capture_output=True, text=True,
                check=False, cwd=REPO)
            walls.append(time.perf_counter() - started)
        if completed.returncode != 0:
            sys.exit(f"case {case} failed:\n{completed.stderr[-3000:]}")
        results.append(json.loads(completed.stdout.strip().splitlines()[-1]))
    result = results[-1]
    result["wall_s"] = statistics.median(walls)
    result["synth_s"] = statistics.median(r["synth_s"] for r in results)
    result["construct_s"] = statistics.median(r["construct_s"] for r in results)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the median is shown (default 1)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.out)))
        return 0

    rows = [measure(case, args.repeat) for case in CASES]
    floor = rows[0]["wall_s"]
    print(f"hyperpod-dpd synth benchmark ({args.repeat} run(s) per case, fresh process each, wall clock)\n")
    header = (f"{'case':<14}{'wall s':>8}{'x floor':>9}{'construct s':>13}{'synth s':>9}"
              f"{'resources':>11}{'% of 500':>10}{'template KB':>13}{'% of 1 MB':>11}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['case']:<14}{row['wall_s']:>8.1f}{row['wall_s'] / floor:>9.2f}{row['construct_s']:>13.2f}"
              f"{row['synth_s']:>9.2f}{row['resources']:>11}{100 * row['resources'] / MAX_RESOURCES:>9.0f}%"
              f"{row['template_bytes'] / 1000:>13.1f}{100 * row['template_bytes'] / MAX_TEMPLATE_BYTES:>10.1f}%")
    by_case = {row["case"]: row for row in rows}
    one, sixteen = by_case["endpoints=1"], by_case["endpoints=16"]
    per_endpoint_resources = (sixteen["resources"] - one["resources"]) / 15
    per_endpoint_bytes = (sixteen["template_bytes"] - one["template_bytes"]) / 15
    headroom = min((MAX_RESOURCES - one["resources"]) / per_endpoint_resources if per_endpoint_resources else 1e9,
                   (MAX_TEMPLATE_BYTES - one["template_bytes"]) / per_endpoint_bytes)
    print(f"\nper extra endpoint: {per_endpoint_resources:.1f} resources, {per_endpoint_bytes / 1000:.1f} KB; "
          f"room for about {int(headroom)} more endpoints before a CloudFormation limit, more than HyperPod's "
          "100 instance groups (50 endpoints) allow")
    return 0


if __name__ == "__main__":
    sys.exit(main())

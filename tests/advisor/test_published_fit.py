"""DPD-only corrections fitted on one GPU's published points, then held out on the other's, both ways.

The test prints the 16-point table (published, the model's prediction, its miss; then each point predicted
by the corrections fitted on the *other* GPU, and that miss) and the held-out figures, and writes the
same into docs/advise.md between the ``published-fit`` markers (``UPDATE_PUBLISHED_TABLE=1`` rewrites it).
The limits are :data:`hyperpod_dpd.advisor.published.TARGET_MEAN` and ``TARGET_MAX``. The figures are
pinned within MISS_WIDTH (the anchor test's pin width), so a model change that moves them fails here and
must update the pins, the docs and the reading below together.

What the pins say: fitted on H100, the corrections (a DPD prefill 50 % slower than its kernels, a decode
step 15 % slower, 50 ms per request) reach a mean miss of 2.1 points there, but predict H200 worse than no
correction at all (8.6 against 7.0): H200's published gains are larger than H100's although both GPUs
prefill at the same tensor-core rate, so a prefill cost large enough for H100 at 16 and 32 clients takes
H200's gain at 32 out of its published range (31 points). Fitted on H200, they carry to H100 at a mean of
4.8 but leave H100's throughput at 16 clients 25 points over "up to +35 %". Neither direction meets the
targets, so the advisor keeps its sourced costs only and warns where a prediction lies outside what AWS
measured (test_published_warning.py) instead of adopting a fit that does not carry.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from hyperpod_dpd.advisor.published import CONCURRENCY, E2E, GPUS, POINTS, TARGET_MAX, TARGET_MEAN, THROUGHPUT, TPOT
from hyperpod_dpd.advisor.published_fit import Corrections, HeldOut, blog_advice, changes, held_out

MISS_WIDTH = 0.01
DOC = Path(__file__).resolve().parents[2] / "docs" / "advise.md"
BEGIN, END = "<!-- BEGIN generated: published-fit -->", "<!-- END generated: published-fit -->"
# fitted on -> (corrections, in-sample mean and worst miss, held-out mean and worst miss), as measured.
PINNED: dict[str, tuple[Corrections, tuple[float, float], tuple[float, float]]] = {
    "H100": (Corrections(prefill=1.5, decode=1.15, overhead_s=0.05), (0.021, 0.110), (0.086, 0.312)),
    "H200": (Corrections(prefill=1.15, decode=1.1, overhead_s=0.0), (0.037, 0.179), (0.048, 0.249)),
}


@pytest.fixture(scope="module")
def fits() -> dict[str, HeldOut]:
    return {gpu: held_out(gpu) for gpu in GPUS}


def table(fits: dict[str, HeldOut]) -> str:
    """Every published point: the model as it ships, and the corrections fitted on the other GPU."""
    shipped = {gpu: changes(blog_advice(gpu)) for gpu in GPUS}
    other = {fit.predicted: changes(blog_advice(fit.predicted, fit.corrections.factors())) for fit in fits.values()}
    rows = ["| GPU | Metric | C | Published | Model | Miss | Fitted on the other GPU | Miss |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for point in POINTS:
        where = (point.metric, point.concurrency)
        model, held = shipped[point.gpu][where], other[point.gpu][where]
        rows.append(f"| {point.gpu} | {point.metric} | {point.concurrency} | {point.describe()} | "
                    f"{model * 100:+.1f} % | {max(0.0, point.miss(model)) * 100:.1f} | {held * 100:+.1f} % | "
                    f"{max(0.0, point.miss(held)) * 100:.1f} |")
    lines = ["", f"Targets: mean miss at most {TARGET_MEAN * 100:.0f} points, every point at most "
                 f"{TARGET_MAX * 100:.0f}.", ""]
    for fit in fits.values():
        verdict = "meets" if fit.held_out.meets_target else "misses"
        lines.append(f"- Fitted on {fit.fitted_on} ({fit.corrections.describe()}): mean miss "
                     f"{fit.in_sample.mean * 100:.1f}, worst {fit.in_sample.worst * 100:.1f} on {fit.fitted_on}; "
                     f"{fit.predicted} held out: mean {fit.held_out.mean * 100:.1f}, worst "
                     f"{fit.held_out.worst * 100:.1f} ({verdict} the targets).")
    return "\n".join(rows + lines)


def test_the_table_and_the_held_out_figures_are_printed_and_in_the_docs(fits: dict[str, HeldOut]) -> None:
    text = table(fits)
    print("\n" + text)
    doc = DOC.read_text(encoding="utf-8")
    pattern = re.compile(rf"({re.escape(BEGIN)}\n).*?(\n{re.escape(END)})", re.DOTALL)
    assert pattern.search(doc), f"docs/advise.md has no {BEGIN} ... {END} part"
    updated = pattern.sub(lambda m: m.group(1) + text + m.group(2), doc)
    if os.environ.get("UPDATE_PUBLISHED_TABLE") == "1":
        DOC.write_text(updated, encoding="utf-8")
    assert updated == doc, "docs/advise.md's held-out table is stale: rerun with UPDATE_PUBLISHED_TABLE=1"
    assert text.count("\n| H") == len(POINTS) == 16


@pytest.mark.parametrize("gpu", list(GPUS))
def test_the_held_out_figures_are_as_pinned(gpu: str, fits: dict[str, HeldOut]) -> None:
    corrections, (in_mean, in_worst), (out_mean, out_worst) = PINNED[gpu]
    fit = fits[gpu]
    assert fit.corrections == corrections
    assert (fit.in_sample.mean, fit.in_sample.worst) == pytest.approx((in_mean, in_worst), abs=MISS_WIDTH)
    assert (fit.held_out.mean, fit.held_out.worst) == pytest.approx((out_mean, out_worst), abs=MISS_WIDTH)
    # Pinned as missing: when a modelled cost makes a direction meet the targets, unpin it and say so in the docs.
    assert not fit.held_out.meets_target


@pytest.mark.parametrize("gpu", list(GPUS))
def test_a_fit_is_never_worse_in_sample_than_no_correction(gpu: str, fits: dict[str, HeldOut]) -> None:
    from hyperpod_dpd.advisor.published_fit import score

    assert fits[gpu].in_sample.mean <= score(gpu, Corrections()).mean


def test_the_fit_reads_every_metric_at_every_published_concurrency() -> None:
    keys = {(p.metric, p.concurrency) for p in POINTS}
    assert keys <= {(m, c) for m in (TPOT, THROUGHPUT, E2E) for c in CONCURRENCY}
    assert set(changes(blog_advice("H100"))) == {(m, c) for m in (TPOT, THROUGHPUT, E2E) for c in CONCURRENCY}

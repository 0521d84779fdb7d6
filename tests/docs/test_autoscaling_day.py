"""docs/autoscaling.md's figure: a synthetic diurnal day emulated through the compiled SLO autoscaling, redrawn here.

The test regenerates the figure from the generator, the compiler and the emulator, checks what it shows (the
replicas follow the day, the SLO holds where the fixed layout misses it), and fails if the committed PNG or the
figures the page quotes differ. It emulates a whole day (5,760 steps of 15 s through the advisor's queueing
model, about 5 s): the figure the docs show is of a day, so no shorter run stands in for it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from support import SLO_WORKSPACE, write_spec

from hyperpod_dpd.advisor.day_report import DAY_PNG, write_day_report
from hyperpod_dpd.advisor.trace_advice import advise_trace
from hyperpod_dpd.cli._common import load_spec_argument
from hyperpod_dpd.report_page import HTML_FILE, read_embedded
from hyperpod_dpd.traces import Lengths, generate

pytestmark = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator") is None
                                or importlib.util.find_spec("matplotlib") is None,
                                reason="needs the advisor and bench extras")

DOCS = Path(__file__).resolve().parents[2] / "docs"
COMMITTED = DOCS / "images" / "autoscaling-day.png"
WRITE_DOCS = "HYPERPOD_DPD_WRITE_DOC_FIGURES"  # set to 1 to redraw the committed figures after a deliberate change
ISL, OSL = 8192, 256
# One replica's capacity at the SLO for 8,192/256-token requests, by the advisor (capacity.capacities on this spec,
# aiconfigurator 0.4 data), pinned so the figure is the compiler's and the emulator's alone.
PREFILL_CAPACITY, DECODE_CAPACITY = 16061.0, 2046.1
SCALING = (f"    slo:\n      input_tokens: {ISL}\n      output_tokens: {OSL}\n      capacity_tokens_per_s: {{}}\n")
SPEC = (("prefill:\n  replicas: 1\n", "prefill:\n  replicas: 1\n  autoscaling:\n    max_replicas: 4\n"
         + SCALING.format(PREFILL_CAPACITY)),
        ("decode:\n  replicas: 1\n", "decode:\n  replicas: 1\n  autoscaling:\n    max_replicas: 1\n"
         + SCALING.format(DECODE_CAPACITY)),
        ("metrics:\n  enabled: true\n", f"metrics:\n  enabled: true\n  amp_workspace_url: {SLO_WORKSPACE}\n"
         "slo:\n  ttft_ms: 2000\n  tpot_ms: 50\n"))


def day_trace() -> object:
    """The docs' day: diurnal, mean 1.5 requests/s, peak over trough 3 at noon, fixed 8,192/256-token requests."""
    return generate("diurnal", rate_per_s=1.5, duration_s=86_400.0, seed=3, input_tokens=Lengths(mean=ISL),
                    output_tokens=Lengths(mean=OSL))


def test_the_docs_figure_is_the_emulated_diurnal_day(tmp_path: Path) -> None:
    spec = load_spec_argument(write_spec(tmp_path, *SPEC)).spec
    trace = day_trace()
    advice = advise_trace(spec, trace, autoscale=True)  # type: ignore[arg-type]
    write_day_report(tmp_path / "report", advice, text="")
    figure = read_embedded((tmp_path / "report" / HTML_FILE).read_text())
    prefill = figure["replicas"]["prefill"]
    hour = len(prefill) // 24
    trough = prefill[:hour * 2] + prefill[-hour * 2:]  # midnight +- 2 h, where the rate is lowest
    peak = prefill[hour * 11:hour * 13]  # noon +- 1 h
    assert max(trough) == 1 and min(peak) >= 2, "the prefillers follow the day"
    assert set(figure["replicas"]["decode"]) == {1}
    auto, fixed = advice.autoscaled, advice.fixed
    assert auto is not None and auto.slo_attainment is not None and fixed.slo_attainment is not None
    assert auto.slo_attainment > fixed.slo_attainment
    assert figure["slo_attainment"] == round(auto.slo_attainment, 4)
    page = (DOCS / "autoscaling.md").read_text(encoding="utf-8")
    quoted = (f"SLO met for {auto.slo_attainment:.1%} of requests", f"{fixed.slo_attainment:.1%} with the layout "
              "written (one prefiller)")
    assert all(text in page for text in quoted), quoted
    made = (tmp_path / "report" / DAY_PNG).read_bytes()
    if os.environ.get(WRITE_DOCS) == "1":
        COMMITTED.write_bytes(made)
    assert COMMITTED.read_bytes() == made, (
        f"docs/images/{COMMITTED.name} is not the emulated day: rerun with {WRITE_DOCS}=1 after a deliberate change")
    assert f"images/{COMMITTED.name}" in page

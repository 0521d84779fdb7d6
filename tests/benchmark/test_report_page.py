"""The HTML report an engineer forwards (audit B15), drawn from the recorded stub run in tests/benchmark/data/doc-run:
its verdict first (disaggregated and trusted, or every reason not), the throughput, per-GPU and per-dollar figure
beside the latency curves, each run's levels and each pod's counts as tables, and no terminal text pasted in."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import write_spec

from hyperpod_dpd.benchmark.proof.disaggregation import BUCKET
from hyperpod_dpd.benchmark.proof.proof import PROOF_FILE
from hyperpod_dpd.benchmark.report.economics import layouts
from hyperpod_dpd.benchmark.report.figures import LATENCY_PNG, STAGES_PNG, THROUGHPUT_PNG
from hyperpod_dpd.benchmark.run.results import collect, read_files
from hyperpod_dpd.cli import main
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.report_page import HTML_FILE, read_embedded
from hyperpod_dpd.spec.defaults import default_spec

DOC_RUN = Path(__file__).resolve().parent / "data" / "doc-run"


def _no_advisor(spec: Any, scenario: Any) -> Any:
    raise SpecError([Problem(field="model", value="stub", message="the stub is not a model", fix="none")])


def _page(tmp_path: Path, name: str, *folders: str) -> str:
    spec = write_spec(tmp_path, ("threshold: 4096", "threshold: 32"))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["bench", spec, *folders, "--report-dir", str(tmp_path / name)], seams=Seams(predictor=_no_advisor))
    return (tmp_path / name / HTML_FILE).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("healthy")
    return folder, _page(folder, "report", "--results-dir", str(DOC_RUN / "dpd"))


def test_a_verified_run_opens_with_disaggregated_and_trusted(healthy: tuple[Path, str]) -> None:
    _, page = healthy
    body = page[page.index("<body>"):]
    assert body.index('class="verdict ok"') < body.index("<figure>")  # the verdict above everything else
    assert "Disaggregated and trusted: every level of dpd-test was verified" in body
    assert "<pre>" not in page  # no terminal text: tables and paragraphs, whose lines wrap
    assert "overflow-wrap" in page and "<table>" in page


def test_the_throughput_figure_is_per_gpu_and_per_dollar_of_the_levels(healthy: tuple[Path, str]) -> None:
    folder, page = healthy
    data = read_embedded(page)
    (dpd,) = data["throughput"]
    levels = collect(read_files(DOC_RUN / "dpd")).levels
    priced = layouts(default_spec(), price_per_node_hour=None)[0]
    assert dpd["x"] == [8.0, 16.0, 32.0]
    assert dpd["output_tokens_per_s"] == pytest.approx([lv.output_tokens_per_s for lv in levels], abs=1e-3)
    assert dpd["per_gpu"] == pytest.approx([priced.per_gpu(lv.output_tokens_per_s) for lv in levels], abs=1e-3)
    assert all(v is not None for v in dpd["server_tokens_per_s"])  # the decoders' own, from the counters
    figures = [m.start() for m in re.finditer("<figure>", page)]
    assert len(figures) == 3 and (folder / "report" / THROUGHPUT_PNG).is_file()
    assert {p.name for p in (folder / "report").iterdir()} >= {LATENCY_PNG, THROUGHPUT_PNG, STAGES_PNG}


def test_each_pods_counts_are_a_table(healthy: tuple[Path, str]) -> None:
    _, page = healthy
    section = page[page.index("per pod, per level"):]
    rows = re.findall(r"<tr><td class=\"n\">(\d+)</td><td>(decoder|router|prefiller)/([^<]+)</td>", section)
    assert [(c, role) for c, role, _ in rows] == [(c, r) for c in ("8", "16", "32")
                                                  for r in ("decoder", "prefiller", "router")]
    decoder = re.search(r"<td>decoder/decode-dpd-test-7c9-xyz</td>(.*?)</tr>", section)
    assert decoder is not None and "6,784" in decoder[1]  # its prompt tokens of the level, as its counter says


def test_an_unverified_twin_and_a_lost_summary_are_named_at_the_top(tmp_path: Path) -> None:
    folder = tmp_path / "dpd"
    shutil.copytree(DOC_RUN / "dpd", folder)
    (folder / "aiperf_concurrency_16.json").unlink()
    page = _page(tmp_path, "report", "--results-dir", str(folder), "--aggregated-results-dir",
                 str(DOC_RUN / "aggregated"))
    verdict = page[page.index('class="verdict bad"'):page.index("</section>")]
    assert "Not trusted as measured" in verdict
    assert "dpd: summary-lost at concurrency 16" in verdict
    assert "aggregated: unchecked at concurrency 8, concurrency 16, concurrency 32" in verdict
    assert "<h2>DPD against the aggregated twin</h2>" in page
    assert "<td>no interval (one run; --repeat 2 or more)" in page


def test_the_page_is_the_same_bytes_every_time(tmp_path: Path, healthy: tuple[Path, str]) -> None:
    _, page = healthy
    assert _page(tmp_path, "again", "--results-dir", str(DOC_RUN / "dpd")) == page


# the router's buckets coarser around the stub's 500 ms TTFT than the run's: 250 ms to 1 s in one bucket
COARSE_BUCKETS = {0.1, 0.25, 1.0, 2.5, float("inf")}


def test_a_quantile_the_histogram_cannot_decide_is_said_beside_the_verdict(tmp_path: Path) -> None:
    """Audit B14: a server histogram too coarse to place the client's p99 overhead over its bound or within it (vLLM's
    250 ms buckets at the audit's 4,352 tokens; here a 750 ms bucket at the stub's 500 ms). Before, a note in the
    text alone; now the page's verdict says which levels are undecided and why, and the recorded run at its own fine
    buckets says nothing of it."""
    folder = tmp_path / "dpd"
    shutil.copytree(DOC_RUN / "dpd", folder)
    counters = folder / PROOF_FILE
    document = json.loads(counters.read_text(encoding="utf-8"))
    for pods in document["windows"].values():
        for sample in pods.values():
            for key in [k for k in sample if k.startswith(BUCKET) and float(k.removeprefix(BUCKET)) not in
                        COARSE_BUCKETS]:
                del sample[key]
    counters.write_text(json.dumps(document), encoding="utf-8")
    page = _page(tmp_path, "report", "--results-dir", str(folder))
    verdict = page[page.index('class="verdict'):page.index("</section>")]
    assert "Undecided, not excluded" in verdict
    undecided = re.findall(r"<li>dpd: (concurrency \d+): the client&#x27;s TTFT (p\d+) added between", verdict)
    print(f"undecided at coarse buckets: {undecided}")
    assert ("concurrency 8", "p99") in undecided
    assert "Undecided" not in _page(tmp_path, "fine", "--results-dir", str(DOC_RUN / "dpd"))

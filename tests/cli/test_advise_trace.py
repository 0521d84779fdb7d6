"""``advise --trace``, ``plan --trace``, ``--autoscale`` and ``--report-dir`` end to end on generated traces.

The specs pin both roles' capacities (so the sizing needs no AIConfigurator run: its law is checked against the
pinned number); the emulation runs the advisor's queueing model, so these tests need the ``advisor`` extra.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from support import SLO_WORKSPACE, write_spec

from hyperpod_dpd.advisor.day_report import DAY_PNG
from hyperpod_dpd.cli import main
from hyperpod_dpd.report_page import HTML_FILE, JSON_FILE, read_embedded
from hyperpod_dpd.traces import Lengths, generate, write_mooncake

pytestmark = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator") is None, reason="needs the advisor extra")

PREFILL_CAPACITY = 19_000.0
DECODE_CAPACITY = 2_300.0
PRICE = 10.0
SLO = ("metrics:\n  enabled: true\n", f"metrics:\n  enabled: true\n  amp_workspace_url: {SLO_WORKSPACE}\n"
       "slo:\n  ttft_ms: 2000\n  tpot_ms: 50\n")
PINNED = (("prefill:\n  replicas: 1\n", "prefill:\n  replicas: 1\n  autoscaling:\n    max_replicas: 4\n    slo:\n"
           f"      capacity_tokens_per_s: {PREFILL_CAPACITY}\n"),
          ("decode:\n  replicas: 1\n", "decode:\n  replicas: 1\n  autoscaling:\n    max_replicas: 1\n    slo:\n"
           f"      capacity_tokens_per_s: {DECODE_CAPACITY}\n"), SLO)
ISL, OSL = 4096, 256  # every prompt at the default routing.threshold: every request reaches a prefiller
BUSY_OSL = 128  # 10 requests/s x 128 = 1,280 output tokens/s: within one decoder's 2,070 target


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Specs and generated traces, written once: 40-minute Poisson traces of fixed lengths, steady (1/s), busy
    (10/s: three prefillers, one decoder) and heavy (12/s: three prefillers, two decoders)."""
    folder = tmp_path_factory.mktemp("advise-trace")
    pinned = Path(write_spec(folder, *PINNED))
    pinned = pinned.rename(folder / "pinned.yaml")
    plain = Path(write_spec(folder, SLO)).rename(folder / "plain.yaml")
    found = {"pinned": pinned, "plain": plain}
    for name, rate, osl in (("steady", 1.0, OSL), ("heavy", 12.0, OSL), ("busy", 10.0, BUSY_OSL)):
        trace = generate("poisson", rate_per_s=rate, duration_s=2400, seed=7, input_tokens=Lengths(mean=ISL),
                         output_tokens=Lengths(mean=osl))
        write_mooncake(trace, folder / f"{name}.jsonl")
        found[name] = folder / f"{name}.jsonl"
    (folder / "one.jsonl").write_text('{"timestamp": 0, "input_length": 5000, "output_length": 20}\n')
    found["one"] = folder / "one.jsonl"
    return found


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as done:  # argparse refuses an option's value before the command runs
        code = int(done.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def busy_autoscaled(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``advise --trace busy --autoscale --report-dir --json`` once (capsys is per test: captured by hand)."""
    folder = tmp_path_factory.mktemp("report")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["advise", str(files["pinned"]), "--trace", str(files["busy"]), "--autoscale", "--json",
                     "--price-per-node-hour", str(PRICE), "--report-dir", str(folder)])
    return {"code": code, "data": json.loads(out.getvalue()), "err": err.getvalue(), "folder": folder}


def test_advise_trace_sizes_each_window_as_demand_over_one_replica_target(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "advise", files["pinned"], "--trace", files["steady"], "--json",
                        "--price-per-node-hour", PRICE)
    assert code in (0, 1)
    data = json.loads(out)
    windows = data["trace"]["windows"]
    prefill, decode = data["roles"]["prefill"], data["roles"]["decode"]
    # the compiled demand target: floor(capacity x utilisation 0.9)
    assert prefill["target_tokens_per_s"] == math.floor(PREFILL_CAPACITY * 0.9)
    assert decode["target_tokens_per_s"] == math.floor(DECODE_CAPACITY * 0.9)
    for role, per_request in ((prefill, ISL), (decode, OSL)):
        expected = [max(1, math.ceil(w["requests"] * per_request / 300 / role["target_tokens_per_s"]))
                    for w in windows]
        assert role["needed"] == expected
    assert data["fixed_nodes"] == 2 and data["fixed_usd_per_day"] == 2 * 24 * PRICE
    # one node per replica (TP8 on 8 GPUs), priced window by window and scaled to a day
    node_hours = sum(prefill["needed"]) * 300 / 3600 + sum(decode["needed"]) * 300 / 3600
    assert data["usd_per_day"] == pytest.approx(node_hours * PRICE * 86_400 / (len(windows) * 300), abs=0.01)
    fixed = data["fixed"]
    assert [fixed["roles"][r]["peak_replicas"] for r in ("prefill", "decode")] == [1, 1]
    assert 0 <= fixed["slo_attainment"] <= 1 and "autoscaled" not in data


def test_advise_trace_text_names_the_peak_the_sizing_the_cost_and_the_attainment(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "advise", files["pinned"], "--trace", files["steady"], "--window", "600")
    assert code in (0, 1)
    assert f"trace: {files['steady']} (Mooncake JSONL" in out
    assert "windows of 600 s" in out and "p99 window" in out and "prefix reuse:" in out
    assert "replicas each role needs per 600 s window" in out
    assert "capacity: pinned in the spec (autoscaling.slo.capacity_tokens_per_s)" in out
    assert "per day for the layout you wrote (2 nodes)" in out
    assert "the layout you wrote (prefill 1, decode 1), emulated: SLO met for " in out


def test_busy_traffic_needs_more_prefillers_and_the_autoscaled_day_adds_them(busy_autoscaled: dict[str, Any]) -> None:
    data = busy_autoscaled["data"]
    # 10 requests/s x 4,096 tokens = 40,960 prompt tokens/s over a 17,100 target: 3 prefillers
    assert data["roles"]["prefill"]["max_replicas"] == 3
    auto = data["autoscaled"]
    assert auto["scaling_note"] is None  # the spec's own SLO autoscaling
    assert auto["roles"]["prefill"]["autoscaled"] and auto["roles"]["prefill"]["peak_replicas"] >= 3
    assert auto["roles"]["decode"]["peak_replicas"] == 1  # one decode deployment
    assert auto["slo_attainment"] > data["fixed"]["slo_attainment"]
    assert auto["usd_per_day"] > data["fixed"]["usd_per_day"]


def test_the_report_draws_the_emulated_day_it_was_given(busy_autoscaled: dict[str, Any]) -> None:
    folder, data = busy_autoscaled["folder"], busy_autoscaled["data"]["autoscaled"]
    page = (folder / HTML_FILE).read_text()
    figure = read_embedded(page)
    assert figure["replicas"]["prefill"] == data["roles"]["prefill"]["ready"]
    assert figure["replicas"]["decode"] == data["roles"]["decode"]["ready"]
    assert figure["arrivals_per_s"] == data["series"]["arrivals_per_s"]
    # report.json's series hold seconds to 4 decimals (0.1 ms), the figure milliseconds to 3: they agree within half
    # of the coarser rounding
    for key in ("ttft_p90", "tpot_p90"):
        drawn, listed = figure[f"{key}_ms"], data["series"][f"{key}_s"]
        assert [v is None for v in drawn] == [v is None for v in listed]
        assert [v for v in drawn if v is not None] == pytest.approx(
            [v * 1000 for v in listed if v is not None], abs=0.051)
    assert figure["slo"] == {"ttft_p90_ms": 2000.0, "tpot_p90_ms": 50.0}
    assert figure["autoscaled"] == ["decode", "prefill"]
    assert json.loads((folder / JSON_FILE).read_text())["figures"] == figure
    if importlib.util.find_spec("matplotlib") is not None:
        assert (folder / DAY_PNG).read_bytes().startswith(b"\x89PNG")
        assert page.count("<svg") == 1
    assert "report.html" in busy_autoscaled["err"]


def test_without_matplotlib_the_report_keeps_the_numbers_and_names_the_extra(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, _ = _run(capsys, "advise", files["pinned"], "--trace", files["one"], "--report-dir", tmp_path)
    assert code in (0, 1)
    page = (tmp_path / HTML_FILE).read_text()
    assert "pip install &#x27;.[bench]&#x27; in the hyperpod-dpd checkout" in page and not (tmp_path / DAY_PNG).exists()
    assert read_embedded(page)["replicas"] == {"prefill": [1], "decode": [1]}


def test_a_spec_without_slo_autoscaling_is_emulated_with_the_compiled_default_and_says_so(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.advisor import trace_advice
    from hyperpod_dpd.scaling import RoleCapacity

    pinned = {"prefill": RoleCapacity(tokens_per_s=PREFILL_CAPACITY, source="test"),
              "decode": RoleCapacity(tokens_per_s=DECODE_CAPACITY, source="test")}
    monkeypatch.setattr(trace_advice, "capacities", lambda spec, factors=None: pinned)  # the advisor's bisection
    code, out, _ = _run(capsys, "advise", files["plain"], "--trace", files["one"], "--autoscale")
    assert code in (0, 1)
    assert "note: the spec has no SLO autoscaling: emulated with the compiled default (autoscaling: {slo: true} on " \
           "both roles, min_replicas 1, max_replicas 5)" in out
    assert "prefill: 1..5 replicas" in out and "decode: 1..1 replicas" in out


def test_plan_trace_prints_the_replicas_a_day_needs_and_the_compiled_autoscaling(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)  # pinned: no advisor needed
    code, out, _ = _run(capsys, "plan", files["pinned"], "--trace", files["heavy"], "--json")
    assert code == 0
    data = json.loads(out)["trace"]
    assert [data["roles"][r]["max_replicas"] for r in ("prefill", "decode")] == [3, 2]
    assert data["roles"]["decode"]["over_operator_cap"] and data["autoscaling"]["decode"]["max_replicas"] == 1
    assert data["autoscaling"]["prefill"]["triggers"][0]["target"] == math.floor(PREFILL_CAPACITY * 0.9)
    code, out, _ = _run(capsys, "plan", files["pinned"], "--trace", files["heavy"])
    assert code == 0 and "SLO autoscaling for this traffic" in out and "decode needs up to 2 decoders" in out


def test_plan_trace_without_the_advisor_names_the_extra(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)
    code, _, err = _run(capsys, "plan", files["plain"], "--trace", files["one"])
    assert code == 2
    assert "prefill.autoscaling.slo.capacity_tokens_per_s" in err
    assert "pip install '.[advisor]' in the hyperpod-dpd checkout" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("argv", "message"), [
    (("--trace", "missing.jsonl"), "missing.jsonl: no such trace file"),
    (("--trace", "{steady}", "--trace-format", "azure"), "Azure LLM inference CSV trace"),
    (("--trace", "{steady}", "--window", "0"), "must be a finite number of seconds, more than 0"),
    (("--trace", "{steady}", "--window", "nan"), "must be a finite number of seconds, more than 0"),
    (("--trace", "{steady}", "--window", "1e-5"), "must be at least 0.001 s"),
    (("--trace", "{steady}", "--isl", "4096"), "--isl does not apply with --trace"),
    (("--trace", "{steady}", "--search"), "--search does not apply with --trace"),
    (("--autoscale",), "--autoscale needs --trace FILE"),
    (("--replay", "r.json", "--isl", "1", "--osl", "1", "--request-rate", "1"), "--replay needs --trace FILE"),
    (("--window", "60", "--isl", "1", "--osl", "1", "--request-rate", "1"), "--window needs --trace FILE"),
    ((), "advise needs --isl, --osl, --concurrency or --request-rate"),
    (("--isl", "1024"), "advise needs --osl, --concurrency or --request-rate"),
])
def test_bad_trace_input_is_a_clear_refusal(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                            argv: tuple[str, ...], message: str) -> None:
    code, _, err = _run(capsys, "advise", files["pinned"], *(a.format(**files) for a in argv))
    assert code == 2 and message in err and "Traceback" not in err


def test_a_spec_without_slo_targets_is_refused_naming_the_field(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "advise", write_spec(tmp_path), "--trace", files["one"])
    assert code == 2 and "slo.ttft_ms" in err and "slo.tpot_ms" in err and "Traceback" not in err


def test_one_request_and_a_window_longer_than_the_trace_are_one_window(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "advise", files["pinned"], "--trace", files["one"], "--window", "86400", "--json")
    assert code in (0, 1)
    data = json.loads(out)
    assert len(data["trace"]["windows"]) == 1 and data["roles"]["prefill"]["needed"] == [1]
    assert data["fixed"]["requests"] == 1


def _replay_file(folder: Path, *, speedup: float, windows: list[dict[str, Any]]) -> Path:
    """A ``bench --trace --json`` result of the fields the comparison reads (``benchmark/replay/replay_proof.py``)."""
    path = folder / "replay.json"
    path.write_text(json.dumps({"endpoint": "dpd-test", "replay": {"source": "steady", "speedup": speedup,
                                                                   "window_s": 300.0}, "windows": windows}))
    return path


def test_replay_puts_the_emulated_windows_beside_the_measured_ones_at_the_replays_pace(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.traces import read_trace

    speedup = 2.0
    windows = [{"window_start_s": 300.0 * i, "window_s": 300.0, "arrivals_per_s": 2.0, "ttft_p90_s": 0.5,
                "tpot_p90_s": None if i == 1 else 0.02} for i in range(3)]
    replay = _replay_file(tmp_path, speedup=speedup, windows=windows)
    code, out, _ = _run(capsys, "advise", files["pinned"], "--trace", files["steady"], "--replay", replay, "--json")
    assert code in (0, 1)
    found = json.loads(out)["replay"]
    assert found["speedup"] == speedup and found["day"] == "the layout you wrote" and len(found["windows"]) == 3
    arrivals = [r.at_s / speedup for r in read_trace(files["steady"]).requests]
    for i, row in enumerate(found["windows"]):
        inside = sum(300 * i <= t < 300 * (i + 1) for t in arrivals)
        # the emulator's 15 s steps tile the window exactly, so the mean of their rates is the window's count / 300
        assert row["emulated_arrivals_per_s"] == pytest.approx(inside / 300, abs=1e-4)
        assert row["ttft_error"] == pytest.approx(row["emulated_ttft_p90_s"] / 0.5 - 1, abs=1e-3)
    assert found["windows"][1]["tpot_error"] is None and found["windows"][0]["tpot_error"] is not None
    code, out, _ = _run(capsys, "advise", files["pinned"], "--trace", files["steady"], "--replay", replay)
    assert "beside the replay" in out and "median |error|: TTFT " in out


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "cannot read it as JSON"),
    ('{"replay": {"speedup": 1}, "windows": []}', "replay, windows: are missing or empty"),
    ('{"replay": {"speedup": 0}, "windows": [{}]}', "replay.speedup"),
    ('{"replay": {"speedup": 1}, "windows": [{"window_start_s": 0, "window_s": 300}]}',
     "windows[0].arrivals_per_s"),
    ('{"replay": {"speedup": 1}, "windows": [{"window_start_s": 0, "window_s": 300, "arrivals_per_s": 1, '
     '"ttft_p90_s": "fast"}]}', "windows[0].ttft_p90_s"),
])
def test_a_replay_file_of_another_shape_is_refused_naming_the_field(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
        message: str) -> None:
    path = tmp_path / "replay.json"
    path.write_text(content)
    code, _, err = _run(capsys, "advise", files["pinned"], "--trace", files["one"], "--replay", path)
    assert code == 2 and message in err and "Traceback" not in err

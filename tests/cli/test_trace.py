"""``hyperpod-dpd trace summary`` and ``trace generate``: the figures, the files, and bad input as exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import write_spec

from hyperpod_dpd.cli import main
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.traces import read_trace

AZURE = Path(__file__).parents[1] / "traces" / "data" / "azure_conv_sample.csv"


def test_generate_writes_mooncake_that_summary_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "shared-prefix", "--rate", "2", "--duration", "600", "--seed", "3",
                 "--lengths", "fixed", "--isl", "2048", "--osl", "64", "-o", str(out)]) == 0
    assert "wrote " in capsys.readouterr().err
    trace = read_trace(out)
    assert {r.input_tokens for r in trace.requests} == {2048} and trace.block_tokens == 512
    assert main(["trace", "summary", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == len(trace.requests) and 0 < data["prefix_reuse"] < 0.5  # 2 of 4 blocks at most
    assert data["routing_threshold"] is None and data["prefilled_share"] == 1.0


def test_summary_with_a_spec_counts_only_prompts_at_or_above_its_threshold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    threshold = default_spec().routing.threshold
    spec = write_spec(tmp_path)
    assert main(["trace", "summary", str(AZURE), "--spec", spec, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    prompts = [374, 396, 91, 1200]
    assert data["routing_threshold"] == threshold
    assert data["prefilled_share"] == pytest.approx(sum(p >= threshold for p in prompts) / 4)


def test_summary_text_names_the_source_the_rates_and_the_busiest_windows(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "summary", str(AZURE), "--window", "60"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"trace: {AZURE} (Azure LLM inference CSV: 4 requests read, 1 skipped")
    assert "4 requests over 61.0 s; windows of 60 s" in out
    assert "arrivals/s: mean 0.033, p99 window 0.050, peak window 0.050" in out  # [3, 1]: p99 2.98 / 60
    assert "prefix reuse: - (the trace has no prefix hashes" in out
    assert "from first arrival  requests  requests/s  prefill tok/s  decode tok/s" in out
    assert "00:00:00                   3       0.050" in out


def test_generate_to_standard_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "generate", "poisson", "--duration", "30", "-o", "-"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["timestamp"] == 0 and all({"timestamp", "input_length", "output_length"} <= set(r) for r in rows)


@pytest.mark.parametrize(("argv", "message"), [
    (["trace", "summary", "missing.jsonl"], "missing.jsonl: no such trace file"),
    (["trace", "generate", "bursty", "--burst-cv", "0.5", "-o", "-"], "burst_cv: must be above 1"),
    (["trace", "generate", "poisson", "--rate", "1000", "--duration", "86400", "-o", "-"], "over 5,000,000"),
    (["trace", "generate", "poisson", "--rate", "1e-300", "-o", "t.jsonl"], "drew no request"),
    (["trace", "generate", "poisson", "--rate", "1e-306", "--duration", "1e307", "-o", "-"], "is over ten years"),
    (["trace", "summary", str(AZURE), "--window", "1e-320", "--json"], "window: must be at least 0.001 s"),
])
def test_bad_input_is_one_message_and_status_2(argv: list[str], message: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_bad_row_is_status_2_with_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": -1}\n')
    assert main(["trace", "summary", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"invalid Mooncake JSONL trace in {bad} (1 problem)" in err and "line 2: input_length: is negative" in err


def test_argparse_refuses_an_unknown_kind_and_a_zero_window(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["trace", "generate", "steady", "-o", "-"], ["trace", "summary", str(AZURE), "--window", "0"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
    assert "invalid choice: 'steady'" in capsys.readouterr().err


def test_shared_blocks_are_taken_by_shared_prefix_without_prefix_groups(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "shared-prefix", "--shared-blocks", "3", "--lengths", "fixed", "--isl", "2048",
                 "--duration", "60", "-o", str(out)]) == 0
    assert "8 prefix groups of 3 blocks" in capsys.readouterr().err
    firsts = {tuple(r.prefix_blocks[:3]) for r in read_trace(out).requests}
    assert firsts <= {tuple(range(g * 3, g * 3 + 3)) for g in range(8)}  # the 8 groups' three shared blocks


def test_a_trace_shorter_than_one_window_is_said_to_read_low(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "t.jsonl"
    short.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n'
                     '{"timestamp": 5000, "input_length": 5, "output_length": 1}\n')
    assert main(["trace", "summary", str(short)]) == 0
    assert ("warning: the trace spans 5 s, less than one 300 s window, so its rates per window read low; give "
            "--window 5 or less") in capsys.readouterr().err
    assert main(["trace", "summary", str(short), "--window", "5"]) == 0
    assert "read low" not in capsys.readouterr().err

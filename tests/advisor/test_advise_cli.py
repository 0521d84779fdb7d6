"""``hyperpod-dpd advise``, run in-process: every mode, its exit codes and its messages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import write_spec
from syrupy.assertion import SnapshotAssertion

from hyperpod_dpd.cli import main
from hyperpod_dpd.loading import load_spec
from hyperpod_dpd.validation import check

BLOG = ["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32"]


def test_blog_comparison_table(capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion) -> None:
    assert main([*BLOG, "--baseline-nodes", "1"]) == 0
    out = capsys.readouterr().out
    assert out == snapshot
    assert "concurrency 32" in out and "on 16 GPUs against 8" in out
    assert "aiconfigurator: 0.12.0" in out and "confirm it on the cluster" in out


def test_json_is_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BLOG, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["concurrency"] for p in data["points"]] == [8, 16, 32]
    for point in data["points"]:
        for side in ("aggregated", "disaggregated"):
            assert {"ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "gpus"} <= set(point[side])
            assert point[side]["gpus"] == 16
    assert data["assumptions"]["database_mode"].startswith("SILICON")


def test_request_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--isl", "4096", "--osl", "256", "--request-rate", "2"]) == 0
    assert "2 requests/s (" in capsys.readouterr().out


def test_missed_sla_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BLOG, "--ttft-ms", "1000"]) == 1
    captured = capsys.readouterr()
    assert "!! disaggregated misses the TTFT target" in captured.out
    assert "misses the SLA" in captured.err


def test_search_writes_a_spec_that_passes_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "best.yaml"
    code = main(["advise", "--isl", "8192", "--osl", "512", "--concurrency", "64", "--ttft-ms", "2000",
                 "--tpot-ms", "30", "--search", "--write-spec", str(out_file)])
    assert code == 0
    captured = capsys.readouterr()
    assert "DPD layouts meeting TTFT <= 2000 ms and TPOT <= 30 ms at concurrency 64" in captured.out
    assert f"wrote the best layout to {out_file}" in captured.err
    written = check(load_spec(str(out_file))).spec
    assert written.name == "dpd-test"
    assert written.decode.max_num_seqs is not None and written.prefill.max_num_seqs is not None
    assert main(["validate", str(out_file)]) == 0


def test_unwritable_spec_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing-folder" / "best.yaml"
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "16", "--tpot-ms", "20", "--search",
                 "--write-spec", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {target}" in err and "Traceback" not in err


def test_search_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "16", "--tpot-ms", "20", "--search",
                 "--json", "--top", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["best"]) == 2
    assert data["best"][0]["estimate"]["tpot_s"] <= 0.020
    assert data["best"][0]["nodes"] <= data["best"][1]["nodes"]


def test_unmeetable_sla_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "32", "--tpot-ms", "3",
                 "--search"]) == 1
    err = capsys.readouterr().err
    assert "no DPD layout of up to 8 nodes meets TPOT <= 3 ms" in err
    assert "Traceback" not in err


def test_unsupported_model_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ("  name: Llama-3.3-70B-Instruct\n",
                                 "  name: Qwen2.5-72B-Instruct\n  architecture: qwen2.5-72b\n"))
    assert main(["advise", spec, "--isl", "4096", "--osl", "256", "--concurrency", "8"]) == 2
    err = capsys.readouterr().err
    assert "model.architecture: has no model in AIConfigurator's database" in err
    assert "(got 'qwen2.5-72b')" in err


def test_unsupported_instance_type_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ("instance_type: ml.p5.48xlarge", "instance_type: ml.g6e.48xlarge"))
    assert main(["advise", spec, "--isl", "4096", "--osl", "256", "--concurrency", "8"]) == 2
    err = capsys.readouterr().err
    assert "instance_type" in err and "ml.g6e.48xlarge" in err


def test_missing_extra_exits_2_and_names_it(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator.cli.api", None)  # makes the import fail as if not installed
    assert main([*BLOG]) == 2
    err = capsys.readouterr().err
    assert "pip install 'hyperpod-dpd[advisor]'" in err
    assert "Traceback" not in err


def test_the_command_registers_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator", None)
    monkeypatch.setitem(sys.modules, "aiconfigurator.cli.api", None)
    with pytest.raises(SystemExit) as caught:
        main(["advise", "--help"])
    assert caught.value.code == 0


@pytest.mark.parametrize(("argv", "message"), [
    (["--isl", "0", "--osl", "256", "--concurrency", "8"], "traffic.isl: must be a whole number of tokens"),
    (["--isl", "16000", "--osl", "1000", "--concurrency", "8"], "exceeds the spec's max_model_len 16384"),
    (["--isl", "4096", "--osl", "256", "--concurrency", "0"], "traffic.concurrency"),
    (["--isl", "4096", "--osl", "256", "--request-rate", "-1"], "traffic.request_rate"),
    (["--isl", "4096", "--osl", "256", "--concurrency", "8", "--write-spec", "x.yaml"], "--write-spec needs --search"),
    (["--isl", "4096", "--osl", "256", "--concurrency", "8", "--top", "2"], "--top needs --search"),
    (["--isl", "4096", "--osl", "256", "--concurrency", "8", "--baseline-nodes", "1", "--search", "--ttft-ms", "9"],
     "--baseline-nodes applies to the comparison"),
    (["--isl", "4096", "--osl", "256", "--concurrency", "8,16", "--ttft-ms", "900", "--search"],
     "the search takes exactly one load point"),
    (["--isl", "4096", "--osl", "256", "--concurrency", "8", "--search"], "the search needs an SLA"),
])
def test_bad_traffic_exits_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ["--isl", "many", "--osl", "256", "--concurrency", "8"],
    ["--isl", "4096", "--osl", "256", "--concurrency", "8,x"],
    ["--isl", "4096", "--osl", "256", "--concurrency", "8", "--request-rate", "1"],
    ["--isl", "4096", "--osl", "256"],
])
def test_malformed_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["advise", *argv])
    assert caught.value.code == 2
    assert "usage: hyperpod-dpd advise" in capsys.readouterr().err

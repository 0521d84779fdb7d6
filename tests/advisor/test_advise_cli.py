"""``hyperpod-dpd advise``, run in-process: every mode, its exit codes and its messages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from support import write_spec
from syrupy.assertion import SnapshotAssertion

from hyperpod_dpd.cli import main
from hyperpod_dpd.spec.defaults import default_spec_text
from hyperpod_dpd.spec.loading import load_spec
from hyperpod_dpd.validation import check

BLOG = ["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32"]


def test_blog_comparison_table(capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion) -> None:
    assert main([*BLOG, "--baseline-nodes", "1"]) == 0
    out = capsys.readouterr().out
    assert out == snapshot
    assert "concurrency 32" in out and "on 2 nodes against 1" in out and "$/M tok" in out
    assert "the DPD images run vLLM 0.19.0" in out and "measured on vllm 0.24.0" in out
    assert "aiconfigurator: 0.12.0" in out and "confirm it on the cluster" in out
    assert out.count("not a benchmark") == 1  # once, as the closing sentence; not also among the assumptions


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


SEARCH = ["advise", "--isl", "8192", "--osl", "512", "--concurrency", "64", "--ttft-ms", "2000", "--tpot-ms", "30",
          "--search"]


def test_write_spec_dash_prints_only_the_spec_on_standard_output(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``advise ... --search --write-spec - > my-spec.yaml`` yields a spec that validate accepts."""
    assert main([*SEARCH, "--write-spec", str(tmp_path / "file.yaml")]) == 0
    capsys.readouterr()
    assert main([*SEARCH, "--write-spec", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (tmp_path / "file.yaml").read_text(encoding="utf-8")  # the spec, and nothing else
    assert "DPD layouts meeting TTFT <= 2000 ms and TPOT <= 30 ms at concurrency 64" in captured.err
    assert captured.err.rstrip("\n").endswith("wrote the best layout to standard output")
    redirected = tmp_path / "my-spec.yaml"
    redirected.write_text(captured.out, encoding="utf-8")
    assert main(["validate", str(redirected)]) == 0
    assert not (Path.cwd() / "-").exists()


def test_write_spec_dash_with_json_sends_the_json_to_standard_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SEARCH, "--write-spec", "-", "--json"]) == 0
    captured = capsys.readouterr()
    spec = yaml.safe_load(captured.out)
    assert spec["name"] == "dpd-test" and "best" not in spec
    start = captured.err.index("{\n")  # after any warnings about the written spec
    report = captured.err[start:captured.err.rindex("}") + 1]
    assert json.loads(report)["best"][0]["nodes"] >= 2


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
                                 "  name: Mixtral-8x7B-Instruct-v0.1\n  architecture: mixtral-8x7b\n"))
    assert main(["advise", spec, "--isl", "4096", "--osl", "256", "--concurrency", "8"]) == 2
    err = capsys.readouterr().err
    assert "model.architecture: is a mixture-of-experts model" in err
    assert "(got 'mixtral-8x7b')" in err


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
    assert "pip install '.[advisor]' in the hyperpod-dpd checkout" in err
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
])
def test_malformed_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["advise", *argv])
    assert caught.value.code == 2
    assert "usage: hyperpod-dpd advise" in capsys.readouterr().err


def test_no_load_point_and_no_trace_exit_2_naming_both(capsys: pytest.CaptureFixture[str]) -> None:
    """--isl/--osl and a load point are required unless --trace gives the traffic."""
    assert main(["advise", "--isl", "4096", "--osl", "256"]) == 2
    assert "advise needs --concurrency or --request-rate (the traffic to predict), or --trace FILE" in \
        capsys.readouterr().err


def test_json_has_nodes_and_dollars_for_both_layouts(capsys: pytest.CaptureFixture[str]) -> None:
    """F4: whole nodes and money at every point; the default baseline is equal in nodes."""
    assert main([*BLOG, "--json", "--price-per-node-hour", "100"]) == 0
    data = json.loads(capsys.readouterr().out)
    for point in data["points"]:
        for side in ("aggregated", "disaggregated"):
            figures = point[side]
            assert figures["nodes"] == 2 and figures["usd_per_hour"] == 200.0
            expected = 200.0 / (figures["output_tokens_per_s"] * 3600) * 1e6
            assert figures["usd_per_million_output_tokens"] == pytest.approx(expected, rel=1e-3)
            assert figures["ttft_p90_s"] >= figures["ttft_s"]
    assert data["assumptions"]["cost"] == "$100.00 per node-hour (your rate: --price-per-node-hour)"
    assert data["price"]["kind"] == "user" and data["price"]["usd_per_node_hour"] == 100.0


def test_partial_node_layout_is_costed_on_whole_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """F4: a TP4 layout of one pod per role occupies two nodes (role_nodes), and is paid as two."""
    spec = write_spec(tmp_path, ("tensor_parallel_size: 8", "tensor_parallel_size: 4"))
    assert main(["advise", str(spec), "--isl", "4096", "--osl", "256", "--concurrency", "8", "--json"]) == 0
    (point,) = json.loads(capsys.readouterr().out)["points"]
    assert point["disaggregated"]["nodes"] == 2 and point["disaggregated"]["gpus_used"] == 8
    assert point["disaggregated"]["gpus"] == 16
    assert point["aggregated"]["nodes"] == 2


def test_fp8_engine_flags_change_the_estimate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """F5: FP8 weights and KV cache reach AIConfigurator; the output differs from BF16 and says so."""
    assert main([*BLOG, "--json"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    spec = write_spec(tmp_path, ("max_model_len: 16384", "max_model_len: 16384\nargs: [--quantization, fp8, "
                                 "--kv-cache-dtype, fp8, --max-num-batched-tokens, '2048']"))
    assert main(["advise", str(spec), "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32", "--json"]) == 0
    fp8 = json.loads(capsys.readouterr().out)
    assert fp8["assumptions"]["engine"] == "weights fp8, KV cache fp8, max_num_batched_tokens 2,048"
    faster = [f["disaggregated"]["tpot_s"] < b["disaggregated"]["tpot_s"]
              for f, b in zip(fp8["points"], bf16["points"], strict=True)]
    assert all(faster)


def test_flags_the_advisor_cannot_model_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ("max_model_len: 16384", "max_model_len: 16384\nargs: [--speculative-config, "
                                 "'{\"method\": \"ngram\"}']"))
    assert main(["advise", str(spec), "--isl", "4096", "--osl", "256", "--concurrency", "8"]) == 2
    err = capsys.readouterr().err
    assert "--speculative-config" in err and "cannot show" in err and "Traceback" not in err


def test_write_spec_refuses_a_layout_the_operator_does_not_run(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8", "--any-layout"]) == 2
    assert "--any-layout needs --search" in capsys.readouterr().err


def test_search_json_without_a_layout_still_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    """F12: --search --json answered nothing on stdout when no layout met the SLA."""
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "32", "--tpot-ms", "3", "--search",
                 "--json", "--max-nodes", "3"]) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["best"] == [] and data["closest"]["runnable_by_operator"]
    assert "no DPD layout of up to 3 nodes" in data["message"] and "Relax the SLA" in captured.err


def test_a_prefill_bound_winner_is_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    """With only a TPOT target the search can pick a layout whose prompts queue for seconds (audit, section 4)."""
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "64", "--tpot-ms", "15", "--search",
                 "--json", "--top", "1"]) == 0
    (best,) = json.loads(capsys.readouterr().out)["best"]
    assert best["estimate"]["queue_s"] > 1.0
    assert any(w.startswith("[prefill-bound]") for w in best["warnings"])


def test_a_request_rate_search_writes_a_spec_that_raises_none_of_our_warnings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Sized at the requests in flight at that rate (plus Poisson headroom), not the KV room of 238."""
    out = tmp_path / "best.yaml"
    assert main(["advise", "--isl", "4096", "--osl", "256", "--request-rate", "6", "--ttft-ms", "2000",
                 "--tpot-ms", "20", "--search", "--write-spec", str(out)]) == 0
    assert "warning" not in capsys.readouterr().err
    written = check(load_spec(str(out)))
    assert written.warnings == ()
    assert written.spec.decode.max_num_seqs is not None and 20 < written.spec.decode.max_num_seqs <= 40


@pytest.mark.parametrize("same", ["the path", "another spelling"])
def test_write_spec_refuses_to_replace_the_spec_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str], same: str) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "ow.yaml"
    text = "# my notes on this layout\n" + default_spec_text()
    spec.write_text(text)
    target = str(spec) if same == "the path" else "./ow.yaml"
    assert main([*SEARCH, str(spec), "--write-spec", target]) == 2
    err = capsys.readouterr().err
    assert f"--write-spec: {target} is the spec being read" in err
    assert f"Fix: write it beside the spec (--write-spec {tmp_path / 'ow.best.yaml'})" in err
    assert spec.read_text() == text  # comments and all

"""``hyperpod-dpd observe``: files for your own Prometheus and Grafana, and clean errors with exit status 2."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.cli import main
from hyperpod_dpd.spec.defaults import default_spec_text


def test_observe_writes_rules_and_dashboard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "obs"
    assert main(["observe", "--output-dir", str(out)]) == 0
    rules, dashboard = out / "default-dpd-test.rules.yaml", out / "default-dpd-test.dashboard.json"
    assert capsys.readouterr().out.split() == [str(rules), str(dashboard)]
    assert yaml.safe_load(rules.read_text())["groups"][0]["name"] == "dpd_default_dpd-test"
    assert json.loads(dashboard.read_text())["uid"] == "hyperpod-dpd-default-dpd-test"


def test_observe_reads_slo_and_threshold_overrides_from_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text() + "slo:\n  ttft_ms: 1500\nalerts:\n  prefill_queue: 3\n")
    assert main(["observe", str(spec), "--output-dir", str(tmp_path / "o")]) == 0
    rules = yaml.safe_load((tmp_path / "o" / "default-dpd-test.rules.yaml").read_text())["groups"][0]["rules"]
    by_name = {r["alert"]: r["expr"] for r in rules if "alert" in r}
    assert ") > 1.5)" in by_name["DpdTtftSloBreach"]
    assert "DpdTpotSloBreach" not in by_name
    assert by_name["DpdPrefillQueueDeep"].endswith("> 3")


def test_observe_refuses_bad_thresholds_naming_each_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text() + "slo:\n  ttft_ms: 2\nalerts:\n  error_ratio: 1.5\n  prefillQueue: 3\n")
    out = tmp_path / "o"
    assert main(["observe", str(spec), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "slo.ttft_ms: is below 10 ms" in err
    assert "alerts.error_ratio: is a fraction and must be in (0, 1] (got 1.5)" in err
    assert "alerts.prefillQueue: is not a known key" in err and "rename it to 'prefill_queue'" in err
    assert "error_ratio_critical" not in err  # no follow-on problem from the bad error_ratio
    assert "Traceback" not in err
    assert not out.exists()


def test_observe_without_the_extra_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    real_import = builtins.__import__

    def no_grafana(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("grafana_foundation_sdk"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_grafana)
    out = tmp_path / "o"
    assert main(["observe", "--output-dir", str(out)]) == 2
    assert "pip install '.[observability]' in the hyperpod-dpd checkout" in capsys.readouterr().err
    assert not out.exists()


def test_observe_reports_an_unwritable_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["observe", "--output-dir", str(blocker / "sub")]) == 2
    assert "cannot write to" in capsys.readouterr().err


def test_observe_output_is_byte_identical(tmp_path: Path) -> None:
    assert main(["observe", "--output-dir", str(tmp_path / "a")]) == 0
    assert main(["observe", "--output-dir", str(tmp_path / "b")]) == 0
    for name in ("default-dpd-test.rules.yaml", "default-dpd-test.dashboard.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()

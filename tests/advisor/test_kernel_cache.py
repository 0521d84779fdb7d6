"""The disk cache of AIConfigurator's step times: a repeated look-up is read back, never made again, and a cache
that cannot be used is ignored (the look-up is then made, and the figures are the same)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hyperpod_dpd.advisor import estimates, kernel_cache
from hyperpod_dpd.advisor.systems import Target


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """AIConfigurator replaced by a recorder, and the cache put in a fresh folder."""
    made: list[dict[str, Any]] = []

    def fake(target: Target, tp: int, **options: Any) -> Any:
        made.append(options)
        return SimpleNamespace(raw={"context_latency": 187.5 + options["isl"] / 1000, "tpot": 11.25,
                                    "other": "ignored"})

    monkeypatch.setattr(estimates, "_aic_call", fake)
    monkeypatch.setenv(kernel_cache.CACHE_ENV, str(tmp_path / "cache"))
    kernel_cache._OPEN.clear()
    return made


TARGET = Target(system="h100_sxm", backend="vllm", model_path="meta-llama/Meta-Llama-3.1-70B")


def test_a_repeated_look_up_is_read_back_across_processes(calls: list[dict[str, Any]]) -> None:
    first = estimates._cached_call(TARGET, 8, mode="static_ctx", isl=4096, osl=2, batch_size=1)
    kernel_cache._OPEN.clear()  # a new process: the cache is read from its file
    again = estimates._cached_call(TARGET, 8, mode="static_ctx", isl=4096, osl=2, batch_size=1)
    assert len(calls) == 1 and first.raw == again.raw == {"context_latency": 191.596, "tpot": 11.25}
    estimates._cached_call(TARGET, 8, mode="static_ctx", isl=8192, osl=2, batch_size=1)
    assert len(calls) == 2  # another look-up is its own entry


def test_a_broken_cache_file_is_ignored(calls: list[dict[str, Any]], tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    path = kernel_cache.shared()
    assert path is not None
    path.path.write_text("{not json", encoding="utf-8")
    kernel_cache._OPEN.clear()
    found = estimates._cached_call(TARGET, 8, mode="static_gen", isl=4096, osl=256, batch_size=16)
    assert found.raw["tpot"] == 11.25 and len(calls) == 1


@pytest.mark.parametrize("value", ["off", "OFF", " "])
def test_the_cache_can_be_turned_off(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kernel_cache.CACHE_ENV, value)
    assert kernel_cache.cache_dir() is None and kernel_cache.shared() is None


def test_the_default_place_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(kernel_cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kernel_cache.cache_dir() == tmp_path / "hyperpod-dpd"

"""The Linux limits the checks use are the kernel's, re-read from its UAPI headers by scripts/linux_limits.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import load_module

from hyperpod_dpd.contracts.linux import MAX_ARG_STRLEN, NAME_MAX, PATH_MAX, path_error

REPO = Path(__file__).resolve().parents[2]
script = load_module("linux_limits", REPO / "scripts" / "linux_limits.py")
SYSTEM_HEADERS = Path("/usr/include")


def _headers(tmp_path: Path, *, pages: int = 32, name_max: int = 255) -> Path:
    (tmp_path / "linux").mkdir(parents=True)
    (tmp_path / "linux" / "limits.h").write_text(f"#define NAME_MAX {name_max:>9}\n#define PATH_MAX        4096\n")
    (tmp_path / "linux" / "binfmts.h").write_text(f"#define MAX_ARG_STRLEN (PAGE_SIZE * {pages})\n")
    return tmp_path


def test_the_script_reads_the_limits_and_fails_when_the_kernel_changed_one(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert script.header_limits(_headers(tmp_path)) == {"NAME_MAX": NAME_MAX, "PATH_MAX": PATH_MAX,
                                                        "MAX_ARG_STRLEN": MAX_ARG_STRLEN}
    assert script.main([str(_headers(tmp_path / "new", pages=64))]) == 1
    assert "MAX_ARG_STRLEN: headers 262144, shipped 131072" in capsys.readouterr().out


@pytest.mark.skipif(not (SYSTEM_HEADERS / "linux" / "binfmts.h").exists(), reason="no kernel headers installed")
def test_the_installed_kernel_headers_agree() -> None:
    assert script.main([str(SYSTEM_HEADERS)]) == 0


@pytest.mark.parametrize(("text", "problem"), [
    ("models/config.json", None),
    ("a" * 255, None),
    ("a" * 256, "has a name of 256 bytes, over the 255 a Linux file name may have (NAME_MAX)"),
    ("é" * 128, "has a name of 256 bytes, over the 255"),  # counted in bytes of UTF-8
    ("a/" * 2048, "is 4096 bytes, over the 4095 a Linux path may have (PATH_MAX)"),
    ("a/" * 2047 + "a", None),  # 4095 bytes and the NUL: PATH_MAX
    ("a\x00", "contains a NUL byte, which ends a path for the kernel"),
])
def test_a_path_is_refused_where_the_kernel_would(text: str, problem: str | None) -> None:
    found = path_error(text)
    assert found == problem if problem is None else found is not None and found.startswith(problem)

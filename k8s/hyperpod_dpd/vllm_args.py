"""Reading vLLM command-line flags, so extra args can be checked against the spec they extend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# vLLM's short aliases, spelled out.
_ALIASES = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size"}


@dataclass(frozen=True)
class Flag:
    """One flag as written (``--max-num-seqs 32`` or ``--enforce-eager``), with its canonical name."""

    name: str
    value: str | None
    tokens: tuple[str, ...]


def canonical(flag: str) -> str:
    """``--gpu_memory_utilization`` and ``--gpu-memory-utilization`` are the same vLLM flag."""
    flag = _ALIASES.get(flag, flag)
    return "--" + flag.lstrip("-").replace("_", "-")


def parse_flags(args: Sequence[str]) -> tuple[list[Flag], list[str]]:
    """Split ``args`` into flags and stray tokens (a value with no flag before it)."""
    flags: list[Flag] = []
    stray: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token.startswith("-") and not _is_number(token):
            if "=" in token:
                name, value = token.split("=", 1)
                flags.append(Flag(canonical(name), value, (token,)))
                i += 1
                continue
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and (not nxt.startswith("-") or _is_number(nxt)):
                flags.append(Flag(canonical(token), nxt, (token, nxt)))
                i += 2
            else:
                flags.append(Flag(canonical(token), None, (token,)))
                i += 1
        else:
            stray.append(token)
            i += 1
    return flags, stray


def flag_values(args: Sequence[str]) -> dict[str, str | None]:
    """The last value of each flag, keyed by canonical name (vLLM lets a later flag win)."""
    flags, _ = parse_flags(args)
    return {flag.name: flag.value for flag in flags}


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True

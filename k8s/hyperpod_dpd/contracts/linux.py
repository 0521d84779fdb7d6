"""What the Linux kernel accepts for a path and for the strings a process starts with.

Each limit is the kernel's own, with the header it is defined in (``scripts/linux_limits.py``
re-reads them from a kernel's UAPI headers). A path a command is given, and the environment and
arguments a spec gives vLLM, are checked against them before any file is opened or any pod starts.
"""

from __future__ import annotations

# include/uapi/linux/limits.h: "NAME_MAX 255 /* # chars in a file name */" and
# "PATH_MAX 4096 /* # chars in a path name including nul */" (counted in bytes).
NAME_MAX = 255
PATH_MAX = 4096
# include/uapi/linux/binfmts.h: "MAX_ARG_STRLEN (PAGE_SIZE * 32)", the longest single argument or
# environment string execve() copies, its terminating NUL included (fs/exec.c copy_strings:
# strnlen_user(str, MAX_ARG_STRLEN), then valid_arg_len: len <= MAX_ARG_STRLEN); PAGE_SIZE is 4 KiB
# on x86-64 and on the arm64 kernels of EKS's AMIs. Longer, execve() fails with E2BIG
# ("argument list too long") and the container never starts.
PAGE_SIZE = 4096
MAX_ARG_STRLEN = PAGE_SIZE * 32
# fs/exec.c bprm_stack_limits: every argument and environment string, and one pointer to each, must fit
# in a quarter of the stack rlimit (capped at 3/4 of _STK_LIM); containerd and Docker start containers
# with the default 8 MiB soft stack limit, so 2 MiB in all.
DEFAULT_STACK_RLIMIT = 8 * 1024 * 1024
EXEC_STRINGS_MAX = DEFAULT_STACK_RLIMIT // 4
POINTER_BYTES = 8


def path_error(text: str) -> str | None:
    """Why no Linux call can take ``text`` as a path, or None: a NUL byte, a name or a path too long."""
    if "\x00" in text:
        return "contains a NUL byte, which ends a path for the kernel"
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 (a lone surrogate)"
    if len(encoded) >= PATH_MAX:
        return f"is {len(encoded)} bytes, over the {PATH_MAX - 1} a Linux path may have (PATH_MAX)"
    longest = max(encoded.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        return f"has a name of {len(longest)} bytes, over the {NAME_MAX} a Linux file name may have (NAME_MAX)"
    return None


def exec_string_bytes(text: str) -> int:
    """The bytes execve() copies for one argument or ``NAME=value`` string: UTF-8, and its NUL."""
    return len(text.encode("utf-8", "surrogatepass")) + 1

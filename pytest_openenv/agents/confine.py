"""Start a program that can write only inside the folders it is given (Linux Landlock).

    python -I -S confine.py --write DIR [--write DIR ...] -- PROGRAM ARG...

An agent program runs other programs (shells, editors, test runners) on a model's say, so
its episode bounds what it may change on the machine: the runner starts it through this
file, which asks the kernel to refuse every write outside the episode's folder (and the
folders named with ``--write``), then ``exec``s the program. Reads are not restricted. A
refused write fails in the program with EACCES, the way a read-only folder's would; the
restriction passes to every process the program starts and cannot be lifted by them.

The file runs as a script with nothing of the package imported (``-I -S``: a fresh
interpreter in some tens of milliseconds, before a Node agent's second of start-up), and
as a wrapper rather than a ``preexec_fn`` because the runner's process has threads (the
proxy, the MCP bridge), where code between fork and exec may deadlock.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence

# syscall numbers, the same on every Linux architecture that has Landlock
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2: renaming and linking across folders
_TRUNCATE = 1 << 14  # ABI 3
_WRITES_ABI1 = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_CHAR
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_BLOCK
    | _MAKE_SYM
)
#: what a program may still write outside its folders: the terminal and /dev/null
_DEVICE_WRITES = _WRITE_FILE
#: the devices folder every program writes to (/dev/null, /dev/tty) and shared memory,
#: which Node and browsers make files in
DEVICES, SHARED_MEMORY = "/dev", "/dev/shm"


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (not Linux, too old a
    kernel, or Landlock not enabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(
            _CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_writes(abi: int) -> int:
    """Every kind of write the kernel of ``abi`` can refuse."""
    handled = _WRITES_ABI1
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    return handled


def restrict_writes(folders: Sequence[str]) -> None:
    """From now on this process and its children write only beneath ``folders`` (and to
    devices). Raises OSError when the kernel refuses."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("this kernel has no Landlock")
    libc = _libc()
    handled = handled_writes(abi)
    ruleset = ctypes.c_uint64(handled)  # struct landlock_ruleset_attr's first field
    fd = libc.syscall(
        _CREATE_RULESET, ctypes.byref(ruleset), ctypes.c_size_t(8), ctypes.c_uint32(0)
    )
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        rules = [(folder, handled) for folder in folders]
        rules += [(DEVICES, _DEVICE_WRITES & handled), (SHARED_MEMORY, handled)]
        for folder, access in rules:
            _allow(libc, int(fd), folder, access)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(int(fd))


def _allow(libc: ctypes.CDLL, ruleset: int, folder: str, access: int) -> None:
    try:
        parent = os.open(folder, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # /dev/shm is missing on some machines: nothing there to allow
    try:
        rule = _PathBeneath(access, parent)
        done = libc.syscall(
            _ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
        if done != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {folder}")
    finally:
        os.close(parent)


def wrap(argv: Sequence[str], folders: Sequence[str]) -> list[str]:
    """``argv`` started through this file, writing only beneath ``folders``."""
    command = [sys.executable, "-I", "-S", os.path.abspath(__file__)]
    for folder in folders:
        command += ["--write", str(folder)]
    return [*command, "--", *argv]


def main(args: Sequence[str]) -> None:
    folders: list[str] = []
    rest = list(args)
    while rest and rest[0] == "--write" and len(rest) > 1:
        folders.append(rest[1])
        rest = rest[2:]
    if not rest or rest[0] != "--" or len(rest) < 2:
        sys.exit("usage: confine.py --write DIR [--write DIR ...] -- PROGRAM ARG...")
    program = rest[1:]
    try:
        restrict_writes(folders)
    except OSError as exc:
        sys.exit(f"pytest-openenv could not confine the agent's writes: {exc}")
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        sys.exit(f"pytest-openenv could not start {program[0]}: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])

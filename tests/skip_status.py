#!/usr/bin/env python3
"""Runs one test command for CTest and gives CTest its outcome by the exit
code alone (CMakeLists.txt sets SKIP_RETURN_CODE 77 on the tests it runs):

    exit 0, and a line that starts with "SKIPPED:"   -> 77: skipped
    exit 0                                           -> 0: passed
    any other exit, whatever the test printed        -> that exit (77 -> 1): failed

A test that cannot run here, in whole or in part, prints "SKIPPED: why" and
exits 0. CTest's SKIP_REGULAR_EXPRESSION, used before, reported a test whose
output matched as skipped even when it had failed: a failure hidden as a
skip. The command's output (stdout and stderr together) passes through as it
comes; the command dies with this process (a CTest timeout kills this one).

    tests/skip_status.py COMMAND [ARGS...]
"""
import ctypes
import signal
import subprocess
import sys

SKIP_EXIT = 77


def die_with_parent():
    """In the child: be killed when this process dies (Linux's PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: a timed-out test's command may outlive this process


def outcome(code, skipped):
    """The exit code CTest gets for a command that exited `code` (negative: killed by
    that signal), having printed a SKIPPED: line or not."""
    if code == 0:
        return SKIP_EXIT if skipped else 0
    if code < 0:
        return 128 - code
    return 1 if code == SKIP_EXIT else code


def main(argv):
    if not argv:
        print("skip_status.py: no command given (usage: tests/skip_status.py COMMAND [ARGS...])", file=sys.stderr)
        return 2
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 preexec_fn=die_with_parent)
    except OSError as e:
        print(f"skip_status.py: cannot run {argv[0]}: {e.strerror}", file=sys.stderr)
        return 1
    skipped = False
    for line in child.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        skipped = skipped or line.startswith(b"SKIPPED:")
    code = child.wait()
    result = outcome(code, skipped)
    if skipped and result != SKIP_EXIT:
        print(f"skip_status.py: the test printed SKIPPED but exited {code}: a failure, not a skip", flush=True)
    elif code == SKIP_EXIT:
        print(f"skip_status.py: the test exited {SKIP_EXIT} (a skip) after exit 0 is expected: a failure", flush=True)
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""What scripts/test.sh prints at its end for one stage: from the JUnit file
that `ctest --output-junit FILE` wrote, how many tests passed, skipped and
failed, every test CTest counted as skipped with its reasons (each line of
its output after "SKIPPED: ", a test that skipped only a part of itself
included), and every test that failed. A test that failed is listed as
failed, never as skipped, whatever it printed.

    scripts/ctest_summary.py PRESET JUNIT_FILE

Python 3 standard library only; a missing or unreadable file is one line, exit 2.
"""
import sys
import xml.etree.ElementTree as ET

MARK = "SKIPPED: "


def reasons(output):
    """The text after "SKIPPED: " on each line of a test's output that has it, in order."""
    found = [line.split(MARK, 1)[1].strip() for line in output.splitlines() if MARK in line]
    return list(dict.fromkeys(found)) or ["(it printed no reason)"]


def outcomes(junit):
    """(name, 'passed' | 'skipped' | 'failed', output) of each test case in the file."""
    kind = {"run": "passed", "notrun": "skipped", "disabled": "skipped", "fail": "failed"}
    for case in ET.parse(junit).getroot().iter("testcase"):
        output = case.findtext("system-out") or ""
        yield case.get("name"), kind.get(case.get("status"), "failed"), output


def summary(preset, junit):
    """The lines test.sh prints for this stage."""
    rows = list(outcomes(junit))
    count = {k: sum(1 for _, o, _ in rows if o == k) for k in ("passed", "skipped", "failed")}
    lines = [f"test.sh: {preset}: {count['passed']} passed, {count['skipped']} skipped, {count['failed']} failed"]
    lines += [f"test.sh: {preset} skipped {name}: {'; '.join(reasons(out))}" for name, o, out in rows if o == "skipped"]
    lines += [f"test.sh: {preset} FAILED {name}" for name, o, _ in rows if o == "failed"]
    return lines


def main(argv):
    if len(argv) != 2:
        print("ctest_summary.py: usage: scripts/ctest_summary.py PRESET JUNIT_FILE", file=sys.stderr)
        return 2
    try:
        lines = summary(*argv)
    except (OSError, ET.ParseError) as e:
        print(f"ctest_summary.py: {argv[1]}: not a readable JUnit file ({e})", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

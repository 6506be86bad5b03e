#!/usr/bin/env python3
"""What scripts/test.sh prints at its end. For each stage, from the JUnit
file that `ctest --output-junit FILE` wrote: how many tests passed, skipped
and failed, every test CTest counted as skipped with its reasons (each line
of its output after "SKIPPED: ", a test that skipped only a part of itself
included), and every test that failed. A test that failed is listed as
failed, never as skipped, whatever it printed. Then, over all the stages,
the numbered list of what no stage ran, with its count: each test skipped
in every stage that has it (a test the release stage skips for want of a
GPU and the cuda-sim stage runs is not in it), with its stage and reasons.

    scripts/ctest_summary.py PRESET JUNIT_FILE [PRESET JUNIT_FILE ...]

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


def summary(preset, rows):
    """The lines test.sh prints for one stage, given its outcomes."""
    count = {k: sum(1 for _, o, _ in rows if o == k) for k in ("passed", "skipped", "failed")}
    lines = [f"test.sh: {preset}: {count['passed']} passed, {count['skipped']} skipped, {count['failed']} failed"]
    lines += [f"test.sh: {preset} skipped {name}: {'; '.join(reasons(out))}" for name, o, out in rows if o == "skipped"]
    lines += [f"test.sh: {preset} FAILED {name}" for name, o, _ in rows if o == "failed"]
    return lines


def not_run(stages):
    """The lines that list, numbered and counted, each test skipped in every stage that has
    it: (preset, rows) per stage, in order."""
    ran = {name for _, rows in stages for name, o, _ in rows if o != "skipped"}
    nowhere = {}
    for preset, rows in stages:
        for name, o, out in rows:
            if o == "skipped" and name not in ran:
                nowhere.setdefault(name, []).append((preset, reasons(out)))
    lines = [f"test.sh: not run by any stage here: {len(nowhere)} test{'' if len(nowhere) == 1 else 's'}"
             + (" (skipped, in whole or in part, wherever registered)" if nowhere else "")]
    for i, (name, where) in enumerate(nowhere.items(), 1):
        said = "; ".join(dict.fromkeys(r for _, rs in where for r in rs))
        lines.append(f"test.sh:   {i}. {name} ({', '.join(p for p, _ in where)}): {said}")
    return lines


def main(argv):
    if not argv or len(argv) % 2:
        print("ctest_summary.py: usage: scripts/ctest_summary.py PRESET JUNIT_FILE [PRESET JUNIT_FILE ...]",
              file=sys.stderr)
        return 2
    stages = []
    for preset, junit in zip(argv[::2], argv[1::2]):
        try:
            stages.append((preset, list(outcomes(junit))))
        except (OSError, ET.ParseError) as e:
            print(f"ctest_summary.py: {junit}: not a readable JUnit file ({e})", file=sys.stderr)
            return 2
    lines = [line for preset, rows in stages for line in summary(preset, rows)]
    print("\n".join(lines + not_run(stages)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

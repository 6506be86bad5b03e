#!/usr/bin/env python3
"""Every path of the repository that lina's sources and docs name exists:
each `folder/.../name.ext` in a tracked file, with folder one of lina's own
(core/, dispatch/, tests/, docs/, ...) and ext a source or doc extension,
written from the repository root (or from the naming file's folder, as
`../core/ops.h` in docs/), must be a file of the tree; written as git's
`COMMIT:path` (a set of results kept in git history, docs/results-history.md),
a file at that commit. The test fails listing each one that is not, with
where it is named.

Not checked: paths under runs/ and build/ (what a run or a build writes);
paths inside a longer one (/usr/include/..., build/release/tests/...); the
few in EXAMPLES (placeholders, and the checks' own planted paths);
`COMMIT:path` where this clone lacks the commit (a shallow one). Not
scanned: third_party/ and data/ (the training text).

The check must be able to fail: a planted reference to a missing file, and
one to a file missing at its commit, are reported; one to an existing file,
a build path and an example are not.
Prints "SKIPPED: ..." (ctest: skipped) outside a git checkout.

    tests/test_comment_paths.py
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("core", "dispatch", "backend_cpu", "backend_cuda", "autograd", "models", "experiments", "cuda_sim",
           "tests", "scripts", "docs", "results")
EXTENSIONS = ("h", "cpp", "cu", "cuh", "md", "py", "sh", "txt", "json")
NOT_SCANNED = ("third_party/", "data/")
# Paths that are only ever meant as files a reader creates, each with why.
EXAMPLES = {
    "results/SET/README.md": "docs/results-history.md: SET stands for any set its tables name",
    "results/SET/report.md": "docs/results-history.md: SET stands for any set its tables name",
    "core/bad.cpp": "tests/test_layering.py: the file its check plants, to show it fails",
    "core/no_such_file.h": "this test's own planted reference, to show it fails",
    "core/also_missing.cpp": "this test's own planted reference, to show it fails",
    "results/no_such_set/README.md": "this test's own planted reference, to show it fails",
    "docs/planted.md": "this test's own planted file",
    "scripts/my_grid.sh": "this test's own planted example",
}

# A path: an optional commit (abc1234:), an optional prefix (../,
# ${sourceDir}/, build/release/), then one of FOLDERS, subfolders, a name with
# one of EXTENSIONS; not inside a longer word or path on either side.
PATH = re.compile(r"(?<![\w./${}:-])(?:([0-9a-f]{7,40}):)?((?:[\w.${}-]+/)*?)"
                  r"((?:%s)/(?:[\w.-]+/)*[\w.-]+\.(?:%s))(?![\w/-]|\.\w)"
                  % ("|".join(FOLDERS), "|".join(EXTENSIONS)))
SOURCE_DIR_VARIABLE = re.compile(r"^\$\{?\w*(?:SOURCE|source|ROOT|root)\w*\}?/$")
RELATIVE = re.compile(r"^(?:\.\.?/)+$")


def is_git_checkout():
    return subprocess.run(["git", "-C", ROOT, "rev-parse", "--is-inside-work-tree"],
                          capture_output=True, text=True).stdout.strip() == "true"


def scanned_files():
    listed = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True)
    return [p for p in listed.stdout.splitlines() if not p.startswith(NOT_SCANNED)]


def read_text(path):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return None


def repository_path(naming_file, prefix, path):
    """The path from the repository root that `prefix + path` in naming_file
    means, or None where it is not a path of the repository's tree."""
    if prefix == "" or SOURCE_DIR_VARIABLE.match(prefix):
        return path
    if RELATIVE.match(prefix):
        resolved = os.path.normpath(os.path.join(os.path.dirname(naming_file), prefix + path))
        return None if resolved.startswith("..") else resolved
    return None  # inside a longer path: build/, runs/, another machine's


def in_tree(path, commit):
    """Whether path is a file of the tree, or of commit; None where this
    clone does not hold the commit."""
    if commit is None:
        return os.path.exists(os.path.join(ROOT, path))
    def git_has(obj):
        return subprocess.run(["git", "-C", ROOT, "cat-file", "-e", obj], capture_output=True).returncode == 0
    if not git_has(commit + "^{commit}"):
        return None
    return git_has(f"{commit}:{path}")


def missing_paths(files, exists, examples):
    """'file:line: path' for each path named in `files` (path -> text) that
    exists(path, commit or None) says is not there."""
    missing = []
    for naming_file, text in files.items():
        for number, line in enumerate(text.splitlines(), 1):
            for match in PATH.finditer(line):
                commit, prefix, named = match.groups()
                path = repository_path(naming_file, prefix, named)
                if path is None or path.startswith(("runs/", "build/")) or path in examples:
                    continue
                if exists(path, commit) is False:
                    missing.append(f"{naming_file}:{number}: {match.group(0)}")
    return missing


def check_can_fail():
    """Planted missing paths are reported; an existing one, a build path and an example are not."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=7", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    planted = {"docs/planted.md": "See core/no_such_file.h, core/tensor.h, build/release/tests/x.json,\n"
                                  "../core/also_missing.cpp and `scripts/my_grid.sh`;\n"
                                  f"`git show {head}:results/no_such_set/README.md`, {head}:core/tensor.h.\n"}
    reported = missing_paths(planted, in_tree, {"scripts/my_grid.sh": "an example"})
    want = ["docs/planted.md:1: core/no_such_file.h", "docs/planted.md:2: ../core/also_missing.cpp",
            f"docs/planted.md:3: {head}:results/no_such_set/README.md"]
    if reported != want:
        print(f"FAIL the check on planted references: reported {reported}, want {want}")
        return False
    print("ok   planted references to missing files (in the tree, at a commit) are reported; one to an "
          "existing file, a build path and an example are not")
    return True


def main():
    if not is_git_checkout():
        print(f"SKIPPED: {ROOT} is not a git checkout (the files scanned are git's tracked files)")
        return 0
    ok = check_can_fail()
    tracked = scanned_files()
    files = {p: t for p in tracked if (t := read_text(p)) is not None}
    missing = missing_paths(files, in_tree, EXAMPLES)
    for entry in missing:
        print(f"FAIL {entry}: no such file in the repository")
    if not missing:
        print(f"ok   every repository path named in {len(files)} tracked files exists")
    return 0 if ok and not missing else 1


if __name__ == "__main__":
    sys.exit(main())

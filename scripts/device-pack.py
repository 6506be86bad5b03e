#!/usr/bin/env python3
"""Packs a runs folder into what a lent GPU machine's call may send back, and
unpacks it here (or into the next call's carried folder), so that the
unfinished runs resume from their checkpoints:

    scripts/device-pack.py pack OUT RUNS [--parts N] [--part-mb M]
    scripts/device-pack.py unpack FILES_AT RUNS [--as DEVICE]

pack writes one tar archive of RUNS, split into OUT/runs.tar.00, .01, ...
(at most N parts, default 4, of at most M MiB each, default 15: the call
returns at most 8 files of 16 MiB, 64 MiB in all, so 4 × 15 leaves room for
the device check's files). What goes in, in this order, while it fits:
  1. the finished runs' jsons (and their .predictions.json),
  2. everything else that is not a checkpoint: the sweeps' logs, the
     unfinished runs' jsons,
  3. the unfinished runs' latest checkpoints (*.safetensors, about 11 MB
     each), the furthest run first: what the next call or the CPU resumes,
  4. the finished runs' checkpoints, as room allows.
Lock and pid files and temporary files are left out. The archive's first
member, PACKED.txt, lists what is in it and what did not fit; pack prints it.
A file that a run still writing renames meanwhile is taken as it was.

unpack joins FILES_AT/runs.tar.* (FILES_AT: the run tool's files_at, or any
folder holding the parts) and extracts them into RUNS, refusing a member
whose path leaves RUNS; --as DEVICE puts the runs of a device folder
(RUNS/cuda/...) under RUNS/DEVICE/ instead (e.g. --as cpu into the CPU's
run store, where the run then takes the place of the CPU's run of that
name); a file already in RUNS is replaced only by a newer
run state (a json whose steps_done is larger, or a checkpoint beside it).
Then `lina train --resume RUNS/cuda/NAME.safetensors` (with `--device cpu`
on the CPU) or scripts/device-course.sh with RUNS carried resumes them.
Exit status: 0 done; 1 nothing to pack or unpack; 2 bad arguments.
"""
import argparse
import glob
import io
import json
import os
import sys
import tarfile
import time

PART_NAME = "runs.tar.{:02d}"
SKIP_SUFFIXES = (".lock", ".pid", ".tmp")


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_states(runs):
    """{run path without suffix: (finished, steps_done)} for every run json under runs."""
    states = {}
    for path in glob.glob(os.path.join(runs, "**", "*.json"), recursive=True):
        if path.endswith(".predictions.json"):
            continue
        j = read_json(path)
        if isinstance(j, dict) and ("finished" in j or "steps_done" in j):
            states[path[:-5]] = (bool(j.get("finished")), int(j.get("steps_done") or 0))
    return states


def run_of(path, states):
    for suffix in (".predictions.json", ".json", ".safetensors"):
        if path.endswith(suffix) and path[: -len(suffix)] in states:
            return path[: -len(suffix)]
    return None


def ordered_files(runs):
    """The files of runs in the order they are packed (see the module's docstring)."""
    states = run_states(runs)
    groups = ([], [], [], [])
    for dirpath, _, names in os.walk(runs):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            if name.endswith(SKIP_SUFFIXES) or ".tmp" in name or not os.path.isfile(path):
                continue
            run = run_of(path, states)
            finished, steps = states.get(run, (False, 0))
            checkpoint = name.endswith(".safetensors")
            group = (3 if finished else 2) if checkpoint else (0 if finished and run else 1)
            groups[group].append((-steps if group == 2 else 0, path))
    return [path for group in groups for _, path in sorted(group)]


def tar_size(size):
    return 512 + (size + 511) // 512 * 512


class SplitWriter(io.RawIOBase):
    """A file object that writes OUT/runs.tar.00, .01, ... of at most part_bytes each."""

    def __init__(self, out, part_bytes):
        self.out, self.part_bytes, self.index, self.used, self.file = out, part_bytes, -1, 0, None
        self.names = []

    def writable(self):
        return True

    def _next(self):
        if self.file:
            self.file.close()
        self.index += 1
        name = PART_NAME.format(self.index)
        self.names.append(name)
        self.file = open(os.path.join(self.out, name), "wb")
        self.used = 0

    def write(self, data):
        data = memoryview(data)
        done = 0
        while done < len(data):
            if self.file is None or self.used == self.part_bytes:
                self._next()
            n = min(len(data) - done, self.part_bytes - self.used)
            self.file.write(data[done:done + n])
            self.used += n
            done += n
        return done

    def close(self):
        if self.file:
            self.file.close()
            self.file = None
        super().close()


def pack(out, runs, parts, part_mb):
    if not os.path.isdir(runs):
        print(f"device-pack: no runs folder {runs}", file=sys.stderr)
        return 1
    os.makedirs(out, exist_ok=True)
    for old in glob.glob(os.path.join(out, "runs.tar.*")):
        os.remove(old)
    part_bytes = part_mb * 1024 * 1024
    budget = parts * part_bytes - 1024 - 64 * 1024   # the end blocks, PACKED.txt
    chosen, left_out, used = [], [], 0
    for path in ordered_files(runs):
        size = tar_size(os.path.getsize(path))
        if used + size <= budget:
            chosen.append(path)
            used += size
        else:
            left_out.append(path)
    if not chosen:
        print(f"device-pack: nothing to pack in {runs}", file=sys.stderr)
        return 1
    states = run_states(runs)
    lines = [f"packed {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} from {runs}"]
    for run, (finished, steps) in sorted(states.items()):
        lines.append(f"run {os.path.relpath(run, runs)}: {'finished' if finished else 'at update ' + str(steps)}")
    lines += [f"in {os.path.relpath(p, runs)} {os.path.getsize(p)}" for p in chosen]
    lines += [f"left out (no room) {os.path.relpath(p, runs)} {os.path.getsize(p)}" for p in left_out]
    manifest = ("\n".join(lines) + "\n").encode()[: 60 * 1024]
    writer = SplitWriter(out, part_bytes)
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("PACKED.txt")
        info.size, info.mtime = len(manifest), int(time.time())
        tar.addfile(info, io.BytesIO(manifest))
        written = tar_size(len(manifest))
        for path in chosen:
            try:   # the open file's own size: a run still writing may rename a newer one over it meanwhile
                with open(path, "rb") as f:
                    info = tar.gettarinfo(arcname=os.path.relpath(path, runs), fileobj=f)
                    if written + tar_size(info.size) > budget + 64 * 1024:
                        print(f"device-pack: {path} not packed: it grew past the room left", file=sys.stderr)
                        continue
                    tar.addfile(info, f)
                    written += tar_size(info.size)
            except OSError as e:
                print(f"device-pack: {path} not packed: {e.strerror}", file=sys.stderr)
    writer.close()
    sys.stdout.write(manifest.decode())
    total = sum(os.path.getsize(os.path.join(out, n)) for n in writer.names)
    print(f"device-pack: {len(chosen)} files in {len(writer.names)} part(s) of {out} "
          f"({total / 2**20:.1f} MiB), {len(left_out)} left out")
    return 0


class JoinedReader(io.RawIOBase):
    def __init__(self, paths):
        self.files = [open(p, "rb") for p in paths]

    def readable(self):
        return True

    def readinto(self, buffer):
        while self.files:
            n = self.files[0].readinto(buffer)
            if n:
                return n
            self.files.pop(0).close()
        return 0


def newer_or_new(member, data, dest):
    """Whether the packed file should replace dest."""
    if not os.path.exists(dest):
        return True
    if dest.endswith(".json") and not dest.endswith(".predictions.json"):
        old, new = read_json(dest), None
        try:
            new = json.loads(data)
        except ValueError:
            pass
        if isinstance(old, dict) and isinstance(new, dict):
            return int(new.get("steps_done") or 0) >= int(old.get("steps_done") or 0)
    return True


def destination(name, device):
    """name's path inside RUNS: its device folder (cpu/, cuda/) renamed device where given."""
    first, sep, rest = name.partition("/")
    return f"{device}/{rest}" if device and sep and first in ("cpu", "cuda") else name


def unpack(files_at, runs, device=None):
    parts = sorted(glob.glob(os.path.join(files_at, "**", "runs.tar.[0-9][0-9]"), recursive=True))
    if not parts:
        print(f"device-pack: no runs.tar.NN in {files_at}", file=sys.stderr)
        return 1
    os.makedirs(runs, exist_ok=True)
    root = os.path.realpath(runs)
    members = {}
    with tarfile.open(fileobj=io.BufferedReader(JoinedReader(parts)), mode="r|") as tar:
        for member in tar:
            dest = os.path.realpath(os.path.join(root, destination(member.name, device)))
            if not member.isfile() or os.path.commonpath([root, dest]) != root:
                print(f"device-pack: skipped {member.name!r} (not a plain file inside {runs})", file=sys.stderr)
                continue
            members[member.name] = (dest, tar.extractfile(member).read())
    # A checkpoint goes with its json: it is taken where the json is.
    kept = {}
    for name, (dest, data) in members.items():
        if name.endswith(".safetensors"):
            continue
        kept[name] = newer_or_new(name, data, dest)
    for name, (dest, data) in sorted(members.items()):
        if name == "PACKED.txt":
            sys.stdout.write(data.decode(errors="replace"))
            continue
        take = kept.get(name[: -len(".safetensors")] + ".json", True) if name.endswith(".safetensors") else kept[name]
        if not take:
            print(f"device-pack: kept {name}: the one in {runs} is further on")
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = dest + ".unpack-tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, dest)
    print(f"device-pack: unpacked {len(members) - ('PACKED.txt' in members)} files from {len(parts)} part(s) into {runs}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    pk = sub.add_parser("pack", help="RUNS into OUT/runs.tar.NN")
    pk.add_argument("out")
    pk.add_argument("runs")
    pk.add_argument("--parts", type=int, default=4, choices=range(1, 9), metavar="N (1-8)")
    pk.add_argument("--part-mb", type=int, default=15, choices=range(1, 17), metavar="M (1-16)")
    up = sub.add_parser("unpack", help="FILES_AT/runs.tar.NN into RUNS")
    up.add_argument("files_at")
    up.add_argument("runs")
    up.add_argument("--as", dest="device", help="put the device folders' runs under RUNS/DEVICE (e.g. cpu)")
    a = p.parse_args()
    if a.command == "pack":
        return pack(a.out, a.runs, a.parts, a.part_mb)
    return unpack(a.files_at, a.runs, a.device)


if __name__ == "__main__":
    sys.exit(main())

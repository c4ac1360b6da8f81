#!/usr/bin/env python3
"""The issue slots of each way through a kernel's node loop, read from its SASS (nvdisasm -c output).

Usage: sass_paths.py FILE.sass
Prints the innermost loop's paths, shortest first: the instructions one pass issues on that path
(predicated ones included: a warp issues them whatever its lanes), and what it touches (LDS, STS.128,
ATOMG, EXIT), so a pass that takes a seed shows as such. A warp whose lanes take different paths issues
their union. Used by coordinator/benches/sass.sh.
"""
import re
import sys


def read(path):
    ins, labels, pending = [], {}, []
    for line in open(path):
        m = re.match(r"^(\.L_x_\d+):", line.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            for label in pending:
                labels[label] = len(ins)
            pending = []
            ins.append(m.group(2))
    return ins, labels


def target(text):
    m = re.search(r"BRA `\((\.L_x_\d+)\)", text)
    return m.group(1) if m else None


def main():
    ins, labels = read(sys.argv[1])

    def succ(i):
        t, to = ins[i], target(ins[i])
        out = [labels[to]] if to else []
        if (not to or t.startswith("@")) and not t.startswith(("EXIT", "RET")):
            out.append(i + 1)
        return out

    loops = sorted((i - labels[target(t)], labels[target(t)], i)
                   for i, t in enumerate(ins) if target(t) and labels[target(t)] < i)
    if not loops:
        print("no loop")
        return
    _, head, back = loops[0]
    paths = set()

    def walk(i, n, seen, tags):
        if i < head or i > back or i in seen:
            paths.add((n, tags + ("leaves the loop",)))
            return
        tags = tags + tuple(k for k in ("LDS", "STS.128", "ATOMG", "EXIT") if k in ins[i] and k not in tags)
        for j in succ(i):
            if i == back and j == head:
                paths.add((n + 1, tags))
            else:
                walk(j, n + 1, seen | {i}, tags)

    walk(head, 0, frozenset(), ())
    for n, tags in sorted(paths):
        print(n, " ".join(tags))


main()

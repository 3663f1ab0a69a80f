#!/usr/bin/python3
"""The house's floors (docs/ARCHITECTURE.md, "Where things live"): a folder includes only from
its own floor or below, and the folders include one another without a cycle. Reads every
production .hpp/.cpp's `#include "folder/..."` lines; prints each include that runs up a floor
and each cycle, and exits 1 if there is one. Usage: layering.py SOURCE_DIR"""
import os
import re
import sys

# Bottom first. Folders of one floor may include one another (without a cycle).
FLOORS = [["core"], ["judges"], ["config"], ["sampling", "sinks", "tracking"], ["sources"],
          ["daemon"], ["cli"], ["fuzz"]]
FLOOR = {folder: i for i, floor in enumerate(FLOORS) for folder in floor}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def main(root):
    bad = []
    edges = {}
    for top in FLOOR:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".hpp", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for target in INCLUDE.findall(text):
                    if target not in FLOOR or target == top:
                        continue
                    edges.setdefault(top, set()).add(target)
                    if FLOOR[target] > FLOOR[top]:
                        bad.append(f"{os.path.relpath(path, root)}: includes {target}/ "
                                   f"(floor {FLOOR[target]}) from floor {FLOOR[top]}")
    # Cycles among the folders (depth-first search).
    state = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                bad.append("cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    for line in bad:
        print(line)
    print(f"layering: {sum(len(v) for v in edges.values())} folder imports, "
          f"{len(bad)} upward or circular")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

#!/usr/bin/env python3
"""Reads `cuobjdump -sass` output on stdin and, for every kernel whose mangled name contains one of
the given substrings, appends its SASS to OUTDIR/sass-TAG.txt (one file: the GPU machine's tool
brings back a limited number) and prints its instruction count, its local loads and stores
(spills) and its 45 most frequent opcodes. Runs on the GPU machine, whose toolkit has cuobjdump.

  cuobjdump -sass BINARY | python3 dev/sass_hist.py OUTDIR TAG SUBSTRING [SUBSTRING...]
"""
import collections
import re
import sys

out_dir, tag, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
current, lines, n = None, [], 0


def flush():
    global n
    if current is None or not any(w in current for w in wanted):
        return
    n += 1
    with open(f"{out_dir}/sass-{tag}.txt", "a") as f:
        f.write(f"== #{n}: {current}\n" + "".join(lines))
    ops = collections.Counter()
    for line in lines:
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?", line)
        if m:
            ops[m.group(1) + (m.group(2) or "")] += 1
    total = sum(ops.values())
    print(f"== {tag} #{n}: {current[:160]}\n   {total} instructions; "
          f"local ld/st {sum(v for k, v in ops.items() if k.startswith(('LDL', 'STL')))}")
    for op, count in ops.most_common(45):
        print(f"   {count:6d} {op}")


for line in sys.stdin:
    m = re.match(r"\s+Function : (\S+)", line)
    if m:
        flush()
        current, lines = m.group(1), []
    elif current is not None:
        lines.append(line)
flush()

"""job.spark.worker_heap: the objects alive in a worker's first tasks are frozen, later ones are not."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_settle_freezes_in_the_first_calls_only() -> None:
    out = run("""
        import gc
        from job.spark import worker_heap
        assert gc.get_freeze_count() == 0
        counts = []
        keep = []
        for i in range(worker_heap.FREEZES + 2):
            keep.append([[] for _ in range(1000)])  # 1,001 new containers before each call
            worker_heap.settle()
            counts.append(worker_heap.frozen())
        print(counts)
    """)
    counts = json.loads(out)
    grown = [b - a for a, b in zip(counts, counts[1:], strict=False)]
    assert counts[0] > 1000
    assert all(g >= 1001 for g in grown[:2]), grown  # calls 2 and 3 freeze the 1,001 new ones
    assert grown[2:] == [0, 0], grown  # calls 4 and 5 freeze nothing


def test_a_forked_child_freezes_its_own() -> None:
    out = run("""
        import os
        from job.spark import worker_heap
        for _ in range(worker_heap.FREEZES):
            worker_heap.settle()
        before = worker_heap.frozen()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            junk = [[] for _ in range(500)]
            worker_heap.settle()
            os.write(w, str(worker_heap.frozen()).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        print(before, int(os.read(r, 100)))
    """)
    before, child = map(int, out.split())
    assert child >= before + 500


def test_garbage_of_later_objects_is_still_collected() -> None:
    out = run("""
        import gc
        from job.spark import worker_heap
        for _ in range(worker_heap.FREEZES):
            worker_heap.settle()
        class Node:
            pass
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle only the collector frees
        before = worker_heap.frozen()
        worker_heap.settle()  # a later task's call: it must not freeze the cycle
        del a, b
        print(before, worker_heap.frozen(), gc.collect())
    """)
    before, after, collected = map(int, out.split())
    assert after == before
    assert collected >= 2

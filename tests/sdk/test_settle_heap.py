"""``settle_heap``: a serving process's collector skips what was loaded and runs less often.

Each check runs in a child interpreter: the collector's settings belong to the whole process.
"""

from __future__ import annotations

import json
import subprocess
import sys

from naiad.heap import YOUNG_THRESHOLD

REPORT = """
import gc, json
{before}
from naiad.backend import settle_heap
loaded = [[index] for index in range(1000)]  # containers alive when the process settles
settle_heap()
garbage = []
garbage.append(garbage)  # a cycle made after settling: still collected
del garbage
print(json.dumps({{"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold(), "collected": gc.collect()}}))
"""


def _settled(before: str = "") -> dict[str, object]:
    child = subprocess.run(
        [sys.executable, "-c", REPORT.format(before=before)], capture_output=True, text=True, check=True
    )
    report: dict[str, object] = json.loads(child.stdout)
    return report


def test_what_is_alive_is_frozen_and_later_cycles_are_still_collected() -> None:
    report = _settled()
    assert isinstance(report["frozen"], int)
    assert report["frozen"] >= 1000
    assert report["collected"] == 1  # the cycle made after settling
    assert report["threshold"] == [YOUNG_THRESHOLD, 10, 10]


def test_a_higher_threshold_the_process_chose_is_kept() -> None:
    report = _settled("gc.set_threshold(50000, 20, 30)")
    assert report["threshold"] == [50000, 20, 30]


IN_PROCESS_SERVER = """
import gc, json, tempfile
from pathlib import Path
from naiad.testing import serve_in_thread
before = {"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}
with tempfile.TemporaryDirectory() as folder, serve_in_thread([Path(folder)]):
    pass  # READY, then stopped: run() went through all of its start
after = {"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}
print(json.dumps({"before": before, "after": after}))
"""


def test_a_server_run_inside_another_program_leaves_its_collector_alone() -> None:
    child = subprocess.run([sys.executable, "-c", IN_PROCESS_SERVER], capture_output=True, text=True, check=True)
    report = json.loads(child.stdout.splitlines()[-1])
    assert report["after"] == report["before"]
    assert report["after"]["frozen"] == 0

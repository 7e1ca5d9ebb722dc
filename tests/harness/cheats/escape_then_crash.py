"""Cheat: a process forked at import into a session of its own (setsid, out of the worker's
process group), then the candidate kills its own worker in forward. With the worker gone, its
subreaper, the orphan would go to init and run on: it waits for the worker's end, then a
moment more (where a real cheat would rewrite the report, or keep the GPU busy while the next
contender is timed), then writes a marker. Its pid and the marker go to
WARPFORGE_TEST_ESCAPE_DIR."""

import os
import signal
import time

import torch

_DIR = os.environ.get("WARPFORGE_TEST_ESCAPE_DIR")
_WORKER = os.getpid()


def _worker_running():
    try:
        with open(f"/proc/{_WORKER}/stat", "rb") as stat_file:
            stat = stat_file.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")  # exited: a zombie, or gone


if _DIR and os.fork() == 0:
    os.setsid()
    with open(os.path.join(_DIR, "escapee.pid"), "w") as pid_file:
        pid_file.write(str(os.getpid()))
    deadline = time.monotonic() + 60
    while _worker_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.5)
    with open(os.path.join(_DIR, "escapee.outlived"), "w") as marker:
        marker.write("outlived the worker")
    os._exit(0)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        os.kill(os.getpid(), signal.SIGKILL)
        return x

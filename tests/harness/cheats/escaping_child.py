"""Cheat: processes forked at import that leave the worker's process group, so the group kill
misses them: one calls setsid(), one is a daemon (fork, setsid, fork again, the middle one exits,
leaving the last an orphan). Each writes its pid to a file, then waits for the worker to be gone
and writes a second file (where a real cheat would rewrite the report, or keep the GPU busy
while the next contender is timed). The files go to WARPFORGE_TEST_ESCAPE_DIR."""

import os
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


_DIR = os.environ.get("WARPFORGE_TEST_ESCAPE_DIR")
_WORKER = os.getpid()


def _worker_running():
    try:
        with open(f"/proc/{_WORKER}/stat", "rb") as stat_file:
            stat = stat_file.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")  # exited: a zombie, or gone


def _outlive(name):
    with open(os.path.join(_DIR, f"{name}.pid"), "w") as pid_file:
        pid_file.write(str(os.getpid()))
    deadline = time.monotonic() + 60
    while _worker_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(os.path.join(_DIR, f"{name}.outlived"), "w") as marker:
        marker.write("outlived the worker")
    os._exit(0)


if _DIR:
    if os.fork() == 0:
        os.setsid()
        _outlive("setsid")
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            _outlive("daemon")
        os._exit(0)
    os.waitpid(middle, 0)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y

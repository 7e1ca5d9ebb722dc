"""Shared pieces for the kernel-cache tests: keys, artifacts and a throw-away redis-server."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server process on a free port, started and stopped by the test."""

    def __init__(self, binary: str, tmp_dir: str) -> None:
        self.binary = binary
        self.tmp_dir = tmp_dir
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--bind", "127.0.0.1", "--dir", self.tmp_dir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                if client.ping():
                    break
            except redis.RedisError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError(
                        f"redis-server did not answer PING on port {self.port}"
                    ) from None
                time.sleep(0.02)
        client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def redis_server(redis_server_binary: str, tmp_path) -> Iterator[RedisServer]:
    server = RedisServer(redis_server_binary, str(tmp_path))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _no_ambient_cache_config(monkeypatch, tmp_path) -> None:
    """Tests never touch the user's cache or a fleet Redis."""
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path / "cache-home"))
    monkeypatch.delenv("WARPFORGE_REDIS_URL", raising=False)
    for name in list(os.environ):
        if name.startswith("WARPFORGE_CACHE_") and name != "WARPFORGE_CACHE_DIR":
            monkeypatch.delenv(name)

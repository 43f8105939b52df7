"""The oracle's child process: ``python -m observatory.oracle.child``, started by ``pool``.

It limits its own address space (``RLIMIT_AS``) before torch is imported, asks the kernel to kill
it when its parent dies, and never reaches the network (``HF_HUB_OFFLINE``; configs arrive on
stdin, and only transformers' own config classes build them: no remote code). Then it reads one
JSON job a line from stdin and answers one JSON line on the protocol stream (the original stdout;
anything a library prints goes to stderr instead):

    -> {"id": 7, "config": {...}}
    <- {"id": 7, "status": "read", "reading": {...}}          (Reading.to_dict)
    <- {"id": 7, "status": "unsupported" | "failed", "reason": "..."}

The first line it writes is ``{"ready": true, "transformers": "<version>"}``. After a MemoryError it
answers and exits, so the next config gets a fresh process. Time limits are the parent's: it kills
a child that does not answer in time.
"""

from __future__ import annotations

import json
import os
import signal
import sys

# Test-only: {"model_type": "hang" | "crash" | "oom"} makes the child misbehave on such configs, so
# the tests can show what the pool does with a config that hangs, crashes or exhausts memory.
TEST_HOOK_ENV = "OBSERVATORY_ORACLE_TEST_HOOK"
MEMORY_ENV = "OBSERVATORY_ORACLE_MEMORY_BYTES"
EXIT_AFTER_MEMORY_ERROR = 3


def _limit_memory() -> None:
    limit = int(os.environ.get(MEMORY_ENV) or 0)
    if limit > 0:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _die_with_parent() -> None:
    if sys.platform != "linux":
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # the parent still kills us on its time limit; EOF on stdin ends the loop


def _test_hook(raw: dict) -> None:
    hooks = json.loads(os.environ.get(TEST_HOOK_ENV) or "{}")
    action = hooks.get(raw.get("model_type"))
    if action == "hang":
        signal.pause() if hasattr(signal, "pause") else __import__("time").sleep(10**6)
    elif action == "crash":
        os.abort()
    elif action == "oom":
        blocks = []
        while True:  # until RLIMIT_AS says no
            blocks.append(bytes(1 << 28))  # calloc: address space, not touched pages


def main() -> int:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    _die_with_parent()
    _limit_memory()
    protocol = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # whatever torch or transformers print lands on stderr, never in the protocol
    sys.stdout = sys.stderr

    from observatory.oracle import (
        probe,  # torch and transformers, under the memory limit
    )

    def say(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    say({"ready": True, "transformers": probe.VERSION})
    for line in sys.stdin:
        job = json.loads(line)
        raw = job["config"]
        try:
            _test_hook(raw)
            reason = probe.unbuildable(raw)
            if reason:
                say({"id": job["id"], "status": "unsupported", "reason": reason})
                continue
            reading = probe.probe(raw)
        except MemoryError:
            say({"id": job["id"], "status": "failed",
                 "reason": f"memory limit: building it needed more than {_limit_text()}"})
            return EXIT_AFTER_MEMORY_ERROR
        except Exception as exc:  # noqa: BLE001 - a config transformers refuses or cannot run: the reason is the record
            say({"id": job["id"], "status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:900]})
            continue
        say({"id": job["id"], "status": "read", "reading": reading.to_dict()})
    return 0


def _limit_text() -> str:
    limit = int(os.environ.get(MEMORY_ENV) or 0)
    return f"{limit / 2**20:,.0f} MiB of address space" if limit else "the memory available"


if __name__ == "__main__":
    sys.exit(main())

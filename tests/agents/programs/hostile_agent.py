"""Agent programs that misbehave, for ``agent:command``: ``python hostile_agent.py KIND PIDS``.

- ``hang``: starts a child that sleeps, writes both pids to PIDS, and sleeps itself
- ``flood``: writes to stdout without end
- ``crash``: writes a line to stderr and exits with status 3
- ``quit``: exits 0 at once without playing
- ``escape``: writes a file in its working directory, then tries PIDS (a path outside its
  folder); says on stderr what each write did and exits with status 3
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    kind, pids = sys.argv[1], Path(sys.argv[2])
    if kind == "hang":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pids.write_text(f"{child.pid} {__import__('os').getpid()}")
        time.sleep(600)
    elif kind == "flood":
        line = b"y" * 65535 + b"\n"
        while True:
            sys.stdout.buffer.write(line)
    elif kind == "crash":
        print("agent crashed: cannot reach its model", file=sys.stderr, flush=True)
        sys.exit(3)
    elif kind == "quit":
        sys.exit(0)
    elif kind == "escape":
        for target in (Path("inside.txt"), pids):
            try:
                target.write_text("written by the agent")
                print(f"wrote {target}", file=sys.stderr, flush=True)
            except OSError as exc:
                print(f"could not write {target}: {exc.strerror}", file=sys.stderr, flush=True)
        sys.exit(3)


if __name__ == "__main__":
    main()

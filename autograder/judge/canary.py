"""The grader's starvation canary, run as a script by :func:`autograder.judge.starvation.canary`
(by path, so nothing of the package is imported): it asks for one CPU for a moment and prints
the CPU seconds it got and the wall seconds it took. A process that never sleeps and got less
than half a CPU was kept from one by the machine's other work."""
import sys
import time

if __name__ == "__main__":
    spin = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
    wall0, cpu0 = time.monotonic(), time.process_time()
    n = 0
    while time.monotonic() - wall0 < spin:
        n += 1
    print(f"{time.process_time() - cpu0:.6f} {time.monotonic() - wall0:.6f}")

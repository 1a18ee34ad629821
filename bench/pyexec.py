# The Python side of the bench's python step: one den.Client kept for the
# whole run, as a Python agent would keep one. For each line on stdin it
# runs `true` in the sandbox and prints how long the SDK's exec took, in
# nanoseconds (or "error ..." and the reason).
import sys
import time

import den

client = den.Client(socket=sys.argv[1])
name = sys.argv[2]
for _ in sys.stdin:
    start = time.perf_counter_ns()
    try:
        result = client.exec(name, ["true"])
    except den.DenError as e:
        print("error", e, flush=True)
        continue
    took = time.perf_counter_ns() - start
    if not result.ok:
        print("error", result.status, result.exit_code, flush=True)
        continue
    print(took, flush=True)

"""medrcube's performance benchmarks: `python -m benchmarks` (or `scripts/bench`).

Every scenario runs the real suite in child processes (the `medrcube` command, `pytest
tests_benchmark`, an OpenAI-path client against the scripted server in its own process)
and is measured from outside with `os.wait4` (wall clock, CPU, peak RSS) or from inside
the client with `resource.getrusage`. See benchmarks/README.md.
"""

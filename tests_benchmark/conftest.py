"""The checkout's copy of the qualification suite, kept thin: the suite itself ships in
the package (medrcube/suite), and `pytest --model=SPEC` at the root runs that one. This
directory stays as the smallest example of a suite outside the package (what a site
project made by `medrcube init` looks like) and for the scripts and benchmarks that run
`pytest tests_benchmark ...`."""

MEDRCUBE_SUITE = True

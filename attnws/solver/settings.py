"""The solver's defaults and limits, as the command line offers them, without loading Z3: each
query's resource units, the second solver's, and the findings a search lists per kind.
"""

DEFAULT_RLIMIT = 20_000_000  # Z3 resource units per query: a few seconds on one core
MAX_RLIMIT = 2**32 - 1  # Z3 keeps rlimit in an unsigned 32-bit parameter: larger values wrap
# cvc5's resource units per query: its units cost about 50 times Z3's in time on these queries
# (measured: 1,000,000 cvc5 units took up to 16 s where Z3 decides in well under one), so the
# default gives each query roughly the time Z3's default gives it.
DEFAULT_SECOND_RLIMIT = 400_000
SOLVERS = ("cvc5",)  # the second solvers `--second-opinion` takes
DEFAULT_LIMIT = 8  # findings per kind unless --limit says otherwise

"""`python -m k8sdds`: the command line, as the `k8sdds` script runs it."""

from k8sdds.cli import main

main()

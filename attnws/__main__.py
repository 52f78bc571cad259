"""`python -m attnws`: the same command line as the `attnws` script."""

from .cli import main

if __name__ == "__main__":
    main()

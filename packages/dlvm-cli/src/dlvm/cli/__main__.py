"""`python -m dlvm.cli`, for environments where the `dlvm` script is not on PATH."""

from dlvm.cli.main import main

if __name__ == "__main__":
    main()

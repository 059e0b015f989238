"""The `dlvm` command: a thin driver over `dlvm.ir` and the installed plugins.

Run it as `dlvm …` or `python -m dlvm.cli …`; the entry point is `dlvm.cli.main:main`.
Importing this package is cheap: typer, rich and numpy load only when a command runs.
"""

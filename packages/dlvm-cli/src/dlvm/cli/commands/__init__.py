"""The core commands, one module each; `dlvm.cli.app` registers them."""

# FILE of verify, opt, compile and exec; `dlvm.cli.app.module_inputs_help` lists, under their
# `--help`, the suffixes of the front ends installed.
MODULE_FILE_HELP = ("A module: a .dl file or a source that an installed front end reads "
                    "(listed below); '-' reads DLVM IR text from stdin.")

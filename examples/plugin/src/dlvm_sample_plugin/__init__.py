"""A sample third-party DLVM plugin, complete: a pass, an instruction with its derivative
rules, a target, a front end and commands. Its own top-level package, as every plugin should have;
`plugin.py` holds the hooks that the `dlvm.plugins` entry point names."""

"""The core commands, one module each; `dlvm.cli.app` registers them."""

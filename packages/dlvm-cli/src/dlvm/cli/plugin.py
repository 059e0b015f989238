"""dlvm-cli's entry in the `dlvm.plugins` group.

It registers nothing: the core commands are built into the app, and the entry
exists so that `dlvm plugins` lists dlvm-cli with its version. It must stay
cheap to import, because every registry load imports it.
"""

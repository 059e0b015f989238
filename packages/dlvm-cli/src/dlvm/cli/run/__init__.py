"""`dlvm run PIPELINE.toml`: a whole compile-and-train pipeline from one TOML file.

`spec` validates the file into a `RunSpec` (every error before any work),
`actions` emits and calls, `train` trains; `docs/pipeline-toml.md` is the schema.
"""

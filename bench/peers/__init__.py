"""The peer scoreboard (issue 17): Tessera against FlashInfer, FlexAttention and cuDNN on the same tensors and masks.

Modules without torch (importable anywhere, tested on the CPU in CI): `workloads` (geometry, seeds, mask recipes),
`metrics` (exact active-pair accounting, TF/s, medians, geometric means), `schema` (the JSON document: rows,
validation, merging) and `report` (bench/RESULTS.md and the charts from a JSON file). `systems` and `run` need
torch and a GPU. Usage: bench/peers/README.md.
"""

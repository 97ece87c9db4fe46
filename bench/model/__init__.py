"""Model-level run (issue 20): a Wan2.1 DiT denoising loop with VSA-rule masks through dense SDPA, FlexAttention,
FlashInfer and Tessera (bench/model/README.md)."""

"""naiad-llm: LLM serving for naiad.

Two backend names share this package: ``vllm`` (Triton's vLLM-backend repositories, unchanged) and
``llm`` (the same layout, with ``model.json`` naming its engine). Engines sit behind
:class:`naiad_llm.engine.Engine`; each is an optional extra.
"""

"""What is sent and what is computed: profiles, prompts, the load
generator, vLLM's metrics.
"""

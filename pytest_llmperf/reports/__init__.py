"""What a person reads: terminal tables, vLLM's result block, JSON,
Markdown, HTML, history, baseline tables.
"""

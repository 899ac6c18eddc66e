"""Root conftest: this repository is also a ready-to-run regression suite.

`pytest --engine=vllm --hardware=cpu` here runs `test_serving.py` against `baselines/`.
"""

pytest_plugins = ["pytester"]

"""tpu-trainer: run LLM training recipes on Cloud TPUs end to end."""

__version__ = "0.1.0"

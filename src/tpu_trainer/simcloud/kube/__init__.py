"""An emulated Kubernetes API server for the real kubectl (see ``server.py``)."""

"""Small programs run by a runtime's own Python (3.12, MaxText, JAX) to answer one question.

Each reads one JSON document from its first argument and prints one JSON document as its last
line of standard output. They import only what the runtime has; nothing here imports them.
"""

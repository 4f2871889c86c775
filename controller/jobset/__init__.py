"""The JobSet domain: API names, parsing, pure decision functions, the reconciler."""

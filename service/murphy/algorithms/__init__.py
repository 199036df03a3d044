"""SageMaker's built-in algorithms that murphy implements itself (the common case of their
container contract), run by the training toolkit as ``command`` images."""

"""fuzzfuse: find and minimize bugs in tensor fusing compilers."""
__version__ = "0.1.0"

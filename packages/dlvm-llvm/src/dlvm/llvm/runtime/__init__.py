"""The runtime around compiled code: executables and their call path, results as numpy
arrays, the thread pool and its budget, BLAS."""

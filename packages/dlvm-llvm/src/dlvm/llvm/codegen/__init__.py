"""Code generation: DLVM functions lowered to LLVM IR (functions, kernels, math, the
run-time support every module carries) and compiled to object code (`jit`)."""

"""DLVM's optimizer: one pass per module in `dlvm.opt.transforms`, registered by name.

    import dlvm.ir as ir
    ir.run_passes(module, "differentiation,O2")
"""

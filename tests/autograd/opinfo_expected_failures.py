"""Ops that do not yet pass the OpInfo sweep, with the reason each fails (generated:
EMBER_REGEN_OPINFO=1 python -m pytest tests/autograd/test_opinfo.py)."""

FORWARD = {
    'allclose': 'DataDependentOutputException: aten.allclose.default',
    'argwhere': 'DynamicOutputShapeException: aten.nonzero.default',
    'combinations': 'DynamicOutputShapeException: aten.masked_select.default',
    'corrcoef': 'DataDependentOutputException: aten.equal.default',
    'cov': 'DataDependentOutputException: aten.equal.default',
    'equal': 'DataDependentOutputException: aten.equal.default',
    'item': 'DataDependentOutputException: aten._local_scalar_dense.default',
    'linalg.lstsq': 'DynamicOutputShapeException: aten.linalg_lstsq.default',
    'linalg.lstsq.grad_oriented': 'DynamicOutputShapeException: aten.linalg_lstsq.default',
    'masked_select': 'DynamicOutputShapeException: aten.masked_select.default',
    'nn.functional.ctc_loss': 'DynamicOutputShapeException: aten._ctc_loss.default',
    'nn.functional.gaussian_nll_loss': 'DataDependentOutputException: aten._local_scalar_dense.default',
    'nonzero': 'DynamicOutputShapeException: aten.nonzero.default',
    'sparse.mm.reduce': 'RuntimeError: Sparse CSR tensors do not have strides',
    'sparse.sampled_addmm': 'RuntimeError: Sparse CSR tensors do not have strides',
    'tensor_split': 'RuntimeError: The tensor has a non-zero number of elements, but its data is not allocated yet.',
    'unique': 'DynamicOutputShapeException: aten._unique2.default',
    'unique_consecutive': 'DynamicOutputShapeException: aten.unique_consecutive.default',
}

BACKWARD = {
    'combinations': 'DynamicOutputShapeException: aten.masked_select.default',
    'corrcoef': 'DataDependentOutputException: aten.equal.default',
    'cov': 'DataDependentOutputException: aten.equal.default',
    'linalg.lstsq': 'DynamicOutputShapeException: aten.linalg_lstsq.default',
    'linalg.lstsq.grad_oriented': 'DynamicOutputShapeException: aten.linalg_lstsq.default',
    'masked_select': 'DynamicOutputShapeException: aten.masked_select.default',
    'nn.functional.ctc_loss': 'DynamicOutputShapeException: aten._ctc_loss.default',
    'nn.functional.gaussian_nll_loss': 'DataDependentOutputException: aten._local_scalar_dense.default',
    'sparse.mm.reduce': 'RuntimeError: Sparse CSR tensors do not have strides',
    'sparse.sampled_addmm': 'RuntimeError: Sparse CSR tensors do not have strides',
    'tensor_split': 'RuntimeError: The tensor has a non-zero number of elements, but its data is not allocated yet.',
    'to_sparse': 'RuntimeError: memory format option is only supported by strided tensors',
}

"""CUDA OpInfo sweep (backend "ember"): the ops expected to fail, per torch version, dtype and
direction, with the reason each failed when the list was made (issue 10, acceptance 2).

`python3 -m tests.autograd.opinfo_report --device cuda ...` (GPU_PART=opinfo) compares its run with the
list for its torch version: an unexpected failure fails the run, an unexpected pass is reported
(take it off the list).  Made from benchmarks/results/opinfo_cuda.md (commit 61779e0, H100, torch
2.11.0+cu130); a torch version without a list only reports."""

EXPECTED = {
    "2.11": {
        ('bfloat16', 'backward'): {
            'atanh': 'AssertionError: grad 0: Tensor-likes are not close!',
            'combinations': 'TracingError: an output whose size depends on data requires grad',
            'corrcoef': 'DataDependentOutputException: aten.equal.default',
            'cov': 'DataDependentOutputException: aten.equal.default',
            'masked_select': 'TracingError: an output whose size depends on data requires grad',
            'nn.functional.fractional_max_pool3d': 'UnsupportedOperatorException: aten.fractional_max_pool3d_backward.default',
            'nn.functional.gaussian_nll_loss': 'GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: none)',
            'nn.functional.multi_head_attention_forward': 'AssertionError: grad 0: Tensor-likes are not close!',
            'nn.functional.multi_margin_loss': 'UnsupportedOperatorException: aten.multi_margin_loss_backward.default',
            'nn.functional.multilabel_margin_loss': 'UnsupportedOperatorException: aten.multilabel_margin_loss_backward.default',
            'sign': 'AssertionError: forward (grad mode): Tensor-likes are not close!',
            'tensor_split': 'RuntimeError: The tensor has a non-zero number of elements, but its data is not allocated yet.',
            'to_sparse': 'UnsupportedOperatorException: aten._to_sparse.default',
            'torch.ops.aten._efficient_attention_forward': 'AssertionError: forward (grad mode): Scalars are not close!',
            'torch.ops.aten._flash_attention_forward': 'AssertionError: forward (grad mode): Tensor-likes are not close!',
        },
        ('bfloat16', 'forward'): {
            'allclose': 'DataDependentOutputException: aten.allclose.default',
            'corrcoef': 'DataDependentOutputException: aten.equal.default',
            'cov': 'DataDependentOutputException: aten.equal.default',
            'equal': 'DataDependentOutputException: aten.equal.default',
            'nn.functional.gaussian_nll_loss': 'GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: none)',
            'sign': 'AssertionError: forward: Tensor-likes are not close!',
            'tensor_split': 'RuntimeError: The tensor has a non-zero number of elements, but its data is not allocated yet.',
            'to_sparse': 'UnsupportedOperatorException: aten._to_sparse.default',
            'torch.ops.aten._efficient_attention_forward': 'AssertionError: forward: Scalars are not close!',
            'torch.ops.aten._flash_attention_forward': 'AssertionError: forward: Tensor-likes are not close!',
        },
        ('float32', 'backward'): {
            'combinations': 'TracingError: an output whose size depends on data requires grad',
            'corrcoef': 'DataDependentOutputException: aten.equal.default',
            'cov': 'DataDependentOutputException: aten.equal.default',
            'linalg.lstsq': 'DynamicOutputShapeException: aten.linalg_lstsq.default',
            'linalg.lstsq.grad_oriented': 'DynamicOutputShapeException: aten.linalg_lstsq.default',
            'masked_select': 'TracingError: an output whose size depends on data requires grad',
            'nn.functional.ctc_loss': 'UnsupportedOperatorException: aten._use_cudnn_ctc_loss.default',
            'nn.functional.fractional_max_pool3d': 'UnsupportedOperatorException: aten.fractional_max_pool3d_backward.default',
            'nn.functional.gaussian_nll_loss': 'GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: none)',
            'nn.functional.multi_margin_loss': 'UnsupportedOperatorException: aten.multi_margin_loss_backward.default',
            'nn.functional.multilabel_margin_loss': 'UnsupportedOperatorException: aten.multilabel_margin_loss_backward.default',
            'sparse.sampled_addmm': 'RuntimeError: Sparse CSR tensors do not have strides',
            'tensor_split': 'RuntimeError: The tensor has a non-zero number of elements, but its data is not allocated yet.',
            'to_sparse': 'UnsupportedOperatorException: aten._to_sparse.default',
            'torch.ops.aten._efficient_attention_forward': 'AssertionError: forward (grad mode): Scalars are not close!',
        },
        ('float32', 'forward'): {
            'allclose': 'DataDependentOutputException: aten.allclose.default',
            'corrcoef': 'DataDependentOutputException: aten.equal.default',
            'cov': 'DataDependentOutputException: aten.equal.default',
            'equal': 'DataDependentOutputException: aten.equal.default',
            'geqrf': 'UnsupportedOperatorException: aten.geqrf.default',
            'linalg.lstsq': 'DynamicOutputShapeException: aten.linalg_lstsq.default',
            'linalg.lstsq.grad_oriented': 'DynamicOutputShapeException: aten.linalg_lstsq.default',
            'nn.functional.ctc_loss': 'UnsupportedOperatorException: aten._use_cudnn_ctc_loss.default',
            'nn.functional.gaussian_nll_loss': 'GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: none)',
            'sparse.sampled_addmm': 'RuntimeError: Sparse CSR tensors do not have strides',
            'tensor_split': 'RuntimeError: The tensor has a non-zero number of elements, but its data is not allocated yet.',
            'to_sparse': 'UnsupportedOperatorException: aten._to_sparse.default',
            'torch.ops.aten._efficient_attention_forward': 'AssertionError: forward: Scalars are not close!',
        },
    },
}


def expected_failures(torch_version: str, dtype: str, kind: str) -> dict | None:
    """{op: reason} for this torch version ("2.11.0+cu130" reads the "2.11" list), or None."""
    lists = EXPECTED.get(".".join(torch_version.split("+")[0].split(".")[:2]))
    return None if lists is None else lists.get((dtype, kind), {})

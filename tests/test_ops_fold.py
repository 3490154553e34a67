"""nn.functional.fold (col2im), which has no OpInfo, against CPU in every mode; unfold (im2col)
is in the OpInfo slice."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same_as_cpu


@pytest.mark.parametrize("kernel,dilation,padding,stride", [
    ((2, 2), 1, 0, 1), ((3, 2), (2, 1), (1, 0), (2, 1)), ((1, 3), 1, (0, 2), (1, 3)),
])
def test_fold_matches_cpu(mode, no_fallback, kernel, dilation, padding, stride):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8)
    cols = F.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)
    assert_same_as_cpu(lambda c: F.fold(c, (7, 8), kernel, dilation=dilation, padding=padding, stride=stride),
                       cols)
    # Unbatched input, and the round trip's gradient (fold and unfold are each other's transpose).
    assert_same_as_cpu(lambda c: F.fold(c, (7, 8), kernel, dilation=dilation, padding=padding, stride=stride),
                       cols[0])


def test_fold_backward_matches_cpu(mode):
    torch.manual_seed(0)
    cols = torch.randn(1, 3 * 4, 12, requires_grad=True)
    def grads(c):
        out = F.fold(c, (4, 5), (2, 2))
        (out * torch.arange(out.numel(), dtype=out.dtype, device=out.device).reshape(out.shape)).sum().backward()
        return c.grad
    expected = grads(cols)
    tpu_cols = cols.detach().to("tpu").requires_grad_(True)
    torch.testing.assert_close(grads(tpu_cols).cpu(), expected)


# Patches as vision models cut them: a large kernel with overlapping windows (DepthPro's 32 x 32
# patches at a stride of 24), dilated and padded ones, and windows that leave the edge unread.
@pytest.mark.parametrize("kernel,dilation,padding,stride,size", [
    ((12, 12), 1, 0, (9, 9), (30, 30)), ((5, 3), (2, 3), (3, 1), (3, 2), (17, 19)), ((4, 4), 1, 0, 4, (11, 13)),
])
def test_unfold_and_fold_of_patches_match_cpu(mode, no_fallback, kernel, dilation, padding, stride, size):
    torch.manual_seed(0)
    x = torch.randn(2, 3, *size)
    options = dict(dilation=dilation, padding=padding, stride=stride)
    assert_same_as_cpu(lambda t: F.unfold(t, kernel, **options), x)
    cols = F.unfold(x, kernel, **options)
    assert_same_as_cpu(lambda c: F.fold(c, size, kernel, **options), torch.randn_like(cols))

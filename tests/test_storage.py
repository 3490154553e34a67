"""The storage model: views are metadata, writes through any alias are seen by every alias."""
import pytest
import torch


def pair(shape=(4, 6), dtype=torch.float32):
    cpu = torch.arange(int(torch.tensor(shape).prod()), dtype=dtype).reshape(shape)
    return cpu, cpu.to("tpu")


VIEWS = {
    "transpose": lambda t: t.t(),
    "slice_rows": lambda t: t[1:3],
    "slice_cols": lambda t: t[:, 2:5],
    "strided": lambda t: t[::2, 1::2],
    "select": lambda t: t[2],
    "column": lambda t: t[:, 3],
    "expand": lambda t: t[:1].expand(3, 6),
    "view": lambda t: t.view(2, 12),
    "permute_3d": lambda t: t.view(2, 2, 6).permute(2, 0, 1),
    "as_strided_overlap": lambda t: t.as_strided((3, 3), (2, 1), 1),
    "unfold": lambda t: t.reshape(-1).unfold(0, 4, 4),
    "unfold_overlapping": lambda t: t.reshape(-1).unfold(0, 4, 3),
    "diagonal": lambda t: t.diagonal(),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_reading_views(mode, name):
    cpu, tpu = pair()
    view = VIEWS[name](tpu)
    assert view.data_ptr() == tpu.data_ptr() + view.storage_offset() * tpu.element_size()
    torch.testing.assert_close(view.cpu(), VIEWS[name](cpu))
    torch.testing.assert_close((view * 2).cpu(), VIEWS[name](cpu) * 2)


@pytest.mark.parametrize("name", ["transpose", "slice_rows", "slice_cols", "strided", "select", "column",
                                  "view", "permute_3d", "unfold"])
def test_in_place_through_a_view_is_seen_by_the_base(mode, name):
    cpu, tpu = pair()
    VIEWS[name](cpu).mul_(-1).add_(0.5)
    VIEWS[name](tpu).mul_(-1).add_(0.5)
    torch.testing.assert_close(tpu.cpu(), cpu)


def test_copy_into_slices_and_aliases(mode):
    cpu, tpu = pair()
    alias = tpu.view(-1)
    tpu[1:3, 2:4] = torch.full((2, 2), 7.0, device="tpu")
    cpu[1:3, 2:4] = 7.0
    tpu[:, 0].copy_(torch.arange(4.0))
    cpu[:, 0].copy_(torch.arange(4.0))
    torch.testing.assert_close(alias.cpu(), cpu.view(-1))
    tpu.t()[5].zero_()
    cpu.t()[5].zero_()
    torch.testing.assert_close(tpu.cpu(), cpu)


def test_in_place_on_base_is_seen_by_existing_views(mode):
    cpu, tpu = pair()
    view_cpu, view_tpu = cpu[1:, ::2], tpu[1:, ::2]
    cpu.add_(100)
    tpu.add_(100)
    torch.testing.assert_close(view_tpu.cpu(), view_cpu)


def test_data_ptrs_are_unique_and_views_share_them():
    a = torch.empty(10, device="tpu")
    b = torch.empty(10, device="tpu")
    assert a.data_ptr() != b.data_ptr() and a.data_ptr() != 0
    assert a[3:].data_ptr() == a.data_ptr() + 3 * 4
    assert a.untyped_storage().data_ptr() == a[3:].untyped_storage().data_ptr()
    assert a.untyped_storage().nbytes() == 40
    assert a.untyped_storage().device == torch.device("tpu", 0)


def test_resize_keeps_the_prefix(mode):
    t = torch.arange(6.0, device="tpu")
    t.resize_(10)
    assert t.shape == (10,)
    torch.testing.assert_close(t[:6].cpu(), torch.arange(6.0))
    t.resize_(2, 3)
    torch.testing.assert_close(t.cpu(), torch.arange(6.0).view(2, 3))


def test_resize_to_the_same_sizes_keeps_the_strides_as_on_cpu(mode):
    for device in ("cpu", "tpu"):
        column_major = torch.empty_strided((3, 5), (1, 3), device=device)
        column_major.resize_(3, 5)
        assert column_major.stride() == (1, 3), device
        column_major.resize_as_(torch.empty(3, 5, device=device))
        assert column_major.stride() == (1, 3), device
        column_major.resize_(3, 5, memory_format=torch.contiguous_format)
        assert column_major.stride() == (5, 1), device
        with pytest.raises(RuntimeError, match="Unsupported memory format"):
            column_major.resize_(3, 5, memory_format=torch.preserve_format)
    # A resize to other sizes is contiguous, with the values of the prefix kept.
    t = torch.empty_strided((3, 5), (1, 3), device="tpu").fill_(1.0)
    t.resize_(2, 2)
    assert t.stride() == (2, 1)


def test_set_and_storage_sharing(mode):
    source = torch.arange(12.0, device="tpu")
    target = torch.empty(0, device="tpu")
    target.set_(source.untyped_storage(), 2, (2, 3), (3, 1))
    torch.testing.assert_close(target.cpu(), torch.arange(12.0)[2:8].view(2, 3))
    source.mul_(2)
    torch.testing.assert_close(target.cpu(), torch.arange(12.0)[2:8].view(2, 3) * 2)
    other = torch.empty(0, device="tpu").set_(source)
    assert other.data_ptr() == source.data_ptr()
    other.zero_()
    assert source.abs().sum().item() == 0


def test_storage_resize_to_zero_and_back_as_fsdp_does(mode):
    param = torch.arange(8.0, device="tpu")
    view = param.view(2, 4)
    storage = param.untyped_storage()
    storage.resize_(0)
    assert storage.nbytes() == 0
    storage.resize_(8 * 4)
    param.copy_(torch.ones(8))
    torch.testing.assert_close(view.cpu(), torch.ones(2, 4))


def test_untyped_storage_round_trip(mode):
    t = torch.arange(5, dtype=torch.int32, device="tpu")
    clone = t.untyped_storage().cpu()
    assert clone.nbytes() == 20
    back = torch.empty(0, dtype=torch.int32).set_(clone)
    torch.testing.assert_close(back, torch.arange(5, dtype=torch.int32))


def test_reinterpreting_a_storage_with_view_dtype(mode):
    cpu = torch.tensor([1.0, -2.0, 3.5])
    tpu = cpu.to("tpu")
    torch.testing.assert_close(tpu.view(torch.int32).cpu(), cpu.view(torch.int32))

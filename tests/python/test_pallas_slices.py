"""vtpu.pallas sliced loads and stores of VMEM blocks (`x_ref[pl.ds(r0, 8), :]`, fixed slices,
offsets affine in the program ids) against CPU references, and the slices refused."""
import pytest
import torch

from vtpu import pallas as pl


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_fixed_slices_move_row_groups_single_rows_and_lane_columns(dtype, native_in_each_eager_mode):
    def shuffle(x_ref, o_ref):
        o_ref[8:16, :] = x_ref[0:8, :] * 2
        o_ref[0:8, :] = x_ref[pl.ds(8, 8), :] + 1
        o_ref[16:24, 128:256] = x_ref[pl.ds(3, 8), 0:128]         # rows from any offset
        o_ref[16:24, 0:128] = x_ref[5:6, 128:256] + x_ref[16:24, 0:128] * 0  # one row, broadcast down
        o_ref[24:32, :] = x_ref[24:32, :]
        o_ref[31:32, 128:] = x_ref[0:1, :128] - 1                 # one row stored

    f = pl.pallas_call(shuffle, out_shape=pl.ShapeDtype((32, 256), dtype), in_specs=[None])
    x = (torch.randn(32, 256) * 100).to(dtype)
    expected = torch.empty(32, 256, dtype=dtype)
    expected[8:16] = x[0:8] * 2
    expected[0:8] = x[8:16] + 1
    expected[16:24, 128:] = x[3:11, :128]
    expected[16:24, :128] = x[5:6, 128:].expand(8, 128)
    expected[24:] = x[24:]
    expected[31, 128:] = x[0, :128] - 1
    torch.testing.assert_close(f(x.to("tpu")).cpu(), expected, rtol=0, atol=0)


def test_offsets_from_the_program_ids_walk_a_resident_block():
    # The whole input stays in VMEM (its block never moves); step i reads its 8 rows out of it
    # and writes them, doubled, into row group 3 - i of its output block.
    def reverse_groups(x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[pl.ds(24 - 8 * i, 8), :] = x_ref[pl.ds(8 * i, 8), :] * 2

    whole = pl.BlockSpec((32, 128), lambda i: (0, 0))
    f = pl.pallas_call(reverse_groups, out_shape=pl.ShapeDtype((32, 128)), grid=(4,), in_specs=[whole],
                       out_specs=whole)
    x = torch.randn(32, 128)
    expected = torch.cat([x[24:32], x[16:24], x[8:16], x[0:8]]) * 2
    torch.testing.assert_close(f(x.to("tpu")).cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("key, message", [
    ((slice(0, 8), slice(64, 192)), r"a slice of 128 columns from column 64: slices start at a fixed multiple of 128"),
    ((slice(0, 8), slice(0, 64)), r"a slice of 64 columns from column 0"),
    ((slice(0, 12), slice(None)), r"a slice of 12 rows: slices span whole 8-row groups, or one row"),
    ((slice(None), 0), r"window indices are pl.ds\(start, size\), fixed slices \(8:16\) or ':'"),
])
def test_slices_the_chip_cannot_move_are_refused(key, message):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[key] * 0 + o_ref[...] * 0

    f = pl.pallas_call(body, out_shape=pl.ShapeDtype((32, 256)), in_specs=[None])
    with pytest.raises(ValueError, match=message):
        f(torch.zeros(32, 256, device="tpu"))


def test_a_slice_leaving_its_block_names_the_grid_index():
    def overreads(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(pl.program_id(0) * 8 + 4, 8), :]

    spec = pl.BlockSpec((8, 128), lambda i: (0, 0))
    f = pl.pallas_call(overreads, out_shape=pl.ShapeDtype((8, 128)), grid=(2,),
                       in_specs=[pl.BlockSpec((16, 128), lambda i: (0, 0))], out_specs=spec)
    with pytest.raises(ValueError, match=r"kernel 'overreads': the slice at grid index \(1,\) is rows \[12, 20\), "
                                         r"columns \[0, 128\) of a 16 x 128 ref"):
        f(torch.zeros(16, 128, device="tpu"))

"""The tpu device's generator: a Philox-style (seed, offset) state of 16 bytes, as CUDA's, so the
torch code that reads or moves it works (DTensor's RNG tracker, torch.Generator(device="tpu"),
host-drawn dtypes following the same state)."""
import pytest
import torch

import vtpu


def seed_and_offset(state):
    return state[:8].view(torch.int64).item(), state[8:].view(torch.int64).item()


def test_state_is_seed_then_offset_and_moves_past_each_draw():
    torch.tpu.manual_seed(42)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.shape == (16,)
    assert seed_and_offset(state) == (42, 0)
    torch.rand(5, device="tpu")
    torch.randn(8, device="tpu")
    assert seed_and_offset(torch.tpu.get_rng_state()) == (42, 8 + 8)  # 5 rounded up to 4's multiple, then 8


def test_offsets_give_different_numbers_and_restore_the_same():
    torch.tpu.manual_seed(7)
    start = torch.tpu.get_rng_state()
    a = torch.rand(6, device="tpu").cpu()
    b = torch.rand(6, device="tpu").cpu()
    assert not torch.equal(a, b)
    torch.tpu.set_rng_state(start)
    assert torch.equal(torch.rand(6, device="tpu").cpu(), a)
    # the offset alone decides where a draw starts, as DTensor's tracker relies on
    jumped = start.clone()
    jumped[8:] = torch.tensor([8], dtype=torch.int64).view(torch.uint8)
    torch.tpu.set_rng_state(jumped)
    assert torch.equal(torch.rand(6, device="tpu").cpu(), b)


def test_bad_states_are_refused():
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.tpu.set_rng_state(torch.zeros(5056, dtype=torch.uint8))
    odd = torch.zeros(16, dtype=torch.uint8)
    odd[8] = 3
    with pytest.raises(RuntimeError, match="multiple of 4"):
        torch.tpu.set_rng_state(odd)


def test_a_new_generator_on_tpu():
    g = torch.Generator(device="tpu")
    assert g.device == torch.device("tpu", 0)
    g.manual_seed(3)
    x = torch.empty(5, device="tpu").normal_(generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(torch.empty(5, device="tpu").normal_(generator=g).cpu(), x)
    assert seed_and_offset(g.get_state()) == (3, 8)
    # a draw the host makes (int64 beyond the chip's exact range) follows the same state
    g.manual_seed(4)
    big = torch.randint(0, 2**40, (4,), device="tpu", generator=g).cpu()
    g.manual_seed(4)
    assert torch.equal(torch.randint(0, 2**40, (4,), device="tpu", generator=g).cpu(), big)


def test_dtensor_random_init_of_a_sharded_parameter(run_ranks):
    """FSDP2 under TorchTitan initialises sharded parameters with DTensor random ops, whose
    tracker moves the Philox offset: the shards must differ and the replicas agree."""
    results = run_ranks("""
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor, Shard, Replicate
mesh = init_device_mesh("tpu", (world,))
torch.manual_seed(0)
sharded = distribute_tensor(torch.empty(8, 4, device="tpu"), mesh, [Shard(0)])
torch.nn.init.normal_(sharded)
replicated = distribute_tensor(torch.empty(4, device="tpu"), mesh, [Replicate()])
torch.nn.init.uniform_(replicated)
print(json.dumps({"shard": sharded.to_local().cpu().tolist(), "replica": replicated.to_local().cpu().tolist()}))
""", world_size=2)
    assert results[0]["replica"] == results[1]["replica"]
    assert results[0]["shard"] != results[1]["shard"]

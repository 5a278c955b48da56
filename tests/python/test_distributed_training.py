"""Data, fully sharded and tensor parallel training on tpu ranks (backend tpu_dist), each against
a single-process CPU reference of the same model on the whole batch, with the CPU fallback off:
DDP, FSDP2 (fully_shard; a 2x2 HSDP mesh with a gradient divide factor), tensor parallel
(colwise then rowwise) and a distributed checkpoint saved and loaded."""

# Each rank trains on its slice of the batch; the reference trains on all of it. Every rank
# reports the largest difference from the reference's parameters after the steps.
MODEL = r"""
torch.manual_seed(0)
def make():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
model, ref = make(), make()
ref.load_state_dict(model.state_dict())
steps, per_rank = 3, 4
data, target = torch.randn(steps, per_rank * world, 16), torch.randn(steps, per_rank * world, 8)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)

def train(module, shard_of_batch=True, divide=1.0):
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    for step in range(steps):
        rows = slice(rank * per_rank, (rank + 1) * per_rank) if shard_of_batch else slice(None)
        x, y = data[step, rows].to("tpu"), target[step, rows].to("tpu")
        loss = torch.nn.functional.mse_loss(module(x), y) * divide
        opt.zero_grad()
        loss.backward()
        opt.step()
        ref_loss = torch.nn.functional.mse_loss(ref(data[step]), target[step])
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()

def report(params):
    err = max((p - ref.state_dict()[k]).abs().max().item() for k, p in params.items())
    print(json.dumps({"err": err, "fallbacks": vtpu.stats()["cpu_fallbacks"],
                      "interconnect": sorted(vtpu.stats()["interconnect"])}))
"""


def check(results, collectives):
    for rank, r in enumerate(results):
        assert r["err"] < 1e-5, f"rank {rank}: {r['err']}"
        assert r["fallbacks"] == {}, f"rank {rank}"
        assert set(collectives) <= set(r["interconnect"]), r["interconnect"]


def test_ddp_steps_equal_a_single_process_on_the_whole_batch(run_ranks):
    results = run_ranks(MODEL + """
from torch.nn.parallel import DistributedDataParallel
ddp = DistributedDataParallel(model.to("tpu"))
train(ddp)
report({k: v.cpu() for k, v in ddp.module.state_dict().items()})
""")
    check(results, ["all_reduce", "broadcast"])


def test_fsdp2_fully_shard_equals_a_single_process(run_ranks):
    results = run_ranks(MODEL + """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
mesh = init_device_mesh("tpu", (world,))
model.to("tpu")
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
train(model)
report({k: v.full_tensor().cpu() for k, v in model.state_dict().items()})
""")
    check(results, ["all_gather", "reduce_scatter"])


def test_hsdp_on_a_2x2_mesh_with_a_gradient_divide_factor(run_ranks):
    # Shards over the inner axis, replicas over the outer; the loss is scaled by the world size
    # and the divide factor takes it back out (FSDP2 reduce-scatters with PREMUL_SUM(1 / factor)).
    results = run_ranks(MODEL + """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
mesh = init_device_mesh("tpu", (2, 2), mesh_dim_names=("replicate", "shard"))
model.to("tpu")
fully_shard(model, mesh=mesh)
model.set_gradient_divide_factor(float(world * world))
train(model, divide=float(world))
report({k: v.full_tensor().cpu() for k, v in model.state_dict().items()})
""", world_size=4, VTPU_TOPOLOGY="2x2")
    check(results, ["all_gather", "reduce_scatter", "all_reduce"])


def test_tensor_parallel_colwise_then_rowwise(run_ranks):
    # Every rank sees the whole batch; the layers' weights are split across the ranks.
    results = run_ranks(MODEL + """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
mesh = init_device_mesh("tpu", (world,))
parallelize_module(model.to("tpu"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
train(model, shard_of_batch=False)
report({k: v.full_tensor().cpu() for k, v in model.state_dict().items()})
""")
    check(results, ["all_reduce"])


def test_distributed_checkpoint_of_a_sharded_model_saves_and_loads(run_ranks, tmp_path):
    results = run_ranks(MODEL + f"""
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
mesh = init_device_mesh("tpu", (world,))
fully_shard(model.to("tpu"), mesh=mesh)
train(model)
dcp.save(model.state_dict(), checkpoint_id={str(tmp_path / "ckpt")!r})
fresh = make().to("tpu")
fully_shard(fresh, mesh=mesh)
state = fresh.state_dict()
dcp.load(state, checkpoint_id={str(tmp_path / "ckpt")!r})
fresh.load_state_dict(state)
report({{k: v.full_tensor().cpu() for k, v in fresh.state_dict().items()}})
""")
    check(results, ["all_gather"])

// How a lowered aten op is recorded: take the graph values of its device inputs, add nodes, give
// the result a fresh device tensor whose buffer the pending value will fill. When an op cannot be
// lowered (a dtype the chip lacks, a broadcast kernels cannot stream) it runs on the CPU if the
// user allowed fallback, counted per op, and otherwise raises NotImplementedError naming it.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "kernels/graph/graph.h"
#include "torch_bridge/csrc/record/cpu_scalar.h"

namespace vtpu::bridge {

// f32, bf16 or f16: the floating dtypes the chip holds (the narrow two widened to f32 to compute).
inline bool is_chip_float(c10::ScalarType t) { return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf; }

using BuildFn = std::function<int(kernels::Graph& g, const std::vector<int>& values)>;
using CpuFn = std::function<at::Tensor(const std::vector<at::Tensor>& cpu_inputs)>;
using CpuOutputsFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& cpu_inputs)>;

// Records `build` over `inputs` and returns the result tensor, of torch's `result_dtype` (a cast
// is added when the graph's promotion differs). `build` gets the values of the device tensors
// among `inputs`, in order; `cpu` gets all of `inputs` (on the CPU) when the op falls back.
at::Tensor record(const char* op, const std::vector<at::Tensor>& inputs, c10::ScalarType result_dtype, const BuildFn& build,
                  const CpuFn& cpu);

// record for an elementwise op (its result has the broadcast shape of `inputs`): the result laid
// out as torch's TensorIterator lays it out (layout.h), so a transposed input gives a transposed
// result, as torch's meta functions, and so torch.compile's graphs, expect.
at::Tensor record_elementwise(const char* op, const std::vector<at::Tensor>& inputs, c10::ScalarType result_dtype,
                              const BuildFn& build, const CpuFn& cpu);

// dst (whole dense buffer) <- src, converting dtype on the chip.
void record_copy(const at::Tensor& dst, const at::Tensor& src);

// Makes `out` (a whole dense buffer) the result of the value `build` adds, with no tensor
// inputs (factories: fills, arange). The caller holds the runtime's lock.
void define_on_chip(const at::Tensor& out, const char* op, const std::function<int(kernels::Graph&)>& build);

// Writes `value` into every element of `t` on the chip.
void fill_on_chip(const at::Tensor& t, double value);

// A UserWarning in Python with exactly `message`: vtpu's own warnings name what happened and where
// it is counted, not the C++ line that noticed it (TORCH_WARN's "Triggered internally at").
void warn_user(const std::string& message);

// Runs an op on the CPU with the inputs copied over and the result copied back (fallback).
// Without the fallback, an op the chip declines is first tried on meta tensors: when torch's own
// checks reject the inputs (shapes that do not match, a bad dim), that error is raised, as the
// CPU would raise it; only valid inputs get "cannot run on the chip".
at::Tensor run_on_cpu(const char* op, const std::vector<at::Tensor>& inputs, const CpuFn& cpu, const std::string& why);
// The same for an op with several results (topk, a backward): the CPU op runs once and each
// result is copied back (undefined ones, outputs the caller did not ask for, stay undefined).
std::vector<at::Tensor> run_on_cpu_outputs(const char* op, const std::vector<at::Tensor>& inputs, const CpuOutputsFn& cpu,
                                           const std::string& why);

// Device int32 or int64 indices, flattened, as the gather and scatter-add kernels read them:
// int32 as they are, int64 as a [n, 2] int32 view of the same bytes (word pairs; the kernels
// check the high words). Non-contiguous indices are made dense on the chip first.
at::Tensor index_words(const at::Tensor& index);

// An int64 tensor's int32 word pairs, [..., 2], as a view of the same bytes strided as the tensor
// is (each element's two words adjacent): a strided int64 copy is then a strided int32 copy.
at::Tensor word_view(const at::Tensor& t);

// An int64 tensor's data as its int32 word pairs, shape [..., 2] (a dense copy first if needed):
// data movement (gathers, cat) on it moves each element's two words together, at any magnitude.
at::Tensor int64_word_pairs(const at::Tensor& t);

// int32 value v ([..]) as int64's [.., 2] int32 words (the sign fills the high word), and the
// int64 tensor a recorded [.., 2] int32 result holds (or the result itself when it already is
// int64: the op ran on the CPU).
int int64_words(kernels::Graph& g, int v);
at::Tensor as_int64(const at::Tensor& words);
// as_int64, recording `bound` (the largest magnitude the op that made the words knows) when the
// chip made them; a CPU fallback's int64 result keeps the bound its host copy measured.
at::Tensor as_int64(const at::Tensor& words, int64_t bound);
// The int64 tensor of the integers an f32 tensor holds exactly (positions, counts, below 2^24 in
// magnitude `bound`), converted on the chip as int32 word pairs.
at::Tensor int64_from_f32(const char* op, const at::Tensor& f, int64_t bound);

// The known bound on |value| of the int64 elements in t's buffer (Buffer::int64_bound), and
// setting it after an op that knows its result's range wrote t.
std::optional<int64_t> int64_bound_of(const at::Tensor& t);
void set_int64_bound(const at::Tensor& t, std::optional<int64_t> bound);

// A reduction's dims as torch reads them (none given: every dim; wrapped, sorted, each once) and
// its result's shape (reduced dims dropped, or kept as 1 with keepdim).
struct Reduction {
  std::vector<int64_t> dims, shape;
};
Reduction reduction_over(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim);

// torch's out= contract for ops computed functionally: `out` resized when its size differs, then
// `result` copied in (a device copy).
at::Tensor& write_out(at::Tensor& out, const at::Tensor& result);

kernels::TensorType tensor_type(const at::Tensor& t);

}  // namespace vtpu::bridge

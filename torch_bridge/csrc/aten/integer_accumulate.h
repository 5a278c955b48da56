// Integer sums scattered on the chip (scatter_add, index_put with accumulate=True), exact: the
// chip's scatter-add kernel sums f32, which holds integers exactly below 2^24.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>

namespace vtpu::bridge {

// `scatter` adds an f32 source (shaped as `src`) into f32 zeros of self's shape. self plus the
// integer `src` scattered so, as torch's integer kernels give it (int32, int8 and uint8 wrapping;
// int64 of known magnitude whose sums stay below 2^31); nullopt where it cannot be exact here.
// Small sources (every sum of |src| below 2^24) scatter as they are; other int32 ones as their
// four bytes, each plane's sums below 2^24 while at most 65793 elements are added, weighed by
// 2^(8b) and added with int32's wrapping.
std::optional<at::Tensor> integer_accumulate(const at::Tensor& self, const at::Tensor& src,
                                             const std::function<at::Tensor(const at::Tensor& f32_src)>& scatter);

}  // namespace vtpu::bridge

// Minimal .npy reader/writer for the CLI: little-endian f4/f8/i4/i8/i1/u1, C order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vtpu::tools {

struct NpyArray {
  std::string dtype;             // "f32", "i32" or "i8" after reading (f8/i8 arrays are narrowed)
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;     // raw little-endian elements of `dtype`
  int64_t elements() const;
};

NpyArray read_npy(const std::string& path);  // throws std::runtime_error naming the file and problem
void write_npy(const std::string& path, const NpyArray& array);
int dtype_bytes(const std::string& dtype);   // f32/i32: 4, bf16: 2, i8: 1

}  // namespace vtpu::tools

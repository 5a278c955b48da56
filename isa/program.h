// A vtpu Program: encoded code, the argument list it expects at launch, and constant data that is
// placed in VMEM before the first instruction runs. Also its binary file format (.vtpu).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/instruction.h"

namespace vtpu::isa {

enum class ArgumentKind : uint8_t { Buffer, Scalar };  // Buffer = an HBM address

struct ArgumentSpec {
  std::string name;
  ArgumentKind kind = ArgumentKind::Buffer;
  bool operator==(const ArgumentSpec&) const = default;
};

struct DataSegment {
  uint32_t vmem_address = 0;
  std::vector<uint8_t> bytes;
  bool operator==(const DataSegment&) const = default;
};

struct Program {
  std::string name;
  std::vector<uint64_t> code;
  std::vector<ArgumentSpec> arguments;
  std::vector<DataSegment> data;
  // The MXU width the code was generated for (0: any). A group operand spans mxu_dim/128 vregs
  // and weights are D x D, so code for one width computes something else on another: launches
  // on a chip of another width are refused instead.
  uint32_t mxu_dim = 0;
  // The code divides its work among the launch's TensorCores (`score` / `sncore`), so a device
  // launches it on every TensorCore of the chip; other programs run on one (.multicore).
  bool multicore = false;

  bool operator==(const Program&) const = default;
  Instruction at(size_t pc) const { return decode(code.at(pc)); }
  void append(const Instruction& instruction) { code.push_back(encode(instruction)); }
};

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<uint8_t> serialize(const Program& program);
// Throws FormatError on truncated or corrupt input, naming the byte offset.
Program deserialize(std::span<const uint8_t> bytes);

}  // namespace vtpu::isa

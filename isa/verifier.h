// Static checks on a Program for one target: operand ranges the encoding cannot rule out
// (register groups, MXU/queue/semaphore indices, argument numbers, branch targets) and VMEM
// accesses whose addresses are known constants within a basic block.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/program.h"

namespace vtpu::isa {

// What the verifier needs to know about the chip; sim fills it from its ChipConfig.
struct TargetLimits {
  uint64_t vmem_bytes = 0;
  int mxu_count = 0;
  int mxu_dim = 128;
  int mxu_acc_slots = 0;
  int dma_queues = 0;
  int semaphores = 0;
};

struct VerifyIssue {
  size_t pc;  // instruction index; SIZE_MAX for program-level issues (data segments)
  std::string message;
};

std::vector<VerifyIssue> verify(const Program& program, const TargetLimits& limits);

class VerifyError : public std::runtime_error {
 public:
  explicit VerifyError(std::vector<VerifyIssue> issues);
  const std::vector<VerifyIssue>& issues() const { return issues_; }

 private:
  std::vector<VerifyIssue> issues_;
};

void verify_or_throw(const Program& program, const TargetLimits& limits);

// Bytes a vector load/store of this opcode moves per lane (4, 2 or 1).
int vector_element_bytes(Opcode opcode);

}  // namespace vtpu::isa

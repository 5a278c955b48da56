// Runtime errors of the simulated chip. Each names what a user can act on: the instruction
// (index and text), the address, the waiting semaphore, the sizes.
#pragma once

#include <stdexcept>
#include <string>

namespace vtpu::sim {

enum class SimErrorKind {
  OutOfBounds,      // VMEM or HBM access outside its memory / allocation
  Misaligned,       // address not aligned to the element size
  Deadlock,         // semaphore wait that no in-flight DMA or signal can satisfy
  Uninitialized,    // read of VMEM never written (only with SimOptions::check_uninitialized)
  Race,             // VMEM/HBM touched while an in-flight DMA (not yet waited on) uses it
  Arithmetic,       // scalar division by zero
  BadLaunch,        // wrong argument count/kinds, program fails verification
  OutOfMemory,      // HBM allocation that does not fit
  StepLimit,        // instruction budget exhausted (runaway loop)
  Trap,             // a `trap` instruction: the program refused its arguments (trap_code() says which check)
};

class SimError : public std::runtime_error {
 public:
  SimError(SimErrorKind kind, const std::string& message, int trap_code = -1)
      : std::runtime_error(message), kind_(kind), trap_code_(trap_code) {}
  SimErrorKind kind() const { return kind_; }
  int trap_code() const { return trap_code_; }  // Trap only; -1 otherwise

 private:
  SimErrorKind kind_;
  int trap_code_;
};

class OutOfMemoryError : public SimError {
 public:
  OutOfMemoryError(const std::string& message, uint64_t requested, uint64_t free, uint64_t total)
      : SimError(SimErrorKind::OutOfMemory, message), requested_(requested), free_(free), total_(total) {}
  uint64_t requested_bytes() const { return requested_; }
  uint64_t free_bytes() const { return free_; }
  uint64_t total_bytes() const { return total_; }

 private:
  uint64_t requested_, free_, total_;
};

}  // namespace vtpu::sim

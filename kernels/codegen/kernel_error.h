// The one exception kernels/ throws: a spec no generator can serve, or a generator bug the
// assembler caught. The bridge turns it into an error naming the op; callers that only need to
// catch it include this header, not the code-generation machinery.
#pragma once

#include <stdexcept>

namespace vtpu::kernels {

class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A generator ran out of registers: a KernelError a generator may catch to retry a plainer
// schedule.
class RegisterShortage : public KernelError {
 public:
  using KernelError::KernelError;
};

}  // namespace vtpu::kernels

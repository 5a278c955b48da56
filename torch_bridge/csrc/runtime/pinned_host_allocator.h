// Host memory pinned for device "tpu". The simulator reads host memory directly, so pinning
// changes no timing; what it keeps is CUDA's contract: tensor.pin_memory() returns a tensor that
// is_pinned() reports, DataLoader(pin_memory=True) hands out pinned batches, and whether a
// pointer lies in pinned memory is known (PrivateUse1HooksInterface::isPinnedPtr).
#pragma once

#include <c10/core/Allocator.h>

namespace vtpu::bridge {

at::Allocator* pinned_host_allocator();
// True when `ptr` lies inside a live allocation of pinned_host_allocator().
bool is_pinned_host_pointer(const void* ptr);

}  // namespace vtpu::bridge

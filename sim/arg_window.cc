#include "sim/arg_window.h"

#include <fmt/format.h>

#include "sim/sim_error.h"

namespace vtpu::sim {

uint32_t ArgWindow::map(const std::string& name, Hbm& memory, HbmAddress physical, uint64_t bytes, bool on_chip) {
  const uint64_t base = next_base_;
  const uint64_t end = base + bytes;
  if (end > isa::kWindowBytes - 1) {
    throw SimError(SimErrorKind::BadLaunch,
                   fmt::format("buffer arguments exceed the 4 GiB kernel address window (argument '{}')", name));
  }
  entries_.push_back({name, base, &memory, physical, bytes, on_chip});
  next_base_ = isa::next_window_base(base, bytes);  // as isa::window_fits lays them out
  return static_cast<uint32_t>(base);
}

bool ArgWindow::on_chip(uint64_t address) const {
  for (const Entry& e : entries_) {
    if (address >= e.base && address - e.base < e.bytes) return e.on_chip;
  }
  return false;
}

std::span<uint8_t> ArgWindow::view(uint64_t address, uint64_t bytes, const std::string& what) const {
  return view(address, bytes, [&what] { return what; });
}

std::span<uint8_t> ArgWindow::view(uint64_t address, uint64_t bytes, const std::function<std::string()>& what) const {
  const Entry* nearest = nullptr;
  for (const Entry& e : entries_) {
    if (address >= e.base && address - e.base <= e.bytes && bytes <= e.bytes - (address - e.base)) {
      static const std::string kInArgument = "access inside a kernel argument";
      try {
        return e.memory->view(e.physical + (address - e.base), bytes, kInArgument);
      } catch (const SimError&) {  // the argument's own allocation is gone: say which access found it
        return e.memory->view(e.physical + (address - e.base), bytes, what());
      }
    }
    // Name the buffer the access starts in (or just past); an overrun reports its own argument.
    if (address >= e.base && address <= e.base + e.bytes + kGuardBytes) nearest = &e;
    else if (!nearest && address + bytes > e.base - kGuardBytes && address < e.base) nearest = &e;
  }
  if (nearest) {
    throw SimError(SimErrorKind::OutOfBounds,
                   fmt::format("{}: HBM access [0x{:x}, 0x{:x}) outside argument '{}' [0x{:x}, 0x{:x}) of {} bytes", what(),
                               address, address + bytes, nearest->name, nearest->base, nearest->base + nearest->bytes,
                               nearest->bytes));
  }
  throw SimError(SimErrorKind::OutOfBounds,
                 fmt::format("{}: HBM access [0x{:x}, 0x{:x}) is not inside any buffer argument", what(), address,
                             address + bytes));
}

}  // namespace vtpu::sim

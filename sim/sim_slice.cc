// The simulated slice behind sim::SliceDevice: one HBM per chip and the slice's topology; each
// launch is a slice launch over them.
#include <memory>
#include <vector>

#include "sim/device.h"
#include "sim/hbm.h"
#include "sim/interconnect.h"
#include "sim/slice_launch.h"

namespace vtpu::sim {
namespace {

class SimSlice : public SliceDevice {
 public:
  SimSlice(ChipConfig chip, std::vector<int> axes) : chip_(std::move(chip)), slice_(chip_, std::move(axes)) {
    for (int c = 0; c < slice_.size(); ++c) {
      memories_.push_back(std::make_unique<Hbm>(chip_.hbm_bytes));
      hbms_.push_back(memories_.back().get());
    }
  }
  const ChipConfig& chip() const override { return chip_; }
  int chips() const override { return slice_.size(); }
  HbmAddress allocate(int chip, uint64_t bytes) override { return memories_.at(chip)->allocate(bytes); }
  void free(int chip, HbmAddress address) override { memories_.at(chip)->free(address); }
  SliceLaunchResult launch(const isa::Program& program, std::span<const std::vector<KernelArg>> args) override {
    return execute_slice(program, chip_, slice_, args, hbms_);
  }

 private:
  ChipConfig chip_;
  Slice slice_;
  std::vector<std::unique_ptr<Hbm>> memories_;
  std::vector<Hbm*> hbms_;
};

}  // namespace

std::unique_ptr<SliceDevice> make_sim_slice(ChipConfig chip, std::vector<int> axes) {
  return std::make_unique<SimSlice>(std::move(chip), std::move(axes));
}

}  // namespace vtpu::sim

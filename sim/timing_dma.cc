// The DMA side of the timing model: transfers between VMEM and HBM on the core's FIFO HBM
// timeline, copies to VMEM held across launches, and copies to other chips over the ICI links.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "isa/instruction_info.h"
#include "sim/timing_model.h"

namespace vtpu::sim {

using isa::Opcode;

// `bytes` moved in turn on the core's HBM timeline from `accept` on, for queue `q`: the cycles
// the transfer starts and ends, both tracks' accounts kept.
std::pair<uint64_t, uint64_t> TimingModel::take_hbm_turn(Track& q, uint64_t accept, uint64_t bytes) {
  const double hbm_start = std::max(double(accept), hbm_free_);
  hbm_free_ = hbm_start + double(bytes) / hbm_bytes_per_cycle_;
  const auto hs = static_cast<uint64_t>(hbm_start);
  const auto hbm_end = static_cast<uint64_t>(std::ceil(hbm_free_));
  q.free_at = std::max(q.free_at, hbm_end);
  q.busy_cycles += hbm_end - hs;
  ++q.instructions;
  enqueue_start(q, accept);
  Track& h = tracks_[units_.hbm];
  h.busy_cycles += hbm_end - hs;
  ++h.instructions;
  h.free_at = std::max(h.free_at, hbm_end);
  return {hs, hbm_end};
}

// A DMA: accepted by its queue, then its transfer in turn on the core's HBM timeline (or on chip).
Scheduled TimingModel::schedule_dma(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t deps) {
  if (ins.opcode == Opcode::Dmaremote) return schedule_remote_dma(ins, outcome, deps);
  const auto& meta = isa::info(ins.opcode);
  Scheduled s;
  // The queue accepts the descriptor at dispatch; the transfer itself waits its turn on the
  // core's HBM timeline (FIFO), so a queue's transfers never overlap and bandwidth is shared.
  Track& q = dma_track(ins.operands[0]);
  const uint64_t accept = std::max({dispatch(q), deps, vmem_ready(outcome.vmem_read)});
  if (outcome.dma_on_chip) return schedule_local_dma(ins, outcome, q, accept);
  const auto [hs, hbm_end] = take_hbm_turn(q, accept, outcome.dma_bytes);
  // in issue order, behind a long local DMA too (schedule_local_dma)
  const uint64_t done = std::max(hbm_end + hbm_latency_cycles_, last_dma_done_);
  s = {accept, hbm_end, done};
  if (trace_) {
    trace_->slice(q.trace_id, hs, hbm_end, meta.mnemonic.data());
    trace_->slice(tracks_[units_.hbm].trace_id, hs, hbm_end, ins.opcode == Opcode::Dmah2v ? "read" : "write");
    trace_->sample(hbm_counter_, hs, hbm_bytes_per_cycle_ * chip_.clock_hz / 1e9);
    trace_->sample(hbm_counter_, hbm_end, 0);
  }
  (ins.opcode == Opcode::Dmah2v ? hbm_read_bytes_ : hbm_write_bytes_) += outcome.dma_bytes;
  vmem_written(outcome.vmem_write, done);
  last_dma_done_ = std::max(last_dma_done_, done);
  return s;
}

// A DMA between a kernel's VMEM and VMEM held across launches stays on chip: it keeps its queue
// busy at VMEM bandwidth and lands after the local latency, with no HBM bandwidth or round trip.
// It still lands no earlier than the DMAs issued before it: HBM's FIFO makes DMAs land in issue
// order, and kernels count on it when several DMAs signal one semaphore.
Scheduled TimingModel::schedule_local_dma(const isa::Instruction& ins, const StepOutcome& outcome, Track& q, uint64_t accept) {
  const uint64_t start = std::max(accept, q.free_at);
  const auto transfer = static_cast<uint64_t>(std::ceil(double(outcome.dma_bytes) / local_dma_bytes_per_cycle_));
  const uint64_t end = start + transfer;
  const uint64_t done = std::max(end + uint64_t(chip_.local_dma_latency_cycles), last_dma_done_);
  q.free_at = end;
  q.busy_cycles += transfer;
  ++q.instructions;
  enqueue_start(q, accept);
  if (trace_) trace_->slice(q.trace_id, start, end, ins.opcode == isa::Opcode::Dmah2v ? "dma.h2v (held VMEM)" : "dma.v2h (held VMEM)");
  local_dma_bytes_ += outcome.dma_bytes;
  vmem_written(outcome.vmem_write, done);
  last_dma_done_ = std::max(last_dma_done_, done);
  return {accept, end, done};
}

// A copy to another chip streams from HBM onto the links of its route from the moment its queue
// accepts it: a link is some twenty times slower than HBM, so the read is paced by the link and
// does not wait its turn behind the other DMAs' reads (which would serialise a chip's two ring
// directions). Its bytes still take their share of the core's HBM timeline, so local DMAs after it
// see the traffic. It does not join the local DMAs' landing order (last_dma_done_): a kernel
// must not wait for a collective's transfers to use its own loads.
Scheduled TimingModel::schedule_remote_dma(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t deps) {
  if (!peers_) throw std::logic_error("vtpu: dma.remote timed without a slice");
  Track& q = dma_track(ins.operands[0]);
  const uint64_t accept = std::max(dispatch(q), deps);
  const auto [hs, hbm_end] = take_hbm_turn(q, accept, outcome.dma_bytes);
  const uint64_t landed = peers_->transfer(chip_index_, outcome.remote_chip, outcome.dma_bytes, accept);
  const uint64_t done = std::max(landed, hbm_end + hbm_latency_cycles_);
  if (trace_) {
    trace_->slice(q.trace_id, hs, done, fmt::format("dma.remote to chip {}", outcome.remote_chip).c_str());
    trace_->slice(tracks_[units_.hbm].trace_id, hs, hbm_end, "read");
  }
  hbm_read_bytes_ += outcome.dma_bytes;
  ici_bytes_ += outcome.dma_bytes;
  remote_done_ = std::max(remote_done_, done);
  return {accept, hbm_end, done};
}

}  // namespace vtpu::sim
